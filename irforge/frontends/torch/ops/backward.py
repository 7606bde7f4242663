"""The core ATen backward ops, which an exported training step (a joint forward-backward graph)
holds: gradients of convolution, pooling, normalization and embedding, by their textbook
formulas in ONNX ops.  Registered into :data:`irforge.frontends.torch.ops.TABLE`.

Each returns only the gradients its ``output_mask`` asks for (``None`` for the others), as ATen does.
"""

from __future__ import annotations

import math

import numpy as np

from ....core_ir.dtypes import DataType, to_numpy
from ....core_ir.value import Value
from ...common import NotMapped
from ...lib.linalg import _i64


def register(aten) -> None:
    aten("embedding_dense_backward.default")(_embedding_backward)
    aten("_adaptive_avg_pool2d_backward.default")(_adaptive_avg_pool2d_backward)
    aten("avg_pool2d_backward.default")(_avg_pool2d_backward)
    aten("native_layer_norm_backward.default")(_layer_norm_backward)
    aten("native_group_norm_backward.default")(_group_norm_backward)
    aten("convolution_backward.default")(_convolution_backward)


def _static(cx, v: Value, what: str) -> tuple[int, ...]:
    shape = cx.shape(v)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped(f"{what} of a symbolic shape")
    return tuple(shape)


def _typed(cx, v: Value, index: int) -> Value:
    out = cx.emit("Identity", v)
    out.type = cx.meta_type(cx.val[index])
    return out


