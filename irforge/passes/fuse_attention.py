"""fuse-attention: scaled dot-product attention written in primitives becomes one
``irforge::Attention`` op.

Every transformer exporter writes attention over split heads (``[batch, heads, seq, head
dim]``) as ``MatMul(Q, K^T)``, a scale (``Div`` by sqrt(d), ``Mul`` by its inverse, or none), an
optional additive mask, ``Softmax`` over the last axis and ``MatMul`` with V: five or six nodes
that write the ``seq x seq`` score matrix out three times.  As one op a runtime keeps the scores
in cache (onnxruntime's ``MultiHeadAttention``, ``lower-fused{target=onnxruntime}``) or picks
its own fused kernel.  K^T may come as ``Transpose(K, [0, 1, 3, 2])`` (K is then an input of the
fused op) or from anywhere else (a ``Transpose`` back to K is inserted, which canonicalization
merges with the head split's).  The scale and the mask must be constants or graph values that
broadcast onto the scores; intermediates are read by nothing else; inputs are 4-D floats.  A
boolean mask (``Where(mask, -inf, scores)`` or ``Where(mask, scores, -inf)``, as
``masked_fill`` and GPT-2's causal masking export it; an additive mask may follow) becomes the
additive mask it equals, ``Where(mask, -inf, 0)`` (plus the other mask), computed outside the op.

``irforge::Attention(Q, K, V[, mask]) <scale>`` has the overloads ``mask`` and ``nomask``, and
``mask-guarded`` and ``nomask-guarded`` where the probabilities of a fully masked row (NaN) are
set to 0 before the last MatMul (``Where(IsNaN(p), 0, p)``, as the torch exporter writes SDPA);
its body is the same primitives.  The scale may also come as two factors, on Q and on K^T.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.attributes import Attr, AttrKind
from ..core_ir.builder import Builder
from ..core_ir.dtypes import COMPUTE_FLOATS, DataType, to_numpy
from ..core_ir.graph import Graph
from ..core_ir.model import Function
from ..core_ir.pattern import Match, Pattern
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult
from .fused_ops import DOMAIN, only_read_inside, run_fusion

_SWAP_LAST = [0, 1, 3, 2]
_ABSORBING = 1e30
"""A boolean mask's fill at or below ``-1e30`` (or ``-inf``) equals the additive mask's ``score +
fill``: float32 rounds any score under 1e22 away, so fully masked rows stay what they were."""


def _scale(m: Match) -> float | None:
    """The product of the scale factors: one on the scores (``Mul``/``Div``), or one on each of
    Q and K^T (``sqrt(scale)`` each, as the torch exporter writes it)."""
    value = 1.0
    for name in ("c", "cq", "ck"):
        if name not in m.values:
            continue
        c = m.constant(name)
        if c is None or c.size != 1 or float(c.reshape(-1)[0]) == 0:
            return None
        factor = float(c.reshape(-1)[0])
        value *= 1 / factor if name == "c" and any(n.op_type == "Div" for n in m.nodes) else factor
    return value


def _check(m: Match) -> bool:
    if m.dtype("q") not in COMPUTE_FLOATS:
        return m.fail("not a float type")
    if any(m.rank(n) != 4 for n in ("q", "v")):
        return m.fail("Q and V are not 4-D (batch, heads, seq, head dim)")
    softmax = next(n for n in m.nodes if n.op_type == "Softmax")
    axis = softmax.attributes.get("axis")
    if axis is None or axis.ref is not None or axis.value not in (-1, 3):
        return m.fail("the Softmax is not over the last axis")
    transpose = next((n for n in m.nodes if n.op_type == "Transpose"), None)
    if transpose is not None:
        perm = transpose.attributes.get("perm")
        if perm is None or perm.ref is not None or list(perm.value) != _SWAP_LAST:
            return m.fail("K is not transposed over its last two axes")
    elif m.rank("kt") != 4:
        return m.fail("K^T is not 4-D")
    if _scale(m) is None:
        return m.fail("the scale is not a constant non-zero scalar")
    if "mask" in m.values and (m.rank("mask") is None or m.rank("mask") > 4):
        return m.fail("the mask's rank is not known or above 4")
    if "cond" in m.values:
        if m.dtype("cond") != DataType.BOOL or m.rank("cond") is None or m.rank("cond") > 4:
            return m.fail("the Where's condition is not a boolean mask of rank 4 or less")
        fill = m.constant("fill")
        if fill is None or fill.size != 1 or not float(fill.reshape(-1)[0]) <= -_ABSORBING:
            return m.fail("the masked-out scores are not set to -inf (or below -1e30)")
    if "zero" in m.values:
        zero = m.constant("zero")
        if zero is None or zero.size != 1 or float(zero.reshape(-1)[0]) != 0:
            return m.fail("the NaN guard does not set fully masked rows to 0")
    if not only_read_inside(m):
        return m.fail("an intermediate result (the scores, the probabilities) is read elsewhere")
    return True


def _additive(b: Builder, m: Match) -> Value:
    """The boolean mask as the additive one: the fill where the Where wrote it, 0 elsewhere."""
    dtype = to_numpy(m.dtype("q"))
    fill = b.constant(m.constant("fill").reshape(()).astype(dtype))
    zero = b.constant(np.zeros((), dtype))
    where = next(n for n in m.nodes if n.op_type == "Where")
    fill_where_true = where.inputs[1] is m["fill"]
    mask = b.op.Where(m["cond"], fill, zero) if fill_where_true else b.op.Where(m["cond"], zero, fill)
    mask.type = TensorType(m.dtype("q"), m.shape("cond"))
    return mask


def _broadcast(a, b) -> tuple | None:
    if a is None or b is None:
        return None
    out = []
    for x, y in zip((1,) * (len(b) - len(a)) + tuple(a), (1,) * (len(a) - len(b)) + tuple(b), strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


def _masks(b: Builder, m: Match) -> list[Value]:
    """The additive mask the op takes: the graph's, the boolean one's, or their sum."""
    masks = [_additive(b, m)] if "cond" in m.values else []
    if "mask" in m.values:
        masks.append(m["mask"])
    if len(masks) == 2:
        total = b.op.Add(*masks)
        shape = _broadcast(m.shape("cond"), m.shape("mask"))
        total.type = TensorType(m.dtype("q"), shape) if shape is not None else None
        return [total]
    return masks


def _rewrite(b: Builder, m: Match) -> Value:
    if "k" in m.values:
        k = m["k"]
    else:
        k = b.op.Transpose(m["kt"], perm=_SWAP_LAST)
        shape = m.shape("kt")
        k.type = TensorType(m.dtype("kt"), tuple(shape[i] for i in _SWAP_LAST)) if shape is not None else None
    mask = _masks(b, m)
    inputs = [m["q"], k, m["v"], *mask]
    node = b.add_node("Attention", inputs, {"scale": _scale(m)}, domain=DOMAIN, num_outputs=1)
    node.overload = ("mask" if mask else "nomask") + ("-guarded" if "zero" in m.values else "")
    out = node.outputs[0]
    out.type = m.outputs[0].type
    return out


def _patterns() -> list[Pattern]:
    out = []
    for k_form in ("transpose", "given"):
        for scale in ("div", "mul", "none", "both"):
            for mask in ("", "mask", "where-fill", "where-keep", "where-fill-mask", "where-keep-mask"):
                for guard in (False, True):

                    def source(p, k_form=k_form, scale=scale, mask=mask, guard=guard):
                        kt = p.op.Transpose(p.var("k")) if k_form == "transpose" else p.var("kt")
                        q = p.var("q")
                        if scale == "both":  # Q and K^T scaled by sqrt(scale) each
                            q, kt = p.op.Mul(q, p.const("cq")), p.op.Mul(kt, p.const("ck"))
                        s = p.op.MatMul(q, kt)
                        if scale in ("div", "mul"):
                            s = (p.op.Div if scale == "div" else p.op.Mul)(s, p.const("c"))
                        if mask.startswith("where-fill"):  # masked_fill(cond, -inf)
                            s = p.op.Where(p.var("cond"), p.const("fill"), s)
                        elif mask.startswith("where-keep"):  # where(cond, scores, -inf)
                            s = p.op.Where(p.var("cond"), s, p.const("fill"))
                        if mask.endswith("mask"):
                            s = p.op.Add(s, p.var("mask"))
                        probs = p.op.Softmax(s)
                        if guard:  # fully masked rows: 0, not NaN (the torch exporter's SDPA)
                            probs = p.op.Where(p.op.IsNaN(probs), p.const("zero"), probs)
                        return p.op.MatMul(probs, p.var("v"))

                    name = (f"attention-k{'t' if k_form == 'given' else ''}-{scale}{'-' + mask if mask else ''}"
                            f"{'-guarded' if guard else ''}")  # fmt: skip
                    benefit = (3 + bool(mask) + mask.endswith("-mask") + guard + (scale != "none") +
                               (scale == "both") + (k_form == "transpose"))  # the largest match first
                    out.append(Pattern(name, source, _rewrite, check=_check, benefit=benefit))
    return out


PATTERNS = _patterns()


def _function(overload: str, opset: int) -> Function:
    masked = overload.startswith("mask")
    names = ["Q", "K", "V"] + (["Mask"] if masked else [])
    g = Graph(inputs=[Value(n) for n in names], name=f"Attention_{overload}", opset_imports={"": opset})
    b = Builder(g, opset=opset)
    q, k, v = g.inputs[:3]
    scores = b.op.MatMul(q, b.op.Transpose(k, perm=_SWAP_LAST))
    constant = b.add_node("Constant", [], {}, num_outputs=1)
    constant.set_attribute("value_float", Attr("value_float", AttrKind.FLOAT, None, ref="scale"))
    scores = b.op.Mul(scores, b.op.CastLike(constant.outputs[0], scores))
    if masked:
        scores = b.op.Add(scores, g.inputs[3])
    probs = b.op.Softmax(scores, axis=-1)
    if overload.endswith("-guarded"):
        probs = b.op.Where(b.op.IsNaN(probs), b.op.CastLike(b.op.Constant(value_float=0.0), probs), probs)
    g.append_output(b.op.MatMul(probs, v))
    doc = ("softmax(Q K^T * scale (+ mask)) V over [batch, heads, seq, head dim]: the decomposition of "
           "irforge::Attention")  # fmt: skip
    return Function(DOMAIN, "Attention", g, attributes=["scale"], overload=overload, doc_string=doc)


BODIES = [("Attention", _function)]
"""The fused op this pass makes, with its decomposition (registered by the built-in plugin)."""


@dataclass(frozen=True)
class FuseAttention(Pass):
    name = "fuse-attention"
    summary = "scaled dot-product attention in primitives (any scale form, optional mask) -> irforge::Attention"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_fusion(self, graph, ctx, PATTERNS)

