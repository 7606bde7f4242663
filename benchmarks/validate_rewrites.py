"""``--validate-rewrites`` on real models: how many rewrites -O3 (and -O3 --target onnxruntime)
makes, how many of them the checker ran and refused, and what the check costs.

Models: those of ``fusion_counts.py`` (the light_*.onnx models of the onnx wheel, with random
weights; the ResNet-50, MobileNetV2 and BERT-base exports of ``torch_models.py``).  The counts are
what matters; the times are one run each (median of ``--repeat``), without and with the checker.

Run:  python benchmarks/validate_rewrites.py [--no-torch] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def _randomized(path: str):
    """The light models ship with constant-filled weights: random ones make the checks mean something."""
    import real_models

    from irforge import from_onnx

    if os.path.basename(path).startswith("light_"):
        return from_onnx(real_models.randomized(path))
    from irforge import load

    return load(path)


def _optimize(path: str, pipeline: str, checker) -> float:
    from irforge.passes import PassManager

    model = _randomized(path)
    pm = PassManager.parse(pipeline, rewrite_checker=checker)
    start = time.perf_counter()
    pm.run(model)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-torch", action="store_true", help="the light models only")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from fusion_counts import _models

    from irforge.passes import RewriteChecker

    totals = {"checked": 0, "unchecked": 0, "refused": 0}
    print("| model | pipeline | rewrites checked | unchecked (why) | refused | seconds without / with the checker |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path in _models(tmp, not args.no_torch):
            for pipeline in ("-O3", "O3,lower-fused{target=onnxruntime}"):
                plain = statistics.median(_optimize(path, pipeline, None) for _ in range(args.repeat))
                runs = []
                for _ in range(args.repeat):
                    checker = RewriteChecker()
                    runs.append(_optimize(path, pipeline, checker))
                checked = statistics.median(runs)
                why = ", ".join(f"{n} {reason}" for reason, n in checker.unchecked.most_common()) or "–"
                unchecked = sum(checker.unchecked.values())
                totals["checked"] += checker.checked
                totals["unchecked"] += unchecked
                totals["refused"] += len(checker.rejections)
                spelled = "-O3" if pipeline == "-O3" else "-O3 --target onnxruntime"
                print(f"| {name} | {spelled} | {checker.checked} | {unchecked} ({why}) | {len(checker.rejections)} "
                      f"| {plain:.2f} / {checked:.2f} |", flush=True)  # fmt: skip
                for r in checker.rejections:
                    print(f"\n```\n{r}\n```\n", flush=True)
    print(f"\ntotal: {totals['checked']} rewrites checked, {totals['unchecked']} unchecked, "
          f"{totals['refused']} refused")  # fmt: skip


if __name__ == "__main__":
    main()
