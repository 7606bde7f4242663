"""Draw the scaling results as log-log PNGs for the README: time and peak memory against node
count, irforge next to every peer, from benchmarks/results/optimize.json and io.json.

Run:  python benchmarks/plot.py   (matplotlib; writes benchmarks/results/*.png)
"""

from __future__ import annotations

import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
SKIP = {"irforge -O2", "irforge -O1 unbounded"}
"""Drawn only once re-measured with -O1: their rows in optimize.json may come from an older run."""


def _size(model: str) -> int | None:
    kind, _, size = model.partition(" ")
    return int(size[:-1]) * 1000 if kind in ("chain", "ladder") and size.endswith("k") else None


def _draw(axes, col: int, series: dict, what: str, kind: str) -> None:
    """One column of the figure: seconds above, peak MiB below, one line per label."""
    for label, points in series.items():
        points.sort()
        xs = [p[0] for p in points]
        style = "-o" if label.startswith("irforge") else "--s"
        axes[0][col].plot(xs, [p[1] for p in points], style, label=label)
        axes[1][col].plot(xs, [p[2] for p in points], style, label=label)
    axes[0][col].set_title(f"{kind}: {what}")
    axes[1][col].set_title(f"{kind}: peak memory")
    axes[0][col].set_ylabel("seconds")
    axes[1][col].set_ylabel("MiB")
    axes[1][col].set_xlabel("nodes")


def _finish(fig, axes, title: str, name: str, legend_columns: int) -> str:
    for ax in axes.flat:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7, ncol=legend_columns)
    fig.suptitle(title)
    fig.tight_layout()
    path = os.path.join(RESULTS, name)
    fig.savefig(path, dpi=90)
    return path


def plot_optimize() -> str:
    with open(os.path.join(RESULTS, "optimize.json"), encoding="utf-8") as f:
        rows = json.load(f)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    for col, kind in enumerate(("chain", "ladder")):
        series: dict[str, list[tuple[int, float, float]]] = {}
        for r in rows:
            n = _size(r["model"])
            if n is None or not r["model"].startswith(kind) or "seconds" not in r or r["tool"] in SKIP:
                continue
            series.setdefault(r["tool"], []).append((n, r["seconds"], r["peak_mib"]))
        _draw(axes, col, dict(sorted(series.items())), "load + optimize (cold)", kind)
    return _finish(fig, axes, "irforge and peer optimizers on synthetic graphs (a tool past the timeout is not drawn)",
                   "optimize_scaling.png", 1)  # fmt: skip


def plot_io() -> str:
    with open(os.path.join(RESULTS, "io.json"), encoding="utf-8") as f:
        rows = json.load(f)
    steps = ["load", "verify", "print", "parse", "save"]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    for col, kind in enumerate(("chain", "ladder")):
        series: dict[str, list[tuple[int, float, float]]] = {}
        for r in rows:
            if r["kind"] != kind or "seconds" not in r:
                continue
            if r["step"] in steps:
                series.setdefault(f"{r['tool']} {r['step']}", []).append((r["nodes"], r["seconds"], r["peak_mib"]))
        ordered = dict(sorted(series.items(), key=lambda kv: (kv[0].split()[0] != "irforge", kv[0])))
        _draw(axes, col, ordered, "time per step", kind)
    return _finish(fig, axes, "irforge, onnx-ir and onnx: load, verify, print, parse, save", "io_scaling.png", 2)


if __name__ == "__main__":
    print(plot_optimize())
    print(plot_io())
