"""The zoo at full size on every engine: is irforge's output at least as fast as what a user
already has?

For each model of ``hf_zoo`` (full configs, random weights, batch 1, 2 threads, spinning off):

- ``export, ORT_ENABLE_ALL``: ``torch.onnx.export``'s model under onnxruntime's own fusions (the bar;
  the dynamo exporter, or the TorchScript one where dynamo fails: T5, marked ``†``);
- ``ort transformers optimizer``: that file through ``onnxruntime.transformers.optimizer`` (the
  transformer models it has a type for), under ``ORT_ENABLE_ALL``;
- ``irforge -O3 --target onnxruntime`` on the export and on ``irforge.from_torch``'s import, under
  ``ORT_ENABLE_ALL``;
- ``irforge -O3 → xla`` (the ``from_torch`` import); ``irforge -O3 → tvm`` with ``--tvm`` (untuned
  TVM takes seconds to minutes a call on these sizes; ``irforge tune`` is what it needs).

Every engine's output is checked against PyTorch's (largest difference relative to the output's
largest value), then the engines are timed in rounds (each in turn, a pause between them); the
table gives medians, the ratio to the bar (above 1: faster; under 1.1x either way is a tie) and the
fused ops each irforge row runs.

Run:  python benchmarks/bench_zoo.py [--models bert gpt2 ...] [--runs 12] [--tvm] [--small] [--update]
Writes benchmarks/results/zoo.json, zoo.md and zoo.png (the ratios, one bar per model and engine).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, HERE)

THREADS = 2
BAR = "export, ORT_ENABLE_ALL"
ENGINES = [BAR, "ort transformers optimizer", "irforge -O3 --target onnxruntime (export)",
           "irforge -O3 --target onnxruntime (from_torch)", "irforge -O3 → xla", "irforge -O3 → tvm"]  # fmt: skip
OPTIMIZER_TYPES = {"bert": "bert", "distilbert": "bert", "gpt2": "gpt2", "t5-encoder": "t5", "vit": "vit"}
"""The zoo models onnxruntime's transformer optimizer has a model type for."""


def _ort(path: str, feeds: list[np.ndarray]):
    from rounds import ort_session

    session = ort_session(path, threads=THREADS)
    names = [i.name for i in session.get_inputs()]
    given = dict(zip(names, feeds, strict=True))
    return lambda: session.run(None, given)[0]


