"""constant-fold: compute, once, what every run would compute the same way.

A node folds when its inputs are all constants (or, for ``Shape`` and ``Size``, when its input's
shape is static); the reference interpreter computes the result.  Nothing runs before its size is
known: ONNX's shape inference (fed the small constant inputs) gives each result's size, and where
it cannot, an explicit bound from the input values (``result_bounds``) does; an op with neither
is left alone.  So a tensor over ``size-limit`` bytes is never materialised: ``ConstantOfShape``
of a huge shape or ``Range(0, 10**10, 1)`` stays an op.  A result whose dtype or shape disagrees
with the op's schema is refused, not stored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

import numpy as np
import onnx
import onnx.defs
import onnx.shape_inference

from ..core_ir.builder import Builder, NameGenerator
from ..core_ir.dtypes import DataType, bit_width, from_numpy
from ..core_ir.errors import InterpreterError
from ..core_ir.graph import Graph
from ..core_ir.interpreter import Interpreter
from ..core_ir.node import Node
from ..core_ir.pattern import filled_value
from ..core_ir.serde import Serializer, tensor_to_proto, type_from_proto, type_to_proto
from ..core_ir.tensors import NumpyTensor, TensorData, filled_view, is_tensor_data, nbytes
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult
from .result_bounds import result_bound

NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)
FOLDABLE_DOMAINS = frozenset({"", "ai.onnx.ml"})
RELABELLING = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
"""Ops whose result is their first input's elements, in order, under another shape."""
_DATA_LIMIT = 4096  # constant inputs up to this many bytes are shown to shape inference as data


