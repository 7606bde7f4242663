"""Products, convolutions (ConvTranspose through :mod:`irforge.ops.geometry`) and pools."""

from __future__ import annotations

import numpy as np

from ....core_ir.node import Node
from ....ops.geometry import ceil_pads, conv_transpose, flat_pads, pool_counts, window
from ...table import Refused
from .common import RULES, _op, _s, rule

# --- linear algebra, convolution, pooling -------------------------------------------------------


@rule("MatMul")
def _matmul(ctx, node, args):
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    if ctx.dtype(a) == "float16":  # accumulate in float32, as the other engines do
        return [op.astype(op.matmul(a, b, out_dtype="float32"), "float16")]
    return [op.matmul(a, b)]


@rule("Gemm")
def _gemm(ctx, node, args):
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    if node.attr("transA", 0):
        a = op.permute_dims(a)
    if node.attr("transB", 0):
        b = op.permute_dims(b)
    y = op.matmul(a, b)
    if node.attr("alpha", 1.0) != 1.0:
        y = op.multiply(y, ctx.scalar(node.attr("alpha"), y))
    if len(args) > 2 and args[2] is not None:
        c = ctx.expr(args[2])
        if node.attr("beta", 1.0) != 1.0:
            c = op.multiply(c, ctx.scalar(node.attr("beta"), c))
        y = op.add(y, c)
    return [y]


def _pads(node, x_dims, kernel, strides, dilations):
    return flat_pads(window(node, x_dims[2:], kernel)[1])


@rule("Conv")
def _conv(ctx, node, args):
    x, w = ctx.expr(args[0]), ctx.expr(args[1])
    wdims = ctx.shape(w)
    kernel = list(node.attr("kernel_shape") or wdims[2:])
    n = len(kernel)
    if n not in (1, 2, 3):
        raise Refused(f"Conv with {n} spatial dims")
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    pads = _pads(node, ctx.shape(x), kernel, strides, dilations)
    return [_convolve(ctx, x, w, args, strides, pads, dilations, node.attr("group", 1))]


