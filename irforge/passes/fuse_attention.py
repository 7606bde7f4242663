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
broadcast onto the scores; intermediates are read by nothing else; inputs are 4-D floats.

``irforge::Attention(Q, K, V[, mask]) <scale>`` has two overloads, ``mask`` and ``nomask``; its
body is the same primitives.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core_ir.attributes import Attr, AttrKind
from ..core_ir.builder import Builder
from ..core_ir.dtypes import COMPUTE_FLOATS
from ..core_ir.graph import Graph
from ..core_ir.model import Function
from ..core_ir.pattern import Match, Pattern
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult
from .fused_ops import DOMAIN, only_read_inside, register_body, run_fusion

_SWAP_LAST = [0, 1, 3, 2]


def _scale(m: Match) -> float | None:
    if "c" not in m.values:
        return 1.0
    c = m.constant("c")
    if c is None or c.size != 1 or float(c.reshape(-1)[0]) == 0:
        return None
    value = float(c.reshape(-1)[0])
    return 1 / value if any(n.op_type == "Div" for n in m.nodes) else value


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
    if not only_read_inside(m):
        return m.fail("an intermediate result (the scores, the probabilities) is read elsewhere")
    return True


def _rewrite(b: Builder, m: Match) -> Value:
    k = m["k"] if "k" in m.values else b.op.Transpose(m["kt"], perm=_SWAP_LAST)
    inputs = [m["q"], k, m["v"], *([m["mask"]] if "mask" in m.values else [])]
    node = b.add_node("Attention", inputs, {"scale": _scale(m)}, domain=DOMAIN, num_outputs=1)
    node.overload = "mask" if "mask" in m.values else "nomask"
    out = node.outputs[0]
    out.type = m.outputs[0].type
    return out


def _patterns() -> list[Pattern]:
    out = []
    for k_form in ("transpose", "given"):
        for scale in ("div", "mul", "none"):
            for mask in (True, False):

                def source(p, k_form=k_form, scale=scale, mask=mask):
                    kt = p.op.Transpose(p.var("k")) if k_form == "transpose" else p.var("kt")
                    s = p.op.MatMul(p.var("q"), kt)
                    if scale != "none":
                        s = (p.op.Div if scale == "div" else p.op.Mul)(s, p.const("c"))
                    if mask:
                        s = p.op.Add(s, p.var("mask"))
                    return p.op.MatMul(p.op.Softmax(s), p.var("v"))

                name = f"attention-k{'t' if k_form == 'given' else ''}-{scale}{'-mask' if mask else ''}"
                out.append(Pattern(name, source, _rewrite, check=_check, benefit=3 + mask))
    return out


PATTERNS = _patterns()


def _function(overload: str, opset: int) -> Function:
    names = ["Q", "K", "V"] + (["Mask"] if overload == "mask" else [])
    g = Graph(inputs=[Value(n) for n in names], name=f"Attention_{overload}", opset_imports={"": opset})
    b = Builder(g, opset=opset)
    q, k, v = g.inputs[:3]
    scores = b.op.MatMul(q, b.op.Transpose(k, perm=_SWAP_LAST))
    constant = b.add_node("Constant", [], {}, num_outputs=1)
    constant.set_attribute("value_float", Attr("value_float", AttrKind.FLOAT, None, ref="scale"))
    scores = b.op.Mul(scores, b.op.CastLike(constant.outputs[0], scores))
    if overload == "mask":
        scores = b.op.Add(scores, g.inputs[3])
    g.append_output(b.op.MatMul(b.op.Softmax(scores, axis=-1), v))
    doc = ("softmax(Q K^T * scale (+ mask)) V over [batch, heads, seq, head dim]: the decomposition of "
           "irforge::Attention")  # fmt: skip
    return Function(DOMAIN, "Attention", g, attributes=["scale"], overload=overload, doc_string=doc)


register_body("Attention", _function)


@dataclass(frozen=True)
class FuseAttention(Pass):
    name = "fuse-attention"
    summary = "scaled dot-product attention in primitives (any scale form, optional mask) -> irforge::Attention"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_fusion(self, graph, ctx, PATTERNS)