@dataclass(frozen=True)
class ConstantFold(Pass):
    name = "constant-fold"
    summary = "replace nodes whose inputs are constants (and Shape/Size of static shapes) by their results"

    size_limit: int = 1 << 20
    """Largest folded result, in bytes."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        folder = _Folder(graph, ctx.opset_imports(graph), self.size_limit)
        for node in list(graph):
            if node.graph is graph:
                folder.fold(node)
        return PassResult(bool(folder.stats["folded"] or folder.stats["shape-folded"]), folder.stats)


class _Folder:
    def __init__(self, graph: Graph, opsets: dict[str, int], size_limit: int):
        self.graph, self.opsets, self.size_limit = graph, opsets, size_limit
        self.stats = {"folded": 0, "shape-folded": 0, "over-size-limit": 0, "unbounded": 0, "refused": 0}
        self._interpreter: Interpreter | None = None
        self._names: NameGenerator | None = None

    def fold(self, node: Node) -> None:
        if node.domain not in FOLDABLE_DOMAINS or node.op_type in NONDETERMINISTIC or node.subgraphs():
            return
        if node.op_type in ("Shape", "Size") and self.fold_shape(node):
            return
        if not all(v is None or _constant(v) is not None for v in node.inputs):
            return
        if node.op_type == "Constant" and any(o.is_graph_output() for o in node.outputs):
            return  # already as folded as a graph output can be; other Constants become initializers
        known = _read_off(node)
        if known is not None:  # nothing to infer or run: the result is written in the node
            if _type_bytes(known.type) > self.size_limit:
                self.stats["over-size-limit"] += 1
                return
            if not _declared_agrees(node.outputs[0], known.type):
                self.stats["refused"] += 1  # its declared type says otherwise: the verifier explains
                return
            self.replace(node, [known.materialise()], [known.type])
            self.stats["folded"] += 1
            return
        expected = _relabelled_types(node, self.opsets) or self.expected_types(node)
        if expected is None:
            self.stats["refused"] += 1
            return
        args = [None if v is None else _constant(v).numpy() for v in node.inputs]
        if any(t is None or not _static(t) for t in expected):
            # inference could not size a result: only an explicit bound from the input values
            # lets the op run (Range(0, 10**10, 1) must stay an op, not exhaust the memory)
            bound = result_bound(node.op_type, args, {k: a.value for k, a in node.attributes.items()})
            if bound is None:
                self.stats["unbounded"] += 1
                return
            if bound > self.size_limit:
                self.stats["over-size-limit"] += 1
                return
        elif sum(_type_bytes(t) for t in expected) > self.size_limit:
            self.stats["over-size-limit"] += 1
            return
        try:
            if node.op_type in RELABELLING and not node.domain and _static(expected[0]):
                # the same elements in the same order: the data with the shape inference gives
                results = [np.reshape(args[0], expected[0].shape).copy()]
            else:
                results = self.interpreter().evaluate(node, args)
        except (InterpreterError, ValueError):
            self.stats["refused"] += 1
            return
        if not self.acceptable(node, results, expected):
            self.stats["refused"] += 1
            return
        self.replace(node, results)
        self.stats["folded"] += 1

    def fold_shape(self, node: Node) -> bool:
        x = node.inputs[0]
        t = x.type if x is not None else None
        if not isinstance(t, TensorType) or not _static(t):
            return False
        if node.op_type == "Size":
            result = np.array(prod(t.shape), dtype=np.int64)
        else:
            start, end = node.attr("start", 0), node.attr("end", None)
            result = np.array(t.shape[start:end], dtype=np.int64)
        self.replace(node, [result])
        self.stats["shape-folded"] += 1
        return True

    def expected_types(self, node: Node) -> list | None:
        """The output types ONNX's inference gives this node on its constant inputs."""
        version = self.opsets.get(node.domain, onnx.defs.onnx_opset_version() if not node.domain else 1)
        try:
            schema = onnx.defs.get_schema(node.op_type, version, node.domain)
        except onnx.defs.SchemaError:
            return None
        serializer = Serializer()
        serializer.reserve(self.graph)
        proto = onnx.NodeProto()
        serializer.node(node, proto)
        types, data = {}, {}
        for v in node.inputs:
            if v is None:
                continue
            c = _constant(v)
            name = serializer.name(v)
            tp = onnx.TypeProto()
            type_to_proto(TensorType(c.dtype, tuple(c.shape)), tp)
            types[name] = tp
            if nbytes(c) <= _DATA_LIMIT:
                tensor_to_proto(c, name, data.setdefault(name, onnx.TensorProto()))
        try:
            out = onnx.shape_inference.infer_node_outputs(
                schema,
                proto,
                types,
                data,
                opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in self.opsets.items()],
            )
        except Exception:  # ONNX's inference rejects the node: leave it to the verifier to explain
            return None
        return [type_from_proto(out[serializer.name(o)]) if o is not None and serializer.name(o) in out else None
                for o in node.outputs]  # fmt: skip

    def acceptable(self, node: Node, results: list, expected: list) -> bool:
        if len(results) < len([o for o in node.outputs if o is not None]):
            return False
        total = 0
        for o, r, t in zip(node.outputs, results, expected, strict=False):
            if o is None:
                continue
            if not isinstance(r, np.ndarray) or (r.dtype == object and not isinstance(t, TensorType)):
                return False
            if isinstance(t, TensorType):
                if isinstance(o.type, TensorType) and o.type.dtype != t.dtype:
                    return False
                if _dtype_of(r) != t.dtype:
                    return False
                if t.shape is not None and not _shape_agrees(r.shape, t.shape):
                    return False
            if isinstance(o.type, TensorType) and o.type.shape is not None and not _shape_agrees(r.shape, o.type.shape):
                return False
            total += r.nbytes
        return total <= self.size_limit

    def replace(self, node: Node, results: list, types: list[TensorType] | None = None) -> None:
        """``types``: the results' types when they are known exactly (read off the node)."""
        b = Builder(self.graph, before=node, names=self.names())
        for i, (o, r) in enumerate(zip(node.outputs, results, strict=False)):
            if o is None:
                continue
            if types is not None:
                t = types[i]
                payload = NumpyTensor(r, t.dtype)
            else:
                payload = NumpyTensor(np.asarray(r), o.type.dtype if isinstance(o.type, TensorType) else _dtype_of(r))
                t = TensorType(payload.dtype, payload.shape)
            if o.is_graph_output():  # keeps its name and a producer: a Constant node holds the result
                c = b.op.Constant(value=payload)
                c.type = t
            else:  # the initializer takes the value's name, so the IR still reads the same
                name, o.name = o.name, None
                c = self.graph.add_initializer(Value(name or self.names().fresh("const"), t, payload))
                o.name = f"{c.name}__folded"
            o.replace_all_uses_with(c)
        self.graph.remove(node)

    def interpreter(self) -> Interpreter:
        if self._interpreter is None:
            self._interpreter = Interpreter(self.graph, self.opsets)
        return self._interpreter

    def names(self) -> NameGenerator:
        if self._names is None:
            self._names = NameGenerator(self.graph)
        return self._names