def _embedding_backward(cx, grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    """Each index's row of ``grad`` added into its weight row; the padding row gets nothing;
    ``scale_grad_by_freq`` divides by how often each index occurs."""
    grad = cx.tensor(grad)
    width = cx.shape(grad)[-1]
    flat_index = cx.emit("Reshape", cx.cast(indices, DataType.INT64), cx.const(_i64([-1, 1])))
    rows = cx.emit("Reshape", grad, cx.int64s([-1, width]))
    keep = cx.emit("Not", cx.emit("Equal", flat_index, cx.const(np.asarray(padding_idx, np.int64))))
    rows = cx.emit("Where", keep, rows, cx.tensor(0))
    if scale_grad_by_freq:
        ones = cx.emit("Expand", cx.tensor(1), cx.emit("Shape", flat_index))
        none = cx.emit("Expand", cx.tensor(0), cx.const(_i64([num_weights, 1])))
        counts = cx.emit("ScatterND", none, flat_index, ones, reduction="add")
        rows = cx.emit("Div", rows, cx.emit("GatherND", counts, flat_index))
    zeros = cx.emit("Expand", cx.tensor(0), cx.int64s([num_weights, width]))
    return cx.emit_typed("ScatterND", zeros, flat_index, rows, reduction="add")


def _spread(cx, grad: Value, rows: np.ndarray, cols: np.ndarray) -> Value:
    """``rowsᵀ · grad · cols`` over the last two axes: each output cell's gradient spread over the
    input cells of its window, with the window's weights."""
    dtype = to_numpy(cx.out_dtype)
    left = cx.emit("MatMul", cx.const(rows.T.astype(dtype)), cx.tensor(grad))
    return cx.emit_typed("MatMul", left, cx.const(cols.astype(dtype)))


def _adaptive_weights(size: int, out: int) -> np.ndarray:
    w = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        w[i, start:end] = 1.0 / (end - start)
    return w


def _adaptive_avg_pool2d_backward(cx, grad, x):
    *_, h, w = _static(cx, x, "adaptive_avg_pool2d_backward")
    *_, oh, ow = _static(cx, grad, "adaptive_avg_pool2d_backward")
    return _spread(cx, grad, _adaptive_weights(h, oh), _adaptive_weights(w, ow))


def _pool_weights(size: int, out: int, k: int, s: int, p: int, include_pad: bool, uniform: bool) -> np.ndarray:
    """ATen's avg_pool2d windows along one axis: row i spreads over [start, end) clipped to the
    input, divided by the window's length (with or without the padding it covers)."""
    w = np.zeros((out, size))
    for i in range(out):
        start = i * s - p
        end = min(start + k, size + p)
        padded = end - start
        start, end = max(start, 0), min(end, size)
        w[i, start:end] = 1.0 if uniform else 1.0 / (padded if include_pad else max(end - start, 1))
    return w


def _avg_pool2d_backward(cx, grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    *_, h, w = _static(cx, x, "avg_pool2d_backward")
    *_, oh, ow = _static(cx, grad, "avg_pool2d_backward")
    kh, kw = (list(kernel_size) * 2)[:2]
    sh, sw = (list(stride or kernel_size) * 2)[:2]
    ph, pw = (list(padding) * 2)[:2]
    uniform = divisor_override is not None
    rows = _pool_weights(h, oh, kh, sh, ph, count_include_pad, uniform)
    cols = _pool_weights(w, ow, kw, sw, pw, count_include_pad, uniform)
    if uniform:
        rows = rows / divisor_override
    return _spread(cx, grad, rows, cols)


def _layer_norm_backward(cx, grad, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    grad, x = cx.tensor(grad), cx.tensor(x)
    rank, k = cx.rank(x), len(normalized_shape)
    axes = cx.const(_i64(range(rank - k, rank)))
    batch_axes = cx.const(_i64(range(rank - k)))
    x_hat = cx.emit("Mul", cx.emit("Sub", x, cx.tensor(mean)), cx.tensor(rstd))
    g = cx.emit("Mul", grad, cx.tensor(weight)) if isinstance(weight, Value) else grad
    outs = [None, None, None]
    if output_mask[0]:
        n = cx.tensor(float(math.prod(normalized_shape)))
        total = cx.emit("ReduceSum", g, axes, keepdims=1)
        dot = cx.emit("ReduceSum", cx.emit("Mul", g, x_hat), axes, keepdims=1)
        inner = cx.emit("Sub", cx.emit("Sub", cx.emit("Mul", g, n), total), cx.emit("Mul", x_hat, dot))
        outs[0] = _typed(cx, cx.emit("Mul", cx.emit("Div", cx.tensor(rstd), n), inner), 0)
    if output_mask[1] and isinstance(weight, Value):
        outs[1] = _typed(cx, cx.emit("ReduceSum", cx.emit("Mul", grad, x_hat), batch_axes, keepdims=0), 1)
    if output_mask[2] and isinstance(bias, Value):
        outs[2] = _typed(cx, cx.emit("ReduceSum", grad, batch_axes, keepdims=0), 2)
    return tuple(outs)


def _group_norm_backward(cx, grad, x, mean, rstd, weight, n, c, hw, group, output_mask):
    """The layer-norm gradient over each group's channels and positions, the affine weight per channel."""
    grad, x = cx.tensor(grad), cx.tensor(x)
    if not all(isinstance(v, int) for v in (n, c, hw, group)):
        raise NotMapped("native_group_norm_backward of symbolic sizes")
    shape = cx.int64s([n, group, c // group, hw])
    channel = cx.int64s([1, group, c // group, 1])
    g3 = cx.emit("Reshape", grad, shape)
    x3 = cx.emit("Reshape", x, shape)
    per_group = cx.int64s([n, group, 1, 1])
    x_hat = cx.emit("Mul", cx.emit("Sub", x3, cx.emit("Reshape", cx.tensor(mean), per_group)),
                    cx.emit("Reshape", cx.tensor(rstd), per_group))  # fmt: skip
    g = cx.emit("Mul", g3, cx.emit("Reshape", cx.tensor(weight), channel)) if isinstance(weight, Value) else g3
    inner_axes = cx.const(_i64([2, 3]))
    outs = [None, None, None]
    if output_mask[0]:
        m = cx.tensor(float(c // group * hw))
        total = cx.emit("ReduceSum", g, inner_axes, keepdims=1)
        dot = cx.emit("ReduceSum", cx.emit("Mul", g, x_hat), inner_axes, keepdims=1)
        inner = cx.emit("Sub", cx.emit("Sub", cx.emit("Mul", g, m), total), cx.emit("Mul", x_hat, dot))
        rstd4 = cx.emit("Reshape", cx.tensor(rstd), per_group)
        dx = cx.emit("Mul", cx.emit("Div", rstd4, m), inner)
        outs[0] = _typed(cx, cx.emit("Reshape", dx, cx.emit("Shape", x)), 0)
    sum_axes = cx.const(_i64([0, 3]))
    if output_mask[1] and isinstance(weight, Value):
        dw = cx.emit("ReduceSum", cx.emit("Mul", g3, x_hat), sum_axes, keepdims=0)
        outs[1] = _typed(cx, cx.emit("Reshape", dw, cx.int64s([c])), 1)
    if output_mask[2]:
        db = cx.emit("ReduceSum", g3, sum_axes, keepdims=0)
        outs[2] = _typed(cx, cx.emit("Reshape", db, cx.int64s([c])), 2)
    return tuple(outs)


def _convolution_backward(cx, grad, x, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
                          groups, output_mask):  # fmt: skip
    """Input gradient: the transposed convolution of ``grad`` by the weights (sized to the input);
    weight gradient: the correlation of the input with ``grad``, batch as the reduced axis, per
    group; bias gradient: ``grad`` summed over all but the channel axis."""
    if transposed:
        raise NotMapped("convolution_backward of a transposed convolution")
    grad, x, weight = cx.tensor(grad), cx.tensor(x), cx.tensor(weight)
    xs = _static(cx, x, "convolution_backward")
    ws = _static(cx, weight, "convolution_backward")
    gs = _static(cx, grad, "convolution_backward")
    nd = len(xs) - 2
    stride, padding, dilation = (list(v) * nd if len(v) == 1 else list(v) for v in (stride, padding, dilation))
    outs = [None, None, None]
    if output_mask[0]:
        natural = [(gs[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ws[2 + i] - 1) + 1 for i in range(nd)]
        extra = [xs[2 + i] - natural[i] for i in range(nd)]
        if any(e < 0 or e >= max(stride[i], dilation[i]) for i, e in enumerate(extra)):
            raise NotMapped("convolution_backward whose input size the transposed convolution cannot reach")
        dx = cx.emit("ConvTranspose", grad, weight, group=int(groups), strides=stride, dilations=dilation,
                     pads=padding * 2, output_padding=extra)  # fmt: skip
        outs[0] = _typed(cx, dx, 0)
    if output_mask[1]:
        outs[1] = _typed(cx, _weight_gradient(cx, grad, x, xs, ws, gs, stride, padding, dilation, int(groups)), 1)
    if output_mask[2]:
        axes = cx.const(_i64([0, *range(2, 2 + nd)]))
        outs[2] = _typed(cx, cx.emit("ReduceSum", grad, axes, keepdims=0), 2)
    return tuple(outs)


def _weight_gradient(cx, grad, x, xs, ws, gs, stride, padding, dilation, groups) -> Value:
    """dW[o, i, k] = sum over n and output positions of grad[n, o, p] * x[n, i, p*s - pad + k*d]:
    a convolution of the input (batch and channels swapped) by the gradient (likewise), whose
    stride is the dilation and dilation the stride; one per group."""
    nd = len(xs) - 2
    swap = [1, 0, *range(2, 2 + nd)]
    cin, cout = xs[1] // groups, gs[1] // groups
    parts = []
    for g in range(groups):
        xg = cx.emit("Slice", x, cx.const(_i64([g * cin])), cx.const(_i64([(g + 1) * cin])), cx.const(_i64([1])))
        gg = cx.emit("Slice", grad, cx.const(_i64([g * cout])), cx.const(_i64([(g + 1) * cout])), cx.const(_i64([1])))
        corr = cx.emit("Conv", cx.emit("Transpose", xg, perm=swap), cx.emit("Transpose", gg, perm=swap),
                       strides=dilation, dilations=stride, pads=padding * 2)  # fmt: skip  # [cin, cout, K']
        spatial = cx.const(_i64(range(2, 2 + nd)))
        kernel = cx.emit("Slice", corr, cx.const(_i64([0] * nd)), cx.const(_i64(ws[2:])), spatial)
        parts.append(cx.emit("Transpose", kernel, perm=swap))  # [cout, cin, K]
    return parts[0] if groups == 1 else cx.emit("Concat", *parts, axis=0)
