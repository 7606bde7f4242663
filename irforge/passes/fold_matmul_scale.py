"""fold-matmul-scale: a constant scalar factor before or after a MatMul by constant weights is
folded into the weights.

``(x * c) @ W``, ``(x / c) @ W``, ``(x @ W) * c`` and ``(x @ W) / c`` are ``x @ (W * c)`` (or
``W / c``): one elementwise pass over the activations fewer, paid once on the weights.  Exporters
write these for scaled embeddings (``x * sqrt(d)``), for temperature and logit scales, and for
attention's ``1/sqrt(d)`` when it is applied to a projection.  The factor must be a constant
scalar (one element) of the weights' float type, the weights a constant matrix, the intermediate
result read by nothing else; the new weights are computed in float64 and stored in the weights'
dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.builder import Builder
from ..core_ir.dtypes import COMPUTE_FLOATS
from ..core_ir.graph import Graph
from ..core_ir.pattern import Match, Pattern
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult, run_patterns
from .fused_ops import only_read_inside


def _factor(m: Match) -> float | None:
    c = m.constant("c")
    if c is None or c.size != 1:
        return None
    value = float(c.reshape(-1)[0])
    if any(n.op_type == "Div" for n in m.nodes):
        return None if value == 0 else 1 / value
    return value


def _check(m: Match) -> bool:
    w = m.constant("w")
    if w is None or w.ndim != 2:
        return m.fail("the weights are not a constant matrix")
    if m.dtype("w") not in COMPUTE_FLOATS or m.dtype("c") != m.dtype("w") or m.dtype("x") != m.dtype("w"):
        return m.fail("not one float type")
    if _factor(m) is None:
        return m.fail("the factor is not a constant non-zero scalar")
    if not only_read_inside(m):
        return m.fail("the scaled (or unscaled) result is read elsewhere")
    return True


def _rewrite(b: Builder, m: Match) -> Value:
    w = m.constant("w")
    scaled = b.constant((w.astype(np.float64) * _factor(m)).astype(w.dtype))
    scaled.type = m["w"].type
    out = b.op.MatMul(m["x"], scaled)
    out.type = m.outputs[0].type
    return out


def _patterns() -> list[Pattern]:
    out = []
    for op in ("Mul", "Div"):
        out.append(Pattern(f"matmul-then-{op.lower()}",
                           lambda p, op=op: getattr(p.op, op)(p.op.MatMul(p.var("x"), p.const("w")), p.const("c")),
                           _rewrite, check=_check))  # fmt: skip
        out.append(Pattern(f"{op.lower()}-then-matmul",
                           lambda p, op=op: p.op.MatMul(getattr(p.op, op)(p.var("x"), p.const("c")), p.const("w")),
                           _rewrite, check=_check))  # fmt: skip
    return out


PATTERNS = _patterns()


@dataclass(frozen=True)
class FoldMatMulScale(Pass):
    name = "fold-matmul-scale"
    summary = "a constant scalar Mul/Div before or after a MatMul by constant weights -> folded into the weights"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_patterns(self, graph, ctx, PATTERNS)
