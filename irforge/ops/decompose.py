"""Decompositions into core ops for ops whose ONNX schema gives no function body.

``expand-functions`` expands an op into the body its schema defines; for the ops below ONNX
defines none, so their decomposition is written here once, exactly as the op is specified, and
every backend that has no rule for one of them gets it for free (``irforge.compile`` and
``irforge.emit`` expand on a copy, keeping the ops the backend lowers itself).

A decomposition is ``fn(node, opset) -> Function | None | False``: the function's body computes
the node's outputs from its inputs with the node's attributes bound; ``None`` where it does not
apply (a shape it needs is not static, an attribute it does not cover), ``False`` where it cannot
tell yet (its operands' types are not inferred: ``expand-functions`` infers them and asks again).
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

Decomposition = Callable[[Node, int], "Function | bool | None"]
DECOMPOSITIONS: dict[str, Decomposition] = {}


def decomposition(op_type: str):
    def register(fn: Decomposition) -> Decomposition:
        DECOMPOSITIONS[op_type] = fn
        return fn

    return register


def decompose(node: Node, opset: int) -> Function | bool | None:
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


_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
_PLAIN = frozenset({"Sigmoid", "Tanh", "Relu"})


def _given(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] is not None


@decomposition("RNN")
@decomposition("GRU")
@decomposition("LSTM")
def _recurrent(node: Node, opset: int) -> Function | None:
    """RNN, GRU and LSTM unrolled over their (static) sequence: one step's gates a MatMul of the
    input and one of the hidden state, in ONNX's gate order (GRU z r h, LSTM i o f c), for each
    direction.  Not covered (``None``): ``sequence_lens`` other than the full length, activations
    other than Sigmoid/Tanh/Relu, ``input_forget``."""
    from ..core_ir.pattern import constant_value

    kind, gates = node.op_type, _GATES[node.op_type]
    xs, ws = _static_shape(node.inputs[0]), _static_shape(node.inputs[1])
    if xs is None or ws is None or len(xs) != 3 or node.attr("input_forget", 0):
        return None
    layout = node.attr("layout", 0)
    steps, batch = (xs[0], xs[1]) if layout == 0 else (xs[1], xs[0])
    hidden = node.attr("hidden_size") or ws[1] // gates
    dirs = 2 if node.attr("direction", "forward") == "bidirectional" else 1
    if _given(node, 4):
        lens = constant_value(node.inputs[4])
        if lens is None or not np.all(np.asarray(lens) == steps):
            return None
    names = list(node.attr("activations") or _ACTIVATIONS[kind] * dirs)
    if node.attr("activation_alpha") or node.attr("activation_beta") or not set(names) <= _PLAIN:
        return None
    per = len(_ACTIVATIONS[kind])
    clip = node.attr("clip")
    dtype = node.inputs[0].type.dtype
    np_dtype = to_numpy(dtype)
    g, b = _body(node, opset)
    ins = g.inputs

    def c(values, like=np_dtype):
        return b.constant(np.asarray(values, like))

    def pick(x, i, axis=0):
        return b.op.Gather(x, c(i, np.int64), axis=axis)

    def part(x, k):  # gate k along the last axis (of ``gates * hidden``)
        return b.op.Slice(x, c([k * hidden], np.int64), c([(k + 1) * hidden], np.int64), c([-1], np.int64))

    def act(name, x):
        return getattr(b.op, name)(x)

    def clipped(x):
        return x if clip is None else b.op.Clip(x, c(-clip), c(clip))

    x = ins[0] if layout == 0 else b.op.Transpose(ins[0], perm=[1, 0, 2])

    def state(index):
        if not _given(node, index):
            return None
        v = ins[index]
        return v if layout == 0 else b.op.Transpose(v, perm=[1, 0, 2])

    h0, c0 = state(5), state(6) if kind == "LSTM" else None
    ys, hs, cs = [], [], []
    for d in range(dirs):
        f = names[d * per:(d + 1) * per]
        w_t, r_t = b.op.Transpose(pick(ins[1], d)), b.op.Transpose(pick(ins[2], d))
        bias = pick(ins[3], d) if _given(node, 3) else None
        size = gates * hidden
        wb = None if bias is None else b.op.Slice(bias, c([0], np.int64), c([size], np.int64))
        rb = None if bias is None else b.op.Slice(bias, c([size], np.int64), c([2 * size], np.int64))
        peep = pick(ins[7], d) if kind == "LSTM" and _given(node, 7) else None
        h = pick(h0, d) if h0 is not None else c(np.zeros((batch, hidden)))
        cell = (pick(c0, d) if c0 is not None else c(np.zeros((batch, hidden)))) if kind == "LSTM" else None
        reverse = node.attr("direction", "forward") == "reverse" or d == 1
        outs: list = [None] * steps
        for t in (reversed(range(steps)) if reverse else range(steps)):
            xw = b.op.MatMul(pick(x, t), w_t)
            xw = xw if wb is None else b.op.Add(xw, wb)
            hr = b.op.MatMul(h, r_t)
            hr = hr if rb is None else b.op.Add(hr, rb)
            if kind == "RNN":
                h = act(f[0], clipped(b.op.Add(xw, hr)))
            elif kind == "GRU":
                z = act(f[0], clipped(b.op.Add(part(xw, 0), part(hr, 0))))
                r = act(f[0], clipped(b.op.Add(part(xw, 1), part(hr, 1))))
                if node.attr("linear_before_reset", 0):
                    candidate = b.op.Add(part(xw, 2), b.op.Mul(r, part(hr, 2)))
                else:
                    rh = b.op.MatMul(b.op.Mul(r, h), part(r_t, 2))
                    candidate = b.op.Add(part(xw, 2), rh if rb is None else b.op.Add(rh, part(rb, 2)))
                n = act(f[1], clipped(candidate))
                h = b.op.Add(b.op.Mul(b.op.Sub(c(1.0), z), n), b.op.Mul(z, h))
            else:
                pre = b.op.Add(xw, hr)
                pi, po, pf = (None, None, None) if peep is None else (part(peep, 0), part(peep, 1), part(peep, 2))
                i_pre, f_pre = part(pre, 0), part(pre, 2)
                if peep is not None:
                    i_pre, f_pre = b.op.Add(i_pre, b.op.Mul(pi, cell)), b.op.Add(f_pre, b.op.Mul(pf, cell))
                i_gate, f_gate = act(f[0], clipped(i_pre)), act(f[0], clipped(f_pre))
                cell = b.op.Add(b.op.Mul(f_gate, cell), b.op.Mul(i_gate, act(f[1], clipped(part(pre, 3)))))
                o_pre = part(pre, 1) if peep is None else b.op.Add(part(pre, 1), b.op.Mul(po, cell))
                h = b.op.Mul(act(f[0], clipped(o_pre)), act(f[2], cell))
            outs[t] = b.op.Unsqueeze(h, c([0], np.int64))
        ys.append(b.op.Unsqueeze(b.op.Concat(*outs, axis=0), c([1], np.int64)))
        hs.append(b.op.Unsqueeze(h, c([0], np.int64)))
        if kind == "LSTM":
            cs.append(b.op.Unsqueeze(cell, c([0], np.int64)))
    y = b.op.Concat(*ys, axis=1)  # [steps, dirs, batch, hidden]
    finals = [b.op.Concat(*hs, axis=0)] + ([b.op.Concat(*cs, axis=0)] if kind == "LSTM" else [])
    if layout:
        y = b.op.Transpose(y, perm=[2, 0, 1, 3])
        finals = [b.op.Transpose(v, perm=[1, 0, 2]) for v in finals]
    for v in (y, *finals):
        g.append_output(v)
    return _function(node, g)


@decomposition("QLinearMatMul")
def _qlinear_matmul(node: Node, opset: int) -> Function | None:
    """As ONNX's reference computes it: the zero points taken off in int32, an int32 MatMul,
    rescaled by ``a_scale * b_scale / y_scale`` in float64, rounded half to even, shifted by the
    output zero point and saturated to the output type."""
    if len(node.inputs) < 8 or node.inputs[0].type is None:
        return None
    out_dtype = (node.inputs[7].type.dtype if node.inputs[7] is not None and node.inputs[7].type is not None
                 else node.inputs[0].type.dtype)  # fmt: skip
    np_out = to_numpy(out_dtype)
    if not np.issubdtype(np_out, np.integer):
        return None
    g, b = _body(node, opset)
    a, a_scale, a_zero, w, w_scale, w_zero, y_scale, y_zero = g.inputs[:8]
    int32, double = int(DataType.INT32), int(DataType.DOUBLE)
    lhs = b.op.Sub(b.op.Cast(a, to=int32), b.op.Cast(a_zero, to=int32))
    rhs = b.op.Sub(b.op.Cast(w, to=int32), b.op.Cast(w_zero, to=int32))
    scale = b.op.Cast(b.op.Div(b.op.Mul(a_scale, w_scale), y_scale), to=double)
    scaled = b.op.Add(b.op.Mul(b.op.Cast(b.op.MatMul(lhs, rhs), to=double), scale), b.op.Cast(y_zero, to=double))
    info = np.iinfo(np_out)
    saturated = b.op.Clip(b.op.Round(scaled), b.constant(np.array(info.min, np.float64)),
                          b.constant(np.array(info.max, np.float64)))  # fmt: skip
    g.append_output(b.op.Cast(saturated, to=int(out_dtype)))
    return _function(node, g)


_QUANT_RANGES = {DataType.UINT8: (0, 255), DataType.INT8: (-128, 127), DataType.UINT16: (0, 65535),
                 DataType.INT16: (-32768, 32767)}  # fmt: skip


def _quant_param(b: Builder, v: Value, value_shape, x_shape, axis: int, block: int) -> Value:
    """A scale or zero point made to broadcast against ``x`` as ONNX's reference does: a scalar
    as it is, a vector along ``axis``, a blocked one repeated ``block`` times along it."""
    if len(value_shape) == 0:
        return v
    if int(np.prod(value_shape)) == 1:
        return b.op.Reshape(v, b.constant(np.array([], np.int64)))
    if not block:
        dims = [1] * len(x_shape)
        dims[axis] = int(np.prod(value_shape))
        return b.op.Reshape(v, b.constant(np.array(dims, np.int64)))
    spread = list(value_shape)
    spread.insert(axis + 1, block)
    repeated = b.op.Expand(b.op.Unsqueeze(v, b.constant(np.array([axis + 1], np.int64))),
                           b.constant(np.array(spread, np.int64)))  # fmt: skip
    whole = list(value_shape)
    whole[axis] *= block
    flat = b.op.Reshape(repeated, b.constant(np.array(whole, np.int64)))
    if whole[axis] == x_shape[axis]:
        return flat
    return b.op.Slice(flat, b.constant(np.array([0], np.int64)), b.constant(np.array([x_shape[axis]], np.int64)),
                      b.constant(np.array([axis], np.int64)))  # fmt: skip


def _quant_shapes(node: Node):
    if any(v is not None and not isinstance(v.type, TensorType) for v in node.inputs):
        return None
    x_shape, scale_shape = _static_shape(node.inputs[0]), _static_shape(node.inputs[1])
    zero = node.inputs[2] if len(node.inputs) > 2 else None
    zero_shape = _static_shape(zero) if zero is not None else ()
    if x_shape is None or scale_shape is None or zero_shape is None:
        return None
    return x_shape, scale_shape, zero_shape, zero


@decomposition("QuantizeLinear")
def _quantize_linear(node: Node, opset: int) -> Function | None:
    """To an 8- or 16-bit integer: ``saturate(round_half_even(x / scale) + zero_point)``, the
    division in the wider of the two float types, as ONNX's reference computes it."""
    shapes = _quant_shapes(node)
    if shapes is None:
        return False  # its operands' types are not inferred yet
    if node.attr("precision"):
        return None
    x_shape, scale_shape, zero_shape, zero = shapes
    out = zero.type.dtype if zero is not None else DataType(node.attr("output_dtype") or DataType.UINT8)
    if out not in _QUANT_RANGES or not x_shape:
        return None
    axis, block = node.attr("axis", 1) % len(x_shape), node.attr("block_size", 0)
    wide = np.promote_types(to_numpy(node.inputs[0].type.dtype), to_numpy(node.inputs[1].type.dtype))
    g, b = _body(node, opset)
    to_wide = int(DataType.DOUBLE if wide == np.float64 else node.inputs[0].type.dtype
                  if wide == to_numpy(node.inputs[0].type.dtype) else node.inputs[1].type.dtype)  # fmt: skip
    x = b.op.Cast(g.inputs[0], to=to_wide)
    scale = b.op.Cast(_quant_param(b, g.inputs[1], scale_shape, x_shape, axis, block), to=to_wide)
    q = b.op.Cast(b.op.Round(b.op.Div(x, scale)), to=int(DataType.INT32))
    if zero is not None:
        q = b.op.Add(q, b.op.Cast(_quant_param(b, g.inputs[2], zero_shape, x_shape, axis, block),
                                  to=int(DataType.INT32)))  # fmt: skip
    lo, hi = _QUANT_RANGES[out]
    q = b.op.Clip(q, b.constant(np.array(lo, np.int32)), b.constant(np.array(hi, np.int32)))
    g.append_output(b.op.Cast(q, to=int(out)))
    return _function(node, g)


