"""What -O2 and -O3 --target onnxruntime leave of each model: node counts and the fused ops.

Models: the light_*.onnx models of the onnx wheel, and the ResNet-50, MobileNetV2 and BERT-base
exports of the latency benchmark (``torch_models.py``; torch==2.13.0).  The numbers are counts,
not timings: one run tells them.

Run:  python benchmarks/fusion_counts.py [--no-torch]
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile
import warnings
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))


def _models(tmp: str, torch: bool):
    import onnx

    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    for path in sorted(glob.glob(os.path.join(light, "*.onnx"))):
        yield os.path.basename(path)[len("light_"):-len(".onnx")], path
    if torch:
        sys.path.insert(0, HERE)
        import torch_models

        for name, (module, inputs, names) in torch_models.models().items():
            path = os.path.join(tmp, f"{name}.onnx")
            torch_models.export(module, inputs, names, path)
            yield f"{name} (torch export)", path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-torch", action="store_true", help="the light models only")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import irforge

    print("| model | nodes | -O1 | -O2 | fused ops after -O2 | -O3 --target onnxruntime: contrib ops |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in _models(tmp, not args.no_torch):
            before = len(irforge.load(path).graph)
            o1 = len(irforge.optimize(irforge.load(path), "-O1").graph)
            o2 = irforge.optimize(irforge.load(path), "-O2")
            fused = Counter(n.op_type for n in o2.graph if n.domain == "irforge")
            ort = irforge.optimize(irforge.load(path), "-O3", target="onnxruntime")
            contrib = Counter(n.op_type for n in ort.graph if n.domain == "com.microsoft")
            left = sum(n.op_type == "BatchNormalization" for n in o2.graph)

            def spell(c: Counter) -> str:
                return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "–"

            bn = f" (BatchNormalization left: {left})" if left else ""
            print(f"| {name} | {before} | {o1} | {len(o2.graph)} | {spell(fused)}{bn} | {spell(contrib)} |", flush=True)


if __name__ == "__main__":
    main()
