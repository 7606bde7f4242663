"""combine-parallel-matmul: linear layers that read one input become one wider layer and a Split.

Attention's Q, K and V projections (and a gated MLP's gate and up projections) are sibling
linear layers: ``x @ Wq + bq``, ``x @ Wk + bk``, ``x @ Wv + bv``.  One ``x @ [Wq|Wk|Wv] +
[bq|bk|bv]`` followed by a ``Split`` on the last axis computes the same, reads ``x`` once, runs
one larger (better-shaped) product instead of three small ones, and is the packed form that
onnxruntime's ``Attention`` kernel takes.  This is TVM's CombineParallelDense and what
onnxruntime's transformer optimizer does for BERT.

Siblings are MatMuls by a constant matrix, each optionally followed by an Add of a constant
``[N]`` bias (all with a bias, or all without), or Gemms (``alpha = beta = 1``, ``transA = 0``,
constant weights and ``[N]`` bias); they must share the input, the inner size and the dtype, and
a sibling's product must be read by its bias Add alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.builder import Builder
from ..core_ir.dtypes import COMPUTE_FLOATS, to_numpy
from ..core_ir.graph import Graph
from ..core_ir.node import Node
from ..core_ir.pattern import constant_value
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult


@dataclass
class _Layer:
    nodes: list[Node]
    """The MatMul (and its bias Add), or the Gemm."""
    weight: np.ndarray
    """``[K, N]``."""
    bias: np.ndarray | None

    @property
    def output(self) -> Value:
        return self.nodes[-1].outputs[0]


def _layer(node: Node, x: Value) -> _Layer | None:
    """``node`` as a linear layer reading ``x`` by its first input, or ``None``."""
    if node.domain or len(node.outputs) != 1 or node.inputs[0] is not x:
        return None
    if not node.outputs[0].num_uses() and not node.outputs[0].is_graph_output():
        return None  # dead (a fusion took its place): combining it would compute it again
    w = constant_value(node.inputs[1]) if len(node.inputs) > 1 else None
    if w is None or w.ndim != 2:
        return None
    if node.op_type == "Gemm":
        attrs = {k: a.value for k, a in node.attributes.items()}
        if attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0):
            return None
        weight = w.T if attrs.get("transB", 0) else w
        bias = constant_value(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] is not None else None
        if len(node.inputs) > 2 and node.inputs[2] is not None and (bias is None or bias.shape != weight.shape[1:]):
            return None
        return _Layer([node], weight, bias)
    if node.op_type != "MatMul":
        return None
    product = node.outputs[0]
    users = product.users()
    if len(users) == 1 and users[0].op_type == "Add" and not users[0].domain and not product.is_graph_output():
        add = users[0]
        other = add.inputs[1] if add.inputs[0] is product else add.inputs[0]
        bias = constant_value(other)
        if bias is not None and bias.shape == (w.shape[1],) and bias.dtype == w.dtype:
            return _Layer([node, add], w, bias)
    return _Layer([node], w, None)


def _siblings(x: Value) -> list[list[_Layer]]:
    """The groups of two or more linear layers reading ``x`` that combine into one."""
    dtype = getattr(x.type, "dtype", None)
    shape = getattr(x.type, "shape", None)
    if dtype not in COMPUTE_FLOATS or shape is None or len(shape) < 2:
        return []
    groups: dict[tuple, list[_Layer]] = {}
    for node in x.users():
        layer = _layer(node, x)
        if layer is None or layer.weight.dtype != to_numpy(dtype) or layer.weight.shape[0] != shape[-1]:
            continue
        kind = (node.op_type, layer.bias is not None, str(layer.weight.dtype))
        if node.op_type == "Gemm" and len(shape) != 2:
            continue
        groups.setdefault(kind, []).append(layer)
    return [g for g in groups.values() if len(g) > 1]


def _combine(graph: Graph, x: Value, layers: list[_Layer]) -> None:
    first = min((n for layer in layers for n in layer.nodes), key=_position(graph))
    b = Builder(graph, before=first)
    weight = b.constant(np.concatenate([layer.weight for layer in layers], axis=1))
    sizes = [layer.weight.shape[1] for layer in layers]
    shape = (*x.type.shape[:-1], sum(sizes))
    dtype = x.type.dtype
    if layers[0].nodes[0].op_type == "Gemm":
        bias = [b.constant(np.concatenate([layer.bias for layer in layers]))] if layers[0].bias is not None else []
        wide = b.op.Gemm(x, weight, *bias)
    else:
        wide = b.op.MatMul(x, weight)
        if layers[0].bias is not None:
            wide.type = TensorType(dtype, shape)
            wide = b.op.Add(wide, b.constant(np.concatenate([layer.bias for layer in layers])))
    wide.type = TensorType(dtype, shape)
    parts = b.add_node("Split", [wide, b.constant(np.array(sizes, np.int64))], {"axis": -1}, num_outputs=len(layers))
    for layer, part, size in zip(layers, parts.outputs, sizes, strict=True):
        part.type = TensorType(dtype, (*x.type.shape[:-1], size))
        old, name = layer.output, layer.output.name
        old.replace_all_uses_with(part)
        if part.name != name:  # each part keeps its layer's name (a graph output's moves by itself)
            old.name, part.name = f"{name}__combined", name
    replaced = [n for layer in layers for n in layer.nodes]
    constants = {v for n in replaced for v in n.inputs if v is not None and v.is_initializer()}
    graph.remove(replaced)
    for v in constants:  # the separate weights and biases, unless something else reads them
        if not v.has_uses() and not v.is_graph_input():
            graph.remove_initializer(v)


def _position(graph: Graph):
    order = {n: i for i, n in enumerate(graph)}
    return order.__getitem__


@dataclass(frozen=True)
class CombineParallelMatMul(Pass):
    name = "combine-parallel-matmul"
    summary = "linear layers reading one input (Q/K/V projections) -> one wider MatMul/Gemm + Split"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        combined = layers = 0
        inputs = list(dict.fromkeys(v for n in graph for v in n.inputs[:1] if v is not None))
        for x in inputs:
            for group in _siblings(x):
                _combine(graph, x, group)
                combined += 1
                layers += len(group)
        return PassResult(combined > 0, {"combined": combined, "layers": layers})