def _export(module, args, path: str) -> str:
    """Write ``torch.onnx.export``'s model of ``module`` to ``path``: the dynamo exporter, or the
    TorchScript one where dynamo fails (T5); which one wrote it."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            program = torch.onnx.export(module, args, dynamo=True, verbose=False)
        except Exception:
            torch.onnx.export(module, args, path, dynamo=False, opset_version=18)
            return "torchscript"
    program.save(path, external_data=True)
    return "dynamo"


def _fused(model) -> str:
    counts = collections.Counter(n.op_type for n in model.graph.all_nodes() if n.domain in ("irforge", "com.microsoft"))
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _optimizer(name: str, module, path: str, out: str) -> tuple[str, str]:
    from onnxruntime.transformers import optimizer

    config = module.model.config
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", 0)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", 0)
    opt = optimizer.optimize_model(path, model_type=OPTIMIZER_TYPES[name], num_heads=heads, hidden_size=hidden,
                                   opt_level=0)  # fmt: skip
    opt.save_model_to_file(out, use_external_data_format=True)
    counts = collections.Counter(n.op_type for n in opt.model.graph.node if n.domain == "com.microsoft")
    return out, ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _engine(engine: str, name: str, module, args, export_path: str, tmp: str):
    """(run function, fused ops) of one engine; None when it is not an engine for this model."""
    import irforge

    feeds = [x.numpy() for x in args]
    if engine == BAR:
        return _ort(export_path, feeds), ""
    if engine == "ort transformers optimizer":
        if name not in OPTIMIZER_TYPES:
            return None
        out, fused = _optimizer(name, module, export_path, os.path.join(tmp, f"{name}-ortopt.onnx"))
        return _ort(out, feeds), fused
    if "--target onnxruntime" in engine:
        model = irforge.load(export_path) if "(export)" in engine else irforge.from_torch(module, args)
        model = irforge.optimize(model, "-O3", target="onnxruntime")
        out = os.path.join(tmp, f"{name}-{'export' if '(export)' in engine else 'from_torch'}.onnx")
        irforge.save(model, out)
        return _ort(out, feeds), _fused(model)
    backend = engine.rsplit(" ", 1)[-1]
    model = irforge.optimize(irforge.from_torch(module, args), "-O3")
    exe = irforge.compile(model, backend)
    return (lambda: exe(*feeds)[0]), _fused(model)


def measure(names: list[str], engines: list[str], runs: int, rounds: int, pause: float, small: bool) -> list[dict]:
    import hf_zoo
    import torch
    from rounds import time_in_rounds

    rows = []
    for name in names:
        module, args = hf_zoo.ZOO[name](small)
        with torch.no_grad():
            expected = module(*args).numpy()
        scale = float(np.abs(expected).max())
        with tempfile.TemporaryDirectory() as tmp:
            export_path = os.path.join(tmp, f"{name}.onnx")
            try:
                exporter = _export(module, args, export_path)
            except Exception as e:
                rows.append({"model": name, "engine": BAR, "error": f"torch.onnx.export: {type(e).__name__}"})
                print(json.dumps(rows[-1]), flush=True)
                export_path, exporter = None, None
            runners, fused, errors, diffs = {}, {}, {}, {}
            for engine in engines:
                if export_path is None and (engine == BAR or "(export)" in engine or "optimizer" in engine):
                    continue
                try:
                    built = _engine(engine, name, module, args, export_path, tmp)
                    if built is None:
                        continue
                    runners[engine], fused[engine] = built
                    got = np.asarray(runners[engine](), np.float64)
                    diffs[engine] = float(np.abs(got - expected).max()) / scale
                except Exception as e:
                    errors[engine] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
                    print(name, engine, "failed:", errors[engine], flush=True)
                time.sleep(pause)
            budget = 20.0 if not small else None  # an engine taking seconds a call stops after 20 s of calls
            times = time_in_rounds(runners, runs, rounds, pause, budget_s=budget)
            for engine in engines:
                if engine in errors:
                    rows.append({"model": name, "engine": engine, "error": errors[engine]})
                elif engine in runners:
                    rows.append({"model": name, "engine": engine, "ms": statistics.median(times[engine]) * 1000,
                                 "runs": len(times[engine]), "max_rel_diff": diffs[engine], "fused": fused[engine],
                                 "exporter": exporter})  # fmt: skip
                else:
                    continue
                print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    out = "| model | engine | median ms | vs export on ORT_ENABLE_ALL | max rel. diff to PyTorch | fused ops |\n"
    out += "|---|---|---:|---:|---:|---|\n"
    for name in dict.fromkeys(r["model"] for r in rows):
        by = {r["engine"]: r for r in rows if r["model"] == name}
        bar = by.get(BAR, {}).get("ms")
        for engine, r in by.items():
            if "ms" not in r:
                out += f"| {name} | {engine} | fails: {r['error'][:90].replace('|', '/')} | | | |\n"
                continue
            ratio = f"{bar / r['ms']:.2f}×" if bar else ""
            mark = " †" if r.get("exporter") == "torchscript" and ("export" in engine or "optimizer" in engine) else ""
            out += (f"| {name} | {engine}{mark} | {r['ms']:.2f} | {ratio} | {r['max_rel_diff']:.1e} | "
                    f"{r['fused'] or '–'} |\n")  # fmt: skip
    return out


def plot(rows: list[dict], path: str, stamp: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r["model"] for r in rows))
    engines = [e for e in ENGINES[1:] if any(r["engine"] == e and "ms" in r for r in rows)]
    bars = {m: next((r["ms"] for r in rows if r["model"] == m and r["engine"] == BAR and "ms" in r), None)
            for m in models}  # fmt: skip
    fig, ax = plt.subplots(figsize=(14, 4.5))
    width = 0.8 / max(1, len(engines))
    for i, engine in enumerate(engines):
        ys = []
        for m in models:
            r = next((r for r in rows if r["model"] == m and r["engine"] == engine and "ms" in r), None)
            ys.append(bars[m] / r["ms"] if r and bars[m] else 0)
        ax.bar([j + i * width for j in range(len(models))], ys, width, label=engine)
    ax.axhline(1.0, color="black", linewidth=0.8)
    for tie in (1 / 1.1, 1.1):
        ax.axhline(tie, color="grey", linewidth=0.5, linestyle="--")
    ax.set_xticks([j + width * (len(engines) - 1) / 2 for j in range(len(models))], models, rotation=20)
    ax.set_ylabel("speed vs export on ORT_ENABLE_ALL (×)")
    ax.set_title(f"zoo, batch 1, {THREADS} threads ({stamp}); dashed: the 1.1× tie band")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    import hf_zoo

    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=list(hf_zoo.ZOO))
    ap.add_argument("--engines", nargs="+", default=None, help="default: every engine but tvm")
    ap.add_argument("--tvm", action="store_true", help="time untuned tvm too")
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=1.0)
    ap.add_argument("--small", action="store_true", help="the test configs (a quick run)")
    ap.add_argument("--update", action="store_true", help="replace only the rows of --models in the results")
    a = ap.parse_args()
    engines = a.engines or [e for e in ENGINES if a.tvm or not e.endswith("tvm")]
    rows = measure(a.models, engines, a.runs, a.rounds, a.pause, a.small)
    stamp = time.strftime("%Y-%m-%d")
    os.makedirs(RESULTS, exist_ok=True)
    suffix = "-small" if a.small else ""
    previous = os.path.join(RESULTS, f"zoo{suffix}.json")
    if a.update and os.path.exists(previous):  # the models measured now replace theirs, the others stay
        with open(previous) as f:
            kept = [r for r in json.load(f)["rows"] if r["model"] not in a.models]
        order = list(hf_zoo.ZOO)
        rows = sorted(kept + rows, key=lambda r: order.index(r["model"]) if r["model"] in order else len(order))
    with open(os.path.join(RESULTS, f"zoo{suffix}.json"), "w") as f:
        json.dump({"date": stamp, "rows": rows}, f, indent=1)
    text = table(rows)
    with open(os.path.join(RESULTS, f"zoo{suffix}.md"), "w") as f:
        f.write(f"Measured {stamp}, batch 1, {THREADS} threads (`python benchmarks/bench_zoo.py`).\n\n{text}")
    plot(rows, os.path.join(RESULTS, f"zoo{suffix}.png"), stamp)
    print(text)


if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        main()
