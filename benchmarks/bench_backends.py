"""Latency of the same network on every engine, side by side in one process.

Engines: PyTorch eager (``torch.inference_mode``), onnxruntime (``ORT_ENABLE_ALL``, threads not
spinning), TVM's own ONNX importer (``relax.frontend.onnx.from_onnx`` → ``tvm.compile``, untuned)
and irforge ``-O2`` → xla and → tvm.  Models: ResNet-50, MobileNetV2 (224x224) and BERT-base (seq 128),
batch 1, written in torch with random weights (``torch_models.py``) and exported to ONNX once.

Each engine is built (compile time measured), checked against PyTorch's outputs, then timed in
rounds: every round runs each engine in turn with a pause between engines (idle worker threads
of one engine must not steal a core from the next).  The table gives medians over all runs.

Run:  python benchmarks/bench_backends.py [--runs 20] [--models resnet50 mobilenet_v2 bert-base]
Writes benchmarks/results/backends.json and backends.md.
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


def _torch_engine(module, inputs):
    import torch

    torch.set_num_threads(THREADS)

    def run():
        with torch.inference_mode():
            out = module(*inputs)
        return out.numpy()

    return run


def _ort_engine(path, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.intra_op_num_threads = THREADS
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return lambda: session.run(None, feeds)[0]


def _tvm_engine(path, feeds):
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    shapes = {k: list(v.shape) for k, v in feeds.items()}
    mod = from_onnx(onnx.load(path), shape_dict=shapes, keep_params_in_input=False)
    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod = relax.transform.LegalizeOps()(mod)
    with tvm.transform.PassContext(opt_level=3):
        ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    args = [tvm.runtime.tensor(v) for v in feeds.values()]
    return lambda: vm["main"](*args).numpy()


def _irforge_engine(path, feeds, backend):
    import irforge

    model = irforge.optimize(irforge.load(path), "-O2")
    exe = irforge.compile(model, backend)
    return lambda: exe(feeds)[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20, help="timed runs per engine (at least)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--pause", type=float, default=1.0, help="seconds between engines")
    ap.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v2", "bert-base"])
    ap.add_argument("--engines", nargs="+",
                    default=["pytorch", "onnxruntime", "tvm from_onnx", "irforge -O2 → xla", "irforge -O2 → tvm"])
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
            engines, compile_s, errors = {}, {}, {}
            for engine in args.engines:
                t0 = time.perf_counter()
                try:
                    if engine == "pytorch":
                        fn = _torch_engine(module, inputs)
                    elif engine == "onnxruntime":
                        fn = _ort_engine(path, feeds)
                    elif engine == "tvm from_onnx":
                        fn = _tvm_engine(path, feeds)
                    else:
                        fn = _irforge_engine(path, feeds, engine.split("→ ")[1])
                    reference = fn()  # the first call (lazy compilers compile here)
                except Exception as e:
                    errors[engine] = f"{type(e).__name__}: {e}"[:200]
                    print(name, engine, "failed:", errors[engine], flush=True)
                    continue
                compile_s[engine] = time.perf_counter() - t0
                engines[engine] = (fn, reference)
                time.sleep(args.pause)
            want = engines["pytorch"][1] if "pytorch" in engines else None
            # a slow engine stops after 30 s: a few runs tell enough
            times = time_in_rounds({e: fn for e, (fn, _) in engines.items()}, args.runs, args.rounds, args.pause,
                                   budget_s=30)  # fmt: skip
            for engine in args.engines:
                row = {"model": name, "engine": engine}
                if engine in errors:
                    row["error"] = errors[engine]
                else:
                    got = np.asarray(engines[engine][1])
                    diff = None if want is None else float(np.abs(got - want).max())
                    row.update(ms=statistics.median(times[engine]) * 1000, runs=len(times[engine]),
                               compile_s=compile_s[engine], max_diff=diff)  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "backends.json"), "w") as f:
        json.dump(rows, f, indent=1)
    text = table(rows, args.engines)
    with open(os.path.join(RESULTS, "backends.md"), "w") as f:
        f.write(text)
    print(text)


def table(rows: list[dict], engines: list[str]) -> str:
    """Per model: each engine's median latency (compile seconds) and its ratio to PyTorch eager."""
    out = "| model | " + " | ".join(engines) + " |\n|---|" + "---|" * len(engines) + "\n"
    for name in dict.fromkeys(r["model"] for r in rows):
        by = {r["engine"]: r for r in rows if r["model"] == name}
        eager = by.get("pytorch", {}).get("ms")
        cells = []
        for e in engines:
            r = by.get(e, {})
            if "ms" not in r:
                cells.append("fails: " + r.get("error", "not run")[:60].replace("|", "/"))
                continue
            ratio = f", {eager / r['ms']:.2f}× eager" if eager and e != "pytorch" else ""
            cells.append(f"{r['ms']:.2f} ms ({r['compile_s']:.1f} s compile{ratio})")
        out += f"| {name} | " + " | ".join(cells) + " |\n"
    return out


if __name__ == "__main__":
    main()
