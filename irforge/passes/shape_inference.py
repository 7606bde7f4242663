"""shape-inference: dtypes and shapes of every value, from ONNX's own inference.

ONNX's C++ inference knows every standard op's shape function, symbolic dims and (with data
propagation) shapes computed by Shape→Gather→Concat→Reshape chains; it runs once over the whole
model, subgraphs included, and what it finds is merged into the IR without ever forgetting a fact
the IR already had (a known dim is never replaced by a symbol, nor a symbol by an unknown).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import onnx
import onnx.shape_inference

from ..core_ir.dtypes import is_floating
from ..core_ir.graph import Graph
from ..core_ir.model import Model
from ..core_ir.serde import Serializer, type_from_proto
from ..core_ir.tensors import nbytes
from ..core_ir.types import TensorType, Type
from .base import Pass, PassContext, PassError, PassResult

_INLINE_LIMIT = 4096
"""Initializers up to this many bytes that data propagation can read go to ONNX with their data
(shape tensors, axes, scales); every other one only as a typed input, so a model's weights are
never copied for inference."""


@dataclass(frozen=True)
class ShapeInference(Pass):
    name = "shape-inference"
    summary = "infer dtypes and shapes (symbolic dims, data-dependent shape chains) with ONNX's inference"
    preserves = frozenset()
    recurse = False  # ONNX's inference walks the subgraphs itself

    data_prop: bool = True

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        model = ctx.model if ctx.model is not None and ctx.model.graph is graph else None
        if model is None:
            model = Model(graph, opset_imports=ctx.opset_imports(graph))
        serializer = Serializer(value_info=True)
        # the model goes to ONNX as bytes written node by node (no Python proto tree of it), and
        # weights go as typed inputs: only what data propagation can read is sent with its data
        encoded = b"".join(serializer.model_parts(model, typed_only=lambda v: not _data_helps(v)))
        try:
            inferred = onnx.ModelProto.FromString(
                onnx.shape_inference.C.infer_shapes(encoded, False, False, self.data_prop)
            )
        except Exception as e:  # ONNX raises bare RuntimeErrors
            raise PassError(f"shape-inference: ONNX's inference failed on graph {graph.name!r}: {e}") from e
        del encoded
        found = dict(_inferred_types(inferred.graph))
        del inferred
        types = _TypeCache()
        updated = 0
        for g in graph.all_graphs():
            for v in g.values():
                tp = found.get(serializer.name(v))
                if tp is None:
                    continue
                merged = merge_types(v.type, types.read(tp))
                if merged != v.type:
                    v.type = merged
                    updated += 1
        return PassResult(updated > 0, {"values-typed": updated})


_READS_FLOAT_DATA = frozenset({"Resize", "Upsample", "Range"})
"""Ops whose shape inference reads floating-point input values (scales, range bounds)."""


def _data_helps(v) -> bool:
    """Whether ONNX's data propagation could use this initializer's values: small integer tensors
    (shapes, axes, pads, sizes) and the small float inputs of the ops that read them."""
    c = v.const_value
    if c is None:
        return False
    if is_floating(c.dtype) and not any(n.op_type in _READS_FLOAT_DATA for n in v.users()):
        return False
    return nbytes(c) <= _INLINE_LIMIT


class _TypeCache:
    """Equal ``TypeProto``s (most values of a model share a handful of types) read once, and the
    resulting type objects shared."""

    def __init__(self) -> None:
        self._seen: dict[bytes, Type | None] = {}

    def read(self, tp: onnx.TypeProto) -> Type | None:
        key = tp.SerializeToString()
        if key not in self._seen:
            self._seen[key] = type_from_proto(tp)
        return self._seen[key]


def _inferred_types(gp: onnx.GraphProto) -> Iterator[tuple[str, onnx.TypeProto]]:
    for vi in (*gp.value_info, *gp.output, *gp.input):
        yield vi.name, vi.type
    for node in gp.node:
        for a in node.attribute:
            if a.HasField("g"):
                yield from _inferred_types(a.g)
            for sub in a.graphs:
                yield from _inferred_types(sub)


def merge_types(old: Type | None, new: Type | None) -> Type | None:
    """The more precise of two descriptions of one value; ``old`` wins every disagreement."""
    if new is None:
        return old
    if old is None:
        return new
    if not isinstance(old, TensorType) or not isinstance(new, TensorType) or old.dtype != new.dtype:
        return old
    if new.shape is None or (old.shape is not None and len(old.shape) != len(new.shape)):
        return old
    if old.shape is None:
        return new
    dims = tuple(_merge_dim(a, b) for a, b in zip(old.shape, new.shape, strict=True))
    return old if dims == old.shape else TensorType(old.dtype, dims)


def _merge_dim(old, new):
    if isinstance(old, int):
        return old
    if isinstance(new, int):
        return new
    return old if old is not None else new
