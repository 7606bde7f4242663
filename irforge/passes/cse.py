"""cse: merge nodes that compute the same thing from the same inputs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.attributes import AttrKind
from ..core_ir.dtypes import DataType
from ..core_ir.graph import Graph
from ..core_ir.node import Node
from ..core_ir.tensors import num_elements
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult

NONDETERMINISTIC = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                              "Bernoulli", "Multinomial"})  # fmt: skip
"""Two draws are two different tensors, even with equal inputs and attributes."""

_SCALARS = (AttrKind.FLOAT, AttrKind.INT, AttrKind.STRING)
_LISTS = (AttrKind.FLOATS, AttrKind.INTS, AttrKind.STRINGS)


@dataclass(frozen=True)
class CommonSubexpressionElimination(Pass):
    name = "cse"
    summary = "merge nodes with the same op, attributes and inputs (random ops are never merged)"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        shared = _share_equal_initializers(graph)
        seen: dict[tuple, Node] = {}
        merged = 0
        for node in graph:
            key = _key(node)
            if key is None:
                continue
            first = seen.setdefault(key, node)
            if first is node or not _mergeable(node, first):
                continue
            for dup, keep in zip(node.outputs, first.outputs, strict=True):
                if dup is not None:
                    dup.replace_all_uses_with(keep)
            graph.remove(node)
            merged += 1
        return PassResult(merged > 0 or shared > 0, {"nodes-merged": merged, "initializers-shared": shared})


def _key(node: Node) -> tuple | None:
    """A hashable identity of what the node computes, or None when it must not be merged."""
    if node.domain or node.op_type in NONDETERMINISTIC:
        return None
    attrs = []
    for a in sorted(node.attributes.values(), key=lambda a: a.name) if node._attrs else ():
        if a.ref is not None:
            return None
        if a.kind in _SCALARS:
            attrs.append((a.name, a.value))
        elif a.kind in _LISTS:
            attrs.append((a.name, tuple(a.value)))
        elif a.kind == AttrKind.TENSOR:
            array = a.value.numpy()
            attrs.append((a.name, int(a.value.dtype), array.shape, array.tobytes()))
        else:
            return None  # subgraphs, sparse tensors, type protos: not compared
    inputs = tuple(_input_key(v) for v in node.inputs)
    return (node.op_type, node.overload, inputs, len(node.outputs), tuple(attrs))


SMALL_CONSTANT = 64
"""Constants up to this many elements are compared by value: rewrites and exporters write equal
shapes and scalars as separate initializers, and two Reshapes by equal shapes are one."""


def _input_key(v: Value | None):
    if v is None:
        return None
    c = v.const_value
    if v.is_constant() and c.dtype != DataType.STRING and num_elements(c.shape) <= SMALL_CONSTANT:
        array = c.numpy()
        return (int(c.dtype), array.shape, array.tobytes())
    return id(v)


_PROBE = 64
"""Elements compared first; most unequal weights differ there, so few are compared whole."""


def _share_equal_initializers(graph: Graph) -> int:
    """Point every reader of an initializer at the first one with the same dtype, shape and bytes,
    so the nodes reading them compare equal.  Only candidates alike in dtype and shape, then in
    their first elements, are compared whole: weights are read once, not hashed every run."""
    groups: dict[tuple, list[Value]] = {}
    for v in graph.initializers.values():
        c = v.const_value
        if v.is_constant() and c.dtype != DataType.STRING and num_elements(c.shape) > SMALL_CONSTANT and v.num_uses():
            groups.setdefault((int(c.dtype), tuple(c.shape)), []).append(v)
    shared = 0
    for values in groups.values():
        if len(values) < 2:
            continue
        kept: dict[bytes, list[tuple[Value, np.ndarray]]] = {}
        for v in values:
            array = v.const_value.numpy()
            alike = kept.setdefault(array.flat[:_PROBE].tobytes(), [])  # flat: a broadcast view stays one
            twin = next((k for k, a in alike if _equal_arrays(a, array)), None)
            if twin is None:
                alike.append((v, array))
            else:
                v.replace_all_uses_with(twin, include_graph_outputs=False)
                shared += 1
    return shared


def _equal_arrays(a: np.ndarray, b: np.ndarray) -> bool:
    """``np.array_equal`` of two arrays of one shape; broadcast views (folded fills, per-channel
    weights) that repeat along the same axes are compared on one slice of those axes."""
    if a.strides == b.strides and 0 in a.strides and a.size:
        index = tuple(slice(0, 1) if st == 0 else slice(None) for st in a.strides)
        return bool(np.array_equal(a[index], b[index]))
    return bool(np.array_equal(a, b))


def _mergeable(dup: Node, keep: Node) -> bool:
    """A graph output of ``dup`` may only move onto a value that is not already a graph output,
    so the graph keeps one value per output name."""
    for d, k in zip(dup.outputs, keep.outputs, strict=True):
        if d is not None and (k is None or (d.is_graph_output() and k.is_graph_output())):
            return False
    return True
