"""Does irforge's graph work make models run faster?  Latency of one network as each optimizer
leaves it, on the same engine, side by side in one process.

onnxruntime rows: the original under ``ORT_DISABLE_ALL`` (no graph work at all) and under
``ORT_ENABLE_ALL`` (onnxruntime's own fusions and layouts: the bar), irforge's ``-O2`` and
``-O3 --target onnxruntime`` outputs under ``ORT_DISABLE_ALL`` (only irforge's graph work counts)
and under ``ORT_ENABLE_ALL``; on BERT also onnxruntime's offline transformer optimizer
(``onnxruntime.transformers.optimizer``, ``model_type="bert"``) under ``ORT_ENABLE_ALL``.  XLA
rows: irforge ``-O1`` and ``-O3`` with ``convert-layout{to=NHWC}`` (channels-last), each compiled
by XLA.

Models: ResNet-50, MobileNetV2 (224x224) and BERT-base (seq 128) of ``torch_models.py``, batch 1,
2 threads, spinning off.  Every engine is checked against the original's outputs, then timed in
rounds (each engine in turn, a pause between engines); the table gives medians and the ratio to
``ORT_ENABLE_ALL`` on the original (above 1: faster; differences under 1.1x are ties).

Run:  python benchmarks/bench_latency.py [--runs 20] [--models resnet50 mobilenet_v2 bert-base]
Writes benchmarks/results/latency.json and latency.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
THREADS = 2
BAR = "original, ORT_ENABLE_ALL"
ENGINES = [
    "original, ORT_DISABLE_ALL", BAR, "irforge -O2, ORT_DISABLE_ALL",
    "irforge -O3 --target onnxruntime, ORT_DISABLE_ALL", "irforge -O3 --target onnxruntime, ORT_ENABLE_ALL",
    "ort transformers optimizer, ORT_ENABLE_ALL", "irforge -O1 → xla", "irforge -O3 + NHWC → xla",
]  # fmt: skip


def _irforge_file(path: str, level: str, target: str | None, out: str) -> tuple[str, int]:
    import irforge

    model = irforge.optimize(irforge.load(path), level, target=target)
    irforge.save(model, out)
    return out, len(model.graph)


def _transformers_optimizer(path: str, out: str) -> tuple[str, int]:
    from onnxruntime.transformers import optimizer

    opt = optimizer.optimize_model(path, model_type="bert", num_heads=12, hidden_size=768, opt_level=0)
    opt.save_model_to_file(out)
    return out, len(opt.model.graph.node)


def _engine(engine: str, path: str, feeds: dict, tmp: str, name: str):
    """(run function, node count) of one engine."""
    stem = os.path.join(tmp, f"{name}-{abs(hash(engine))}.onnx")
    if engine.startswith("original"):
        import onnx

        return _ort_run(path, feeds, "ENABLE" in engine), len(onnx.load(path, load_external_data=False).graph.node)
    if engine.startswith("ort transformers"):
        if not name.startswith("bert"):
            raise ValueError("the transformer optimizer is for transformer models")
        out, nodes = _transformers_optimizer(path, stem)
        return _ort_run(out, feeds, True), nodes
    if "→ xla" in engine:
        import irforge

        level = engine.split()[1].rstrip(",")
        if "NHWC" in engine:
            level += ",convert-layout{to=NHWC},fixpoint(cancel-transposes,dce)"
        model = irforge.optimize(irforge.load(path), level, target="xla")
        exe = irforge.compile(model, "xla")
        return (lambda: exe(feeds)[0]), len(model.graph)
    level = engine.split()[1].rstrip(",")
    target = "onnxruntime" if "--target" in engine else None
    out, nodes = _irforge_file(path, level, target, stem)
    return _ort_run(out, feeds, "ENABLE" in engine), nodes


def _ort_run(path: str, feeds: dict, enable: bool):
    from rounds import ort_session

    session = ort_session(path, enable, THREADS)
    return lambda: session.run(None, feeds)[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="timed runs per engine (at least)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between engines")
    ap.add_argument("--models", nargs="+", default=["mobilenet_v2", "resnet50", "bert-base"])
    ap.add_argument("--engines", nargs="+", default=ENGINES)
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import torch_models
    from rounds import time_in_rounds

    rows = []
    zoo = torch_models.models()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            module, inputs, names = zoo[name]
            path = os.path.join(tmp, f"{name}.onnx")
            torch_models.export(module, inputs, names, path)
            feeds = {n: x.numpy() for n, x in zip(names, inputs, strict=True)}
            engines, errors, nodes = {}, {}, {}
            for engine in args.engines:
                try:
                    fn, nodes[engine] = _engine(engine, path, feeds, tmp, name)
                    engines[engine] = (fn, np.asarray(fn()))
                except ValueError:
                    continue  # not an engine for this model
                except Exception as e:
                    errors[engine] = f"{type(e).__name__}: {e}"[:200]
                    print(name, engine, "failed:", errors[engine], flush=True)
                time.sleep(args.pause)
            want = engines[BAR][1] if BAR in engines else None
            times = time_in_rounds({e: fn for e, (fn, _) in engines.items()}, args.runs, args.rounds, args.pause)
            for engine in args.engines:
                if engine not in engines and engine not in errors:
                    continue
                row = {"model": name, "engine": engine}
                if engine in errors:
                    row["error"] = errors[engine]
                else:
                    got = engines[engine][1]
                    diff = None if want is None else float(np.abs(got - want).max())
                    scale = None if want is None else float(np.abs(want).max())
                    row.update(ms=statistics.median(times[engine]) * 1000, runs=len(times[engine]), nodes=nodes[engine],
                               max_diff=diff, output_scale=scale)  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "latency.json"), "w") as f:
        json.dump(rows, f, indent=1)
    text = table(rows)
    with open(os.path.join(RESULTS, "latency.md"), "w") as f:
        f.write(text)
    print(text)


def table(rows: list[dict]) -> str:
    """One line per model and engine: median ms, nodes, speed-up over ORT_ENABLE_ALL on the original."""
    out = "| model | engine | median ms | nodes | vs original under ORT_ENABLE_ALL | max abs diff |\n"
    out += "|---|---|---|---|---|---|\n"
    for name in dict.fromkeys(r["model"] for r in rows):
        by = {r["engine"]: r for r in rows if r["model"] == name}
        bar = by.get(BAR, {}).get("ms")
        for engine, r in by.items():
            if "ms" not in r:
                out += f"| {name} | {engine} | fails: {r['error'][:80].replace('|', '/')} | | | |\n"
                continue
            ratio = f"{bar / r['ms']:.2f}×" if bar else ""
            diff = "" if r["max_diff"] is None else f"{r['max_diff']:.1e} (of {r['output_scale']:.1f})"
            out += f"| {name} | {engine} | {r['ms']:.2f} | {r['nodes']} | {ratio} | {diff} |\n"
    return out


if __name__ == "__main__":
    main()
