"""What the framework frontends share: the all-at-once unsupported-op report, the op tables that
plugins extend, and an emitter that builds ONNX-vocabulary nodes with types and source locations.

A frontend walks the framework's program twice: first it looks every op up (so a model with an
op it cannot map is reported whole, never imported half-way), then it converts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core_ir.builder import Builder
from ..core_ir.dtypes import DataType
from ..core_ir.errors import IrforgeError
from ..core_ir.graph import Graph
from ..core_ir.node import Node
from ..core_ir.tensors import NumpyTensor
from ..core_ir.types import TensorType, Type
from ..core_ir.value import Value

SOURCE = "source"
"""Node metadata key: ``file:line`` of the framework code the node came from."""
MODULE = "module"
"""Node metadata key: the module path (``encoder.layer.0.attention``) or JAX name stack."""
FRAMEWORK_OP = "framework_op"
"""Node metadata key: the framework op a node was converted from (``aten.convolution.default``)."""


class FrontendError(IrforgeError):
    """A framework program could not be imported; the message names the op and where it came from."""


@dataclass
class UnmappedOp:
    """One framework op the frontend has no mapping for: how often it occurs, where first, and why."""

    op: str
    count: int
    location: str
    why: str = "no mapping"


class UnsupportedOpsError(FrontendError):
    """Every op of a program that the frontend cannot map, listed together."""

    def __init__(self, framework: str, ops: Sequence[UnmappedOp], advice: str = ""):
        self.framework, self.ops = framework, list(ops)
        lines = [f"  {u.op} x{u.count} at {u.location or '?'}: {u.why}" for u in self.ops]
        super().__init__(
            f"the {framework} program uses {len(self.ops)} op(s) irforge cannot map:\n" + "\n".join(lines) +
            f"\nMap them from a plugin (hook irforge_register_frontend_ops, returning ('{framework}', op, converter)),"
            " or import with keep_unmapped=True to keep them as nodes of their own domain for a plugin pass to lower."
            + (f" {advice}" if advice else "")
        )  # fmt: skip


class NotMapped(Exception):
    """Raised by a converter for a use of an op it cannot express (an unsupported dtype or option)."""


Converter = Callable[..., Any]


def plugin_converters(framework: str, registry: Any = None) -> dict[str, Converter]:
    """Converters that plugins registered for ``framework`` (they take precedence): those of
    ``registry``, by default the installed plugins'."""
    if registry is None:
        from ..core_ir.installed import installed_registry

        registry = installed_registry()
    entries = registry.entries.get("frontend_ops", {})
    prefix = framework + "::"
    return {name[len(prefix):]: fn for name, fn in entries.items() if name.startswith(prefix)}


class Unmapped:
    """Collects unmapped ops during the scan: op → [count, first location, why]."""

    def __init__(self) -> None:
        self.ops: dict[str, UnmappedOp] = {}

    def add(self, op: str, location: str, why: str = "no mapping") -> None:
        u = self.ops.get(op)
        if u is None:
            self.ops[op] = UnmappedOp(op, 1, location, why)
        else:
            u.count += 1

    def raise_if_any(self, framework: str, advice: str = "") -> None:
        if self.ops:
            raise UnsupportedOpsError(framework, sorted(self.ops.values(), key=lambda u: (-u.count, u.op)), advice)


class Emitter:
    """Builds nodes into one graph: ``e.op.Add(a, b)``, constants, casts and int64 shape vectors.

    Every node made while :attr:`metadata` is set carries it (the framework op and source location).
    """

    def __init__(self, graph: Graph, builder: Builder | None = None):
        self.graph = graph
        self.b = builder or Builder(graph)
        self.metadata: dict[str, str] = {}
        self._consts: dict[tuple, Value] = {}

    @property
    def op(self):
        return self.b.op

    def node(self, op_type: str, inputs: Sequence[Value | None], attrs: dict | None = None, *, domain: str = "",
             outputs: int = 1, types: Sequence[Type | None] | None = None) -> Node:  # fmt: skip
        n = self.b.add_node(op_type, list(inputs), attrs or {}, domain=domain, num_outputs=outputs, output_types=types)
        if not domain and n.outputs and n.outputs[0] is not None and n.outputs[0].type is None:
            n.outputs[0].type = quick_type(n)
        if self.metadata:
            n.metadata = dict(self.metadata)
        return n

    def emit(self, op_type: str, *inputs: Value | None, **attrs: Any) -> Value:
        return self.node(op_type, inputs, attrs).outputs[0]

    def const(self, value: Any, dtype: DataType | int | None = None) -> Value:
        """A constant (shared between uses when small)."""
        arr = np.asarray(value)
        if dtype is not None:
            from ..core_ir.dtypes import to_numpy

            arr = arr.astype(to_numpy(dtype))
        key = None
        if arr.size <= 16 and arr.dtype != object:
            key = (arr.dtype.str, arr.shape, arr.tobytes())
            if key in self._consts:
                return self._consts[key]
        v = self.b.constant(NumpyTensor(arr, DataType(dtype) if dtype is not None else None))
        if key is not None:
            self._consts[key] = v
        return v

    def cast(self, v: Value, dtype: DataType | int) -> Value:
        if isinstance(v.type, TensorType) and v.type.dtype == dtype:
            return v
        return self.emit("Cast", v, to=int(dtype))

    def int64s(self, items: Sequence[int | Value]) -> Value:
        """A 1-D int64 tensor of ``items``, each an int or a 0-d/1-element int Value (a symbolic size)."""
        if all(isinstance(i, (int, np.integer)) for i in items):
            return self.const(np.asarray(items, np.int64).reshape(len(items)))
        parts, run = [], []
        for i in items:
            if isinstance(i, (int, np.integer)):
                run.append(int(i))
                continue
            if run:
                parts.append(self.const(np.asarray(run, np.int64)))
                run = []
            parts.append(self.emit("Reshape", self.cast(i, DataType.INT64), self.const(np.asarray([1], np.int64))))
        if run:
            parts.append(self.const(np.asarray(run, np.int64)))
        return parts[0] if len(parts) == 1 else self.emit("Concat", *parts, axis=0)


