"""Windowed reductions (jax's ``lax.windowed_reductions``): reduce_window and the pooling
gradients select_and_scatter_add / select_and_gather_add."""

from __future__ import annotations

import math

import numpy as np

from ....core_ir.dtypes import is_floating
from ....core_ir.value import Value
from ...common import NotMapped
from .common import _i64, prim
from .convolution import _dilate
from .reductions import _reduction_operands, _reduction_results


@prim("reduce_window")
def _reduce_window_generic(cx, *args, jaxpr, consts=(), window_dimensions, window_strides, padding, base_dilation,
                           window_dilation, **_):  # fmt: skip
    """Each output cell combines its window's elements, one strided slice per window offset, with
    the initial value (also the padding)."""
    if consts:
        raise NotMapped("reduce_window with constants in its computation")
    if any(d != 1 for d in base_dilation):
        raise NotMapped("reduce_window with base dilation")
    results = []
    for dtype, op, _, x, init in _reduction_operands(cx, args, jaxpr):
        pieces, _, _ = _window_pieces(cx, x, init, window_dimensions, window_strides, padding, window_dilation)
        acc = init
        for _, piece in pieces:
            acc = cx.emit(op, acc, piece)
        results.append((dtype, acc))
    return _reduction_results(cx, results)


def _window(cx, x, op, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    if any(d != 1 for d in base_dilation):
        raise NotMapped("reduce_window with base dilation")
    rank = len(window_dimensions)
    spatial = [i for i in range(rank) if window_dimensions[i] != 1 or window_strides[i] != 1
               or tuple(padding[i]) != (0, 0) or window_dilation[i] != 1]  # fmt: skip
    other = [i for i in range(rank) if i not in spatial]
    if not spatial or len(other) > 2:
        raise NotMapped("reduce_window whose window spans no axis or more than two batch/feature axes")
    perm = other + spatial
    y = cx.emit("Transpose", x, perm=perm) if perm != list(range(rank)) else x
    added = list(range(2 - len(other)))  # pooling wants [N, C, spatial...]
    if added:
        y = cx.emit("Unsqueeze", y, cx.const(_i64(added)))
    attrs = {"kernel_shape": [window_dimensions[i] for i in spatial], "strides": [window_strides[i] for i in spatial],
             "pads": [padding[i][0] for i in spatial] + [padding[i][1] for i in spatial]}  # fmt: skip
    if op == "MaxPool":
        attrs["dilations"] = [window_dilation[i] for i in spatial]
        y = cx.emit("MaxPool", y, **attrs)
    else:
        if any(window_dilation[i] != 1 for i in spatial):
            raise NotMapped("a summing reduce_window with window dilation")
        y = cx.emit("AveragePool", y, count_include_pad=1, **attrs)
        size = int(np.prod(attrs["kernel_shape"]))
        y = cx.emit("Mul", y, cx.value(size, cx.dtype(x)))
    if added:
        y = cx.emit("Squeeze", y, cx.const(_i64(added)))
    inverse = [perm.index(i) for i in range(rank)]
    if inverse == list(range(rank)):
        return cx.typed("Identity", y)
    return cx.typed("Transpose", y, perm=inverse)


@prim("reduce_window_max")
def _reduce_window_max(cx, x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation, **_):
    return _window(cx, cx.value(x), "MaxPool", window_dimensions, window_strides, padding, base_dilation,
                   window_dilation)  # fmt: skip


@prim("reduce_window_min")
def _reduce_window_min(cx, x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation, **_):
    """The max of the negated window, negated (so a padded cell counts as +inf, lax's identity)."""
    x = cx.value(x)
    if not is_floating(cx.dtype(x)):
        raise NotMapped("an integer min reduce_window")
    y = _window(cx, cx.emit("Neg", x), "MaxPool", window_dimensions, window_strides, padding, base_dilation,
                window_dilation)  # fmt: skip
    return cx.typed("Neg", y)


def _window_pieces(cx, x: Value, fill, window_dimensions, window_strides, padding, window_dilation):
    """``x`` padded with ``fill`` (a Value), then for each window offset (row-major) the strided
    slice of the elements at that offset in every window; also the padded shape and the
    windows' count per axis."""
    shape = cx.shape(x)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("window ops over symbolic sizes")
    if math.prod(window_dimensions) > 256:
        raise NotMapped("window ops over windows of more than 256 elements")
    pads = [lo for lo, _ in padding] + [hi for _, hi in padding]
    if any(p < 0 for p in pads):
        raise NotMapped("window ops with negative padding")
    if any(pads):
        x = cx.emit("Pad", x, cx.const(_i64(pads)), fill, mode="constant")
    padded = [d + lo + hi for d, (lo, hi) in zip(shape, padding, strict=True)]
    counts = [max((p - (w - 1) * dl - 1) // st + 1, 0)
              for p, w, dl, st in zip(padded, window_dimensions, window_dilation, window_strides, strict=True)]
    axes, steps = cx.const(_i64(range(len(shape)))), cx.const(_i64(window_strides))
    pieces = []
    for offset in np.ndindex(*window_dimensions):
        starts = [o * dl for o, dl in zip(offset, window_dilation, strict=True)]
        ends = [st + (c - 1) * step + 1 for st, c, step in zip(starts, counts, window_strides, strict=True)]
        pieces.append((starts, cx.emit("Slice", x, cx.const(_i64(starts)), cx.const(_i64(ends)), axes, steps)))
    return pieces, padded, counts


def _selection_init(cx, select_prim, dtype) -> tuple[str, Value]:
    """The comparison that replaces the selected element (strict, so the first of equals stays, as
    XLA's ``ge``/``le`` selection keeps it) and the padding that is never selected."""
    name = getattr(select_prim, "name", str(select_prim))
    if name not in ("ge", "le") or not is_floating(dtype):
        raise NotMapped(f"window selection by {name} of {dtype.name}")
    return ("Greater", cx.value(-np.inf, dtype)) if name == "ge" else ("Less", cx.value(np.inf, dtype))


@prim("select_and_gather_add")
def _select_and_gather_add(cx, tangents, operand, *, select_prim, window_dimensions, window_strides, padding,
                           base_dilation, window_dilation, **_):  # fmt: skip
    """Per window, the tangent at the operand's selected (max for ``ge``, min for ``le``) element."""
    if any(d != 1 for d in base_dilation):
        raise NotMapped("select_and_gather_add with base dilation")
    t, x = cx.value(tangents), cx.value(operand)
    better, never = _selection_init(cx, select_prim, cx.dtype(x))
    values, _, _ = _window_pieces(cx, x, never, window_dimensions, window_strides, padding, window_dilation)
    tans, _, _ = _window_pieces(cx, t, cx.value(0, cx.dtype(t)), window_dimensions, window_strides, padding,
                                window_dilation)  # fmt: skip
    best, chosen = values[0][1], tans[0][1]
    for (_, v), (_, tv) in zip(values[1:], tans[1:], strict=True):
        take = cx.emit(better, v, best)
        best, chosen = cx.emit("Where", take, v, best), cx.emit("Where", take, tv, chosen)
    return cx.typed("Identity", chosen)


@prim("select_and_scatter_add")
def _select_and_scatter_add(cx, source, operand, *, select_prim, window_dimensions, window_strides, padding, **_):
    """Each window's source value added at the operand's selected element: the winning offset per
    window, then per offset the source values placed back at their strided positions."""
    src, x = cx.value(source), cx.value(operand)
    shape = cx.shape(x)
    rank = len(shape)
    better, never = _selection_init(cx, select_prim, cx.dtype(x))
    dilation = [1] * rank
    pieces, padded, counts = _window_pieces(cx, x, never, window_dimensions, window_strides, padding, dilation)
    best, winner = pieces[0][1], cx.const(np.asarray(0, np.int64))
    for k, (_, v) in enumerate(pieces[1:], start=1):
        take = cx.emit(better, v, best)
        best = cx.emit("Where", take, v, best)
        winner = cx.emit("Where", take, cx.const(np.asarray(k, np.int64)), winner)
    zero = cx.value(0, cx.dtype(src))
    total = None
    for k, (starts, _) in enumerate(pieces):
        part = cx.emit("Where", cx.emit("Equal", winner, cx.const(np.asarray(k, np.int64))), src, zero)
        part_shape = list(counts)
        for axis, step in enumerate(window_strides):  # back to the padded grid: strided, then shifted
            if step > 1:
                part, part_shape = _dilate(cx, part, part_shape, axis, step)
        pads = list(starts) + [p - st - n for p, st, n in zip(padded, starts, part_shape, strict=True)]
        if any(pads):
            part = cx.emit("Pad", part, cx.const(_i64(pads)), zero, mode="constant")
        total = part if total is None else cx.emit("Add", total, part)
    lo = [p[0] for p in padding]
    total = cx.emit("Slice", total, cx.const(_i64(lo)), cx.const(_i64([lo[i] + shape[i] for i in range(rank)])),
                    cx.const(_i64(range(rank))))  # fmt: skip
    return cx.typed("Identity", total)


@prim("reduce_window_sum")
def _reduce_window_sum(cx, x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation, **_):
    x = cx.value(x)
    if not is_floating(cx.dtype(x)):
        raise NotMapped("an integer summing reduce_window")
    return _window(cx, x, "Sum", window_dimensions, window_strides, padding, base_dilation, window_dilation)
