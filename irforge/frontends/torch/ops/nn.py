"""Neural-network ops: convolution, normalization, pooling, softmax, resampling, embeddings."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ....core_ir.dtypes import DataType, is_floating, to_numpy
from ....core_ir.value import Value
from ...common import NotMapped
from .common import _axis, aten


@aten("embedding.default")
def _embedding(cx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return cx.emit_typed("Gather", weight, cx.cast(indices, DataType.INT64), axis=0)


@aten("_embedding_bag_forward_only.default", "_embedding_bag.default")
def _embedding_bag(cx, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):  # fmt: skip
    """Bags of embedding rows, summed (mode 0), averaged (1) or maxed (2), empty bags zero.  An
    index's bag is the number of offsets at or before its position, less one; rows at
    ``padding_idx``, and past the last offset when it only closes the last bag, go to a spare bag
    that is dropped.  Rows are accumulated by ScatterND in index order, as ATen adds them."""
    if cx.used_outputs() != {0} or cx.rank(indices) != 1:
        raise NotMapped("embedding_bag's offset2bag, bag_size or max_indices, or 2-D indices")
    dt, i64 = cx.dtype(weight), DataType.INT64
    np_dt = to_numpy(dt)
    idx, offs = cx.cast(indices, i64), cx.cast(offsets, i64)
    first, one = cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([1], np.int64))
    rows = cx.emit("Gather", weight, idx, axis=0)
    if per_sample_weights is not None:
        rows = cx.emit("Mul", rows, cx.emit("Unsqueeze", cx.tensor(per_sample_weights, dt), one))
    n, bags = cx.emit("Shape", idx), cx.emit("Shape", offs)

    def counts(length: Value, where: Value, amount: np.ndarray, size: Value) -> Value:
        start = cx.emit("ConstantOfShape", length, value=np.zeros(1, amount.dtype))
        return cx.emit("ScatterND", start, where, cx.emit("Expand", cx.const(amount), size), reduction="add")

    marks = counts(cx.emit("Add", n, one), cx.emit("Unsqueeze", offs, one), np.asarray(1, np.int64), bags)
    bag = cx.emit("CumSum", cx.emit("Slice", marks, first, n), cx.const(np.asarray(0)))
    bag = cx.emit("Sub", bag, cx.const(np.asarray(1, np.int64)))
    if include_last_offset:
        bags = cx.emit("Sub", bags, one)
    spare = cx.emit("Reshape", bags, cx.const(np.asarray([], np.int64)))
    bag = cx.emit("Min", bag, spare)
    if padding_idx is not None and padding_idx >= 0:
        bag = cx.emit("Where", cx.emit("Equal", idx, cx.const(np.asarray(padding_idx, np.int64))), spare, bag)
    where, slots = cx.emit("Unsqueeze", bag, one), cx.emit("Add", bags, one)
    table = cx.emit("Concat", slots, cx.emit("Shape", weight, start=1), axis=0)
    zero = np.zeros(1, np_dt)
    if mode == 2:
        lowest = np.full(1, -np.inf if is_floating(dt) else np.iinfo(np_dt).min, np_dt)
        top = cx.emit("ScatterND", cx.emit("ConstantOfShape", table, value=lowest), where, rows, reduction="max")
        filled = cx.emit("Greater", counts(slots, where, np.asarray(1, np.int64), n), cx.const(np.asarray(0, np.int64)))
        out = cx.emit("Where", cx.emit("Unsqueeze", filled, one), top, cx.const(zero.reshape(())))
    else:
        out = cx.emit("ScatterND", cx.emit("ConstantOfShape", table, value=zero), where, rows, reduction="add")
        if mode == 1:
            size = cx.emit("Max", counts(slots, where, np.asarray(1, np_dt), n), cx.const(np.asarray(1, np_dt)))
            out = cx.emit("Div", out, cx.emit("Unsqueeze", size, one))
    result = cx.emit("Slice", out, first, bags)  # the spare bag dropped
    return cx.emit_typed("Identity", result), None, None, None


def _linear_cross_entropy(cx, x, linear_weight, target, linear_bias, weight, reduction: str, ignore_index) -> Value:
    """Cross-entropy of a linear layer's logits, which torch computes chunk by chunk to save
    memory: the logits whole, log-softmax, the target's log-probability weighted per class, and
    targets at ``ignore_index`` left out of the loss and of the mean's weight."""
    if cx.rank(x) != 2 or cx.rank(target) != 1:
        raise NotMapped("linear cross-entropy of inputs that are not [N, features]")
    dt = cx.dtype(x)
    logits = cx.emit("MatMul", x, cx.emit("Transpose", linear_weight, perm=[1, 0]))
    if linear_bias is not None:
        logits = cx.emit("Add", logits, linear_bias)
    target = cx.cast(target, DataType.INT64)
    kept = cx.emit("Not", cx.emit("Equal", target, cx.const(np.asarray(ignore_index, np.int64))))
    safe = cx.emit("Where", kept, target, cx.const(np.asarray(0, np.int64)))
    column = cx.emit("Unsqueeze", safe, cx.const(np.asarray([1], np.int64)))
    picked = cx.emit("GatherElements", cx.emit("LogSoftmax", logits, axis=-1), column, axis=1)
    nll = cx.emit("Neg", cx.emit("Squeeze", picked, cx.const(np.asarray([1], np.int64))))
    w = cx.emit("Cast", kept, to=int(dt))
    if weight is not None:
        w = cx.emit("Mul", w, cx.emit("Gather", weight, safe, axis=0))
    loss = cx.emit("Where", kept, cx.emit("Mul", nll, w), cx.const(np.asarray(0, to_numpy(dt))))
    if reduction == "none":
        return loss
    total = cx.emit("ReduceSum", loss, keepdims=0)
    return total if reduction == "sum" else cx.emit("Div", total, cx.emit("ReduceSum", w, keepdims=0))


