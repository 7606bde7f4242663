"""irforge -O1/-O2 next to onnxslim, onnxscript, onnxsim and onnxoptimizer, in one run.

Models: the light_*.onnx models of the onnx wheel, a BERT-base encoder (random weights, seq 128,
exported with torch when torch is installed) and the synthetic chains and ladders.  Every run is
a fresh process (load + optimize, not save) with its peak RSS.  Two times: *cold* is the first
call in the process (with whatever the tool imports or sets up on first use), *warm* the median of
further calls in the same process, each on a freshly loaded model (the cost inside a compiler that
optimizes many models).  Tools differ in what they import up front (onnxsim loads onnxruntime on
``import``, irforge its passes and ONNX's reference kernels on first use), so the table also gives
*import + cold*, the time a one-shot command pays after ``import onnx``.  The table gives medians
over runs and the node count after.  A tool that exceeds --timeout on a synthetic size is not run
on the larger sizes of that kind.

"irforge -O1 unbounded" is -O1 with no folding limit: it materialises every constant, as
onnxslim and onnxsim do, so node counts can be compared at the same policy.

Run:  python benchmarks/bench_optimize.py [--sizes 10000 100000 1000000] [--repeats 3]
Writes benchmarks/results/optimize.json and optimize.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
TOOLS = ["irforge -O1", "irforge -O2", "irforge -O1 unbounded", "onnxslim", "onnxscript", "onnxsim", "onnxoptimizer"]

WORKER = r"""
import gc, json, os, sys, time, warnings
warnings.simplefilter("ignore")
tool, path = sys.argv[1:3]

def peak_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

import onnx
t0 = time.perf_counter()
if tool.startswith("irforge"):
    import irforge
    from irforge.passes.levels import LEVELS
    level = tool.split()[1][1:]
    if tool.endswith("unbounded"):
        level = LEVELS[level].replace("constant-fold", "constant-fold{size-limit=1099511627776}")
    def run():
        m = irforge.load(path)
        irforge.optimize(m, level, verify_each=False)
        return len(m.graph)
elif tool == "onnxslim":
    import onnxslim
    def run():
        return len(onnxslim.slim(path).graph.node)
elif tool == "onnxscript":
    import onnxscript.optimizer
    def run():
        return len(onnxscript.optimizer.optimize(onnx.load(path)).graph.node)
elif tool == "onnxsim":
    import onnxsim
    def run():
        model, _ = onnxsim.simplify(onnx.load(path), check_n=0)
        return len(model.graph.node)
else:
    import onnxoptimizer
    def run():
        return len(onnxoptimizer.optimize(onnx.load(path)).graph.node)

imported = time.perf_counter() - t0
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
t0 = time.perf_counter()
nodes = run()
cold = time.perf_counter() - t0
peak = peak_kib()  # the cold run's: later runs may overlap with garbage of earlier ones
warm = []
while cold < 20 and len(warm) < (5 if cold < 1 else 1):
    gc.collect()
    t0 = time.perf_counter()
    run()
    warm.append(time.perf_counter() - t0)
