"""Ops torch.export keeps before run_decompositions.

A program whose every op is mapped imports without decomposition: fewer, larger nodes (LayerNormalization,
not its arithmetic) and no second trace.  Any use these converters refuse sends the whole program through
run_decompositions instead."""

from __future__ import annotations

import math

import numpy as np

from ....core_ir.dtypes import DataType
from ...common import NotMapped
from .common import _axis, aten
from .elementwise import _as_bool
from .nn import _batch_norm_eval, _convolution, _layer_norm_node, _pool_attrs, _softmax_scalar
from .shapes import _static_sizes


@aten("linear.default")
def _linear(cx, x, w, b=None):
    y = cx.emit("MatMul", cx.tensor(x), cx.emit("Transpose", cx.tensor(w), perm=[1, 0]) if cx.rank(w) == 2 else w)
    return cx.emit_typed("Add", y, cx.tensor(b)) if b is not None else cx.emit_typed("Identity", y)


@aten("conv1d.default", "conv2d.default", "conv3d.default")
def _conv_nd(cx, x, w, b=None, stride=(1,), padding=(0,), dilation=(1,), groups=1):
    if cx.rank(x) != cx.rank(w):
        raise NotMapped("convolution of an unbatched input")
    return _convolution(cx, x, w, b, stride, padding, dilation, False, (0,), groups)


