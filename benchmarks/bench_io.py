"""Load → verify → print → parse → save on synthetic graphs, next to onnx-ir and plain onnx.

Every measurement runs in a fresh process (so peak memory is that step's alone), several times;
the table gives medians.  Run:  python benchmarks/bench_io.py [--sizes 10000 100000 1000000]
Writes benchmarks/results/io.json and io.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")

STEPS = {
    "irforge": ["load", "verify", "print", "parse", "save"],
    "onnx_ir": ["load", "save"],
    "onnx": ["load", "save"],
}

WORKER = r"""
import gc, json, os, sys, time
tool, step, path, scratch = sys.argv[1:5]

def rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])

if tool == "irforge":
    import irforge
    from irforge.core_ir import parse, verify_model, write_model

    def print_to_file(model):
        with open(scratch + ".irf", "w", encoding="utf-8") as f:  # as `irforge print -o` writes it
            write_model(model, f)
    def parse_file(irf):
        with open(irf, encoding="utf-8") as f:  # as `irforge optimize FILE.irf` reads it
            return parse(f)
    from irforge.backends.onnx import save
    ready = {
        "load": lambda: None,
        "verify": lambda: irforge.load(path),
        "print": lambda: irforge.load(path),
        "parse": lambda: print_to_file(irforge.load(path)),
        "save": lambda: irforge.load(path),
    }[step]()
    run = {
        "load": lambda: irforge.load(path),
        "verify": lambda: verify_model(ready),
        "print": lambda: print_to_file(ready),
        "parse": lambda: parse_file(scratch + ".irf"),
        "save": lambda: save(ready, scratch),
    }[step]
elif tool == "onnx_ir":
    import onnx_ir
    ready = onnx_ir.load(path) if step == "save" else None
    run = {"load": lambda: onnx_ir.load(path), "save": lambda: onnx_ir.save(ready, scratch)}[step]
else:
    import onnx
    ready = onnx.load(path) if step == "save" else None
    run = {"load": lambda: onnx.load(path), "save": lambda: onnx.save(ready, scratch)}[step]

gc.collect()
base = rss_kib("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak-RSS counter, so the peak below is this step's
t0 = time.perf_counter()
result = run()
elapsed = time.perf_counter() - t0
peak = rss_kib("VmHWM:")
print(json.dumps({"seconds": elapsed, "peak_mib": peak / 1024, "delta_mib": (peak - base) / 1024}))
"""


def measure(tool: str, step: str, path: str, scratch: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", WORKER, tool, step, path, scratch], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{tool} {step} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--kinds", nargs="+", default=["chain", "ladder"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--repeats-large", type=int, default=None, help="runs per step at 1M nodes and more")
    ap.add_argument("--steps", nargs="+", default=None, help="measure only these steps; keep io.json's other rows")
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import onnx
    from synthetic import build

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds:
            for size in args.sizes:
                path = os.path.join(tmp, f"{kind}_{size}.onnx")
                onnx.save(build(kind, size), path)
                mib = os.path.getsize(path) / 2**20
                for tool, steps in STEPS.items():
                    for step in steps if args.steps is None else [s for s in steps if s in args.steps]:
                        runs = []
                        large = size >= 1_000_000 and args.repeats_large is not None
                        for _ in range(args.repeats_large if large else args.repeats):
                            runs.append(measure(tool, step, path, os.path.join(tmp, "out.onnx")))
                            time.sleep(0.5)
                        row = {
                            "kind": kind, "nodes": size, "file_mib": round(mib, 1), "tool": tool, "step": step,
                            "seconds": statistics.median(r["seconds"] for r in runs),
                            "peak_mib": statistics.median(r["peak_mib"] for r in runs),
                            "delta_mib": statistics.median(r["delta_mib"] for r in runs),
                            "runs": [round(r["seconds"], 4) for r in runs],
                        }  # fmt: skip
                        rows.append(row)
                        print(f"{kind:6} {size:>8} {tool:8} {step:6} {row['seconds']:8.3f}s "
                              f"peak {row['peak_mib']:7.0f} MiB (+{row['delta_mib']:.0f})", flush=True)  # fmt: skip
    os.makedirs(RESULTS, exist_ok=True)
    if args.steps is not None and os.path.exists(os.path.join(RESULTS, "io.json")):
        with open(os.path.join(RESULTS, "io.json")) as f:
            fresh = {(r["kind"], r["nodes"], r["tool"], r["step"]) for r in rows}
            rows = [r for r in json.load(f) if (r["kind"], r["nodes"], r["tool"], r["step"]) not in fresh] + rows
    with open(os.path.join(RESULTS, "io.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(RESULTS, "io.md"), "w") as f:
        f.write(report(rows))
    print(report(rows))


def report(rows: list[dict]) -> str:
    get = {(r["kind"], r["nodes"], r["tool"], r["step"]): r for r in rows}
    kinds = sorted({r["kind"] for r in rows})
    sizes = sorted({r["nodes"] for r in rows})
    out = [
        "| graph | nodes | file | step | irforge | onnx-ir | onnx | irforge / onnx-ir "
        "| peak MiB irforge / onnx-ir / onnx | irforge peak ÷ onnx.load peak |",
        "|---|---:|---:|---|---:|---:|---:|---:|---|---:|",
    ]
    for kind in kinds:
        for size in sizes:
            for step in STEPS["irforge"]:
                ours = get.get((kind, size, "irforge", step))
                if ours is None:
                    continue
                oir, onx = get.get((kind, size, "onnx_ir", step)), get.get((kind, size, "onnx", step))
                ratio = f"{ours['seconds'] / oir['seconds']:.2f}×" if oir else ""
                peaks = " / ".join(f"{r['peak_mib']:.0f}" if r else "–" for r in (ours, oir, onx))
                loaded = get.get((kind, size, "onnx", "load"))
                memory = f"{ours['peak_mib'] / loaded['peak_mib']:.2f}×" if loaded else ""
                head = f"| {kind} | {size:,} | {ours['file_mib']} MiB | {step} | {ours['seconds']:.3f} s |"
                times = f" {oir['seconds']:.3f} s | {onx['seconds']:.3f} s | {ratio} |" if oir else " | | |"
                out.append(f"{head}{times} {peaks} | {memory} |")
    out.append("")
    out.append("Growth (time at 10× the nodes ÷ time before; 10.0 is linear):")
    out.append("")
    out.append("| graph | step | " + " | ".join(f"{a:,}→{b:,}" for a, b in itertools.pairwise(sizes)) + " |")
    out.append("|---|---|" + "---:|" * (len(sizes) - 1))
    for kind in kinds:
        for step in STEPS["irforge"]:
            cells = []
            for a, b in itertools.pairwise(sizes):
                ra, rb = get.get((kind, a, "irforge", step)), get.get((kind, b, "irforge", step))
                cells.append(f"{rb['seconds'] / ra['seconds']:.1f}" if ra and rb else "")
            out.append(f"| {kind} | {step} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
