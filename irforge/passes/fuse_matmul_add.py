"""fuse-matmul-add: a linear layer (MatMul by a constant matrix, then Add of a constant bias) as one Gemm.

Exporters spell ``nn.Linear`` as MatMul + Add; Gemm carries the bias itself, so every layer loses a
node.  Gemm is two-dimensional: a batched input ``[..., K]`` is flattened to ``[M, K]`` and the
result restored to ``[..., N]``.  Those Reshapes are what the rest of ``O1`` removes in pairs
(``reshape-pair``, CSE of the flattening shared by Q/K/V projections), which is why the fusion pays
off on transformers and not only on MLPs.  The restored shape is written out, so the input's shape
must be static.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core_ir.dtypes import DataType
from ..core_ir.graph import Graph
from ..core_ir.pattern import Match, Pattern
from ..core_ir.types import TensorType
from .base import Pass, PassContext, PassResult, run_patterns

_GEMM_TYPES = frozenset({DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16, DataType.BFLOAT16})
"""Gemm's float types; the integer ones would fold an integer bias the same way, but no exporter
writes integer linear layers, and onnxruntime has no integer Gemm kernel."""


def _linear_layer(m: Match) -> bool:
    w, c, shape = m.constant("w"), m.constant("c"), m.shape("x")
    if w is None or w.ndim != 2:
        return m.fail("the weight is not a constant matrix")
    if c is None or c.size != w.shape[1] or c.shape[-1:] != w.shape[1:] or c.ndim > 2:
        return m.fail("the bias is not a constant [N] or [1, N]")
    if m.dtype("x") not in _GEMM_TYPES or m.dtype("w") != m.dtype("x") or m.dtype("c") != m.dtype("x"):
        return m.fail("the dtypes are not one float type")
    if shape is None or len(shape) < 2 or not all(isinstance(d, int) and d > 0 for d in shape):
        return m.fail("the input's shape is not static with rank 2 or more")
    if shape[-1] != w.shape[0]:
        return m.fail("the inner dimensions disagree")
    product = m.nodes[1].outputs[0]
    if product.num_uses() != 1 or product.is_graph_output():
        return m.fail("the MatMul's result is read elsewhere")
    return True


def _gemm(b, m: Match):
    """The new values are typed here (every shape is static), so later passes need no new inference."""
    x, w, c = m["x"], m["w"], m["c"]
    shape, dtype = m.shape("x"), m.dtype("x")
    k, n = m.constant("w").shape
    rows = math.prod(shape[:-1])
    bias = c if m.constant("c").ndim == 1 else b.constant(m.constant("c").reshape(-1))
    if len(shape) == 2:
        return _typed(b.op.Gemm(x, w, bias), dtype, (rows, n))
    flat = _typed(b.op.Reshape(x, b.constant(np.array([-1, k], dtype=np.int64))), dtype, (rows, k))
    product = _typed(b.op.Gemm(flat, w, bias), dtype, (rows, n))
    restored = b.op.Reshape(product, b.constant(np.array([*shape[:-1], n], dtype=np.int64)))
    return _typed(restored, dtype, (*shape[:-1], n))


def _typed(v, dtype: int, shape: tuple[int, ...]):
    v.type = TensorType(DataType(dtype), tuple(shape))
    return v


PATTERNS: list[Pattern] = [
    Pattern(
        "matmul-add-to-gemm",
        lambda p: p.op.Add(p.op.MatMul(p.var("x"), p.const("w")), p.const("c")),
        _gemm,
        check=_linear_layer,
    ),
]


@dataclass(frozen=True)
class FuseMatMulAdd(Pass):
    name = "fuse-matmul-add"
    summary = "MatMul by a constant matrix plus a constant bias becomes Gemm (batched inputs are flattened)"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_patterns(self, graph, ctx, PATTERNS)