warm = sorted(warm)[len(warm) // 2] if warm else None
print(json.dumps({"seconds": cold, "warm": warm, "import": imported, "peak_mib": peak / 1024, "nodes": nodes}))
"""


def measure(tool: str, path: str, timeout: float, baselines: dict[str, str] | None = None) -> dict:
    """One fresh process.  ``irforge -O1 @REV`` runs the irforge of commit REV (a worktree made
    by ``--baseline REV``), so an old and a new version are measured side by side in one run."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if "@" in tool:
        tool, rev = tool.split(" @")
        env["PYTHONPATH"] = (baselines or {})[rev]
    try:
        # run from the model's folder: `python -c` puts the working directory first on sys.path,
        # which would shadow the baseline's irforge with this checkout's
        proc = subprocess.run([sys.executable, "-c", WORKER, tool, path], capture_output=True, text=True,
                              timeout=timeout, env=env, check=False, cwd=os.path.dirname(path))  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:200]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def models(tmp: str, sizes: list[int], with_bert: bool) -> list[tuple[str, str, str | None]]:
    """(name, path, synthetic kind or None)"""
    import onnx
    from synthetic import build

    light = sorted(glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light/*.onnx")))
    out = [(os.path.basename(p)[len("light_") : -len(".onnx")], p, None) for p in light]
    if with_bert:
        path = os.path.join(tmp, "bert_base.onnx")
        proc = subprocess.run([sys.executable, os.path.join(HERE, "bert.py"), path], capture_output=True, text=True)
        if proc.returncode == 0:
            out.append(("bert-base (seq 128)", path, None))
        else:
            print("BERT export failed (is torch installed?):", proc.stderr.strip().splitlines()[-1:], flush=True)
    for kind in ("chain", "ladder"):
        for n in sizes:
            path = os.path.join(tmp, f"{kind}_{n}.onnx")
            onnx.save(build(kind, n), path)
            out.append((f"{kind} {n // 1000}k", path, kind))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    ap.add_argument("--tools", nargs="+", default=TOOLS)
    ap.add_argument("--no-bert", action="store_true")
    ap.add_argument("--only", nargs="+", metavar="MODEL",
                    help='measure only these models (as named in the table, e.g. "chain 1000k"); keep '
                         "optimize.json's other rows")  # fmt: skip
    ap.add_argument("--baseline", metavar="REV",
                    help="also run the -O1 of commit REV (e.g. HEAD~1) as the tool 'irforge -O1 @REV'")  # fmt: skip
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import onnx

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        baselines = {}
        if args.baseline:
            worktree = os.path.join(tmp, "baseline")
            subprocess.run(["git", "worktree", "add", "--detach", worktree, args.baseline], check=True,
                           capture_output=True, cwd=HERE)  # fmt: skip
            baselines[args.baseline] = worktree
            args.tools = [*args.tools, f"irforge -O1 @{args.baseline}"]
        # bytecode for both checkouts, as an installed package has: otherwise whichever ran from a
        # folder without __pycache__ pays for compiling its modules in its cold time
        for root in [os.path.dirname(HERE), *baselines.values()]:
            subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(root, "irforge")], check=False)
        gave_up: dict[tuple[str, str], str] = {}
        for name, path, kind in models(tmp, args.sizes, not args.no_bert):
            if args.only and name not in args.only:
                continue
            before = len(onnx.load(path, load_external_data=False).graph.node)
            # the repeats go round the tools in turn, so a slow spell of the machine falls on
            # every tool alike rather than on whichever ran then
            tools = [t for t in args.tools if not (kind is not None and t.endswith("unbounded"))]
            runs: dict[str, list[dict]] = {t: [] for t in tools}
            for _ in range(args.repeats):
                for tool in tools:
                    done = runs[tool] and ("seconds" not in runs[tool][-1] or runs[tool][-1]["seconds"] > 20)
                    if (tool, kind) in gave_up or done:
                        continue  # one run says enough about a slow or failing tool
                    runs[tool].append(measure(tool, path, args.timeout, baselines))
                    time.sleep(0.5)
            for tool in tools:
                row = {"model": name, "tool": tool, "nodes_before": before}
                if (tool, kind) in gave_up and not runs[tool]:
                    row["skipped"] = gave_up[(tool, kind)]
                    rows.append(row)
                    continue
                ok = [r for r in runs[tool] if "seconds" in r]
                if ok:
                    warm = [r["warm"] for r in ok if r.get("warm") is not None]
                    row.update(seconds=statistics.median(r["seconds"] for r in ok),
                               with_import=statistics.median(r["seconds"] + r.get("import", 0) for r in ok),
                               warm=statistics.median(warm) if warm else None,
                               peak_mib=statistics.median(r["peak_mib"] for r in ok),
                               nodes=ok[0]["nodes"], runs=[round(r["seconds"], 3) for r in ok])  # fmt: skip
                else:
                    first = runs[tool][0]
                    row.update({k: v for k, v in first.items() if k in ("timeout", "error")})
                    if kind is not None and "timeout" in first:
                        gave_up[(tool, kind)] = f"> {args.timeout:.0f} s on {name}"
                print(json.dumps(row), flush=True)
                rows.append(row)
        if baselines:
            subprocess.run(["git", "worktree", "remove", "--force", baselines[args.baseline]], cwd=HERE, check=False)
    os.makedirs(RESULTS, exist_ok=True)
    tools = args.tools
    if args.only and os.path.exists(os.path.join(RESULTS, "optimize.json")):
        with open(os.path.join(RESULTS, "optimize.json")) as f:
            fresh = {(r["model"], r["tool"]) for r in rows}
            kept = [r for r in json.load(f) if (r["model"], r["tool"]) not in fresh]
        order = {name: i for i, name in enumerate(dict.fromkeys(r["model"] for r in kept + rows))}
        rows = sorted(kept + rows, key=lambda r: order[r["model"]])
        tools = TOOLS + [t for t in args.tools if t not in TOOLS]
    with open(os.path.join(RESULTS, "optimize.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(RESULTS, "optimize.md"), "w") as f:
        f.write(table(rows, tools))
    print(table(rows, tools))


def _cell(r: dict) -> str:
    if "seconds" in r:
        warm = f" ({_secs(r['warm'])})" if r.get("warm") is not None else ""
        return f"{r['nodes']} · {_secs(r['seconds'])}{warm} · {r['peak_mib']:.0f} MiB"
    if "timeout" in r:
        return f"> {r['timeout']:.0f} s"
    if "skipped" in r:
        return "not run (" + r["skipped"] + ")"
    return "fails: " + r.get("error", "?").replace("|", "/")[:80]


def _secs(s: float) -> str:
    return f"{s:.2f} s" if s >= 0.1 else f"{s * 1000:.1f} ms"


def _ratio(mine: dict, done: list[dict], key: str) -> str:
    theirs = [r[key] for r in done if r.get(key) is not None]
    return f"{mine[key] / min(theirs):.2f}×" if theirs and mine.get(key) is not None else "–"


def _fewest(mine: dict, done: list[dict]) -> str:
    if not done or "nodes" not in mine:
        return "–"
    return "yes" if mine["nodes"] <= min(r["nodes"] for r in done) else "no"


def table(rows: list[dict], tools: list[str]) -> str:
    """One line per model: nodes after · cold seconds (warm) · peak RSS, for every tool; then
    irforge -O1's cold and warm time over the fastest peer's, and whether -O1 (and -O1 without a
    folding limit) leaves no more nodes than the best peer."""
    by = {(r["model"], r["tool"]): r for r in rows}
    names = list(dict.fromkeys(r["model"] for r in rows))
    peers = [t for t in tools if not t.startswith("irforge")]
    head = ("| model | nodes | " + " | ".join(tools) + " | -O1 cold ÷ fastest peer | -O1 import + cold ÷ fastest "
            "peer | -O1 warm ÷ fastest peer | -O1 nodes ≤ best peer | unbounded nodes ≤ best peer |\n")  # fmt: skip
    out = head + "|" + "---|" * (len(tools) + 7) + "\n"
    for name in names:
        cells = [_cell(by[(name, t)]) if (name, t) in by else "–" for t in tools]
        mine = by.get((name, "irforge -O1"), {})
        done = [by[(name, p)] for p in peers if "seconds" in by.get((name, p), {})]
        summary = [_ratio(mine, done, "seconds"), _ratio(mine, done, "with_import"), _ratio(mine, done, "warm"),
                   _fewest(mine, done),
                   _fewest(by.get((name, "irforge -O1 unbounded"), {}), done)]  # fmt: skip
        before = next(r["nodes_before"] for r in rows if r["model"] == name)
        out += f"| {name} | {before} | " + " | ".join(cells + summary) + " |\n"
    return out


if __name__ == "__main__":
    main()
