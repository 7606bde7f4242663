"""fuse-rms-norm: RMS normalization written in primitives becomes one op.

LLaMA-style models normalize by the root mean square over the last axis, ``x / sqrt(mean(x^2) +
eps) * weight``, which exporters write as five or six nodes (``Pow`` or ``x * x``, ``ReduceMean``,
``Add``, ``Sqrt``, then ``Reciprocal`` + ``Mul``, ``1 / ...`` + ``Mul`` or a ``Div``, then the
weight).  From opset 23
the result is ONNX's ``RMSNormalization``; before, ``irforge::RMSNormalization(x, scale)
<epsilon>`` (its body the primitives; onnxruntime inlines it: its ``SimplifiedLayerNormalization``
kernel is registered in the ONNX domain, where no ONNX schema backs it).  The mean must be over the last axis only with
``keepdims`` on, ``eps`` a constant scalar, the weight (when there is one) a constant that
varies along the last axis only, the intermediates read by nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.attributes import Attr, AttrKind
from ..core_ir.builder import Builder
from ..core_ir.dtypes import COMPUTE_FLOATS, to_numpy
from ..core_ir.graph import Graph
from ..core_ir.model import Function
from ..core_ir.pattern import Match, Pattern
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult
from .fused_ops import DOMAIN, only_read_inside, onnx_opset, run_fusion


def _last_axis_mean(m: Match) -> bool:
    mean = next(n for n in m.nodes if n.op_type == "ReduceMean")
    rank = m.rank("x")
    if rank is None:
        return False
    if len(mean.inputs) > 1:
        axes = m.constant("axes")
        axes = None if axes is None else [int(a) for a in axes.reshape(-1)]
    else:
        a = mean.attributes.get("axes")
        axes = None if a is None or a.ref is not None else list(a.value)
    keep = mean.attributes.get("keepdims")
    if keep is not None and (keep.ref is not None or keep.value != 1):
        return False
    return axes is not None and [x % rank for x in axes] == [rank - 1]


def _width(m: Match) -> int | None:
    shape = m.shape("x")
    return shape[-1] if shape and isinstance(shape[-1], int) else None


def _check(m: Match) -> bool:
    if m.dtype("x") not in COMPUTE_FLOATS:
        return m.fail("not a float type")
    eps = m.constant("eps")
    if eps is None or eps.size != 1:
        return m.fail("epsilon is not a constant scalar")
    two = m.constant("two") if "two" in m.values else np.array(2.0)
    if two is None or two.size != 1 or float(two.reshape(-1)[0]) != 2.0:
        return m.fail("the power is not 2")
    one = m.constant("one") if "one" in m.values else np.array(1.0)
    if one is None or one.size != 1 or float(one.reshape(-1)[0]) != 1.0:
        return m.fail("the inverse is not 1 / sqrt(...)")
    if not _last_axis_mean(m) or _width(m) is None:
        return m.fail("the mean is not over the (static) last axis alone, with keepdims on")
    if "w" in m.values:
        w = m.constant("w")
        if w is None or w.size not in (1, _width(m)) or (w.ndim and w.shape[-1] != w.size):
            return m.fail("the weight is not a constant along the last axis")
    if not only_read_inside(m):
        return m.fail("an intermediate result is read elsewhere")
    return True


def _rewrite(native: bool):
    def rewrite(b: Builder, m: Match) -> Value:
        width, dtype = _width(m), to_numpy(m.dtype("x"))
        scale = np.ones(width, dtype) if "w" not in m.values else np.broadcast_to(
            m.constant("w").reshape(-1), (width,)).astype(dtype)  # fmt: skip
        eps = float(m.constant("eps").reshape(-1)[0])
        if native:
            out = b.op.RMSNormalization(m["x"], b.constant(scale), axis=-1, epsilon=eps)
        else:
            node = b.add_node("RMSNormalization", [m["x"], b.constant(scale)], {"epsilon": eps}, domain=DOMAIN,
                              num_outputs=1)  # fmt: skip
            out = node.outputs[0]
        out.type = m.outputs[0].type
        return out

    return rewrite


def _source(axes_input: bool, square: str, divide: str, weight: bool):
    def source(p):
        x = p.var("x")
        sq = p.op.Pow(x, p.const("two")) if square == "pow" else p.op.Mul(x, x)
        mean = p.op.ReduceMean(sq, p.const("axes")) if axes_input else p.op.ReduceMean(sq)
        root = p.op.Sqrt(p.op.Add(mean, p.const("eps")))
        if divide == "div":
            y = p.op.Div(x, root)
        else:
            inverse = p.op.Reciprocal(root) if divide == "reciprocal" else p.op.Div(p.const("one"), root)
            y = p.op.Mul(x, inverse)
        return p.op.Mul(y, p.const("w")) if weight else y

    return source


def _patterns(native: bool) -> list[Pattern]:
    out = []
    for weight in (True, False):
        for axes_input in (False, True):
            for square in ("pow", "mul"):
                for divide in ("div", "reciprocal", "one-over"):
                    name = (f"rms-norm-{'axes-input' if axes_input else 'axes-attr'}-{square}-"
                            f"{divide}{'-weight' if weight else ''}")  # fmt: skip
                    out.append(Pattern(name, _source(axes_input, square, divide, weight), _rewrite(native),
                                       check=_check, benefit=3 + weight))  # fmt: skip
    return out


def _weight_check(m: Match) -> bool:
    k, scale = m.constant("k"), m.constant("scale")
    if k is None or scale is None or k.size not in (1, scale.size) or (k.ndim and k.shape[-1] != k.size):
        return m.fail("the operand is not a constant along the last axis")
    return m.dtype("k") == m.dtype("scale") and only_read_inside(m)


def _weight_rewrite(b: Builder, m: Match) -> Value:
    """``RMSNorm(x, scale) * k`` is ``RMSNorm(x, scale * k)``: the weight a norm's primitives
    were matched without (graph order reaches them first)."""
    norm = m.nodes[-1]
    scale = (m.constant("scale") * m.constant("k").reshape(-1)).astype(m.constant("scale").dtype)
    node = b.add_node("RMSNormalization", [m["x"], b.constant(scale)], dict(norm.attributes), domain=norm.domain,
                      num_outputs=1)  # fmt: skip
    node.overload = norm.overload
    node.outputs[0].type = m.outputs[0].type
    return node.outputs[0]


def _weight_patterns(native: bool) -> list[Pattern]:
    ops = (lambda p: p.op) if native else (lambda p: p.domain(DOMAIN))
    return [Pattern(f"rms-norm{'' if native else '-irforge'}-times-weight",
                    lambda p: p.op.Mul(ops(p).RMSNormalization(p.var("x"), p.const("scale")), p.const("k")),
                    _weight_rewrite, check=_weight_check, benefit=2)]  # fmt: skip


PATTERNS: dict[bool, list[Pattern]] = {native: _patterns(native) + _weight_patterns(native) for native in (False, True)}
"""The patterns for models without (False) and with (True) ONNX's ``RMSNormalization`` (opset 23)."""


