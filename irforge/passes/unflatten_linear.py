"""Linear layers back on batched inputs: ``Reshape(x, [-1, K]) -> Gemm -> ... -> Reshape(y, [B, S,
N])`` becomes ``MatMul(x, W) + b -> ...`` on the 3-D tensor.

``fuse-matmul-add`` flattens a transformer's ``[batch, seq, hidden]`` activations to run its linear
layers as Gemm, which suits runtimes that have no bias-fusing kernels.  onnxruntime's contrib
kernels want the opposite: ``BiasGelu`` and ``SkipLayerNormalization`` take the bias Add of the
linear layer before them, and ``Attention`` the 3-D input.  So, for that target, a region that
starts at Reshapes flattening the leading axes and ends at Reshapes restoring them, with only
row-wise ops between (Gemm by constant weights, element-wise ops whose other operands are scalars
or ``[N]`` rows, irforge's ``Gelu``), is computed on the unflattened tensors: each Gemm becomes
``MatMul`` and ``Add`` of its bias, and the Reshapes go.
"""

from __future__ import annotations

from ..core_ir.builder import Builder, NameGenerator
from ..core_ir.clone import clone_node
from ..core_ir.graph import Graph
from ..core_ir.node import Node
from ..core_ir.pattern import constant_value
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from .cancel_reshapes import ELEMENTWISE
from .fused_ops import DOMAIN


def _shape(v: Value | None) -> tuple | None:
    return getattr(getattr(v, "type", None), "shape", None)


def _flattening(node: Node) -> tuple | None:
    """The leading dims a ``Reshape`` from rank 3 or more to ``[rows, last]`` flattens."""
    if node.op_type != "Reshape" or node.domain:
        return None
    src, dst = _shape(node.inputs[0]), _shape(node.outputs[0])
    if src is None or dst is None or len(src) < 3 or len(dst) != 2 or dst[1] != src[-1]:
        return None
    return tuple(src[:-1])


def _gemm_row_wise(node: Node) -> bool:
    if node.op_type != "Gemm" or node.domain or len(node.inputs) < 2:
        return False
    if any(node.attr(k, d) != d for k, d in (("alpha", 1.0), ("beta", 1.0), ("transA", 0), ("transB", 0))):
        return False
    w = constant_value(node.inputs[1])
    b = constant_value(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] is not None else None
    return w is not None and w.ndim == 2 and (len(node.inputs) < 3 or (b is not None and b.shape == w.shape[1:]))


def _row_wise(node: Node, inside: Value) -> bool:
    """Whether ``node`` computes each row from the same row of ``inside`` alone."""
    if node.domain == DOMAIN and node.op_type == "Gelu":
        return True
    if node.domain or len([o for o in node.outputs if o is not None]) != 1:
        return False
    if node.op_type == "Gemm":
        return node.inputs[0] is inside and _gemm_row_wise(node)
    if node.op_type not in ELEMENTWISE:
        return False
    last = (_shape(inside) or (None,))[-1]
    for v in node.inputs:
        if v is inside or v is None:
            continue
        c = constant_value(v)
        if c is None or c.ndim > 1 or (c.ndim == 1 and c.shape[0] not in (1, last)):
            return False
    return True


def _region(start: Node) -> tuple[list[Node], list[Node], tuple] | None:
    """(row-wise nodes, restoring Reshapes, leading dims) of the region that ``start`` opens."""
    lead = _flattening(start)
    if lead is None:
        return None
    inner: list[Node] = []
    ends: list[Node] = []
    stack = [start.outputs[0]]
    seen: set[Node] = set()
    while stack:
        v = stack.pop()
        if v.is_graph_output():
            return None
        for user, _ in v.uses():
            if user in seen:
                continue
            if user.op_type == "Reshape" and not user.domain and _restores(user, lead):
                ends.append(user)
            elif user.graph is start.graph and _row_wise(user, v):
                if any(x is not None and x is not v and constant_value(x) is None for x in user.inputs):
                    return None  # two flattened tensors meeting: keep it simple
                inner.append(user)
                stack.append(user.outputs[0])
            else:
                return None
            seen.add(user)
    return (inner, ends, lead) if inner and ends else None


def _restores(node: Node, lead: tuple) -> bool:
    src, dst = _shape(node.inputs[0]), _shape(node.outputs[0])
    return src is not None and dst is not None and len(src) == 2 and tuple(dst[:-1]) == lead and dst[-1] == src[1]


def unflatten_linear_layers(graph: Graph) -> int:
    """Compute every flattened row-wise region of ``graph`` on its 3-D tensors; the number done.

    The region is computed anew beside the old one, the restoring Reshapes' results are replaced
    by the new 3-D results (equal values, so each replacement can be checked), and then the old
    region goes and the new values take its names."""
    done = 0
    names = NameGenerator(graph)
    for node in list(graph):
        if node.graph is not graph:
            continue
        region = _region(node)
        if region is None:
            continue
        inner, ends, lead = region
        lifted: dict[Value, Value] = {node.outputs[0]: node.inputs[0]}
        renamed: list[tuple[Value, str]] = []
        for n in inner:  # in the order the region was found: producers first
            old = n.outputs[0]
            new = _lift(graph, n, lead, lifted, names)
            lifted[old] = new
            renamed.append((new, old.name))
        for end in ends:
            out = end.outputs[0]
            new = lifted[end.inputs[0]]
            renamed.append((new, out.name))
            out.replace_all_uses_with(new)
        graph.remove([*ends, *reversed(inner), node])
        for v, name in renamed:
            if name and v.name != name and not v.is_graph_output():
                v.name = name
        done += 1
    return done


def _lift(graph: Graph, node: Node, lead: tuple, lifted: dict[Value, Value], names: NameGenerator) -> Value:
    """``node`` computed on the 3-D tensor (a Gemm as MatMul + Add), placed before it."""
    out = node.outputs[0]
    shape = (*lead, out.type.shape[-1]) if _shape(out) is not None else None
    dtype = out.type.dtype if out.type is not None else None
    b = Builder(graph, before=node, names=names)
    if node.op_type == "Gemm":
        y = b.op.MatMul(lifted[node.inputs[0]], node.inputs[1])
        y.type = TensorType(dtype, shape)
        if len(node.inputs) > 2 and node.inputs[2] is not None:
            y = b.op.Add(y, node.inputs[2])
            y.type = TensorType(dtype, shape)
        for n in b.created:
            n.metadata = dict(node.metadata) if node.metadata else None
        return y
    copy = clone_node(node, dict(lifted))
    y = copy.outputs[0]
    y.name, y.type = names.fresh(out.name or "v"), TensorType(dtype, shape)
    graph.insert_before(node, copy)
    return y


__all__ = ["unflatten_linear_layers"]
