"""fuse-activation: a Conv, Gemm or MatMul and the activation after it become one fused op.

Every runtime with fused kernels (onnxruntime's ``FusedConv``/``FusedGemm``, XLA's fusions, TVM's
``FuseOps``) applies the activation while the result is still in registers; as two ONNX nodes the
whole activation map is written out and read back.  The fused node is ``irforge::FusedConv``,
``FusedGemm`` or ``FusedMatMul`` with the inner op's attributes, an ``activation`` attribute (an
ONNX op name, as onnxruntime spells it) and ``activation_params`` (its float parameters:
LeakyRelu's alpha, HardSigmoid's alpha and beta, Clip's min and max).

Each fused node calls a model-local function that holds its decomposition, one overload per
activation and parameters (``FusedConv@Relu``, ``FusedConv@LeakyRelu_0.1``), with the inner op's
attributes as formal attributes.  So the fused model stays a valid ONNX model: the reference
interpreter, onnxruntime and any tool that inlines functions run it unchanged, and a backend that
knows the fused op (``lower-fused``) replaces it by its own kernel.  The call always sets every
formal attribute (defaults written out) and a bias (zeros where the op had none), since the
reference interpreter takes neither defaults nor omitted inputs of functions.  Conv with
``auto_pad`` SAME_* is left alone (its padding depends on the input size).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..core_ir.attributes import Attr, AttrKind
from ..core_ir.builder import Builder
from ..core_ir.dtypes import COMPUTE_FLOATS, to_numpy
from ..core_ir.graph import Graph
from ..core_ir.model import Function
from ..core_ir.node import Node
from ..core_ir.pattern import Match, Pattern
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult
from .fused_ops import DOMAIN, gelu_body, onnx_opset, run_fusion, scalar_like

FUSED_OPS = {"Conv": "FusedConv", "Gemm": "FusedGemm", "MatMul": "FusedMatMul"}
_ATTRS: dict[str, tuple[tuple[str, AttrKind], ...]] = {
    "Conv": (("dilations", AttrKind.INTS), ("group", AttrKind.INT), ("kernel_shape", AttrKind.INTS),
             ("pads", AttrKind.INTS), ("strides", AttrKind.INTS)),
    "Gemm": (("alpha", AttrKind.FLOAT), ("beta", AttrKind.FLOAT), ("transA", AttrKind.INT), ("transB", AttrKind.INT)),
    "MatMul": (),
}  # fmt: skip
"""The formal attributes of each fused op's function: the inner op's, all of them."""


@dataclass(frozen=True)
class Activation:
    """One activation: how it appears in a graph and how its function body computes it."""

    name: str
    source: Callable  # (pattern builder, pattern value t) -> pattern value
    params: Callable[[Match], list[float] | None]  # None: this match cannot be fused
    body: Callable[[Builder, Value, list[float]], Value]
    min_opset: int = 13


def _attr(node: Node, key: str, default: float) -> float | None:
    a = node.attributes.get(key)
    if a is None:
        return default
    return None if a.ref is not None else float(a.value)


def _clip_params(m: Match) -> list[float] | None:
    lo = m.constant("min")
    hi = m.constant("max") if "max" in m.values else np.array(np.inf)
    if lo is None or hi is None or lo.size != 1 or hi.size != 1:
        return m.fail("Clip's bounds are not constant scalars") or None
    return [float(lo.reshape(-1)[0]), float(hi.reshape(-1)[0])]


def _clip_body(b: Builder, t: Value, p: list[float]) -> Value:
    lo, hi = (scalar_like(b, v, t) for v in p)
    return b.op.Clip(t, lo, hi)


def _activations() -> list[Activation]:
    def plain(op):
        return Activation(op, lambda p, t: getattr(p.op, op)(t), lambda m: [], lambda b, t, _: getattr(b.op, op)(t))

    def leaky(m):
        alpha = _attr(m.nodes[0], "alpha", 0.01)
        return None if alpha is None else [alpha]

    def hard_sigmoid(m):
        ab = [_attr(m.nodes[0], "alpha", 0.2), _attr(m.nodes[0], "beta", 0.5)]
        return None if None in ab else ab

    return [
        *(plain(op) for op in ("Relu", "Sigmoid", "Tanh")),
        # no activation: only layout conversion makes these (a channels-last Conv on its own)
        Activation("Identity", lambda p, t: p.op.Identity(t), lambda m: None, lambda b, t, _: t),
        Activation("HardSwish", lambda p, t: p.op.HardSwish(t), lambda m: [], lambda b, t, _: b.op.HardSwish(t), 14),
        Activation("LeakyRelu", lambda p, t: p.op.LeakyRelu(t), leaky, lambda b, t, a: b.op.LeakyRelu(t, alpha=a[0])),
        Activation("HardSigmoid", lambda p, t: p.op.HardSigmoid(t), hard_sigmoid,
                   lambda b, t, a: b.op.HardSigmoid(t, alpha=a[0], beta=a[1])),
        Activation("Clip", lambda p, t: p.op.Clip(t, p.const("min"), p.const("max")), _clip_params, _clip_body, 15),
        Activation("Clip", lambda p, t: p.op.Clip(t, p.const("min")), _clip_params, _clip_body, 15),
        Activation("Silu", lambda p, t: p.op.Mul(t, p.op.Sigmoid(t)), lambda m: [],
                   lambda b, t, _: b.op.Mul(t, b.op.Sigmoid(t))),
        Activation("Gelu", lambda p, t: p.op.Gelu(t), lambda m: _gelu_params(m), _gelu_body, 20),
    ]  # fmt: skip


def _gelu_params(m: Match) -> list[float] | None:
    a = m.nodes[0].attributes.get("approximate")
    if a is not None and a.ref is not None:
        return None
    return [1.0] if a is not None and a.value == "tanh" else []


def _gelu_body(b: Builder, t: Value, p: list[float]) -> Value:
    return gelu_body(b, t, tanh=bool(p))


ACTIVATIONS = _activations()


CHANNELS_LAST = "nhwc_"
"""The overload prefix of a fused convolution over channels-last (NHWC) tensors."""


def overload(activation: str, params: list[float], channels_last: bool = False) -> str:
    """The function overload of one activation with its parameters: ``LeakyRelu_0.1`` (and
    ``nhwc_LeakyRelu_0.1`` for a convolution whose input and output are channels-last)."""
    return (CHANNELS_LAST if channels_last else "") + "_".join([activation, *(str(np.float32(p)) for p in params)])


def _inner(m: Match) -> Node:
    return m.nodes[-1] if m.nodes[-1].op_type in FUSED_OPS else next(n for n in m.nodes if n.op_type in FUSED_OPS)


def _explicit_attrs(inner: Node, m: Match) -> dict[str, object] | None:
    """Every formal attribute of the fused op, defaults written out; None where one is not known."""
    return explicit_attrs(inner, m.shape("w"))


def explicit_attrs(inner: Node, w: tuple | None) -> dict[str, object] | None:
    """The formal attributes of the fused op of ``inner`` (a Conv, Gemm or MatMul whose weight has
    shape ``w``), defaults written out; None where one is not known."""
    attrs = inner.attributes
    if any(a.ref is not None for a in attrs.values()):
        return None
    if inner.op_type == "Gemm":
        get = {k: a.value for k, a in attrs.items()}
        return {"alpha": float(get.get("alpha", 1.0)), "beta": float(get.get("beta", 1.0)),
                "transA": int(get.get("transA", 0)), "transB": int(get.get("transB", 0))}  # fmt: skip
    if inner.op_type == "MatMul":
        return {}
    if w is None or not all(isinstance(d, int) for d in w) or len(w) < 3:
        return None
    spatial = len(w) - 2
    auto = attrs.get("auto_pad")
    if auto is not None and auto.value not in ("NOTSET", "VALID"):
        return None
    get = {k: a.value for k, a in attrs.items() if k != "auto_pad"}
    return {
        "dilations": tuple(get.get("dilations", (1,) * spatial)),
        "group": int(get.get("group", 1)),
        "kernel_shape": tuple(get.get("kernel_shape", w[2:])),
        "pads": tuple(get.get("pads", (0,) * (2 * spatial))),
        "strides": tuple(get.get("strides", (1,) * spatial)),
    }


def _bias_size(inner: Node, m: Match) -> int | None:
    """How many zeros stand in for an omitted bias (None: not known statically)."""
    if inner.op_type == "Conv":
        return m.shape("w")[0]
    out = inner.outputs[0].type
    shape = getattr(out, "shape", None)
    return shape[-1] if shape and isinstance(shape[-1], int) else None


def _dtype(inner: Node, m: Match) -> int | None:
    """The element type of the fused op (its result's, or where that is not typed, its input's)."""
    return getattr(inner.outputs[0].type, "dtype", None) or m.dtype("x")


def _make_check(act: Activation):
    def check(m: Match) -> bool:
        inner = _inner(m)
        t = inner.outputs[0]
        if t.num_uses() != len([i for n in m.nodes if n is not inner for i in n.inputs if i is t]):
            return m.fail("the result before the activation is read elsewhere")
        if t.is_graph_output():
            return m.fail("the result before the activation is a graph output")
        if _dtype(inner, m) not in COMPUTE_FLOATS:
            return m.fail("not a float type")
        if act.params(m) is None:
            return False
        if _explicit_attrs(inner, m) is None:
            return m.fail("an attribute is a function reference, the weight shape is unknown or auto_pad is SAME_*")
        has_bias = (inner.op_type == "Conv" and len(inner.inputs) == 3) or (
            inner.op_type == "Gemm" and len(inner.inputs) == 3)
        if inner.op_type != "MatMul" and not has_bias and _bias_size(inner, m) is None:
            return m.fail("no bias, and the size of a zero bias is not known")
        return True

    return check


def _make_rewrite(act: Activation):
    def rewrite(b: Builder, m: Match):
        inner = _inner(m)
        params = act.params(m)
        inputs = list(inner.inputs)
        if inner.op_type != "MatMul" and len(inputs) == 2:
            zeros = np.zeros(_bias_size(inner, m), dtype=to_numpy(_dtype(inner, m)))
            inputs.append(b.constant(zeros))
        attrs = dict(_explicit_attrs(inner, m))
        attrs["activation"] = act.name
        node = b.add_node(FUSED_OPS[inner.op_type], inputs, {**attrs}, domain=DOMAIN, num_outputs=1)
        node.set_attribute("activation_params", [float(np.float32(p)) for p in params], AttrKind.FLOATS)
        node.overload = overload(act.name, params)
        out = node.outputs[0]
        out.type = m.outputs[0].type
        return out

    return rewrite


def _patterns() -> list[tuple[Pattern, Activation]]:
    patterns: list[tuple[Pattern, Activation]] = []
    for act in ACTIVATIONS:
        for inner, arities in (("Conv", (2, 3)), ("Gemm", (2, 3)), ("MatMul", (2,))):
            for arity in arities:

                def source(p, act=act, inner=inner, arity=arity):
                    names = ("x", "w", "b")[:arity]
                    t = getattr(p.op, inner)(*(p.var(n) for n in names))
                    return act.source(p, t)

                name = f"{inner.lower()}{'-bias' if arity == 3 else ''}-{act.name.lower()}"
                if any(pt.name == name for pt, _ in patterns):
                    name += "-min"
                patterns.append((Pattern(name, source, _make_rewrite(act), check=_make_check(act), benefit=2), act))
    return patterns


_PATTERNS = _patterns()
PATTERNS: list[Pattern] = [p for p, _ in _PATTERNS]


def _function(op_type: str, ov: str, opset: int) -> Function:
    """The decomposition of ``irforge::op_type`` at overload ``ov`` (as :func:`overload` spells it)."""
    inner = next(k for k, v in FUSED_OPS.items() if v == op_type)
    channels_last = ov.startswith(CHANNELS_LAST)
    name, *raw = ov.removeprefix(CHANNELS_LAST).split("_")
    params = [float(p) for p in raw]
    act = next(a for a in ACTIVATIONS if a.name == name)
    names = ("X", "W", "B") if inner != "MatMul" else ("A", "B")
    g = Graph(inputs=[Value(n) for n in names], name=f"{op_type}_{ov}", opset_imports={"": opset})
    b = Builder(g, opset=opset)
    x = b.op.Transpose(g.inputs[0], perm=[0, 3, 1, 2]) if channels_last else g.inputs[0]
    node = b.add_node(inner, [x, *g.inputs[1:]], domain="", num_outputs=1)
    for key, kind in _ATTRS[inner]:
        node.set_attribute(key, Attr(key, kind, None, ref=key))
    y = act.body(b, node.outputs[0], params)
    g.append_output(b.op.Transpose(y, perm=[0, 2, 3, 1]) if channels_last else y)
    formals = [k for k, _ in _ATTRS[inner]] + ["activation", "activation_params"] + (
        ["channels_last"] if channels_last else [])  # fmt: skip
    layout = " over channels-last tensors" if channels_last else ""
    doc = f"{inner} followed by {name}{params or ''}{layout}: the decomposition of irforge::{op_type}"
    return Function(DOMAIN, op_type, g, attributes=formals, overload=ov, doc_string=doc)


BODIES = [(op, functools.partial(_function, op)) for op in FUSED_OPS.values()]
"""The fused ops this pass makes, with their decompositions (registered by the built-in plugin)."""


@dataclass(frozen=True)
class FuseActivation(Pass):
    name = "fuse-activation"
    summary = "Conv / Gemm / MatMul + activation (Relu, Clip, Sigmoid, SiLU, GELU, ...) -> one irforge fused op"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        opset = onnx_opset(ctx, graph)
        return run_fusion(self, graph, ctx, [p for p, act in _PATTERNS if act.min_opset <= opset])