@aten("conv1d.padding", "conv2d.padding", "conv3d.padding")
def _conv_nd_padding(cx, x, w, b=None, stride=(1,), padding="valid", dilation=(1,), groups=1):
    if cx.rank(x) != cx.rank(w):
        raise NotMapped("convolution of an unbatched input")
    nd = cx.rank(x) - 2
    if padding == "valid":
        return _convolution(cx, x, w, b, stride, (0,) * nd, dilation, False, (0,), groups)
    kernel = cx.shape(w)[2:]
    dil = list(dilation) * nd if len(dilation) == 1 else list(dilation)
    if not all(isinstance(k, int) for k in kernel):
        raise NotMapped("'same' padding with a symbolic kernel")
    total = [d * (k - 1) for d, k in zip(dil, kernel, strict=True)]
    attrs = {"strides": [1] * nd, "dilations": dil, "group": int(groups),
             "pads": [t // 2 for t in total] + [t - t // 2 for t in total]}  # torch puts the odd one at the end
    inputs = [cx.tensor(x), cx.tensor(w)] + ([cx.tensor(b)] if b is not None else [])
    return cx.emit_typed("Conv", *inputs, **attrs)


@aten("batch_norm.default")
def _batch_norm(cx, x, w, b, mean, var, training, momentum, eps, cudnn_enabled=True):
    if training or mean is None:
        raise NotMapped("batch norm in training mode")
    return _batch_norm_eval(cx, x, w, b, mean, var, momentum, eps)[0]


@aten("layer_norm.default")
def _layer_norm_public(cx, x, normalized_shape, w=None, b=None, eps=1e-5, cudnn_enable=True):
    return _layer_norm_node(cx, x, normalized_shape, w, b, eps).outputs[0]


@aten("dropout.default", "feature_dropout.default", "alpha_dropout.default")
def _dropout(cx, x, p, train):
    if train and p > 0:
        raise NotMapped("dropout in training mode")
    return cx.emit_typed("Identity", x)


@aten("flatten.using_ints")
def _flatten(cx, x, start_dim=0, end_dim=-1):
    rank = cx.rank(x)
    if rank == 0:
        return cx.emit_typed("Reshape", x, cx.const(np.asarray([1], np.int64)))
    start, end = _axis(start_dim, rank), _axis(end_dim, rank)
    sizes = [0] * start + [-1] + [0] * (rank - end - 1)
    return cx.emit_typed("Reshape", x, cx.const(np.asarray(sizes, np.int64)))


@aten("unflatten.int")
def _unflatten(cx, x, dim, sizes):
    rank = cx.rank(x)
    dim = _axis(dim, rank)
    target = [0] * dim + list(sizes) + [0] * (rank - dim - 1)
    if not all(isinstance(t, int) for t in target):
        return cx.emit_typed("Reshape", x, cx.int64s(_static_sizes(cx, x, list(cx.out_shape))))
    return cx.emit_typed("Reshape", x, cx.const(np.asarray(target, np.int64)))


@aten("max_pool1d.default", "max_pool2d.default", "max_pool3d.default")
def _max_pool_plain(cx, x, kernel, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    nd = len(kernel)
    if cx.rank(x) != nd + 2:
        raise NotMapped("pooling of an unbatched input")
    return cx.node_typed("MaxPool", [x], _pool_attrs(nd, kernel, stride, padding, dilation, ceil_mode)).outputs[0]


@aten("softmax.int", "log_softmax.int")
def _softmax_int(cx, x, dim, dtype=None):
    op = "LogSoftmax" if "log_softmax" in str(cx.fx.target) else "Softmax"
    x = cx.tensor(x)
    if cx.rank(x) == 0:
        return _softmax_scalar(cx, x, op)
    return cx.emit_typed(op, x, axis=_axis(dim, cx.rank(x)))


@aten("to.dtype", "to.dtype_layout", "to.device", "type_as.default")
def _to(cx, x, *args, **kwargs):
    if cx.dtype(x) == cx.out_dtype:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("Cast", x, to=int(cx.out_dtype))


@aten("masked_fill.Scalar", "masked_fill.Tensor")
def _masked_fill(cx, x, mask, value):
    return cx.emit_typed("Where", _as_bool(cx, mask), cx.tensor(value), cx.tensor(x))


@aten("scaled_dot_product_attention.default")
def _sdpa(cx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False):
    """softmax(q kᵀ · scale + mask) v, in ONNX ops (opset 21 has no Attention op)."""
    if dropout_p and dropout_p > 0:
        raise NotMapped("attention dropout")
    if enable_gqa:
        raise NotMapped("grouped-query attention")
    q, k, v = cx.tensor(q), cx.tensor(k), cx.tensor(v)
    rank = cx.rank(q)
    head = cx.shape(q)[-1]
    if scale is None:
        if not isinstance(head, int):
            raise NotMapped("attention with a symbolic head size and no scale")
        scale = 1.0 / math.sqrt(head)
    perm = [*range(rank - 2), rank - 1, rank - 2]
    scores = cx.emit("Mul", cx.emit("MatMul", q, cx.emit("Transpose", k, perm=perm)), cx.tensor(scale))
    if is_causal:
        lq, lk = cx.shape(q)[-2], cx.shape(k)[-2]
        if not (isinstance(lq, int) and isinstance(lk, int)):
            raise NotMapped("causal attention over symbolic lengths")
        keep = np.tril(np.ones((lq, lk), bool))
        scores = cx.emit("Where", cx.const(keep), scores, cx.tensor(-np.inf))
    if attn_mask is not None:
        if cx.dtype(attn_mask) == DataType.BOOL:
            scores = cx.emit("Where", attn_mask, scores, cx.tensor(-np.inf))
        else:
            scores = cx.emit("Add", scores, cx.tensor(attn_mask))
    return cx.emit_typed("MatMul", cx.emit("Softmax", scores, axis=-1), v)


@aten("diff.default")
def _diff(cx, x, n=1, dim=-1, prepend=None, append=None):
    """``x[1:] - x[:-1]`` along ``dim``, ``n`` times (booleans: their xor, as torch gives)."""
    dtype, axis = cx.dtype(x), _axis(dim, cx.rank(x))
    parts = [cx.tensor(p, dtype) for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = cx.emit("Concat", *parts, axis=axis)
    axes, one = cx.const(np.asarray([axis], np.int64)), cx.const(np.asarray([1], np.int64))
    op = "Xor" if dtype == DataType.BOOL else "Sub"
    for _ in range(n):
        head = cx.emit("Slice", x, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([-1], np.int64)), axes)
        tail = cx.emit("Slice", x, one, cx.const(np.asarray([2**63 - 1], np.int64)), axes)
        x = cx.emit(op, tail, head)
    return cx.emit_typed("Identity", x)
