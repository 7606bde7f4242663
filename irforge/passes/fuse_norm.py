"""fuse-layer-norm: layer normalization written in primitives becomes ``LayerNormalization``, a
constant scale and shift after it join its weights, and a residual ``Add`` before it makes it
``irforge::SkipLayerNormalization``.

Exporters before opset 17, hand-written models and frameworks' own decompositions spell layer
norm as ``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`` over the trailing axes, seven
nodes that each write the activation out.  Both ``ReduceMean`` spellings (axes as attribute, or
as input from opset 18) and ``Pow(d, 2)`` or ``d * d`` are matched; the axes must be the same
trailing axes in both means, ``keepdims`` on, ``eps`` a constant scalar, every intermediate
read by nothing else; the normalized dims must be static (the new op takes a weight of that
shape).  The result needs ``LayerNormalization``, so models before opset 17 are left alone.

A transformer's residual connection is ``LayerNormalization(x + sublayer(x))``; as
``irforge::SkipLayerNormalization`` (its body that same Add and LayerNormalization, the sum a
second output for pre-norm models that read it again) it becomes onnxruntime's
``SkipLayerNormalization`` after ``lower-fused{target=onnxruntime}``: one pass over the
activations instead of three.  It fuses when both operands have the same shape and the norm is
over the last axis, as onnxruntime's kernel requires (symbolic dims such as the batch are fine, the normalized last
one must be static).
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


def _axes(m: Match, node_index: int, rank: int) -> list[int] | None:
    node = m.nodes[node_index]
    if len(node.inputs) > 1:
        axes = m.constant("axes1" if node_index == 0 else "axes2") if node.inputs[1] is not None else None
        axes = None if axes is None else [int(a) for a in axes.reshape(-1)]
    else:
        a = node.attributes.get("axes")
        axes = None if a is None or a.ref is not None else [int(v) for v in a.value]
    keep = node.attributes.get("keepdims")
    if axes is None or (keep is not None and (keep.ref is not None or keep.value != 1)):
        return None
    return sorted(a % rank for a in axes)


def _normalized(m: Match) -> tuple[int, tuple[int, ...]] | None:
    """(first normalized axis, normalized dims) of a matched decomposition, or None."""
    shape = m.shape("x")
    if shape is None:
        return None
    rank = len(shape)
    means = [i for i, n in enumerate(m.nodes) if n.op_type == "ReduceMean"]
    found = [_axes(m, i, rank) for i in means]
    if len(found) != 2 or found[0] is None or found[0] != found[1]:
        return None
    axes = found[0]
    if not axes or axes != list(range(rank - len(axes), rank)):
        return None
    dims = tuple(shape[axes[0]:])
    return (axes[0], dims) if all(isinstance(d, int) for d in dims) else None


def _ln_check(m: Match) -> bool:
    if m.dtype("x") not in COMPUTE_FLOATS:
        return m.fail("not a float type")
    eps = m.constant("eps")
    if eps is None or eps.size != 1:
        return m.fail("epsilon is not a constant scalar")
    if "two" in m.values and (m.constant("two") is None or m.constant("two").size != 1 or
                              float(m.constant("two").reshape(-1)[0]) != 2.0):  # fmt: skip
        return m.fail("the power is not 2")
    if _normalized(m) is None:
        return m.fail("the means are not over the same trailing axes with static dims (keepdims on)")
    if not only_read_inside(m):
        return m.fail("an intermediate result is read elsewhere")
    return True


def _ln_rewrite(b: Builder, m: Match) -> Value:
    axis, dims = _normalized(m)
    dtype = to_numpy(m.dtype("x"))
    eps = float(m.constant("eps").reshape(-1)[0])
    out = b.op.LayerNormalization(m["x"], b.constant(np.ones(dims, dtype)), b.constant(np.zeros(dims, dtype)),
                                  axis=axis, epsilon=eps)  # fmt: skip
    out.type = m.outputs[0].type
    return out


def _ln_source(axes_input: bool, square: str):
    def source(p):
        x = p.var("x")

        def mean(v, name):
            return p.op.ReduceMean(v, p.const(name)) if axes_input else p.op.ReduceMean(v)

        d = p.op.Sub(x, mean(x, "axes1"))
        sq = p.op.Pow(d, p.const("two")) if square == "pow" else p.op.Mul(d, d)
        return p.op.Div(d, p.op.Sqrt(p.op.Add(mean(sq, "axes2"), p.const("eps"))))

    return source


def _operand(m: Match) -> np.ndarray | None:
    """The constant operand without the leading unit axes that only broadcast it (JAX writes a
    ``[1, 1, hidden]`` weight), as long as it does not raise the result's rank."""
    k, rank = m.constant("k"), m.rank("x")
    if k is None or rank is None or k.ndim > rank:
        return None
    while k.ndim > 1 and k.shape[0] == 1:
        k = k.reshape(k.shape[1:])
    return k


def _affine_check(m: Match) -> bool:
    ln = m.nodes[-1]
    if len(ln.inputs) < 2 or not all(m.constant(n) is not None for n in ("scale", "k")):
        return m.fail("the weights or the operand are not constants")
    if len(ln.outputs) > 1 and any(o is not None and o.has_uses() for o in ln.outputs[1:]):
        return m.fail("the mean or inverse deviation outputs are read")
    k, scale = _operand(m), m.constant("scale")
    if k is None or k.ndim > scale.ndim or np.broadcast_shapes(k.shape, scale.shape) != scale.shape:
        return m.fail("the operand varies along axes the norm does not normalize")
    if m.dtype("k") != m.dtype("scale"):
        return m.fail("the operand's type is not the weights'")
    return only_read_inside(m)