@aten("torch_nn._linear_cross_entropy_batch_chunked.default")
def _linear_cross_entropy_chunked(cx, x, linear_weight, target, linear_bias=None, weight=None, reduction="mean",
                                  ignore_index=-100, label_smoothing=0.0, *rest):  # fmt: skip
    if cx.used_outputs() != {0} or label_smoothing:
        raise NotMapped("linear cross-entropy with label smoothing or gradients")
    loss = _linear_cross_entropy(cx, x, linear_weight, target, linear_bias, weight, reduction, ignore_index)
    return cx.emit_typed("Identity", loss), None, None, None


@aten("torch_nn._linear_cross_entropy_batch_chunked_no_reduction.default")
def _linear_cross_entropy_each(cx, x, linear_weight, target, linear_bias=None, weight=None, ignore_index=-100,
                               *rest):  # fmt: skip
    loss = _linear_cross_entropy(cx, x, linear_weight, target, linear_bias, weight, "none", ignore_index)
    return cx.emit_typed("Identity", loss)


@aten("convolution.default")
def _convolution(cx, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    nd = cx.rank(x) - 2
    if nd < 1:
        raise NotMapped("convolution of an unbatched input")
    attrs = {"strides": list(stride) * (nd // len(stride)) if len(stride) == 1 else list(stride),
             "pads": list(padding) * (2 if len(padding) == nd else 2 * nd) if len(padding) in (1, nd) else None,
             "dilations": list(dilation) * (nd // len(dilation)) if len(dilation) == 1 else list(dilation),
             "group": int(groups)}  # fmt: skip
    if len(padding) == 1:
        attrs["pads"] = list(padding) * 2 * nd
    inputs = [cx.tensor(x), cx.tensor(w)] + ([cx.tensor(b)] if b is not None else [])
    if transposed:
        op = list(output_padding)
        attrs["output_padding"] = op * (nd // len(op)) if len(op) == 1 else op
        return cx.emit_typed("ConvTranspose", *inputs, **attrs)
    return cx.emit_typed("Conv", *inputs, **attrs)


def _channels_const(cx, x, value: float) -> Value:
    c = cx.shape(x)[1]
    if not isinstance(c, int):
        raise NotMapped("normalization over a symbolic channel count without weights")
    return cx.const(np.full(c, value, to_numpy(cx.dtype(x))))


@aten("_native_batch_norm_legit_no_training.default")
def _batch_norm_eval(cx, x, w, b, mean, var, momentum, eps):
    w = w if w is not None else _channels_const(cx, x, 1.0)
    b = b if b is not None else _channels_const(cx, x, 0.0)
    if cx.rank(x) < 2:
        raise NotMapped("batch norm of rank < 2")
    n = cx.node_typed("BatchNormalization", [x, w, b, mean, var], {"epsilon": float(eps)}, outputs=1)
    empty = cx.const(np.zeros(0, to_numpy(cx.dtype(x))))  # eval mode saves no statistics
    return n.outputs[0], empty, empty


@aten("_native_batch_norm_legit.no_stats", "_native_batch_norm_legit.default",
      "_native_batch_norm_legit_functional.default")  # fmt: skip
def _batch_norm_train(cx, x, w, b, *rest):
    functional = "functional" in str(cx.fx.target)
    if "no_stats" in str(cx.fx.target):
        running_mean = running_var = None
        _, momentum, eps = rest
    else:
        running_mean, running_var, training, momentum, eps = rest
        if not training and running_mean is not None and not functional:
            return _batch_norm_eval(cx, x, w, b, running_mean, running_var, momentum, eps)
    return _batch_norm_batch_stats(cx, x, w, b, running_mean, running_var, momentum, eps, functional)


@aten("_batch_norm_with_update_functional.default")
def _batch_norm_with_update(cx, x, w, b, running_mean, running_var, momentum, eps):
    """Training-mode batch norm that also returns the updated running statistics (and an empty
    reserve, cuDNN's workspace on the CPU)."""
    y, mean, rstd, new_mean, new_var = _batch_norm_batch_stats(cx, x, w, b, running_mean, running_var, momentum,
                                                               eps, functional=True)  # fmt: skip
    return y, mean, rstd, cx.const(np.zeros(0, np.uint8)), new_mean, new_var


def _batch_norm_batch_stats(cx, x, w, b, running_mean, running_var, momentum, eps, functional: bool):
    """Normalized by the batch's own statistics; with ``functional``, the running statistics
    updated as torch does (the variance unbiased)."""
    rank = cx.rank(x)
    axes = cx.const(np.asarray([0, *range(2, rank)], np.int64))
    mean = cx.emit("ReduceMean", x, axes, keepdims=1)
    d = cx.emit("Sub", x, mean)
    var = cx.emit("ReduceMean", cx.emit("Mul", d, d), axes, keepdims=1)
    rstd = cx.emit("Reciprocal", cx.emit("Sqrt", cx.emit("Add", var, cx.tensor(eps, cx.dtype(x)))))
    y = cx.emit("Mul", d, rstd)
    bshape = cx.const(np.asarray([-1] + [1] * (rank - 2), np.int64))
    if w is not None:
        y = cx.emit("Mul", y, cx.emit("Reshape", w, bshape))
    if b is not None:
        y = cx.emit("Add", y, cx.emit("Reshape", b, bshape))
    flat = cx.const(np.asarray([-1], np.int64))
    outs = [cx.emit_typed("Identity", y), cx.emit("Reshape", mean, flat), cx.emit("Reshape", rstd, flat)]
    if functional:
        m = cx.tensor(momentum, cx.dtype(x))
        one_m = cx.tensor(1 - momentum, cx.dtype(x))
        count = cx.emit("Div", cx.cast(cx.emit("Size", x), cx.dtype(x)), cx.cast(cx.emit("Size", mean), cx.dtype(x)))
        unbiased = cx.emit("Mul", cx.emit("Reshape", var, flat),
                           cx.emit("Div", count, cx.emit("Sub", count, cx.tensor(1, cx.dtype(x)))))  # fmt: skip
        outs.append(cx.emit("Add", cx.emit("Mul", running_mean, one_m), cx.emit("Mul", outs[1], m)))
        outs.append(cx.emit("Add", cx.emit("Mul", running_var, one_m), cx.emit("Mul", unbiased, m)))
    return tuple(outs)


def _layer_norm_node(cx, x, normalized_shape, w, b, eps, outputs: int = 1):
    """A LayerNormalization over the trailing ``normalized_shape`` dims (a weight of ones where
    torch gives none)."""
    axis = cx.rank(x) - len(normalized_shape)
    if w is None:
        if not all(isinstance(d, int) for d in normalized_shape):
            raise NotMapped("layer norm without weight over symbolic dims")
        w = cx.const(np.ones(list(normalized_shape), to_numpy(cx.dtype(x))))
    inputs = [x, w] + ([b] if b is not None else [])
    return cx.node_typed("LayerNormalization", inputs, {"axis": axis, "epsilon": float(eps)}, outputs=outputs)


@aten("native_layer_norm.default")
def _layer_norm(cx, x, normalized_shape, w, b, eps):
    return tuple(_layer_norm_node(cx, x, normalized_shape, w, b, eps, outputs=3).outputs)


@aten("native_group_norm.default")
def _group_norm(cx, x, w, b, n_batch, channels, hxw, group, eps):
    rank = cx.rank(x)
    grouped = cx.emit("Reshape", x, cx.int64s([n_batch, group, -1]))
    axes = cx.const(np.asarray([2], np.int64))
    mean = cx.emit("ReduceMean", grouped, axes, keepdims=1)
    d = cx.emit("Sub", grouped, mean)
    var = cx.emit("ReduceMean", cx.emit("Mul", d, d), axes, keepdims=1)
    rstd = cx.emit("Reciprocal", cx.emit("Sqrt", cx.emit("Add", var, cx.tensor(eps, cx.dtype(x)))))
    y = cx.emit("Reshape", cx.emit("Mul", d, rstd), cx.emit("Shape", x))
    bshape = cx.const(np.asarray([-1] + [1] * (rank - 2), np.int64))
    if w is not None:
        y = cx.emit("Mul", y, cx.emit("Reshape", w, bshape))
    if b is not None:
        y = cx.emit("Add", y, cx.emit("Reshape", b, bshape))
    ng = cx.int64s([n_batch, group])
    return cx.emit_typed("Identity", y), cx.emit("Reshape", mean, ng), cx.emit("Reshape", rstd, ng)


def _pool_attrs(nd, kernel, stride, padding, dilation=None, ceil_mode=False):
    def full(v, default):
        v = list(v) if v else list(default)
        return v * nd if len(v) == 1 else v

    kernel = full(kernel, kernel)
    attrs = {"kernel_shape": kernel, "strides": full(stride, kernel), "pads": full(padding, [0]) * 2,
             "ceil_mode": int(bool(ceil_mode))}  # fmt: skip
    if dilation is not None:
        attrs["dilations"] = full(dilation, [1])
    return attrs


@aten("max_pool2d_with_indices_backward.default", "max_pool3d_with_indices_backward.default")
def _max_pool_backward(cx, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each output gradient added at the input position its maximum came from (``indices`` are flat
    positions in each spatial plane, as the forward op gives them)."""
    grad, x = cx.tensor(grad, cx.dtype(grad)), cx.tensor(x, cx.dtype(x))
    nd = 3 if "3d" in str(cx.fx.target) else 2
    lead = cx.rank(x) - nd
    planes = cx.const(np.asarray([0] * lead + [-1], np.int64))
    flat_x = cx.emit("Reshape", x, planes)
    zeros = cx.emit("Mul", flat_x, cx.tensor(0, cx.dtype(x)))
    zeros = cx.emit("Where", cx.emit("IsNaN", zeros), cx.tensor(0, cx.dtype(x)), zeros)  # inf * 0
    summed = cx.emit("ScatterElements", zeros, cx.emit("Reshape", indices, planes), cx.emit("Reshape", grad, planes),
                     axis=lead, reduction="add")  # fmt: skip
    return cx.emit_typed("Reshape", summed, cx.emit("Shape", x))


@aten("max_pool2d_with_indices.default", "max_pool3d_with_indices.default", "max_pool1d_with_indices.default")
def _max_pool(cx, x, kernel, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    nd = len(kernel)
    if cx.rank(x) != nd + 2:
        raise NotMapped("pooling of an unbatched input")
    attrs = _pool_attrs(nd, kernel, stride, padding, dilation, ceil_mode)
    if 1 not in cx.used_outputs():
        return cx.node_typed("MaxPool", [x], attrs).outputs[0], None
    n = cx.node_typed("MaxPool", [x], attrs, outputs=2)
    y, flat = n.outputs
    flat.type = None
    plane = cx.emit("ReduceProd", cx.emit("Shape", x, start=2), keepdims=1)
    return y, cx.emit("Mod", flat, plane)


@aten("avg_pool2d.default", "avg_pool3d.default", "avg_pool1d.default")
def _avg_pool(cx, x, kernel, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
              divisor_override=None):  # fmt: skip
    nd = len(kernel)
    if cx.rank(x) != nd + 2:
        raise NotMapped("pooling of an unbatched input")
    attrs = _pool_attrs(nd, kernel, stride, padding, None, ceil_mode)
    if divisor_override is not None:  # the window sums (a depthwise conv of ones) over the given divisor
        channels, spatial = cx.shape(x)[1], cx.shape(x)[2:]
        out = cx.out_shape[2:]
        if not all(isinstance(d, int) for d in (channels, *spatial, *out)):
            raise NotMapped("avg_pool with divisor_override over symbolic sizes")
        k, st, begin = attrs["kernel_shape"], attrs["strides"], attrs["pads"][:nd]
        end = [(o - 1) * si + ki - n - b for o, si, ki, n, b in zip(out, st, k, spatial, begin, strict=True)]
        ones = cx.const(np.ones([channels, 1, *k], to_numpy(cx.dtype(x))))
        sums = cx.emit("Conv", cx.tensor(x), ones, strides=st, pads=begin + [max(e, 0) for e in end], group=channels)
        return cx.emit_typed("Div", sums, cx.tensor(float(divisor_override)))
    attrs["count_include_pad"] = int(bool(count_include_pad))
    return cx.emit_typed("AveragePool", x, **attrs)


@aten("_adaptive_avg_pool2d.default", "_adaptive_avg_pool3d.default", "adaptive_avg_pool1d.default",
      "adaptive_avg_pool2d.default", "adaptive_avg_pool3d.default")  # fmt: skip
def _adaptive_avg_pool(cx, x, output_size):
    nd = len(output_size)
    unbatched = cx.rank(x) == nd + 1
    if cx.rank(x) not in (nd + 1, nd + 2):
        raise NotMapped(f"adaptive pooling of a rank-{cx.rank(x)} input")
    spatial = cx.shape(x)[-nd:]
    if all(o == 1 for o in output_size) and not unbatched:
        return cx.emit_typed("GlobalAveragePool", x)
    if not all(isinstance(s, int) for s in spatial):
        raise NotMapped("adaptive pooling over symbolic sizes")
    if not unbatched and all(s % o == 0 for s, o in zip(spatial, output_size, strict=True)):
        k = [s // o for s, o in zip(spatial, output_size, strict=True)]
        return cx.emit_typed("AveragePool", x, kernel_shape=k, strides=k)
    return cx.emit_typed("Identity", _adaptive_windows(cx, cx.tensor(x), output_size, "ReduceMean"))


def _adaptive_windows(cx, x: Value, output_size, reduce: str) -> Value:
    """torch's adaptive windows [floor(i*n/o), ceil((i+1)*n/o)) along each trailing axis, reduced
    with ``reduce`` one axis at a time (a box mean is a mean of means; a box max a max of maxes)."""
    nd, rank = len(output_size), cx.rank(x)
    y = x
    for k, (n, o) in enumerate(zip(cx.shape(x)[-nd:], output_size, strict=True)):
        axis = rank - nd + k
        if n == o:
            continue
        parts = []
        for i in range(o):
            lo, hi = (i * n) // o, -((-(i + 1) * n) // o)
            window = cx.emit("Slice", y, cx.const(np.asarray([lo], np.int64)), cx.const(np.asarray([hi], np.int64)),
                             cx.const(np.asarray([axis], np.int64)))  # fmt: skip
            parts.append(cx.emit(reduce, window, cx.const(np.asarray([axis], np.int64)), keepdims=1))
        y = cx.emit("Concat", *parts, axis=axis) if len(parts) > 1 else parts[0]
    return y


@aten("mm.default", "bmm.default", "matmul.default")
def _mm(cx, a, b):
    return cx.emit_typed("MatMul", cx.tensor(a), cx.tensor(b))


@aten("addmm.default", "baddbmm.default", "addmv.default")
def _addmm(cx, bias, a, b, *, beta=1, alpha=1):
    return _scaled_sum(cx, cx.emit("MatMul", cx.tensor(a), cx.tensor(b)), bias, alpha, beta)


def _scaled_sum(cx, prod: Value, bias, alpha, beta) -> Value:
    """``alpha * prod + beta * bias``, torch's add-matmul convention (``beta == 0`` ignores bias)."""
    if alpha != 1:
        prod = cx.emit("Mul", prod, cx.tensor(alpha))
    if beta == 0:
        return cx.emit_typed("Identity", prod)
    bias = cx.tensor(bias)
    if beta != 1:
        bias = cx.emit("Mul", bias, cx.tensor(beta))
    return cx.emit_typed("Add", prod, bias)


@aten("_softmax.default", "_log_softmax.default", "_safe_softmax.default")
def _softmax(cx, x, dim, half_to_float=False):
    op = "LogSoftmax" if "log_softmax" in str(cx.fx.target) else "Softmax"
    if cx.rank(x) == 0:
        return _softmax_scalar(cx, x, op)
    axis = _axis(dim, cx.rank(x))
    if "safe_softmax" in str(cx.fx.target):  # a row that is all -inf gives zeros, not NaN
        x = cx.tensor(x)
        top = cx.emit("ReduceMax", x, cx.const(np.asarray([axis], np.int64)), keepdims=1)
        empty = cx.emit("Equal", top, cx.tensor(-np.inf))
        return cx.emit_typed("Where", empty, cx.tensor(0), cx.emit(op, x, axis=axis))
    return cx.emit_typed(op, cx.tensor(x), axis=axis)


def _softmax_scalar(cx, x, op):
    one = cx.const(np.asarray([1], np.int64))
    y = cx.emit(op, cx.emit("Reshape", cx.tensor(x), one), axis=0)
    return cx.emit_typed("Reshape", y, cx.const(np.asarray([], np.int64)))


_RESIZE_MODES = {"nearest": "nearest", "bilinear": "linear", "linear": "linear", "trilinear": "linear",
                 "bicubic": "cubic"}  # fmt: skip


@aten("upsample_nearest1d.vec", "upsample_nearest2d.vec", "upsample_nearest3d.vec", "upsample_bilinear2d.vec",
      "upsample_linear1d.vec", "upsample_trilinear3d.vec", "upsample_bicubic2d.vec",
      "upsample_nearest2d.default", "upsample_bilinear2d.default")  # fmt: skip
def _upsample(cx, x, output_size, *args):
    target = str(cx.fx.target)
    kind = next(k for k in ("nearest", "bilinear", "trilinear", "bicubic", "linear") if f"upsample_{k}" in target)
    align_corners, scales = False, None
    if kind != "nearest":
        align_corners = bool(args[0]) if args else False
        scales = args[1] if len(args) > 1 else None
    else:
        scales = args[0] if args else None
    if ".default" in target and kind == "nearest":
        scales = [s for s in args if s is not None] or None
    attrs = {"mode": _RESIZE_MODES[kind]}
    if kind == "nearest":
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        attrs["coordinate_transformation_mode"] = "align_corners" if align_corners else "pytorch_half_pixel"
        if kind == "bicubic":
            attrs.update(cubic_coeff_a=-0.75, coordinate_transformation_mode="align_corners" if align_corners
                         else "half_pixel")  # fmt: skip
    if output_size is not None and not (scales and kind == "nearest"):
        sizes = cx.emit("Concat", cx.emit("Shape", x, end=2), cx.int64s(list(output_size)), axis=0)
        return cx.emit_typed("Resize", x, None, None, sizes, **attrs)
    if scales is None:
        raise NotMapped("upsample without sizes or scales")
    return cx.emit_typed("Resize", x, None, cx.const(np.asarray([1.0, 1.0, *scales], np.float32)), **attrs)


def _aa_weights(size_in: int, size_out: int, align_corners: bool, scale_factor, cubic: bool) -> np.ndarray:
    """ATen's antialiased resampling weights along one axis (after PIL): a triangle (or Keys
    cubic, a = -0.5) filter stretched by the downscale factor, cut at the input's edges and
    normalised per output sample, as a dense [out, in] matrix."""
    if align_corners:
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor else size_in / size_out
    scale = np.float32(scale)
    interp = 4 if cubic else 2
    support = np.float32(interp * 0.5 * scale if scale >= 1.0 else interp * 0.5)
    invscale = np.float32(1.0 / scale if scale >= 1.0 else 1.0)

    def kernel(x):
        x = np.abs(x)
        if not cubic:
            return np.where(x < 1.0, 1.0 - x, 0.0)
        a = -0.5
        return np.where(x < 1.0, ((a + 2) * x - (a + 3)) * x * x + 1,
                        np.where(x < 2.0, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))  # fmt: skip

    weights = np.zeros((size_out, size_in), np.float32)
    for i in range(size_out):
        center = np.float32(scale * (i + 0.5))
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), size_in)
        w = kernel((np.arange(lo, hi, dtype=np.float32) - center + np.float32(0.5)) * invscale).astype(np.float32)
        total = w.sum()
        weights[i, lo:hi] = w / total if total != 0 else w
    return weights


@aten("_upsample_bilinear2d_aa.default", "_upsample_bicubic2d_aa.default", "_upsample_bilinear2d_aa.vec",
      "_upsample_bicubic2d_aa.vec")  # fmt: skip
def _upsample_aa(cx, x, output_size, align_corners, *scales):
    """Antialiased 2-D resampling as two matrix products with ATen's weights (sizes static)."""
    scales = list(scales[0]) if len(scales) == 1 and isinstance(scales[0], (list, tuple)) else list(scales)
    scales = [*scales, None, None][:2]
    h, w = cx.shape(x)[-2:]
    if output_size is None:
        if not all(isinstance(d, int) for d in (h, w)) or None in scales:
            raise NotMapped("antialiased resampling of a symbolic size or without sizes")
        output_size = [math.floor(h * scales[0]), math.floor(w * scales[1])]
    if cx.rank(x) != 4 or not all(isinstance(d, int) for d in (h, w, *output_size)):
        raise NotMapped("antialiased resampling of a symbolic size")
    cubic = "bicubic" in str(cx.fx.target)
    np_dt = to_numpy(cx.dtype(x))
    rows = _aa_weights(h, output_size[0], align_corners, scales[0], cubic).astype(np_dt)
    cols = _aa_weights(w, output_size[1], align_corners, scales[1], cubic).astype(np_dt)
    across = cx.emit("MatMul", x, cx.const(cols.T.copy()))
    return cx.emit_typed("MatMul", cx.const(rows), across)


@aten("grid_sampler_2d.default", "grid_sampler_3d.default")
def _grid_sampler(cx, x, grid, interpolation_mode, padding_mode, align_corners):
    mode = ["linear", "nearest", "cubic"][interpolation_mode]
    pad = ["zeros", "border", "reflection"][padding_mode]
    return cx.emit_typed("GridSample", x, grid, mode=mode, padding_mode=pad, align_corners=int(bool(align_corners)))


@aten("pixel_shuffle.default")
def _pixel_shuffle(cx, x, r):
    return cx.emit_typed("DepthToSpace", x, blocksize=int(r), mode="CRD")


@aten("col2im.default")
def _col2im(cx, x, output_size, kernel_size, dilation, padding, stride):
    """``fold``: every column's block summed into the image, which is a transposed convolution with
    one one-hot filter per block position, grouped by channel."""
    batched = cx.rank(x) == 3
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel_size, dilation, padding, stride
    height, width = output_size
    rows, cols = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, p, d, k, s in
                  ((height, ph, dh, kh, sh), (width, pw, dw, kw, sw))]  # fmt: skip
    per_block = cx.shape(x)[-2]
    if not isinstance(per_block, int) or per_block % (kh * kw):
        raise NotMapped("col2im over a symbolic number of channels")
    channels = per_block // (kh * kw)
    weight = np.zeros((per_block, 1, kh, kw), to_numpy(cx.out_dtype))
    for c in range(channels):
        for a in range(kh):
            for b in range(kw):
                weight[c * kh * kw + a * kw + b, 0, a, b] = 1
    blocks = cx.emit("Reshape", cx.tensor(x), cx.int64s([0 if batched else 1, per_block, rows, cols]))
    natural = [(rows - 1) * sh - 2 * ph + dh * (kh - 1) + 1, (cols - 1) * sw - 2 * pw + dw * (kw - 1) + 1]
    y = cx.emit("ConvTranspose", blocks, cx.const(weight), group=channels, strides=[sh, sw], dilations=[dh, dw],
                pads=[ph, pw, ph, pw], output_padding=[height - natural[0], width - natural[1]])  # fmt: skip
    if not batched:
        y = cx.emit("Squeeze", y, cx.const(np.asarray([0], np.int64)))
    return cx.emit_typed("Identity", y)


@aten("adaptive_max_pool2d.default", "adaptive_max_pool3d.default", "adaptive_max_pool1d.default")
def _adaptive_max_pool(cx, x, output_size):
    nd = len(output_size)
    shape = cx.shape(x)
    spatial = shape[-nd:]
    if not all(isinstance(s, int) for s in spatial):
        raise NotMapped("adaptive pooling over symbolic sizes")
    out = cx.emit("Identity", _adaptive_windows(cx, cx.tensor(x), output_size, "ReduceMax"))
    out.type = cx.meta_type(cx.val[0])
    if 1 not in cx.used_outputs():
        return out, None
    indices = cx.emit("Identity", _adaptive_argmax(cx, cx.tensor(x), tuple(spatial), tuple(output_size)))
    indices.type = cx.meta_type(cx.val[1])
    return out, indices


def _adaptive_argmax(cx, x: Value, spatial: tuple[int, ...], output_size: tuple[int, ...]) -> Value:
    """Where each adaptive window's maximum is, as torch gives it: the flat position in the input's
    spatial plane of the window's first largest element.  Every window's positions are a row of a
    constant (shorter windows repeat their first position, which leaves the first maximum alone)."""
    windows = []
    for cell in np.ndindex(*output_size):
        sizes = zip(cell, spatial, output_size, strict=True)
        ranges = [range((i * n) // o, -((-(i + 1) * n) // o)) for i, n, o in sizes]
        windows.append([int(np.ravel_multi_index(p, spatial)) for p in itertools.product(*ranges)])
    width = max(len(w) for w in windows)
    positions = np.asarray([w + [w[0]] * (width - len(w)) for w in windows], np.int64)  # [cells, width]
    lead = cx.rank(x) - len(spatial)
    flat = cx.emit("Reshape", x, cx.const(np.asarray([0] * lead + [-1], np.int64)))
    values = cx.emit("Gather", flat, cx.const(positions), axis=lead)  # [..., cells, width]
    best = cx.emit("ArgMax", values, axis=-1, keepdims=0, select_last_index=0)  # [..., cells]
    offsets = cx.const(np.arange(len(windows), dtype=np.int64) * width)
    picked = cx.emit("Gather", cx.const(positions.reshape(-1)), cx.emit("Add", best, offsets), axis=0)
    return cx.emit("Reshape", picked, cx.const(np.asarray([0] * lead + list(output_size), np.int64)))


@aten("fractional_max_pool2d.default", "fractional_max_pool3d.default")
def _fractional_max_pool(cx, x, kernel_size, output_size, random_samples):
    """Max pooling over pseudo-random windows, as ATen places them from ``random_samples`` (one
    number in [0, 1) per plane and spatial dim): window ``i`` of a dim starts at
    ``int((i + u) * alpha) - int(u * alpha)`` with ``alpha = (in - k) / (out - 1)`` in the input's
    type, the last at ``in - k``.  The value and flat index are the window's first maximum, or its
    last NaN (ATen keeps a NaN and replaces it with every later one)."""
    nd = len(output_size)
    x = cx.tensor(x)
    shape = cx.shape(x)
    spatial, kernel = tuple(shape[-nd:]), tuple(kernel_size)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("fractional max pooling over symbolic sizes")
    batch, planes = (shape[0] if len(shape) == nd + 2 else 1), shape[-nd - 1]
    dtype = cx.dtype(x)
    np_dtype = np.dtype(to_numpy(dtype))
    samples = cx.emit("Reshape", cx.cast(cx.tensor(random_samples), dtype),
                      cx.const(np.asarray([batch, planes, nd], np.int64)))  # fmt: skip
    # the 2-D kernel reads its samples as (w, h), the 3-D one as (t, h, w)
    sample_of = [1, 0] if nd == 2 else list(range(nd))
    strides = [int(np.prod(spatial[d + 1:])) for d in range(nd)]
    positions = None
    for d, (size, k, out) in enumerate(zip(spatial, kernel, output_size, strict=True)):
        u = cx.emit("Gather", samples, cx.const(np.asarray(sample_of[d], np.int64)), axis=2)  # [batch, planes]
        starts = _fractional_starts(cx, u, size, k, out, np_dtype)  # [batch, planes, out]
        view = [batch, planes] + [out if e == d else 1 for e in range(nd)] + [1] * nd
        term = cx.emit("Reshape", cx.emit("Mul", starts, cx.const(np.asarray(strides[d], np.int64))),
                       cx.const(np.asarray(view, np.int64)))  # fmt: skip
        positions = term if positions is None else cx.emit("Add", positions, term)
    offsets = sum(np.arange(k, dtype=np.int64).reshape([k if e == d else 1 for e in range(nd)]) * strides[d]
                  for d, k in enumerate(kernel))  # fmt: skip
    cells, width = int(np.prod(output_size)), int(np.prod(kernel))
    offsets = np.asarray(offsets, np.int64).reshape([1, 1] + [1] * nd + list(kernel))
    positions = cx.emit("Add", positions, cx.const(offsets))
    positions = cx.emit("Reshape", positions, cx.const(np.asarray([batch, planes, cells, width], np.int64)))
    flat = cx.emit("Reshape", x, cx.const(np.asarray([batch, planes, -1], np.int64)))
    gathered = cx.emit("Reshape", positions, cx.const(np.asarray([batch, planes, cells * width], np.int64)))
    values = cx.emit("Reshape", cx.emit("GatherElements", flat, gathered, axis=2),
                     cx.const(np.asarray([batch, planes, cells, width], np.int64)))  # fmt: skip
    nan = cx.emit("Cast", cx.emit("IsNaN", values), to=int(DataType.INT32))
    last_nan = cx.emit("ArgMax", nan, axis=-1, keepdims=1, select_last_index=1)
    first_max = cx.emit("ArgMax", values, axis=-1, keepdims=1, select_last_index=0)
    has_nan = cx.emit("Cast", cx.emit("ReduceMax", nan, cx.const(np.asarray([-1], np.int64)), keepdims=1),
                      to=int(DataType.BOOL))  # fmt: skip
    best = cx.emit("Where", has_nan, last_nan, first_max)  # [batch, planes, cells, 1]
    out_shape = cx.const(np.asarray(list(shape[:-nd]) + list(output_size), np.int64))
    out = cx.emit("Reshape", cx.emit("GatherElements", values, best, axis=3), out_shape)
    out.type = cx.meta_type(cx.val[0])
    indices = cx.emit("Reshape", cx.emit("GatherElements", positions, best, axis=3), out_shape)
    indices.type = cx.meta_type(cx.val[1])
    return out, indices


def _fractional_starts(cx, u: Value, size: int, k: int, out: int, np_dtype) -> Value:
    """Where ATen's fractional pooling windows start along one dim: ``[batch, planes, out]``."""
    last = cx.const(np.full((1, 1, 1), size - k, np.int64))
    if out == 1:
        size_of = cx.emit("Concat", cx.emit("Shape", u), cx.const(np.asarray([1], np.int64)), axis=0)
        return cx.emit("Expand", last, size_of)
    alpha = np_dtype.type(size - k) / np_dtype.type(out - 1)  # ATen divides in the input's type
    u = cx.emit("Unsqueeze", u, cx.const(np.asarray([-1], np.int64)))
    steps = cx.const(np.arange(out - 1).astype(np_dtype))
    scaled = cx.emit("Floor", cx.emit("Mul", cx.emit("Add", steps, u), cx.const(np.asarray(alpha, np_dtype))))
    base = cx.emit("Floor", cx.emit("Mul", u, cx.const(np.asarray(alpha, np_dtype))))
    starts = cx.emit("Cast", cx.emit("Sub", scaled, base), to=int(DataType.INT64))
    tail = cx.emit("Expand", last, cx.emit("Shape", base))
    return cx.emit("Concat", starts, tail, axis=-1)
