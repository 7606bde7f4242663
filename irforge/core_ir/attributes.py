"""Typed node attributes, one kind per ONNX ``AttributeProto.AttributeType``."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from .tensors import NumpyTensor, TensorData, is_tensor_data
from .types import TensorType, Type

if TYPE_CHECKING:
    from .graph import Graph

AttrKind = enum.IntEnum(  # type: ignore[misc]
    "AttrKind",
    {name: value for name, value in onnx.AttributeProto.AttributeType.items() if name != "UNDEFINED"},
)
AttrKind.__doc__ = "Kind of an attribute (values equal onnx.AttributeProto.AttributeType)."

LIST_KINDS = {
    AttrKind.FLOATS: AttrKind.FLOAT,
    AttrKind.INTS: AttrKind.INT,
    AttrKind.STRINGS: AttrKind.STRING,
    AttrKind.TENSORS: AttrKind.TENSOR,
    AttrKind.GRAPHS: AttrKind.GRAPH,
    AttrKind.SPARSE_TENSORS: AttrKind.SPARSE_TENSOR,
    AttrKind.TYPE_PROTOS: AttrKind.TYPE_PROTO,
}


class SparseTensor:
    """A COO sparse tensor (ONNX ``SparseTensorProto``); ``numpy()`` gives the dense array.

    Used both as a sparse attribute and as a sparse initializer, which ONNX defines to mean the
    dense tensor it encodes.
    """

    __slots__ = ("_dense", "dims", "indices", "values")

    def __init__(self, values: TensorData, indices: TensorData, dims: Sequence[int]):
        self.values, self.indices, self.dims = values, indices, tuple(int(d) for d in dims)
        self._dense: np.ndarray | None = None

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.dims

    def numpy(self) -> np.ndarray:
        if self._dense is None:
            vals = self.values.numpy()
            dense = np.zeros(self.dims, dtype=vals.dtype)
            idx = self.indices.numpy().astype(np.int64)
            if idx.ndim == 1:  # linearised indices
                dense.reshape(-1)[idx] = vals
            elif idx.size:
                dense[tuple(idx.T)] = vals
            dense.flags.writeable = False
            self._dense = dense
        return self._dense


GRAPH_KINDS = frozenset({int(AttrKind.GRAPH), int(AttrKind.GRAPHS)})
"""The kinds that hold subgraphs (plain ints: asked once per node by every graph walk)."""


class Attr:
    """A named attribute value, or (inside a function body) a reference to a function attribute."""

    __slots__ = ("doc_string", "kind", "name", "ref", "value")

    def __init__(self, name: str, kind: AttrKind, value: Any, ref: str | None = None, doc_string: str = ""):
        self.name, self.kind, self.value, self.ref, self.doc_string = name, kind, value, ref, doc_string

    def __repr__(self) -> str:
        return f"Attr({self.name!r}, {AttrKind(self.kind).name}, {self.value!r})"

    @property
    def graphs(self) -> tuple[Graph, ...]:
        """The subgraphs this attribute holds (empty unless GRAPH/GRAPHS)."""
        if self.kind == AttrKind.GRAPH and self.value is not None:
            return (self.value,)
        if self.kind == AttrKind.GRAPHS:
            return tuple(self.value)
        return ()


def infer_attr(name: str, value: Any, kind: AttrKind | None = None) -> Attr:
    """Build an :class:`Attr` from a Python value, inferring the kind when not given.

    Empty lists are ambiguous: pass ``kind`` (the builder takes it from the op schema).
    """
    if isinstance(value, Attr):
        return value
    from .graph import Graph

    if kind is None:
        kind = _infer_kind(name, value)
    if kind in (AttrKind.INT,):
        value = int(value)
    elif kind == AttrKind.FLOAT:
        value = float(np.float32(value))
    elif kind == AttrKind.STRING:
        value = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
    elif kind == AttrKind.INTS:
        value = tuple(int(v) for v in value)
    elif kind == AttrKind.FLOATS:
        value = tuple(float(np.float32(v)) for v in value)
    elif kind == AttrKind.STRINGS:
        value = tuple(v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v) for v in value)
    elif kind == AttrKind.TENSOR and not is_tensor_data(value):
        value = NumpyTensor(np.asarray(value))
    elif kind == AttrKind.TENSORS:
        value = tuple(v if is_tensor_data(v) else NumpyTensor(np.asarray(v)) for v in value)
    elif kind in (AttrKind.GRAPHS, AttrKind.TYPE_PROTOS, AttrKind.SPARSE_TENSORS):
        value = tuple(value)
    elif kind == AttrKind.GRAPH and not isinstance(value, Graph):
        raise TypeError(f"attribute {name!r}: expected a Graph, got {type(value).__name__}")
    return Attr(name, kind, value)


def _infer_kind(name: str, value: Any) -> AttrKind:
    from .graph import Graph

    if isinstance(value, bool | int | np.integer):
        return AttrKind.INT
    if isinstance(value, float | np.floating):
        return AttrKind.FLOAT
    if isinstance(value, str | bytes):
        return AttrKind.STRING
    if isinstance(value, Graph):
        return AttrKind.GRAPH
    if isinstance(value, SparseTensor):
        return AttrKind.SPARSE_TENSOR
    if isinstance(value, TensorData | np.ndarray):
        return AttrKind.TENSOR
    if isinstance(value, Type.__args__ if hasattr(Type, "__args__") else TensorType):
        return AttrKind.TYPE_PROTO
    if isinstance(value, list | tuple):
        if not value:
            raise TypeError(f"attribute {name!r}: an empty list has no kind; pass kind= explicitly")
        first = value[0]
        if all(isinstance(v, bool | int | np.integer) for v in value):
            return AttrKind.INTS
        if all(isinstance(v, int | float | np.integer | np.floating) for v in value):
            return AttrKind.FLOATS
        single = _infer_kind(name, first)
        for list_kind, elem_kind in LIST_KINDS.items():
            if elem_kind == single:
                return list_kind
    raise TypeError(f"attribute {name!r}: cannot store a {type(value).__name__}")
