"""convert-layout{to=NHWC} and cancel-transposes: a CNN in channels-last layout, with transposes
only where the graph's inputs and outputs are.

ONNX's convolutions and pools are channels-first (NCHW); XLA's CPU convolutions, like most
compilers' and GPUs' tensor-core kernels, are fastest channels-last.  ``convert-layout``
replaces every 4-D Conv (plain, or irforge's FusedConv), MaxPool, AveragePool and
GlobalAveragePool by its channels-last form between two transposes: ``Transpose(to NCHW) ->
op(NHWC) -> Transpose(to NCHW)``.  The channels-last forms are irforge fused ops (FusedConv,
MaxPool, AveragePool at overloads ``nhwc_*``: bodies that transpose in, run the ONNX op and
transpose out, so every engine still runs them) or, for the global pool, ONNX's ``ReduceMean``
over the spatial axes.  ``cancel-transposes`` then moves each transpose towards the outputs
through the ops that do not care about layout (element-wise ops, with a constant operand
transposed to match; ``Concat`` and reductions that keep their dims, whose axes move; a
``Flatten`` of 1x1 maps) and merges the
pairs that meet: between two convolutions the ``to NCHW`` of one and the ``to NHWC`` of the next
cancel, so a whole CNN keeps one transpose after its input and, where its output is a feature
map, one before it.  ``to=NCHW`` is the way back: channels-last ops are expanded into their
transposed ONNX forms and the transposes cancelled again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.attributes import Attr, AttrKind
from ..core_ir.builder import Builder, NameGenerator
from ..core_ir.dtypes import to_numpy
from ..core_ir.graph import Graph
from ..core_ir.model import Function
from ..core_ir.node import Node
from ..core_ir.pattern import Match, Pattern
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from ..ops.traits import elementwise_ops
from .base import Pass, PassContext, PassError, PassResult, run_patterns
from .canonicalize import PATTERNS as CANONICAL
from .fuse_activation import CHANNELS_LAST, explicit_attrs, overload
from .fused_ops import DOMAIN, add_fused_functions, onnx_opset
from .inline_functions import _inline

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)
_POOL_ATTRS = {
    "MaxPool": {"ceil_mode": 0, "dilations": None, "kernel_shape": None, "pads": None, "storage_order": 0,
                "strides": None},
    "AveragePool": {"ceil_mode": 0, "count_include_pad": 0, "kernel_shape": None, "pads": None, "strides": None},
}  # fmt: skip
"""The formal attributes of the channels-last pools (None: a per-axis default, computed)."""


def _permuted(t, perm) -> TensorType | None:
    shape = getattr(t, "shape", None)
    if shape is None or len(shape) != len(perm):
        return None
    return TensorType(t.dtype, tuple(shape[i] for i in perm))


def _rank4(v: Value | None) -> bool:
    return v is not None and len(getattr(v.type, "shape", None) or ()) == 4


def _pool_attrs(node: Node) -> dict | None:
    attrs = {k: a for k, a in node.attributes.items()}
    if any(a.ref is not None for a in attrs.values()):
        return None
    auto = attrs.pop("auto_pad", None)
    if auto is not None and auto.value not in ("NOTSET", "VALID"):
        return None
    kernel = attrs.get("kernel_shape")
    if kernel is None or len(kernel.value) != 2:
        return None
    if node.op_type == "AveragePool" and "dilations" in attrs and list(attrs.pop("dilations").value) != [1, 1]:
        return None
    if set(attrs) - set(_POOL_ATTRS[node.op_type]):
        return None
    per_axis = {"dilations": (1, 1), "pads": (0, 0, 0, 0), "strides": (1, 1)}
    out = {}
    for key, default in _POOL_ATTRS[node.op_type].items():
        value = attrs[key].value if key in attrs else default if default is not None else per_axis[key]
        out[key] = tuple(value) if isinstance(value, (list, tuple)) else int(value)
    return out


def _channels_last(node: Node, opset: int) -> bool:
    """Replace ``node`` by its channels-last form between two transposes; False where it has none."""
    if node.op_type not in ("Conv", "FusedConv", "GlobalAveragePool", *_POOL_ATTRS) or not node.inputs:
        return False
    x, out = node.inputs[0], node.outputs[0]
    if not _rank4(x) or len([o for o in node.outputs if o is not None]) != 1:
        return False
    fused_conv = node.domain == DOMAIN and node.op_type == "FusedConv" and not node.overload.startswith(CHANNELS_LAST)
    if node.domain and not fused_conv:
        return False
    b = Builder(node.graph, before=node)
    if node.op_type == "Conv" or fused_conv:
        w = getattr(node.inputs[1].type, "shape", None)
        attrs = explicit_attrs(node, w) if node.op_type == "Conv" else {
            k: a.value for k, a in node.attributes.items() if k not in ("activation", "activation_params")}
        if attrs is None:
            return False
        activation = node.attr("activation", "Identity")
        params = list(node.attr("activation_params", ()))
        inputs = [None, *node.inputs[1:]]
        if len(inputs) < 3:  # FusedConv always takes a bias
            inputs.append(b.constant(np.zeros(w[0], dtype=to_numpy(x.type.dtype))))
        make = ("FusedConv", {**attrs, "activation": activation, "channels_last": 1},
                overload(activation, params, channels_last=True), params)
    elif node.op_type in _POOL_ATTRS:
        attrs = _pool_attrs(node)
        if attrs is None:
            return False
        inputs, make = [None], (node.op_type, {**attrs, "channels_last": 1}, "nhwc", None)
    elif node.op_type == "GlobalAveragePool":
        inputs, make = [None], None
    else:
        return False
    xt = b.op.Transpose(x, perm=list(TO_NHWC))
    xt.type = _permuted(x.type, TO_NHWC)
    if make is None:  # GlobalAveragePool: a mean over H and W
        y = b.op.ReduceMean(xt, b.constant(np.array([1, 2], np.int64)), keepdims=1) if opset >= 18 else \
            b.add_node("ReduceMean", [xt], {"axes": [1, 2], "keepdims": 1}, num_outputs=1).outputs[0]  # fmt: skip
    else:
        op_type, attrs, ov, params = make
        fused = b.add_node(op_type, [xt, *inputs[1:]], attrs, domain=DOMAIN, num_outputs=1, name=node.name)
        if params is not None:
            fused.set_attribute("activation_params", [float(p) for p in params], kind=AttrKind.FLOATS)
        fused.overload = ov
        fused.metadata = node.metadata
        y = fused.outputs[0]
    y.type = _permuted(out.type, TO_NHWC)
    back = b.op.Transpose(y, perm=list(TO_NCHW))
    back.type = out.type
    keep = out.name
    out.replace_all_uses_with(back)
    out.name, back.name = f"{keep}__nchw", keep
    node.graph.remove(node)
    return True


def _pool_function(op_type: str):
    def build(ov: str, opset: int) -> Function:
        g = Graph(inputs=[Value("X")], name=f"{op_type}_{ov}", opset_imports={"": opset})
        b = Builder(g, opset=opset)
        node = b.add_node(op_type, [b.op.Transpose(g.inputs[0], perm=list(TO_NCHW))], {}, num_outputs=1)
        for key in _POOL_ATTRS[op_type]:
            kind = AttrKind.INTS if key in ("dilations", "kernel_shape", "pads", "strides") else AttrKind.INT
            node.set_attribute(key, Attr(key, kind, None, ref=key))
        g.append_output(b.op.Transpose(node.outputs[0], perm=list(TO_NHWC)))
        doc = f"{op_type} over channels-last tensors: the decomposition of irforge::{op_type}"
        return Function(DOMAIN, op_type, g, attributes=[*_POOL_ATTRS[op_type], "channels_last"], overload=ov,
                        doc_string=doc)  # fmt: skip

    return build


BODIES = [(pool, _pool_function(pool)) for pool in _POOL_ATTRS]
"""The channels-last pools this pass makes, with their decompositions (registered by the built-in plugin)."""


# -- cancel-transposes ------------------------------------------------------------------------

_UNARY = sorted(elementwise_ops(1))
_BINARY = sorted((elementwise_ops(2) | {"Max", "Min"}) - {"CastLike"})
"""The element-wise ops a Transpose sinks through (:mod:`irforge.ops.traits`): the type operand of
CastLike is left out, Max and Min are matched with two operands."""


def _perm(node: Node) -> tuple[int, ...] | None:
    a = node.attributes.get("perm")
    return None if a is None or a.ref is not None else tuple(a.value)


def _inverse(perm) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


def _sunk(b: Builder, m: Match, inputs: list, attrs: dict | None = None) -> Value:
    """The root op on channels-last ``inputs``, then the transpose it read (moved below it)."""
    root, t = m.nodes[0], next(n for n in m.nodes if n.op_type == "Transpose")
    node = b.add_node(root.op_type, inputs, dict(root.attributes) if attrs is None else attrs, domain=root.domain,
                      num_outputs=1, name=root.name)  # fmt: skip
    node.overload = root.overload
    node.outputs[0].type = _permuted(m.outputs[0].type, _inverse(_perm(t)))
    out = b.op.Transpose(node.outputs[0], perm=list(_perm(t)))
    out.type = m.outputs[0].type
    return out


def _unary_check(m: Match) -> bool:
    return _perm(m.nodes[1]) is not None or m.fail("the Transpose has no perm")


def _binary_check(m: Match) -> bool:
    transposes = [n for n in m.nodes if n.op_type == "Transpose"]
    perms = {_perm(t) for t in transposes}
    if None in perms or len(perms) != 1:
        return m.fail("the operands are not transposed alike")
    if "c" in m.values:  # one operand transposed, the other a constant (both may read one Transpose)
        c, rank = m.constant("c"), len(next(iter(perms)))
        if c is None or c.ndim > rank:
            return m.fail(f"the other operand is not a constant of rank {rank} or less")
    return True


def _binary_rewrite(b: Builder, m: Match) -> Value:
    root = m.nodes[0]
    transposes = [n for n in m.nodes if n.op_type == "Transpose"]
    if "c" not in m.values:
        inputs = [m["a"], m["b"]]
    else:
        c, perm = m.constant("c"), _perm(transposes[0])
        aligned = c.reshape((1,) * (len(perm) - c.ndim) + c.shape)  # broadcasting's leading 1s, made explicit
        moved = b.constant(np.ascontiguousarray(aligned.transpose(_inverse(perm))))
        inputs = [m["a"], moved] if root.inputs[1] is m["c"] else [moved, m["a"]]
    return _sunk(b, m, inputs)


def _clip_rewrite(b: Builder, m: Match) -> Value:
    return _sunk(b, m, [m["x"], *m.nodes[0].inputs[1:]])


def _clip_check(m: Match) -> bool:
    bounds = [v for v in m.nodes[0].inputs[1:] if v is not None]
    if any(v.type is None or len(getattr(v.type, "shape", ()) or ()) != 0 for v in bounds):
        return m.fail("Clip's bounds are not scalars")
    return _unary_check(m)


def _concat_check(m: Match) -> bool:
    perms = {_perm(n) for n in m.nodes[1:]}
    axis = m.nodes[0].attributes.get("axis")
    if None in perms or len(perms) != 1 or axis is None or axis.ref is not None:
        return m.fail("the inputs are not transposed alike")
    return True


def _concat_rewrite(b: Builder, m: Match) -> Value:
    perm = _perm(m.nodes[1])
    axis = int(m.nodes[0].attr("axis")) % len(perm)
    # by operand, not by matched node: one Transpose may feed several operands (Concat(t, t))
    return _sunk(b, m, [v.producer().inputs[0] for v in m.nodes[0].inputs], {"axis": perm[axis]})


def _flatten_check(m: Match) -> bool:
    """Flatten of a transposed map whose transposed axes are all of size 1 but one: the element
    order does not change, so the transpose can go."""
    perm, shape = _perm(m.nodes[1]), m.shape("x")
    axis = m.nodes[0].attr("axis", 1)
    if perm is None or shape is None or axis != 1 or perm[0] != 0:
        return m.fail("not a flatten after the batch axis of a transposed map")
    moved = [i for i in perm[1:] if shape[i] != 1]
    return moved == sorted(moved) or m.fail("the transpose moves axes longer than 1")


_REDUCE = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")


def _reduce_axes(m: Match) -> list[int] | None:
    node = m.nodes[0]
    if len(node.inputs) > 1:
        axes = m.constant("axes")
        return None if axes is None else [int(a) for a in axes.reshape(-1)]
    a = node.attributes.get("axes")
    return None if a is None or a.ref is not None else [int(v) for v in a.value]


def _reduce_check(m: Match) -> bool:
    node, perm = m.nodes[0], _perm(m.nodes[1])
    keep = node.attributes.get("keepdims")
    if perm is None or (keep is not None and (keep.ref is not None or keep.value != 1)):
        return m.fail("no perm, or the reduction drops its axes")
    if any(k not in ("keepdims", "axes") for k in node.attributes) or _reduce_axes(m) is None:
        return m.fail("the axes are not constant, or other attributes are set")
    return True


def _reduce_rewrite(b: Builder, m: Match) -> Value:
    """``Reduce(T(x, p), axes)`` with kept dims is ``T(Reduce(x, p[axes]), p)``."""
    perm = _perm(m.nodes[1])
    axes = sorted(perm[a % len(perm)] for a in _reduce_axes(m))
    if len(m.nodes[0].inputs) > 1:
        return _sunk(b, m, [m["x"], b.constant(np.array(axes, np.int64))], {"keepdims": 1})
    return _sunk(b, m, [m["x"]], {"axes": axes, "keepdims": 1})


def _cancel_patterns() -> list[Pattern]:
    out = [p for p in CANONICAL if p.name == "transpose-pair"]
    for op in _UNARY:
        out.append(Pattern(f"sink-transpose-{op.lower()}",
                           lambda p, op=op: getattr(p.op, op)(p.op.Transpose(p.var("x"))),
                           lambda b, m: _sunk(b, m, [m["x"]]), check=_unary_check))  # fmt: skip
    for n_bounds in (1, 2):
        out.append(Pattern(f"sink-transpose-clip-{n_bounds}",
                           lambda p, n=n_bounds: p.op.Clip(p.op.Transpose(p.var("x")),
                                                           *(p.var(f"c{i}") for i in range(n))),
                           _clip_rewrite, check=_clip_check))  # fmt: skip
    for op in _BINARY:
        out.append(Pattern(f"sink-transpose-{op.lower()}-both",
                           lambda p, op=op: getattr(p.op, op)(p.op.Transpose(p.var("a")), p.op.Transpose(p.var("b"))),
                           _binary_rewrite, check=_binary_check, benefit=2))  # fmt: skip
        out.append(Pattern(f"sink-transpose-{op.lower()}-constant",
                           lambda p, op=op: getattr(p.op, op)(p.op.Transpose(p.var("a")), p.const("c")),
                           _binary_rewrite, check=_binary_check))  # fmt: skip
        if op not in ("Add", "Mul", "Max", "Min"):  # not commutative: the constant first too
            out.append(Pattern(f"sink-transpose-constant-{op.lower()}",
                               lambda p, op=op: getattr(p.op, op)(p.const("c"), p.op.Transpose(p.var("a"))),
                               _binary_rewrite, check=_binary_check))  # fmt: skip
    for n in range(2, 9):
        out.append(Pattern(f"sink-transpose-concat-{n}",
                           lambda p, n=n: p.op.Concat(*(p.op.Transpose(p.var(f"x{i}")) for i in range(n))),
                           _concat_rewrite, check=_concat_check))  # fmt: skip
    for op in _REDUCE:
        out.append(Pattern(f"sink-transpose-{op.lower()}",
                           lambda p, op=op: getattr(p.op, op)(p.op.Transpose(p.var("x"))),
                           _reduce_rewrite, check=_reduce_check))  # fmt: skip
        out.append(Pattern(f"sink-transpose-{op.lower()}-axes",
                           lambda p, op=op: getattr(p.op, op)(p.op.Transpose(p.var("x")), p.const("axes")),
                           _reduce_rewrite, check=_reduce_check))  # fmt: skip
    out.append(Pattern("drop-transpose-before-flatten", lambda p: p.op.Flatten(p.op.Transpose(p.var("x"))),
                       lambda b, m: b.op.Flatten(m["x"], axis=1), check=_flatten_check))  # fmt: skip
    return out


CANCEL_PATTERNS = _cancel_patterns()


@dataclass(frozen=True)
class CancelTransposes(Pass):
    name = "cancel-transposes"
    summary = "move transposes through layout-agnostic ops towards the outputs and merge the pairs that meet"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_patterns(self, graph, ctx, CANCEL_PATTERNS)


@dataclass(frozen=True)
class ConvertLayout(Pass):
    name = "convert-layout"
    summary = "4-D convolutions and pools to channels-last (NHWC) between transposes, or back (to=NCHW)"

    to: str = "NHWC"
    """The layout wanted: NHWC (channels last) or NCHW (ONNX's own, undoing an earlier NHWC)."""

    def __post_init__(self):
        if self.to not in ("NHWC", "NCHW"):
            raise PassError(f"convert-layout: no layout {self.to!r}; use to=NHWC or to=NCHW")

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        if ctx.model is None:
            return PassResult(False)
        if self.to == "NCHW":
            names = NameGenerator(graph)
            calls = [n for n in graph if n.domain == DOMAIN and n.overload.startswith(("nhwc", CHANNELS_LAST))]
            for call in calls:
                _inline(graph, call, ctx.model.functions[(call.domain, call.op_type, call.overload)], names)
            return PassResult(bool(calls), {"expanded": len(calls)})
        opset = onnx_opset(ctx, graph)
        converted = sum(_channels_last(n, opset) for n in list(graph))
        if converted:
            add_fused_functions(ctx.model)
        return PassResult(converted > 0, {"converted": converted})
