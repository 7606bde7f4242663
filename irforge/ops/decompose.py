"""Decompositions into core ops for ops whose ONNX schema gives no function body.

``expand-functions`` expands an op into the body its schema defines; for the ops below ONNX
defines none, so their decomposition is written here once, exactly as the op is specified, and
every backend that has no rule for one of them gets it for free (``irforge.compile`` and
``irforge.emit`` expand on a copy, keeping the ops the backend lowers itself).

A decomposition is ``fn(node, opset) -> Function | None``: the function's body computes the
node's outputs from its inputs with the node's attributes bound; ``None`` where it does not
apply (a shape it needs is not static, an attribute it does not cover).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core_ir.builder import Builder
from ..core_ir.dtypes import DataType, to_numpy
from ..core_ir.graph import Graph
from ..core_ir.model import Function
from ..core_ir.node import Node
from ..core_ir.types import TensorType
from ..core_ir.value import Value

Decomposition = Callable[[Node, int], "Function | None"]
DECOMPOSITIONS: dict[str, Decomposition] = {}


def decomposition(op_type: str):
    def register(fn: Decomposition) -> Decomposition:
        DECOMPOSITIONS[op_type] = fn
        return fn

    return register


def decompose(node: Node, opset: int) -> Function | None:
    """The decomposition of ``node``, or ``None`` (no decomposition, or none for this use)."""
    fn = DECOMPOSITIONS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    return None if fn is None else fn(node, opset)


def _static_shape(v: Value | None) -> tuple[int, ...] | None:
    t = getattr(v, "type", None)
    if not isinstance(t, TensorType) or t.shape is None or not all(isinstance(d, int) for d in t.shape):
        return None
    return tuple(t.shape)


def _body(node: Node, opset: int) -> tuple[Graph, Builder]:
    names = [f"in{i}" for i in range(len(node.inputs))]
    g = Graph(inputs=[Value(n) for n in names], name=f"{node.op_type}_decomposed", opset_imports={"": opset})
    return g, Builder(g, opset=opset)


def _function(node: Node, g: Graph) -> Function:
    doc = f"{node.op_type} in core ops (irforge.ops.decompose)"
    return Function("irforge.decompose", node.op_type, g, doc_string=doc)


def _positions(shape: tuple[int, ...], axis: int) -> np.ndarray:
    """0, 1, ... along ``axis``, shaped to broadcast against ``shape``."""
    out = np.arange(shape[axis], dtype=np.int64)
    return out.reshape([-1 if a == axis else 1 for a in range(len(shape))])


@decomposition("Hardmax")
def _hardmax(node: Node, opset: int) -> Function | None:
    """1 at the first maximum along ``axis``, 0 elsewhere: ``Cast(Equal(position, ArgMax))``."""
    shape = _static_shape(node.inputs[0])
    if shape is None or opset < 13 or not shape:
        return None
    dtype = node.inputs[0].type.dtype
    axis = node.attr("axis", -1) % len(shape)
    g, b = _body(node, opset)
    x = g.inputs[0]
    first = b.op.ArgMax(x, axis=axis, keepdims=1, select_last_index=0)
    hit = b.op.Equal(b.constant(_positions(shape, axis)), first)
    g.append_output(b.op.Cast(hit, to=int(dtype)))
    return _function(node, g)


@decomposition("EyeLike")
def _eye_like(node: Node, opset: int) -> Function | None:
    """Ones on the ``k``-th diagonal of a 2-D tensor, as the input's type or ``dtype``."""
    shape = _static_shape(node.inputs[0])
    if shape is None or len(shape) != 2:
        return None
    dtype = node.attr("dtype")
    dtype = DataType(dtype) if dtype is not None else node.inputs[0].type.dtype
    eye = np.eye(shape[0], shape[1], k=node.attr("k", 0), dtype=to_numpy(dtype))
    g, b = _body(node, opset)
    g.append_output(b.op.Identity(b.constant(eye)))
    return _function(node, g)


@decomposition("OneHot")
def _one_hot(node: Node, opset: int) -> Function | None:
    """``Where(Equal(position, index), on, off)`` along a new ``axis`` of length ``depth``;
    negative indices count from the end, as ONNX says."""
    from ..core_ir.pattern import constant_value

    shape = _static_shape(node.inputs[0])
    depth = constant_value(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
    if shape is None or depth is None:
        return None
    depth = int(np.asarray(depth).reshape(-1)[0])
    rank = len(shape) + 1
    axis = node.attr("axis", -1) % rank
    g, b = _body(node, opset)
    index, values = g.inputs[0], g.inputs[2]
    index = b.op.Cast(index, to=int(DataType.INT64))
    wrapped = b.op.Where(b.op.Less(index, b.constant(np.array(0, np.int64))),
                         b.op.Add(index, b.constant(np.array(depth, np.int64))), index)  # fmt: skip
    expanded = b.op.Unsqueeze(wrapped, b.constant(np.array([axis], np.int64)))
    positions = np.arange(depth, dtype=np.int64).reshape([-1 if a == axis else 1 for a in range(rank)])
    hit = b.op.Equal(expanded, b.constant(positions))
    off = b.op.Gather(values, b.constant(np.array(0, np.int64)), axis=0)
    on = b.op.Gather(values, b.constant(np.array(1, np.int64)), axis=0)
    g.append_output(b.op.Where(hit, on, off))
    return _function(node, g)


@decomposition("LpPool")
def _lp_pool(node: Node, opset: int) -> Function | None:
    """``(sum over the window of |x|^p)^(1/p)``: an AveragePool counting the pads, times the
    window's size (pads count as zeros, as in ONNX's definition)."""
    kernel = node.attr("kernel_shape")
    if kernel is None or node.attr("ceil_mode", 0) or opset < 19:
        return None
    p = float(node.attr("p", 2))
    g, b = _body(node, opset)
    x = g.inputs[0]
    powered = b.op.Pow(b.op.Abs(x), b.op.CastLike(b.constant(np.array(p, np.float32)), x))
    attrs = {k: a.value for k, a in node.attributes.items() if k in ("auto_pad", "dilations", "pads", "strides")}
    mean = b.op.AveragePool(powered, kernel_shape=list(kernel), count_include_pad=1, **attrs)
    total = b.op.Mul(mean, b.op.CastLike(b.constant(np.array(float(np.prod(kernel)), np.float32)), x))
    g.append_output(b.op.Pow(total, b.op.CastLike(b.constant(np.array(1.0 / p, np.float32)), x)))
    return _function(node, g)


__all__ = ["DECOMPOSITIONS", "Decomposition", "decompose", "decomposition"]
