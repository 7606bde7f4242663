"""A fixed slice of the framework op suites that benchmarks/frontend_coverage.py runs whole:
PyTorch OpInfo samples and JAX primitive harnesses, imported and run on the reference
interpreter against the framework's eager results.  Nothing may be wrong; the pass counts may
only go up (the floors); and the coverage page lists the op tables as they are."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import expecttest  # noqa: F401 - torch's OpInfo database needs it; a missing install must fail, not skip

from irforge.testing import frontend_conformance as conformance

ROOT = Path(__file__).resolve().parent.parent

TORCH_SLICE = [
    "abs", "add", "addmm", "amax", "any", "argmax", "atan2", "baddbmm", "bmm", "cat", "clamp", "cumsum", "div",
    "digamma", "erfinv", "expand", "flip", "gather", "index_select", "index_put", "isnan", "layer_norm", "lgamma",
    "linalg.vector_norm", "log_softmax", "masked_fill", "matmul", "max.reduction_with_dim", "mean",
    "nn.functional.avg_pool2d", "nn.functional.batch_norm", "nn.functional.conv2d", "nn.functional.conv_transpose2d",
    "nn.functional.embedding", "nn.functional.gelu", "nn.functional.group_norm", "nn.functional.interpolate",
    "nn.functional.linear", "nn.functional.max_pool2d", "nn.functional.pad",
    "nn.functional.scaled_dot_product_attention", "permute", "pow", "remainder", "repeat", "reshape", "scatter",
    "scatter_add", "select", "sigmoid", "slice", "softmax", "sort", "split", "squeeze", "stack", "sum", "tanh",
    "topk", "transpose", "tril", "unsqueeze", "var", "where",
    "bucketize", "cummax", "index_reduce.mean", "kthvalue", "linalg.cholesky", "linalg.inv", "linalg.lu_factor",
    "linalg.qr", "linalg.solve", "median", "nextafter", "searchsorted", "special.i0e", "special.ndtri", "as_strided",
]  # fmt: skip
TORCH_FLOOR = 98
JAX_FLOOR = 116


def test_torch_opinfo_slice_has_no_wrong_results():
    ops = conformance.torch_ops(TORCH_SLICE)
    results = conformance.run_torch_suite(ops, ("reference",), samples_per_op=1)
    wrong = [(r.op, r.details["reference"]) for r in results if r.outcomes["reference"] == "wrong"]
    assert not wrong
    passed = sum(r.outcomes["reference"] == "pass" for r in results)
    assert passed >= TORCH_FLOOR, conformance.tally(results)


def test_jax_harness_slice_has_no_wrong_results():
    harnesses = conformance.jax_harnesses(per_group=1)
    results = conformance.run_jax_suite(harnesses, ("reference",))
    wrong = [(r.details["name"], r.details["reference"]) for r in results if r.outcomes["reference"] == "wrong"]
    assert not wrong
    passed = sum(r.outcomes["reference"] == "pass" for r in results)
    assert passed >= JAX_FLOOR, conformance.tally(results)


def test_the_coverage_page_lists_the_current_op_tables():
    spec = importlib.util.spec_from_file_location("frontend_coverage", ROOT / "benchmarks" / "frontend_coverage.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    page = (ROOT / "docs" / "frontend-coverage.md").read_text(encoding="utf-8")
    assert script.mapped_ops_section() in page, "stale: run python benchmarks/frontend_coverage.py --render-only"