def _constant(v: Value) -> TensorData | None:
    """The payload of a constant value: an initializer or a ``Constant`` node's ``value``."""
    if v.is_constant():
        c = v.const_value
        return c if is_tensor_data(c) else None
    return None


@dataclass(frozen=True)
class _ReadOff:
    """A result written in its node: ``Constant``'s tensor, or ``ConstantOfShape``'s element and
    shape.  These hold the weights of many exported models, so they skip ONNX's inference and the
    interpreter (the result is known, so is its size)."""

    type: TensorType
    materialise: Callable[[], np.ndarray]


def _read_off(node: Node) -> _ReadOff | None:
    if node.domain or len(node.outputs) != 1:
        return None
    if node.op_type == "ConstantOfShape":
        filled = filled_value(node.outputs[0])
        if filled is None:
            return None
        fill = filled.fill
        # a read-only view of the one element: no memory until a writer or a non-uniform
        # rewrite needs the elements (weights of a model exported without them often are fills)
        return _ReadOff(TensorType(filled.dtype, filled.dims), lambda: filled_view(fill, filled.dims))
    if node.op_type == "Constant" and len(node.attributes) == 1:
        value = node.attributes.get("value")
        if value is not None and value.ref is None and is_tensor_data(value.value):
            c = value.value
            return _ReadOff(TensorType(c.dtype, tuple(c.shape)), c.numpy)
    return None


def _relabelled_types(node: Node, opsets: dict[str, int]) -> list[TensorType] | None:
    """The result type of an ``Unsqueeze``/``Squeeze``/``Identity`` of constants, read off the
    inputs without ONNX's inference (these move the weights of many exported models into place);
    None, so that ONNX decides, for anything unusual: other ops, old opsets, odd axes."""
    op = node.op_type
    if node.domain or op not in ("Unsqueeze", "Squeeze", "Identity") or opsets.get("", 0) < 13:
        return None
    data = _constant(node.inputs[0]) if node.inputs and node.inputs[0] is not None else None
    if data is None or len(node.outputs) != 1 or node.attributes:
        return None
    shape = tuple(data.shape)
    if op == "Identity":
        return [TensorType(data.dtype, shape)] if len(node.inputs) == 1 else None
    axes_value = node.inputs[1] if len(node.inputs) == 2 else None
    if axes_value is None:
        if op == "Unsqueeze" or len(node.inputs) != 1:
            return None
        return [TensorType(data.dtype, tuple(d for d in shape if d != 1))]
    axes_data = _constant(axes_value)
    if axes_data is None or axes_data.dtype != DataType.INT64 or len(axes_data.shape) != 1:
        return None
    rank = len(shape) + (axes_data.shape[0] if op == "Unsqueeze" else 0)
    axes = [int(a) + rank if a < 0 else int(a) for a in axes_data.numpy()]
    if len(set(axes)) != len(axes) or not all(0 <= a < rank for a in axes):
        return None
    if op == "Squeeze":
        if any(shape[a] != 1 for a in axes):
            return None
        return [TensorType(data.dtype, tuple(d for i, d in enumerate(shape) if i not in axes))]
    dims = iter(shape)
    return [TensorType(data.dtype, tuple(1 if i in axes else next(dims) for i in range(rank)))]


def _declared_agrees(o: Value, t: TensorType) -> bool:
    """``o``'s declared type, where it has one, allows a result of type ``t``."""
    declared = o.type
    if not isinstance(declared, TensorType):
        return True
    return declared.dtype == t.dtype and (declared.shape is None or _shape_agrees(t.shape, declared.shape))


def _static(t) -> bool:
    return isinstance(t, TensorType) and t.is_static()


def _type_bytes(t: TensorType) -> int:
    return (prod(t.shape) * max(bit_width(t.dtype), 8) + 7) // 8


def _shape_agrees(actual: tuple, declared: tuple) -> bool:
    return len(actual) == len(declared) and all(
        not isinstance(d, int) or d == a for a, d in zip(actual, declared, strict=True)
    )


def _dtype_of(r: np.ndarray) -> DataType:
    if r.dtype == object:
        return DataType.STRING
    return from_numpy(r.dtype)