def _function(overload: str, opset: int) -> Function:
    g = Graph(inputs=[Value("X"), Value("Scale")], name="RMSNormalization", opset_imports={"": opset})
    b = Builder(g, opset=opset)
    x, scale = g.inputs
    axes = b.op.Constant(value_ints=[-1])
    if opset >= 18:
        mean = b.op.ReduceMean(b.op.Mul(x, x), axes)
    else:
        mean = b.add_node("ReduceMean", [b.op.Mul(x, x)], {"axes": [-1]}, num_outputs=1).outputs[0]
    eps = b.add_node("Constant", [], {}, num_outputs=1)
    eps.set_attribute("value_float", Attr("value_float", AttrKind.FLOAT, None, ref="epsilon"))
    root = b.op.Sqrt(b.op.Add(mean, b.op.CastLike(eps.outputs[0], x)))
    g.append_output(b.op.Mul(b.op.Div(x, root), scale))
    doc = "X / sqrt(mean(X^2, last axis) + epsilon) * Scale: the decomposition of irforge::RMSNormalization"
    return Function(DOMAIN, "RMSNormalization", g, attributes=["epsilon"], overload=overload, doc_string=doc)


BODIES = [("RMSNormalization", _function)]
"""The fused op this pass makes, with its decomposition (registered by the built-in plugin)."""


@dataclass(frozen=True)
class FuseRmsNorm(Pass):
    name = "fuse-rms-norm"
    summary = "RMS norm in primitives (Pow or x*x, Div or Reciprocal, optional weight) -> one RMSNormalization"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_fusion(self, graph, ctx, PATTERNS[onnx_opset(ctx, graph) >= 23])