def _affine_rewrite(b: Builder, m: Match) -> Value:
    """``LN(x) * k`` is LN with weights ``scale * k``, bias ``bias * k``; ``LN(x) + k``: bias ``bias + k``."""
    ln, op = m.nodes[-1], m.nodes[0].op_type
    k, scale = _operand(m).astype(np.float64), m.constant("scale")
    bias = m.constant("bias") if len(ln.inputs) > 2 and ln.inputs[2] is not None else np.zeros_like(scale)
    if op == "Mul":
        scale, bias = scale * k, bias * k
    else:
        bias = bias + k
    dtype = m.constant("scale").dtype
    out = b.op.LayerNormalization(m["x"], b.constant(np.broadcast_to(scale, m.constant("scale").shape).astype(dtype)),
                                  b.constant(np.broadcast_to(bias, m.constant("scale").shape).astype(dtype)),
                                  **ln.attributes)  # fmt: skip
    out.type = m.outputs[0].type
    return out


def _skip_check(m: Match) -> bool:
    ln = m.nodes[0]
    if m.dtype("a") not in COMPUTE_FLOATS or m.dtype("a") != m.dtype("b"):
        return m.fail("not one float type")
    a, b_ = m.shape("a"), m.shape("b")
    if a is None or a != b_ or None in a or len(a) < 2 or not isinstance(a[-1], int):
        return m.fail("the residual's operands do not have one known shape (or the last dim is not static)")
    axis = ln.attributes.get("axis")
    if axis is not None and (axis.ref is not None or axis.value not in (-1, len(a) - 1)):
        return m.fail("the norm is not over the last axis")
    if any(o is not None and o.has_uses() for o in ln.outputs[1:]):
        return m.fail("the mean or inverse deviation outputs are read")
    eps = ln.attributes.get("epsilon")
    return not (eps is not None and eps.ref is not None) or m.fail("epsilon refers to a function attribute")


def _skip_rewrite(b: Builder, m: Match):
    ln, add = m.nodes[0], m.nodes[-1]
    eps = ln.attributes.get("epsilon")
    inputs = [m["a"], m["b"], m["scale"], *([m["bias"]] if "bias" in m.values else [])]
    attrs = {"epsilon": 1e-5 if eps is None else float(eps.value)}
    node = b.add_node("SkipLayerNormalization", inputs, attrs, domain=DOMAIN, num_outputs=2)
    node.overload = "bias" if "bias" in m.values else "nobias"
    y, total = node.outputs
    y.type, total.type = ln.outputs[0].type, add.outputs[0].type
    add.outputs[0].replace_all_uses_with(total)  # pre-norm models read the sum again
    return y


def _patterns() -> list[Pattern]:
    out = [Pattern(f"layer-norm-{'axes-input' if ai else 'axes-attr'}-{sq}", _ln_source(ai, sq), _ln_rewrite,
                   check=_ln_check, benefit=3)
           for ai in (False, True) for sq in ("pow", "mul")]  # fmt: skip
    for op in ("Mul", "Add"):
        for with_bias in (False, True):

            def source(p, op=op, with_bias=with_bias):
                ln_inputs = (p.var("x"), p.const("scale"), *([p.const("bias")] if with_bias else []))
                return getattr(p.op, op)(p.op.LayerNormalization(*ln_inputs), p.const("k"))

            name = f"layer-norm{'-bias' if with_bias else ''}-{op.lower()}"
            out.append(Pattern(name, source, _affine_rewrite, check=_affine_check, benefit=2))
    for with_bias in (False, True):

        def skip_source(p, with_bias=with_bias):
            return p.op.LayerNormalization(p.op.Add(p.var("a"), p.var("b")), p.var("scale"),
                                           *([p.var("bias")] if with_bias else []))  # fmt: skip

        out.append(Pattern(f"skip-layer-norm{'-bias' if with_bias else ''}", skip_source, _skip_rewrite,
                           check=_skip_check))  # fmt: skip
    return out


PATTERNS = _patterns()


def _skip_function(overload: str, opset: int) -> Function:
    names = ["Input", "Skip", "Gamma"] + (["Beta"] if overload == "bias" else [])
    g = Graph(inputs=[Value(n) for n in names], name=f"SkipLayerNormalization_{overload}", opset_imports={"": opset})
    b = Builder(g, opset=opset)
    total = b.op.Add(g.inputs[0], g.inputs[1])
    node = b.add_node("LayerNormalization", [total, *g.inputs[2:]], {"axis": -1}, num_outputs=1)
    node.set_attribute("epsilon", Attr("epsilon", AttrKind.FLOAT, None, ref="epsilon"))
    g.append_output(node.outputs[0])
    g.append_output(b.op.Identity(total))
    doc = "LayerNormalization(input + skip) over the last axis, and the sum: the decomposition of irforge::" \
          "SkipLayerNormalization"  # fmt: skip
    return Function(DOMAIN, "SkipLayerNormalization", g, attributes=["epsilon"], overload=overload, doc_string=doc)


BODIES = [("SkipLayerNormalization", _skip_function)]
"""The fused op this pass makes, with its decomposition (registered by the built-in plugin)."""


@dataclass(frozen=True)
class FuseLayerNorm(Pass):
    name = "fuse-layer-norm"
    summary = "layer norm in primitives -> LayerNormalization; scale/shift into its weights; Add + it -> SkipLayerNorm"

    skip: bool = True
    """Also fuse a residual Add into the norm after it (``irforge::SkipLayerNormalization``)."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        if onnx_opset(ctx, graph) < 17:
            return PassResult(False)
        patterns = PATTERNS if self.skip else [p for p in PATTERNS if not p.name.startswith("skip")]
        return run_fusion(self, graph, ctx, patterns)
