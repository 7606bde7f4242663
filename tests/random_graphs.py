"""Random well-typed ONNX graphs (a hypothesis strategy) over the ops the passes rewrite:
element-wise and broadcasting arithmetic, MatMul and Gemm, Conv, BatchNormalization, Reshape,
Transpose, Slice, Concat, reductions, Cast and Softmax; shapes with size-1 dims, and zero-size
dims where every op on the way takes them.  Weights are drawn from a seeded generator, so a
failing example shrinks to a small graph and the same numbers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

OPSET = 17
UNARY = ("Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Identity", "Softplus", "Sqrt", "Exp", "Erf")
BINARY = ("Add", "Sub", "Mul", "Div", "Max", "Min")


@dataclass
class _Builder:
    rng: np.random.Generator
    nodes: list
    inits: list
    count: int = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, shape, low=-1.0, high=1.0, dtype=np.float32) -> str:
        name = self.name("c")
        self.inits.append(numpy_helper.from_array(self.rng.uniform(low, high, shape).astype(dtype), name))
        return name

    def ints(self, values) -> str:
        name = self.name("i")
        self.inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        out = self.name("v")
        self.nodes.append(h.make_node(op, inputs, [out], name=out, **attrs))
        return out


def _broadcastable(draw, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts against ``shape``: a suffix of it, with some dims set to 1."""
    cut = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else d for d in shape[cut:])