@decomposition("DequantizeLinear")
def _dequantize_linear(node: Node, opset: int) -> Function | None:
    """From an 8-, 16- or 32-bit integer: ``(x - zero_point) * scale`` in float32, in the scale's
    type (or ``output_dtype``) after."""
    shapes = _quant_shapes(node)
    if shapes is None:
        return False  # its operands' types are not inferred yet
    if node.inputs[0].type.dtype not in (*_QUANT_RANGES, DataType.INT32):
        return None
    x_shape, scale_shape, zero_shape, zero = shapes
    if not x_shape:
        x_shape = (1,)
    axis, block = node.attr("axis", 1) % len(x_shape), node.attr("block_size", 0)
    out = DataType(node.attr("output_dtype") or node.inputs[1].type.dtype)
    g, b = _body(node, opset)
    f32 = int(DataType.FLOAT)
    x = b.op.Cast(g.inputs[0], to=f32)
    if zero is not None:
        x = b.op.Sub(x, b.op.Cast(_quant_param(b, g.inputs[2], zero_shape, x_shape, axis, block), to=f32))
    y = b.op.Mul(x, b.op.Cast(_quant_param(b, g.inputs[1], scale_shape, x_shape, axis, block), to=f32))
    g.append_output(b.op.Cast(y, to=int(out)))
    return _function(node, g)


__all__ = ["DECOMPOSITIONS", "Decomposition", "decompose", "decomposition"]
