"""Every zoo model (``hf_zoo``, small configs) on every engine, against PyTorch.

Run:  python benchmarks/zoo_check.py [--models bert gpt2 ...] [--engines onnxruntime xla tvm] [--full]
Each model is imported twice, through ``irforge.from_torch`` and through ``torch.onnx.export`` +
``irforge.from_onnx``, compiled on each engine and called once; the table gives the largest
difference from PyTorch relative to the output's largest value, or the first line of the error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_zoo

import irforge


def _first_line(e: Exception) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()[0]
    return text[:160]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=list(hf_zoo.ZOO))
    ap.add_argument("--engines", nargs="+", default=["onnxruntime", "xla", "tvm"])
    ap.add_argument("--full", action="store_true", help="full-size configs instead of the small ones")
    a = ap.parse_args()
    rows = []
    for name in a.models:
        module, args = hf_zoo.ZOO[name](not a.full)
        with torch.no_grad():
            expected = module(*args).numpy()
        scale = float(np.abs(expected).max()) or 1.0
        feeds = [x.numpy() for x in args]
        for how in hf_zoo.IMPORTS:
            try:
                model = hf_zoo.imported(module, args, how)
            except Exception as e:
                rows.append((name, how, "import", _first_line(e)))
                print(*rows[-1], sep=" | ", flush=True)
                continue
            for engine in a.engines:
                t0 = time.perf_counter()
                try:
                    (got,) = irforge.compile(model, engine)(*feeds)
                    diff = float(np.abs(np.asarray(got, np.float64) - expected).max()) / scale
                    cell = f"{diff:.1e} ({time.perf_counter() - t0:.0f} s)"
                except Exception as e:
                    cell = _first_line(e)
                rows.append((name, how, engine, cell))
                print(*rows[-1], sep=" | ", flush=True)


if __name__ == "__main__":
    main()