def _step(draw, b: _Builder, pool: list[tuple[str, tuple[int, ...]]]) -> tuple[str, tuple[int, ...]]:
    x, shape = draw(st.sampled_from(pool))
    rank, empty = len(shape), 0 in shape
    kinds = ["unary", "binary", "binary-pool", "reshape", "transpose", "reduce", "cast", "concat", "slice"]
    if not empty:
        kinds += ["softmax"]
        if rank >= 2:
            kinds += ["matmul", "matmul"]
        if rank == 2:
            kinds += ["gemm"]
        if rank == 4:
            kinds += ["conv", "conv", "batchnorm"]
    kind = draw(st.sampled_from(kinds))
    if kind == "unary":
        op = draw(st.sampled_from(UNARY))
        if op in ("Sqrt",):
            x = b.node("Abs", [x])
        if op == "Exp":
            x = b.node("Tanh", [x])  # bounded, so the exponent stays finite
        return b.node(op, [x]), shape
    if kind in ("binary", "binary-pool"):
        op = draw(st.sampled_from(BINARY))
        others = [(n, s) for n, s in pool if len(s) <= rank and s == shape[rank - len(s):]]
        if kind == "binary-pool" and others and op != "Div":
            other = draw(st.sampled_from(others))[0]
        else:
            low = 0.5 if op == "Div" else -1.0
            other = b.const(_broadcastable(draw, shape), low, 2.0 if op == "Div" else 1.0)
        operands = [x, other] if draw(st.booleans()) or op == "Div" else [other, x]
        return b.node(op, operands), shape
    if kind == "reshape":
        target = [int(np.prod(shape))] if draw(st.booleans()) or rank < 2 else [shape[0], -1]
        if target == [shape[0], -1] and shape[0] == 0:
            target = [0, int(np.prod(shape[1:]))]
        out = (int(np.prod(shape)),) if len(target) == 1 else (shape[0], int(np.prod(shape[1:])))
        zero = {"allowzero": 1} if 0 in target else {}  # a 0 in the target means "keep that dim" otherwise
        return b.node("Reshape", [x, b.ints(target)], **zero), out
    if kind == "transpose":
        perm = draw(st.permutations(range(rank)))
        return b.node("Transpose", [x], perm=list(perm)), tuple(shape[p] for p in perm)
    if kind == "reduce":
        axis = draw(st.integers(0, rank - 1))
        keep = draw(st.booleans()) or rank == 1
        op = draw(st.sampled_from(["ReduceSum", "ReduceMean", "ReduceMax"]))
        if op != "ReduceSum" and shape[axis] == 0:
            op = "ReduceSum"  # the mean and max of nothing are not numbers every engine agrees on
        out = tuple(1 if i == axis else d for i, d in enumerate(shape)) if keep else shape[:axis] + shape[axis + 1 :]
        if op == "ReduceSum":
            return b.node(op, [x, b.ints([axis])], keepdims=int(keep)), out
        return b.node(op, [x], axes=[axis], keepdims=int(keep)), out
    if kind == "cast":
        wide = b.node("Cast", [x], to=T.DOUBLE)
        return b.node("Cast", [wide], to=T.FLOAT), shape
    if kind == "concat":
        axis = draw(st.integers(0, rank - 1))
        same = [n for n, s in pool if s == shape]
        other = draw(st.sampled_from(same))
        out = tuple(2 * d if i == axis else d for i, d in enumerate(shape))
        return b.node("Concat", [x, other], axis=axis), out
    if kind == "slice":
        axis = draw(st.integers(0, rank - 1))
        start = draw(st.integers(0, max(0, shape[axis] - 1)))
        end = draw(st.integers(start, shape[axis]))
        out = tuple(end - start if i == axis else d for i, d in enumerate(shape))
        return b.node("Slice", [x, b.ints([start]), b.ints([end]), b.ints([axis])]), out
    if kind == "softmax":
        return b.node("Softmax", [x], axis=draw(st.integers(-1, rank - 1))), shape
    if kind == "matmul":
        n = draw(st.integers(1, 4))
        weight = b.const((shape[-1], n))
        y = b.node("MatMul", [x, weight])
        out = (*shape[:-1], n)
        if draw(st.booleans()):
            y = b.node("Add", [y, b.const((n,))])
        return y, out
    if kind == "gemm":
        n = draw(st.integers(1, 4))
        trans = draw(st.booleans())
        weight = b.const((n, shape[1]) if trans else (shape[1], n))
        return b.node("Gemm", [x, weight, b.const((n,))], transB=int(trans)), (shape[0], n)
    if kind == "conv":
        cout, k = draw(st.integers(1, 3)), draw(st.sampled_from([1, 3]))
        pad = k // 2 if draw(st.booleans()) else 0
        if shape[2] + 2 * pad < k or shape[3] + 2 * pad < k:
            pad = k // 2
        weight = b.const((cout, shape[1], k, k))
        inputs = [x, weight] + ([b.const((cout,))] if draw(st.booleans()) else [])
        out = (shape[0], cout, shape[2] + 2 * pad - k + 1, shape[3] + 2 * pad - k + 1)
        return b.node("Conv", inputs, pads=[pad] * 4, kernel_shape=[k, k]), out
    # batchnorm
    c = shape[1]
    return b.node("BatchNormalization", [x, b.const((c,), 0.5, 1.5), b.const((c,)), b.const((c,)),
                                         b.const((c,), 0.5, 2.0)], epsilon=1e-5), shape  # fmt: skip


@st.composite
def graphs(draw, max_nodes: int = 8) -> onnx.ModelProto:
    """A random model with one float input and one or two outputs."""
    rank = draw(st.integers(1, 4))
    dims = st.sampled_from([1, 2, 3, 4]) if draw(st.integers(0, 9)) else st.sampled_from([0, 1, 2])
    shape = tuple(draw(dims) for _ in range(rank))
    b = _Builder(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), [], [])
    pool = [("x", shape)]
    for _ in range(draw(st.integers(1, max_nodes))):
        pool.append(_step(draw, b, pool))
    last = pool[-1]
    outputs = [last] + ([draw(st.sampled_from(pool[1:-1]))] if len(pool) > 2 and draw(st.booleans()) else [])
    outputs = list(dict(outputs).items())
    graph = h.make_graph(b.nodes, "random", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                         [h.make_tensor_value_info(n, T.FLOAT, None) for n, _ in outputs], b.inits)  # fmt: skip
    return h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)])
