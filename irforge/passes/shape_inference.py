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

from ..core_ir.graph import Graph
from ..core_ir.model import Model
from ..core_ir.serde import Serializer, tensor_to_proto, type_from_proto, type_to_proto
from ..core_ir.tensors import nbytes
from ..core_ir.types import TensorType, Type
from .base import Pass, PassContext, PassError, PassResult

_INLINE_LIMIT = 4096
"""Initializers up to this many bytes go to ONNX with their data (shape tensors, axes, small
constants whose values data propagation can use); larger ones only as typed inputs, so a model's
weights are never copied for inference."""


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
        writer = _SmallTensorsOnly(graph)
        serializer = Serializer(write_tensor=writer, value_info=True)
        proto = serializer.model(model)
        _declare_large_initializers(graph, proto.graph, writer.left_out)
        try:
            inferred = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False,
                                                         data_prop=self.data_prop)  # fmt: skip
        except Exception as e:  # ONNX raises bare RuntimeErrors
            raise PassError(f"shape-inference: ONNX's inference failed on graph {graph.name!r}: {e}") from e
        found = dict(_inferred_types(inferred.graph))
        updated = 0
        for g in graph.all_graphs():
            for v in g.values():
                tp = found.get(serializer.name(v))
                if tp is None:
                    continue
                merged = merge_types(v.type, type_from_proto(tp))
                if merged != v.type:
                    v.type = merged
                    updated += 1
        return PassResult(updated > 0, {"values-typed": updated})


class _SmallTensorsOnly:
    """A tensor writer that leaves out large payloads and remembers which it left out."""

    def __init__(self, graph: Graph) -> None:
        self.main = {name for name, v in graph.initializers.items() if not v.is_graph_input()}
        self.left_out: set[str] = set()

    def __call__(self, t, name: str, out: onnx.TensorProto) -> None:
        if name not in self.main or nbytes(t) <= _INLINE_LIMIT:
            tensor_to_proto(t, name, out)
        else:
            out.name = name
            self.left_out.add(name)


def _declare_large_initializers(graph: Graph, gp: onnx.GraphProto, left_out: set[str]) -> None:
    """Replace the left-out initializers of the main graph by typed graph inputs (in the proto only)."""
    if not left_out:
        return
    keep = [tp for tp in gp.initializer if tp.name not in left_out]
    del gp.initializer[:]
    gp.initializer.extend(keep)
    for name, v in graph.initializers.items():
        if name in left_out:
            vi = gp.input.add(name=name)
            type_to_proto(TensorType(v.const_value.dtype, tuple(v.const_value.shape)), vi.type)


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
