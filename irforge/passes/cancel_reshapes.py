"""cancel-reshapes: Reshape, element-wise ops, Reshape back to the start: the two Reshapes go.

Element-wise ops do not care how their operand is shaped, so when a Reshape's result flows only
through element-wise ops (with scalar constants beside it) into a Reshape that restores the
original shape, both Reshapes are removed and the ops run on the original tensor.  This is what
``fuse-matmul-add`` leaves around an activation between two linear layers (Gemm → restore →
GELU → flatten → Gemm).  The region may be a DAG (GELU reads its input twice); it qualifies only
when nothing outside it reads a value inside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core_ir.builder import NameGenerator
from ..core_ir.clone import clone_node
from ..core_ir.graph import Graph
from ..core_ir.node import Node
from ..core_ir.pattern import constant_value
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from ..ops.traits import elementwise_ops
from .base import Pass, PassContext, PassResult

ELEMENTWISE = elementwise_ops()
"""Ops computed element by element, whose attributes do not name axes (:mod:`irforge.ops.traits`)."""


@dataclass(frozen=True)
class CancelReshapes(Pass):
    name = "cancel-reshapes"
    summary = "Reshape, element-wise ops with scalar operands, Reshape back: the Reshapes are removed"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        cancelled = 0
        for node in list(graph):
            if node.graph is graph and node.op_type == "Reshape" and not node.domain and _cancel(node):
                cancelled += 1
        return PassResult(cancelled > 0, {"reshape-pairs-cancelled": cancelled})


def _static_shape(v: Value | None) -> tuple[int, ...] | None:
    t = v.type if v is not None else None
    return tuple(t.shape) if isinstance(t, TensorType) and t.is_static() else None


def _target(reshape: Node, numel: int) -> tuple[int, ...] | None:
    """The shape a Reshape produces from ``numel`` elements, when its shape input says it alone."""
    s = constant_value(reshape.inputs[1])
    if s is None or (s == 0).any() or (s == -1).sum() > 1:  # without 0s, allowzero changes nothing
        return None
    dims = [int(d) for d in s.reshape(-1)]
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or numel % known:
            return None
        dims[dims.index(-1)] = numel // known
    return tuple(dims) if math.prod(dims) == numel else None


def _cancel(outer: Node) -> bool:
    """Remove ``outer`` and the Reshape that starts its element-wise region, if the shapes cancel."""
    region: dict[Node, None] = {}
    inner: Node | None = None
    todo = [outer.inputs[0]]
    while todo:
        v = todo.pop()
        p = v.producer() if v is not None else None
        if p is None or p.domain or p.graph is not outer.graph:
            return False
        if p.op_type == "Reshape":
            if inner is not None and inner is not p:
                return False
            inner = p
            continue
        if p in region:
            continue
        if p.op_type not in ELEMENTWISE:
            return False
        region[p] = None
        for x in p.inputs:
            c = constant_value(x)
            if c is None:
                todo.append(x)
            elif c.size != 1 or c.ndim > 1:
                return False  # a size-1 operand of rank 0 or 1 broadcasts without changing any shape
    if inner is None or not region:
        return False
    source = inner.inputs[0]
    shape = _static_shape(source)
    if shape is None or len(shape) < 1 or _target(outer, math.prod(shape)) != shape:
        return False
    if _target(inner, math.prod(shape)) is None:
        return False
    y = inner.outputs[0]
    inside = set(region) | {outer}
    for v in [y, *(o for n in region for o in n.outputs)]:
        if v is None:
            continue
        if v.is_graph_output() or any(user not in inside for user in v.users()):
            return False
    # the region computed anew on the source, then the restored result replaced by its equal
    graph = outer.graph
    names = NameGenerator(graph)
    vmap: dict[Value, Value] = {y: source}
    renamed: list[tuple[Value, str]] = []
    for n in _producers_first(region):
        copy = clone_node(n, vmap)
        for o, c in zip(n.outputs, copy.outputs, strict=True):
            if o is not None and c is not None:
                c.name = names.fresh(o.name or "v")
                if isinstance(o.type, TensorType):
                    c.type = TensorType(o.type.dtype, shape)
                renamed.append((c, o.name))
        graph.insert_before(outer, copy)
    outer.outputs[0].replace_all_uses_with(vmap[outer.inputs[0]])
    graph.remove([outer, *region])
    if not y.has_uses() and not y.is_graph_output():
        graph.remove(inner)
    for c, name in renamed:
        if name and not c.is_graph_output():
            c.name = name
    return True


def _producers_first(nodes: dict[Node, None]) -> list[Node]:
    """``nodes`` (a small region) ordered so that each comes after those it reads."""
    placed: set[Node] = set()
    order: list[Node] = []
    pending = list(nodes)
    while pending:
        waiting = []
        for n in pending:
            if all(x is None or x.producer() not in nodes or x.producer() in placed for x in n.inputs):
                order.append(n)
                placed.add(n)
            else:
                waiting.append(n)
        pending = waiting
    return order