_SAME_TYPE = {"Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Erf", "Floor", "Ceil",
              "Round", "Sign", "Sin", "Cos", "Not", "Identity", "IsNaN", "IsInf", "BitwiseNot", "Softmax",
              "LogSoftmax", "Gelu", "Clip", "LeakyRelu", "Elu", "HardSigmoid", "HardSwish", "CumSum"}  # fmt: skip
_BOOL_OUT = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "IsNaN", "IsInf", "Not"}
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
              "Where", *_BOOL_OUT}  # fmt: skip


def broadcast_shapes(*shapes: tuple) -> tuple | None:
    """Numpy broadcasting over IR dims (ints, names, expressions); None where a dim can't be told."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(dims) > 1:
            dims = {d for d in dims if isinstance(d, int)} or dims  # a named dim equal to a fixed one
        out.append(dims.pop() if len(dims) == 1 else (1 if not dims else None))
    return tuple(out)


def quick_type(n: Node) -> TensorType | None:
    """The output type of a freshly built element-wise, cast or reshape-by-constant node, so the next
    converter step can ask its rank and dtype; anything else stays untyped for shape inference."""
    ins = [v.type for v in n.inputs if v is not None]
    if not ins or not all(isinstance(t, TensorType) and t.shape is not None for t in ins):
        return None
    op = n.op_type
    first = ins[0]
    if op == "Cast":
        return TensorType(DataType(n.attributes["to"].value), first.shape)
    if op in ("Shape",):
        return None
    if op in _BROADCAST:
        shape = broadcast_shapes(*(t.shape for t in ins))
        dtype = DataType.BOOL if op in _BOOL_OUT else (ins[1].dtype if op == "Where" else first.dtype)
        return TensorType(dtype, shape)
    if op in _SAME_TYPE:
        return TensorType(DataType.BOOL if op in _BOOL_OUT else first.dtype, first.shape)
    if op == "Reshape" and n.inputs[1].const_value is not None:
        target = [int(d) for d in np.asarray(n.inputs[1].const_value.numpy()).reshape(-1)]
        if all(d > 0 for d in target):
            return TensorType(first.dtype, tuple(target))
    return None


def associative_scan(e: Emitter, x: Value, axis: int, combine: str, identity, reverse: bool = False) -> Value:
    """Inclusive scan of ``combine`` (an element-wise ONNX op: Mul, Max, Min) along a static axis,
    in log2(n) doubling steps: step k combines each element with the one 2^k before it (after, with
    ``reverse``); ``identity`` fills in where there is none."""
    from ..core_ir.dtypes import to_numpy

    shape = x.type.shape
    n = shape[axis]
    if not isinstance(n, int):
        raise NotMapped("a cumulative op along a symbolic axis")
    rank = len(shape)
    fill = e.const(np.asarray(identity, to_numpy(x.type.dtype)))
    y, shift = x, 1
    while shift < n:
        pads = [0] * (2 * rank)
        pads[(rank + axis) if reverse else axis] = shift
        padded = e.emit("Pad", y, e.const(np.asarray(pads, np.int64)), fill, mode="constant")
        start = shift if reverse else 0
        moved = e.emit("Slice", padded, e.const(np.asarray([start], np.int64)),
                       e.const(np.asarray([start + n], np.int64)), e.const(np.asarray([axis], np.int64)))  # fmt: skip
        y = e.emit(combine, y, moved)
        y.type = x.type
        shift *= 2
    return y


def any_true(e: Emitter, mask: Value) -> Value:
    """A 0-d bool: whether any element of ``mask`` is true."""
    total = e.emit("ReduceSum", e.cast(mask, DataType.INT64), keepdims=0)
    return e.emit("Greater", total, e.const(np.asarray(0, np.int64)))


LoopBody = Callable[[Emitter, Value, list[Value]], tuple[Value, list[Value]]]


def while_loop(e: Emitter, state: Sequence[Value], going: Value, body: LoopBody, hint: str) -> list[Value]:
    """An ONNX ``Loop`` without a trip count: while ``going`` (0-d bool), ``state`` becomes what
    ``body(emitter, iteration, values)`` returns as ``(still going, new values)``.  The body reads
    outer values freely; the new values keep the state's types."""
    names = e.b.names
    it = Value(names.fresh(f"{hint}_iter"), TensorType(DataType.INT64, ()))
    cond = Value(names.fresh(f"{hint}_cond"), TensorType(DataType.BOOL, ()))
    carried = [Value(names.fresh(f"{hint}_state"), v.type) for v in state]
    graph = Graph(inputs=[it, cond, *carried], name=names.fresh(f"{hint}_body"))
    inner = Emitter(graph, Builder(graph, names=names))
    inner.metadata = dict(e.metadata)
    again, new = body(inner, it, list(carried))
    outputs = []
    for old, v in zip(carried, new, strict=True):
        if v.producer() is None or v.producer().graph is not graph or v in outputs:
            v = inner.emit("Identity", v)  # each body output is made in the body, once
        v.type = old.type
        outputs.append(v)
    graph.set_outputs([again, *outputs])
    loop = e.node("Loop", [None, going, *state], {"body": graph}, outputs=len(state), types=[v.type for v in state])
    return list(loop.outputs)