@rule("ConvTranspose")
def _conv_transpose(ctx, node, args):
    """As on every backend (:func:`irforge.ops.geometry.conv_transpose`): a stride-1 Conv over the
    input dilated by the strides (zeros between its elements), padded, with the kernel flipped."""
    op = _op()
    x, w = ctx.expr(args[0]), ctx.expr(args[1])
    dims, wdims = ctx.shape(x), ctx.shape(w)
    n = len(dims) - 2
    kernel = list(node.attr("kernel_shape") or wdims[2:])
    strides, dilations, pads = conv_transpose(node, dims[2:], kernel)
    for i, s in enumerate(strides):
        if s > 1:  # s - 1 zeros after each element, none after the last
            a = 2 + i
            size = ctx.shape(x)[a]
            x = op.expand_dims(x, a + 1)
            width = [0] * (2 * (len(dims) + 1))
            width[2 * (a + 1) + 1] = s - 1
            x = op.nn.pad(x, width)
            shape = ctx.shape(x)
            x = op.reshape(x, [*shape[:a], size * s, *shape[a + 2 :]])
            x = op.strided_slice(x, [a], [0], [(size - 1) * s + 1], assume_inbound=True)
    if any(lo < 0 or hi < 0 for lo, hi in pads):  # negative pads crop
        shape = ctx.shape(x)
        begin = [max(-lo, 0) for lo, _ in pads]
        end = [shape[2 + i] - max(-hi, 0) for i, (_, hi) in enumerate(pads)]
        x = op.strided_slice(x, list(range(2, 2 + n)), begin, end, assume_inbound=True)
    width = [0, 0, 0, 0] + [v for lo, hi in pads for v in (max(lo, 0), max(hi, 0))]
    if any(width):
        x = op.nn.pad(x, width)
    group = node.attr("group", 1)
    cin, cout_g = wdims[0], wdims[1]
    wk = op.reshape(w, [group, cin // group, cout_g, *wdims[2:]])
    wk = op.permute_dims(wk, [0, 2, 1, *range(3, 3 + n)])
    wk = op.reshape(wk, [group * cout_g, cin // group, *wdims[2:]])
    for a in range(2, 2 + n):
        wk = op.flip(wk, a)
    return [_convolve(ctx, x, wk, args, [1] * n, [0] * (2 * n), dilations, group)]


def _convolve(ctx, x, w, args, strides, pads, dilations, group):
    """A 1-, 2- or 3-D NC* convolution of ``x`` by ``w`` plus the optional bias ``args[2]``;
    float16 accumulates in float32, as the other engines do."""
    op = _op()
    n = len(strides)
    conv = {1: op.nn.conv1d, 2: op.nn.conv2d, 3: op.nn.conv3d}[n]
    layouts = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}[n]
    half = ctx.dtype(x) == "float16"
    y = conv(x, w, strides=strides, padding=pads, dilation=dilations, groups=group,
             data_layout=layouts[0], kernel_layout=layouts[1], out_dtype="float32" if half else None)  # fmt: skip
    if half:
        y = op.astype(y, "float16")
    if len(args) > 2 and args[2] is not None:
        y = op.add(y, op.reshape(ctx.expr(args[2]), [1, -1] + [1] * n))
    return y


@rule("MaxPool", "AveragePool")
def _pool(ctx, node, args):
    op = _op()
    x = ctx.expr(args[0])
    kernel = list(node.attr("kernel_shape"))
    n = len(kernel)
    if n not in (1, 2, 3):
        raise Refused(f"{node.op_type} over {n} spatial dims")
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        raise Refused("MaxPool's Indices output")
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    pads = _pads(node, ctx.shape(x), kernel, strides, dilations)
    ceil = bool(node.attr("ceil_mode", 0))
    layout = {1: "NCW", 2: "NCHW", 3: "NCDHW"}[n]
    if node.op_type == "MaxPool":
        pool = {1: op.nn.max_pool1d, 2: op.nn.max_pool2d, 3: op.nn.max_pool3d}[n]
        return [pool(x, kernel, strides, pads, dilations, ceil_mode=ceil, layout=layout)]
    pool = {1: op.nn.avg_pool1d, 2: op.nn.avg_pool2d, 3: op.nn.avg_pool3d}[n]
    if ceil:
        return [_ceil_average_pool(ctx, node, x, pool, kernel, strides, dilations, layout)]
    return [pool(x, kernel, strides, pads, dilations, ceil_mode=False, layout=layout,
                 count_include_pad=bool(node.attr("count_include_pad", 0)))]  # fmt: skip


def _ceil_average_pool(ctx, node, x, pool, kernel, strides, dilations, layout):
    """An AveragePool with ``ceil_mode``: the input padded with zeros by the declared pads and the
    last window's overhang, summed over full windows, divided by ONNX's count (which leaves the
    overhang out, and the declared pads too unless ``count_include_pad``), known up front."""
    op = _op()
    spatial = ctx.shape(x)[2:]
    declared = window(node, spatial, kernel)[1]
    pads = ceil_pads(spatial, declared, kernel, strides, dilations)
    padded = op.nn.pad(x, [0, 0, 0, 0] + [p for pair in pads for p in pair], "constant", 0.0)
    mean = pool(padded, kernel, strides, [0] * (2 * len(kernel)), dilations, layout=layout, count_include_pad=True)
    counts = pool_counts(spatial, declared, pads, kernel, strides, dilations, bool(node.attr("count_include_pad", 0)))
    total = op.multiply(mean, _s(ctx, int(np.prod(kernel)), mean))
    return op.divide(total, ctx.expr(counts.astype(ctx.dtype(x))))


@rule("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx, node, args):
    x = ctx.expr(args[0])
    axes = list(range(2, len(ctx.shape(x))))
    f = _op().mean if node.op_type == "GlobalAveragePool" else _op().max
    return [f(x, axes, True)]


def supported() -> set[str]:
    return set(RULES) | {"Constant"}


def describe(node: Node) -> str:
    return node.op_type


_GRID_METHODS = {"linear": "bilinear", "bilinear": "bilinear", "nearest": "nearest", "cubic": "bicubic",
                 "bicubic": "bicubic"}  # fmt: skip


@rule("GridSample")
def _grid_sample(ctx, node, args):
    """ONNX's grid is ``[N, *out, rank]`` (x first); TVM's ``[N, rank, *out]``."""
    op = _op()
    x, grid = ctx.expr(args[0]), ctx.expr(args[1])
    n = len(ctx.shape(x)) - 2
    mode = node.attr("mode", "linear")
    if n not in (2, 3) or mode not in _GRID_METHODS or (n == 3 and _GRID_METHODS[mode] == "bicubic"):
        raise Refused(f"GridSample over {n} spatial dims with mode {mode!r}")
    grid = op.permute_dims(grid, [0, n + 1, *range(1, n + 1)])
    return [op.image.grid_sample(x, grid, _GRID_METHODS[mode], "NCHW" if n == 2 else "NCDHW",
                                 node.attr("padding_mode", "zeros"), bool(node.attr("align_corners", 0)))]  # fmt: skip
