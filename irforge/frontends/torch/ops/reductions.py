"""Reductions, scans, sorting and histograms."""

from __future__ import annotations

import math

import numpy as np

from ....core_ir.dtypes import DataType, is_floating, to_numpy
from ....core_ir.types import TensorType
from ....core_ir.value import Value
from ...common import NotMapped
from ...lib import special
from .common import _axis, _dim_size, aten
from .elementwise import _as_bool, _promoted
from .indexing import _slice0
from .linalg import _outputs
from .shapes import _flat

_HISTC_LIMIT = 1 << 24


"""Most element-bin comparisons ``histc`` may build (its counts are a comparison per bin)."""


@aten("histc.default")
def _histc(cx, x, bins=100, min=0, max=0):  # torch's argument names
    """Counts over ``bins`` equal bins of [min, max] (the data's range when they are equal), with
    torch's bin arithmetic: ``trunc((x - min) * bins / (max - min))``, the right edge in the last
    bin; elements outside the range and NaN are not counted."""
    x = cx.tensor(x, cx.dtype(x))
    dt, shape = cx.dtype(x), cx.shape(x)
    if not is_floating(dt) or not all(isinstance(d, int) for d in shape) or math.prod(shape) * bins > _HISTC_LIMIT:
        raise NotMapped("histc of a non-float, symbolic or very large input")
    np_dt = to_numpy(dt)
    flat = _flat(cx, x)
    if min == max:  # ATen takes the data's range then (the docs say: when both are 0)
        lo, hi = cx.emit("ReduceMin", flat, keepdims=0), cx.emit("ReduceMax", flat, keepdims=0)
        same = cx.emit("Equal", lo, hi)
        one = cx.const(np.asarray(1, np_dt))
        lo = cx.emit("Where", same, cx.emit("Sub", lo, one), lo)
        hi = cx.emit("Where", same, cx.emit("Add", hi, one), hi)
    else:
        lo, hi = cx.const(np.asarray(min, np_dt)), cx.const(np.asarray(max, np_dt))
    inside = cx.emit("And", cx.emit("GreaterOrEqual", flat, lo), cx.emit("LessOrEqual", flat, hi))
    scaled = cx.emit("Div", cx.emit("Mul", cx.emit("Sub", flat, lo), cx.const(np.asarray(bins, np_dt))),
                     cx.emit("Sub", hi, lo))  # fmt: skip
    safe = cx.emit("Where", inside, scaled, cx.const(np.asarray(0, np_dt)))
    position = cx.emit("Min", cx.emit("Cast", safe, to=int(DataType.INT64)), cx.const(np.asarray(bins - 1, np.int64)))
    position = cx.emit("Where", inside, position, cx.const(np.asarray(-1, np.int64)))
    hits = cx.emit("Equal", cx.emit("Unsqueeze", position, cx.const(np.asarray([1], np.int64))),
                   cx.const(np.arange(bins, dtype=np.int64).reshape(1, bins)))  # fmt: skip
    counts = cx.emit("ReduceSum", cx.emit("Cast", hits, to=int(DataType.INT64)), cx.const(np.asarray([0], np.int64)),
                     keepdims=0)  # fmt: skip
    return cx.emit_typed("Cast", counts, to=int(dt))


@aten("histogram.bin_ct")
def _histogram(cx, x, bins=100, *, range=None, weight=None, density=False):  # torch's argument names
    """Counts (or summed weights) over ``bins`` bins whose edges are ``torch.linspace`` of the
    range (the data's, widened by 0.5 each way when it is one value): each element goes to the
    last edge at or below it, the right edge into the last bin, elements outside (and NaN) nowhere;
    ``density`` divides by the total and the bin widths."""
    x = cx.tensor(x, cx.dtype(x))
    flat = _histogram_input(cx, x, 1, bins + 1)
    edges = _histogram_edges(cx, flat, bins, range, cx.dtype(x))
    position, inside = _histogram_bins(cx, flat, edges, bins)
    hist = _histogram_counts(cx, position, inside, weight, bins, cx.dtype(x))
    if density:
        hist = cx.emit("Div", hist, cx.emit("Mul", cx.emit("ReduceSum", hist, keepdims=0), _widths(cx, edges, bins)))
    return _outputs(cx, hist, edges)


@aten("_histogramdd_bin_edges.default", "_histogramdd_from_bin_cts.default")
def _histogramdd(cx, x, bins, *, range=None, weight=None, density=False):
    """``histogramdd`` of points (the last axis holds their coordinates): the edges of each
    coordinate as ``histogram`` makes them, and the counts (or summed weights) of the points
    inside every edge range, over the grid of bins; ``density`` divides by the total and each
    cell's volume."""
    x = cx.tensor(x, cx.dtype(x))
    shape, dt = cx.shape(x), cx.dtype(x)
    dims = shape[-1] if shape and isinstance(shape[-1], int) else None
    if dims is None or len(bins) != dims:
        raise NotMapped("histogramdd with a symbolic coordinate count")
    points = _histogram_input(cx, x, dims, max(bins) + 1)
    all_edges, position, inside = [], None, None
    for d, n in enumerate(bins):
        column = cx.emit("Gather", points, cx.const(np.asarray(d, np.int64)), axis=1)
        edges = _histogram_edges(cx, column, n, None if range is None else range[2 * d:2 * d + 2], dt)
        pos, ok = _histogram_bins(cx, column, edges, n)
        all_edges.append(edges)
        stride = cx.const(np.asarray(math.prod(bins[d + 1:]), np.int64))
        offset = cx.emit("Mul", pos, stride)
        position = offset if position is None else cx.emit("Add", position, offset)
        inside = ok if inside is None else cx.emit("And", inside, ok)
    total = math.prod(bins)
    if "bin_edges" in str(cx.fx.target):
        return _outputs(cx, *all_edges)
    hist = _histogram_counts(cx, position, inside, weight, total, dt)
    if density:
        volume = None
        for d, (edges, n) in enumerate(zip(all_edges, bins, strict=True)):
            view = np.where(np.arange(len(bins)) == d, n, 1).astype(np.int64)
            width = cx.emit("Reshape", _widths(cx, edges, n), cx.const(view))
            volume = width if volume is None else cx.emit("Mul", volume, width)
        hist = cx.emit("Reshape", hist, cx.const(np.asarray(bins, np.int64)))
        hist = cx.emit("Div", hist, cx.emit("Mul", cx.emit("ReduceSum", hist, keepdims=0), volume))
    return cx.emit_typed("Reshape", hist, cx.const(np.asarray(bins, np.int64)))


def _histogram_input(cx, x: Value, columns: int, edges: int) -> Value:
    """``x`` as rows of ``columns`` coordinates, refused where the comparisons would not fit."""
    dt, shape = cx.dtype(x), cx.shape(x)
    if not is_floating(dt) or not all(isinstance(d, int) for d in shape) or math.prod(shape) == 0 or (
            math.prod(shape) * edges > _HISTC_LIMIT):  # fmt: skip
        raise NotMapped("histogram of a non-float, empty, symbolic or very large input")
    return cx.emit("Reshape", x, cx.const(np.asarray([-1, columns] if columns > 1 else [-1], np.int64)))


def _histogram_edges(cx, flat: Value, bins: int, bounds, dt: DataType) -> Value:
    """``torch.linspace`` of the range (given, or the data's widened by 0.5 each way when it is
    one value) in ``bins + 1`` steps: start + step·i for the first half, end - step·(steps-1-i)
    for the rest."""
    np_dt = to_numpy(dt)
    if bounds is not None:
        lo, hi = (cx.const(np.asarray(v, np.float64)) for v in bounds)
    else:
        lo = cx.emit("Cast", cx.emit("ReduceMin", flat, keepdims=0), to=int(DataType.DOUBLE))
        hi = cx.emit("Cast", cx.emit("ReduceMax", flat, keepdims=0), to=int(DataType.DOUBLE))
    same = cx.emit("Equal", lo, hi)
    half = cx.const(np.asarray(0.5, np.float64))
    lo = cx.emit("Cast", cx.emit("Where", same, cx.emit("Sub", lo, half), lo), to=int(dt))
    hi = cx.emit("Cast", cx.emit("Where", same, cx.emit("Add", hi, half), hi), to=int(dt))
    steps = bins + 1
    step = cx.emit("Div", cx.emit("Sub", hi, lo), cx.const(np.asarray(bins, np_dt)))
    i = np.arange(steps)
    first = cx.emit("Add", lo, cx.emit("Mul", step, cx.const(i.astype(np_dt))))
    second = cx.emit("Sub", hi, cx.emit("Mul", step, cx.const((steps - 1 - i).astype(np_dt))))
    return cx.emit("Where", cx.const(i < steps // 2), first, second)


def _histogram_bins(cx, flat: Value, edges: Value, bins: int) -> tuple[Value, Value]:
    """Each element's bin (the last edge at or below it, the right edge in the last bin) and
    whether it lies within the edges at all (NaN does not)."""
    zero, one = cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([1], np.int64))
    lo = cx.emit("Gather", edges, cx.const(np.asarray(0, np.int64)), axis=0)
    hi = cx.emit("Gather", edges, cx.const(np.asarray(bins, np.int64)), axis=0)
    inside = cx.emit("And", cx.emit("GreaterOrEqual", flat, lo), cx.emit("LessOrEqual", flat, hi))
    at_or_below = cx.emit("LessOrEqual", cx.emit("Unsqueeze", edges, zero), cx.emit("Unsqueeze", flat, one))
    position = cx.emit("ReduceSum", cx.cast(at_or_below, DataType.INT64), one, keepdims=0)
    position = cx.emit("Min", cx.emit("Sub", position, cx.const(np.asarray(1, np.int64))),
                       cx.const(np.asarray(bins - 1, np.int64)))  # fmt: skip
    return cx.emit("Max", position, cx.const(np.asarray(0, np.int64))), inside


def _histogram_counts(cx, position: Value, inside: Value, weight, bins: int, dt: DataType) -> Value:
    """Ones (or the weights) summed per bin; elements outside go to a spare bin, dropped."""
    np_dt = to_numpy(dt)
    position = cx.emit("Where", inside, position, cx.const(np.asarray(bins, np.int64)))
    amount = cx.emit("Expand", cx.const(np.asarray(1, np_dt)), cx.emit("Shape", position))
    if weight is not None:
        amount = _flat(cx, cx.tensor(weight, dt))
    where = cx.emit("Unsqueeze", position, cx.const(np.asarray([1], np.int64)))
    hist = cx.emit("ScatterND", cx.const(np.zeros(bins + 1, np_dt)), where, amount, reduction="add")
    return cx.emit("Slice", hist, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([bins], np.int64)))


def _widths(cx, edges: Value, bins: int) -> Value:
    return cx.emit("Sub", cx.emit("Slice", edges, cx.const(np.asarray([1], np.int64)),
                                  cx.const(np.asarray([bins + 1], np.int64))),
                   cx.emit("Slice", edges, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([bins], np.int64))))


def _axes(cx, x, dims) -> list[int] | None:
    rank = cx.rank(x)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return None
    dims = [dims] if isinstance(dims, int) else dims
    return sorted(_axis(d, rank) for d in dims) if rank else None


def _reduce(cx, onnx_op: str, x, dims, keepdim: bool, dtype=None) -> Value:
    """``onnx_op`` over ``dims``; with ``dtype`` it computes in that type, untyped for the caller to cast."""
    x = cx.tensor(x, cx.out_dtype if dtype is None else dtype)
    axes = _axes(cx, x, dims)
    emit = cx.emit if dtype is not None else cx.emit_typed
    if cx.rank(x) == 0:
        return emit("Identity", x)
    inputs = [x] if axes is None else [x, cx.const(np.asarray(axes, np.int64))]
    return emit(onnx_op, *inputs, keepdims=int(bool(keepdim)))


@aten("sum.dim_IntList", "sum.default")
def _sum(cx, x, dims=None, keepdim=False, *, dtype=None):
    return _reduce(cx, "ReduceSum", x, dims, keepdim)


@aten("mean.dim", "mean.default")
def _mean(cx, x, dims=None, keepdim=False, *, dtype=None):
    return _reduce(cx, "ReduceMean", x, dims, keepdim)


@aten("prod.dim_int", "prod.default")
def _prod(cx, x, dim=None, keepdim=False, *, dtype=None):
    return _reduce(cx, "ReduceProd", x, dim, keepdim)


@aten("amax.default", "max.default")
def _amax(cx, x, dims=None, keepdim=False):
    return _reduce_bool_aware(cx, "ReduceMax", x, dims, keepdim)


@aten("amin.default", "min.default")
def _amin(cx, x, dims=None, keepdim=False):
    return _reduce_bool_aware(cx, "ReduceMin", x, dims, keepdim)


def _reduce_bool_aware(cx, onnx_op, x, dims, keepdim):
    if cx.out_dtype == DataType.BOOL:
        y = _reduce(cx, onnx_op, cx.cast(x, DataType.INT32), dims, keepdim, dtype=DataType.INT32)
        return cx.emit_typed("Cast", y, to=int(DataType.BOOL))
    return _reduce(cx, onnx_op, x, dims, keepdim)


@aten("any.dim", "any.dims", "any.default", "all.dim", "all.dims", "all.default")
def _any_all(cx, x, dims=None, keepdim=False):
    op = "ReduceMax" if "any" in str(cx.fx.target) else "ReduceMin"
    flags = cx.cast(_as_bool(cx, x), DataType.INT32)
    y = _reduce(cx, op, flags, dims, keepdim, dtype=DataType.INT32)
    return cx.emit_typed("Cast", y, to=int(DataType.BOOL))


@aten("var.correction", "var.dim")
def _var(cx, x, dims=None, *, correction=None, keepdim=False, unbiased=None):
    return _variance(cx, x, dims, correction, keepdim)


def _variance(cx, x, dims, correction, keepdim, out=True):
    x = cx.tensor(x)
    axes = _axes(cx, x, dims)
    axes_v = [] if axes is None else [cx.const(np.asarray(axes, np.int64))]
    mean = cx.emit("ReduceMean", x, *axes_v, keepdims=1)
    d = cx.emit("Sub", x, mean)
    ss = cx.emit("ReduceSum", cx.emit("Mul", d, d), *axes_v, keepdims=int(bool(keepdim)))
    n = cx.emit("Div", cx.cast(cx.emit("Size", x), cx.out_dtype), cx.cast(cx.emit("Size", mean), cx.out_dtype))
    c = 1 if correction is None else correction
    denom = cx.emit("Max", cx.emit("Sub", n, cx.tensor(c)), cx.tensor(0))
    return (cx.emit_typed if out else cx.emit)("Div", ss, denom)


@aten("argmax.default", "argmin.default")
def _argmax(cx, x, dim=None, keepdim=False):
    op = "ArgMax" if "argmax" in str(cx.fx.target) else "ArgMin"
    x = _orderable(cx, x)
    if dim is None:
        flat = cx.emit("Reshape", x, cx.const(np.asarray([-1], np.int64)))
        y = cx.emit(op, flat, axis=0, keepdims=0)
        if keepdim:
            return cx.emit_typed("Reshape", y, cx.const(np.ones(cx.rank(x), np.int64)))
        return cx.emit_typed("Identity", y)
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", cx.const(np.asarray(0)))
    return cx.emit_typed(op, x, axis=_axis(dim, cx.rank(x)), keepdims=int(bool(keepdim)))


def _orderable(cx, x):
    return cx.cast(x, DataType.INT32) if cx.dtype(x) == DataType.BOOL else x


@aten("max.dim", "min.dim")
def _max_dim(cx, x, dim, keepdim=False):
    is_max = str(cx.fx.target).startswith("aten.max")
    x = _orderable(cx, x)
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, cx.rank(x))
    n = cx.node_typed("TopK", [x, cx.const(np.asarray([1], np.int64))], {"axis": axis, "largest": int(is_max)},
                      outputs=2)  # fmt: skip
    values, indices = n.outputs
    values.type = indices.type = None
    if not keepdim:
        ax = cx.const(np.asarray([axis], np.int64))
        values, indices = cx.emit("Squeeze", values, ax), cx.emit("Squeeze", indices, ax)
    if cx.out_dtype != cx.dtype(x):
        values = cx.cast(values, cx.out_dtype)
    return values, indices


@aten("cumsum.default")
def _cumsum(cx, x, dim, *, dtype=None):
    x = cx.tensor(x)
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("CumSum", x, cx.const(np.asarray(_axis(dim, cx.rank(x)), np.int64)))


@aten("sort.default", "sort.stable")
def _sort(cx, x, *args, stable=None, dim=-1, descending=False):
    if args:  # sort.default(x, dim, descending)
        dim = args[0]
        if len(args) > 1:
            descending = args[1]
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    if not is_floating(cx.dtype(x)) and cx.dtype(x) != DataType.INT64:
        raise NotMapped(f"sort of {cx.dtype(x).name}")
    axis = _axis(dim, cx.rank(x))
    k = _dim_size(cx, x, axis)
    n = cx.node_typed("TopK", [x, k], {"axis": axis, "largest": int(bool(descending)), "sorted": 1}, outputs=2)
    return tuple(n.outputs)


@aten("topk.default")
def _topk(cx, x, k, dim=-1, largest=True, sorted=True):
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, cx.rank(x))
    n = cx.node_typed("TopK", [x, cx.int64s([k])], {"axis": axis, "largest": int(bool(largest)), "sorted": 1},
                      outputs=2)  # fmt: skip
    return tuple(n.outputs)


@aten("kthvalue.default")
def _kthvalue(cx, x, k, dim=-1, keepdim=False):
    """The k-th smallest along ``dim``: the last of the k smallest."""
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, cx.rank(x))
    smallest = cx.node("TopK", [x, cx.int64s([k])], {"axis": axis, "largest": 0, "sorted": 1}, outputs=2)
    last = cx.int64s([k - 1]) if isinstance(k, int) else cx.emit("Sub", cx.int64s([k]), cx.int64s([1]))
    outs = []
    for v in smallest.outputs:
        picked = cx.emit("Gather", v, last, axis=axis)
        outs.append(picked if keepdim else cx.emit("Squeeze", picked, cx.const(np.asarray([axis], np.int64))))
    return _outputs(cx, *outs)


def _count_below(cx, boundaries: Value, x: Value, right: bool, out_int32: bool) -> Value:
    """For each element of ``x``: how many of ``boundaries`` (sorted along their last axis) lie
    below it (``right``: at or below it), by comparing it with every boundary.  The comparison is
    torch's binary search's, ``not (b >= x)``, so a NaN ``x`` counts every boundary as below."""
    dt = _promoted(cx, boundaries, x)
    b = cx.cast(boundaries, dt)  # [n] broadcasts as it is; [..., n] becomes [..., 1, n]
    if cx.rank(boundaries) > 1:
        b = cx.emit("Unsqueeze", b, cx.const(np.asarray([-2], np.int64)))
    v = cx.emit("Unsqueeze", cx.cast(x, dt), cx.const(np.asarray([-1], np.int64)))  # [..., k, 1]
    below = cx.emit("Not", cx.emit("Greater" if right else "GreaterOrEqual", b, v))
    count = cx.emit("ReduceSum", cx.emit("Cast", below, to=int(DataType.INT64)), cx.const(np.asarray([-1], np.int64)),
                    keepdims=0)  # fmt: skip
    return cx.emit_typed("Cast", count, to=int(DataType.INT32 if out_int32 else DataType.INT64))


@aten("bucketize.Tensor")
def _bucketize(cx, x, boundaries, *, out_int32=False, right=False):
    if cx.rank(boundaries) != 1:
        raise NotMapped("bucketize with boundaries of rank other than 1")
    return _count_below(cx, boundaries, x, right, out_int32)


@aten("searchsorted.Tensor")
def _searchsorted(cx, sorted_sequence, x, *, out_int32=False, right=False, side=None, sorter=None):
    right = side == "right" if side is not None else right
    rank = cx.rank(sorted_sequence)
    if rank != 1 and rank != cx.rank(x):
        raise NotMapped("searchsorted with a sequence of another rank than the values")
    if sorter is not None:
        t = sorted_sequence.type
        sorted_sequence = cx.emit("GatherElements", sorted_sequence, sorter, axis=rank - 1)
        sorted_sequence.type = t
    return _count_below(cx, sorted_sequence, x, right, out_int32)


@aten("linalg_vector_norm.default")
def _vector_norm(cx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    x = cx.tensor(x)
    axes = _axes(cx, x, dim)
    if cx.rank(x) == 0:
        axes = None
    extra = [] if axes is None else [cx.const(np.asarray(axes, np.int64))]
    keep = int(bool(keepdim))
    a = cx.emit("Abs", x)
    if ord == 2:
        y = cx.emit("Sqrt", cx.emit("ReduceSumSquare", x, *extra, keepdims=keep))
    elif ord == 1:
        y = cx.emit("ReduceSum", a, *extra, keepdims=keep)
    elif ord == math.inf:
        y = cx.emit("ReduceMax", a, *extra, keepdims=keep)
    elif ord == -math.inf:
        y = cx.emit("ReduceMin", a, *extra, keepdims=keep)
    elif ord == 0:
        y = cx.emit("ReduceSum", cx.cast(cx.emit("Not", cx.emit("Equal", x, cx.tensor(0))), cx.out_dtype),
                    *extra, keepdims=keep)  # fmt: skip
    else:
        p = cx.tensor(float(ord))
        y = cx.emit("Pow", cx.emit("ReduceSum", cx.emit("Pow", a, p), *extra, keepdims=keep), cx.tensor(1.0 / ord))
    if cx.rank(x) == 0 and not keepdim:
        y = cx.emit("Reshape", y, cx.const(np.asarray([], np.int64)))
    return cx.emit_typed("Identity", y)


@aten("var_mean.correction", "var_mean.dim")
def _var_mean(cx, x, dims=None, *, correction=None, keepdim=False, unbiased=None):
    if unbiased is not None and correction is None:
        correction = 1 if unbiased else 0
    var = _variance(cx, x, dims, correction, keepdim, out=False)
    x = cx.tensor(x)
    axes = _axes(cx, x, dims)
    mean = cx.emit("ReduceMean", x, *([] if axes is None else [cx.const(np.asarray(axes, np.int64))]),
                   keepdims=int(bool(keepdim)))  # fmt: skip
    t_var, t_mean = (cx.meta_type(v) for v in cx.val)
    var.type, mean.type = t_var, t_mean
    return var, mean


@aten("logcumsumexp.default")
def _logcumsumexp(cx, x, dim):
    x = cx.tensor(x)
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    axis = _axis(dim, cx.rank(x))
    top = cx.emit("ReduceMax", x, cx.const(np.asarray([axis], np.int64)), keepdims=1)
    top = cx.emit("Where", cx.emit("IsInf", top), cx.tensor(0), top)  # all -inf (or +inf): no shift
    s = cx.emit("CumSum", cx.emit("Exp", cx.emit("Sub", x, top)), cx.const(np.asarray(axis, np.int64)))
    return cx.emit_typed("Add", cx.emit("Log", s), top)


_SEGMENT_IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}


@aten("segment_reduce.default")
def _segment_reduce(cx, data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False,
                    initial=None):  # fmt: skip
    """Reductions over consecutive segments of axis 0 given by ``lengths`` or ``offsets`` (data):
    a segment-by-element mask, the reduction over it, and torch's rules: ``initial`` (else the
    reduction's identity) takes part in every segment, a mean divides by the segment's length,
    an empty mean is ``initial`` (else NaN), and a NaN in a max/min segment wins."""
    data = cx.tensor(data, cx.dtype(data))
    dt, shape = cx.dtype(data), cx.shape(data)
    if axis != 0 or indices is not None or reduce not in _SEGMENT_IDENTITY or not isinstance(shape[0], int):
        raise NotMapped(f"segment_reduce {reduce!r} along axis {axis} (axis 0 of a static length is mapped)")
    if lengths is None:
        if offsets is None or cx.rank(offsets) != 1:
            raise NotMapped("segment_reduce without 1-D lengths or offsets")
        offsets = cx.cast(offsets, DataType.INT64)
        lengths = cx.emit("Sub", _slice0(cx, offsets, 1, None), _slice0(cx, offsets, 0, -1))
    elif cx.rank(lengths) != 1:
        raise NotMapped("segment_reduce with lengths per leading index")
    lengths = cx.cast(lengths, DataType.INT64)
    np_dt, rank, n = to_numpy(dt), len(shape), shape[0]
    ends = cx.emit("CumSum", lengths, cx.const(np.asarray(0, np.int64)))
    starts = cx.emit("Sub", ends, lengths)
    column = cx.const(np.asarray([1, *range(2, rank + 1)], np.int64))
    position = cx.const(np.arange(n, dtype=np.int64).reshape([1, n] + [1] * (rank - 1)))
    inside = cx.emit("And", cx.emit("GreaterOrEqual", position, cx.emit("Unsqueeze", starts, column)),
                     cx.emit("Less", position, cx.emit("Unsqueeze", ends, column)))  # [segments, n, 1...]
    rows = cx.emit("Unsqueeze", data, cx.const(np.asarray([0], np.int64)))  # [1, n, ...]
    start = _SEGMENT_IDENTITY[reduce] if initial is None else float(initial)
    one_axis = cx.const(np.asarray([1], np.int64))
    if reduce in ("max", "min"):
        nan = cx.emit("IsNaN", rows)
        fill = cx.const(np.asarray(_SEGMENT_IDENTITY[reduce], np_dt))
        picked = cx.emit("Where", cx.emit("And", inside, cx.emit("Not", nan)), rows, fill)
        out = cx.emit("ReduceMax" if reduce == "max" else "ReduceMin", picked, one_axis, keepdims=0)
        out = cx.emit("Max" if reduce == "max" else "Min", out, cx.const(np.asarray(start, np_dt)))
        any_nan = cx.emit("ReduceMax", cx.emit("Cast", cx.emit("And", inside, nan), to=int(DataType.INT32)), one_axis,
                          keepdims=0)  # fmt: skip
        return cx.emit_typed("Where", cx.cast(any_nan, DataType.BOOL), cx.const(np.asarray(np.nan, np_dt)), out)
    if reduce == "prod":
        picked = cx.emit("Where", inside, rows, cx.const(np.asarray(1, np_dt)))
        product = cx.emit("ReduceProd", picked, one_axis, keepdims=0)
        return cx.emit_typed("Mul", product, cx.const(np.asarray(start, np_dt)))
    total = cx.emit("ReduceSum", cx.emit("Where", inside, rows, cx.const(np.asarray(0, np_dt))), one_axis, keepdims=0)
    total = cx.emit("Add", total, cx.const(np.asarray(start, np_dt)))
    if reduce == "sum":
        return cx.emit_typed("Identity", total)
    count = cx.emit("Reshape", cx.cast(lengths, dt), cx.const(np.asarray([-1] + [1] * (rank - 1), np.int64)))
    mean = cx.emit("Div", total, count)
    if initial is None:
        return cx.emit_typed("Identity", mean)
    empty = cx.emit("Equal", count, cx.const(np.asarray(0, np_dt)))
    return cx.emit_typed("Where", empty, cx.const(np.asarray(start, np_dt)), mean)


@aten("cumprod.default")
def _cumprod(cx, x, dim, *, dtype=None):
    from ...common import associative_scan

    x = cx.tensor(x)
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("Identity", associative_scan(cx, x, _axis(dim, cx.rank(x)), "Mul", 1))


def _median_along(cx, x: Value, axis: int, skip_nan: bool) -> tuple[Value, Value]:
    """The lower median along ``axis`` and its index, both with the axis kept (size 1).  Elements
    are ranked ascending with NaNs last (equal values by position); ``skip_nan`` takes the median
    of the non-NaN ones (NaN where there are none), otherwise any NaN makes the median NaN, at the
    index of the first NaN."""
    shape = cx.shape(x)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("median over a symbolic shape")
    n = shape[axis]
    kept = [1 if d == axis else s for d, s in enumerate(shape)]
    floating = is_floating(cx.dtype(x))
    size = cx.const(np.asarray([n], np.int64))
    key = x
    if floating:
        nan = cx.emit("IsNaN", x)
        key = cx.emit("Where", nan, cx.const(np.asarray(np.inf, to_numpy(cx.dtype(x)))), x)
    order = cx.node("TopK", [key, size], {"axis": axis, "largest": 0, "sorted": 1}, outputs=2).outputs[1]
    if floating:  # NaNs after the +infs; the rest keeps its order (TopK ranks equal keys by position)
        nan_ranked = cx.emit("GatherElements", cx.emit("Cast", nan, to=int(DataType.FLOAT)), order, axis=axis)
        moved = cx.node("TopK", [nan_ranked, size], {"axis": axis, "largest": 0, "sorted": 1}, outputs=2).outputs[1]
        order = cx.emit("GatherElements", order, moved, axis=axis)
    axes = cx.const(np.asarray([axis], np.int64))
    if floating and skip_nan:
        count = cx.emit("ReduceSum", cx.emit("Cast", cx.emit("Not", nan), to=int(DataType.INT64)), axes, keepdims=1)
        one = cx.const(np.asarray(1, np.int64))
        k = cx.emit("Div", cx.emit("Sub", cx.emit("Max", count, one), one), cx.const(np.asarray(2, np.int64)))
    else:
        k = cx.const(np.full(kept, (n - 1) // 2, np.int64))
    index = cx.emit("GatherElements", order, k, axis=axis)
    values = cx.emit("GatherElements", x, index, axis=axis)
    if floating:
        missing = cx.const(np.asarray(np.nan, to_numpy(cx.dtype(x))))
        if skip_nan:
            values = cx.emit("Where", cx.emit("Equal", count, cx.const(np.asarray(0, np.int64))), missing, values)
        else:
            flags = cx.emit("Cast", nan, to=int(DataType.INT32))
            most = cx.emit("ReduceMax", flags, axes, keepdims=1)
            any_nan = cx.emit("Greater", most, cx.const(np.asarray(0, np.int32)))
            values = cx.emit("Where", any_nan, missing, values)
            first_nan = cx.emit("ArgMax", flags, axis=axis, keepdims=1)
            index = cx.emit("Where", any_nan, first_nan, index)
    return values, index


@aten("median.default", "nanmedian.default")
def _median(cx, x):
    skip_nan = "nanmedian" in str(cx.fx.target)
    flat = cx.emit("Reshape", x, cx.const(np.asarray([-1], np.int64)))
    numel = math.prod(cx.shape(x)) if all(isinstance(d, int) for d in cx.shape(x)) else None
    if numel is None:
        raise NotMapped("median over a symbolic shape")
    flat.type = TensorType(cx.dtype(x), (numel,))
    values, _ = _median_along(cx, flat, 0, skip_nan)
    return cx.emit_typed("Reshape", values, cx.const(np.asarray([], np.int64)))


@aten("median.dim", "nanmedian.dim")
def _median_dim(cx, x, dim, keepdim=False):
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, cx.rank(x))
    outs = _median_along(cx, x, axis, "nanmedian" in str(cx.fx.target))
    if not keepdim:
        outs = tuple(cx.emit("Squeeze", o, cx.const(np.asarray([axis], np.int64))) for o in outs)
    return _outputs(cx, *outs)


@aten("hash_tensor.default")
def _hash_tensor(cx, x, dim=(), keepdim=False, mode=0):
    """``mode=0``: every element widened to 64 bits (floats to float64), its bits read as uint64, and
    the whole reduced by XOR, halving the reduced axis each step (ONNX has no XOR reduction)."""
    if mode != 0:
        raise NotMapped(f"hash_tensor mode {mode}")
    rank, dtype = cx.rank(x), cx.dtype(x)
    cx.importer.require_opset(special.BITCAST_OPSET)
    if is_floating(dtype):
        bits = cx.emit("BitCast", cx.cast(x, DataType.DOUBLE), to=int(DataType.UINT64))
    elif dtype in (DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64):
        bits = cx.emit("BitCast", cx.cast(x, DataType.INT64), to=int(DataType.UINT64))
    else:
        bits = cx.cast(x, DataType.UINT64)
    axes = sorted({_axis(d, rank) for d in dim}) if dim else list(range(rank))
    shape = cx.shape(x)
    if not all(isinstance(shape[a], int) for a in axes):
        raise NotMapped("hash_tensor over a symbolic size")
    kept = [a for a in range(rank) if a not in axes]
    length = math.prod(shape[a] for a in axes)
    moved = cx.emit("Transpose", bits, perm=kept + axes) if rank else bits
    flat = cx.emit("Reshape", moved, cx.int64s([*(_dim_size(cx, x, a) for a in kept), length]))
    zero = np.zeros((), np.uint64)
    while length > 1:
        if length % 2:
            flat = cx.emit("Pad", flat, cx.int64s([0] * len(kept) + [0] + [0] * len(kept) + [1]), cx.const(zero))
            length += 1
        half = length // 2
        last = cx.const(np.asarray([-1], np.int64))
        flat = cx.emit("BitwiseXor", cx.emit("Slice", flat, cx.int64s([0]), cx.int64s([half]), last),
                       cx.emit("Slice", flat, cx.int64s([half]), cx.int64s([length]), last))  # fmt: skip
        length = half
    out = cx.emit("Squeeze", flat, cx.const(np.asarray([-1], np.int64)))
    if keepdim:
        out = cx.emit("Unsqueeze", out, cx.const(np.asarray(axes, np.int64)))
    return cx.emit_typed("Identity", out)


_PAIRWISE_LIMIT = 1 << 26


"""Most elements of the pairwise comparisons ``mode`` and ``cummax``/``cummin`` build."""


@aten("mode.default")
def _mode(cx, x, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and the
    last position holding it, as torch's CPU kernel gives them; counted by pairwise comparison."""
    x = cx.tensor(x, cx.dtype(x))
    shape, dt = cx.shape(x), cx.dtype(x)
    if not shape:
        return _outputs(cx, x, cx.const(np.asarray(0, np.int64)))
    axis = _axis(dim, len(shape))
    n = shape[axis]
    if not all(isinstance(d, int) for d in shape) or n * math.prod(shape) > _PAIRWISE_LIMIT:
        raise NotMapped("mode over a symbolic or very long axis")
    np_dt = to_numpy(dt)
    at_i = cx.emit("Unsqueeze", x, cx.const(np.asarray([axis + 1], np.int64)))
    at_j = cx.emit("Unsqueeze", x, cx.const(np.asarray([axis], np.int64)))
    same = cx.emit("Cast", cx.emit("Equal", at_i, at_j), to=int(DataType.INT64))
    counts = cx.emit("ReduceSum", same, cx.const(np.asarray([axis + 1], np.int64)), keepdims=0)
    axes = cx.const(np.asarray([axis], np.int64))
    most = cx.emit("Equal", counts, cx.emit("ReduceMax", counts, axes, keepdims=1))
    top = np.inf if is_floating(dt) else (True if dt == DataType.BOOL else np.iinfo(np_dt).max)
    value = cx.emit("ReduceMin", cx.emit("Where", most, x, cx.const(np.asarray(top, np_dt))), axes, keepdims=1)
    position = cx.const(np.arange(n, dtype=np.int64).reshape([n] + [1] * (len(shape) - axis - 1)))
    held = cx.emit("Where", cx.emit("Equal", x, value), position, cx.const(np.asarray(-1, np.int64)))
    index = cx.emit("ReduceMax", held, axes, keepdims=1)
    if not keepdim:
        value, index = cx.emit("Squeeze", value, axes), cx.emit("Squeeze", index, axes)
    return _outputs(cx, value, index)


@aten("cummax.default", "cummin.default")
def _cummax(cx, x, dim):
    """Running max (min) and the index torch gives it: the last position that holds the running
    value, and from the first NaN on, NaN at the last NaN so far (torch's update rule)."""
    from ...common import associative_scan

    largest = "cummax" in str(cx.fx.target)
    shape, dt = cx.shape(x), cx.dtype(x)
    rank = len(shape)
    if rank == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, rank)
    n = shape[axis]
    if not all(isinstance(d, int) for d in shape) or n * math.prod(shape) > _PAIRWISE_LIMIT:
        raise NotMapped("cummax/cummin over a symbolic or very long axis")
    if dt == DataType.BOOL:
        raise NotMapped("cummax/cummin of bool")
    floating = is_floating(dt)
    np_dt = to_numpy(dt)
    bound = np.inf if floating else (np.iinfo(np_dt).max if not largest else np.iinfo(np_dt).min)
    identity = -bound if floating and largest else bound
    if floating:
        nan = cx.emit("IsNaN", x)
        clean = cx.emit("Where", nan, cx.const(np.asarray(identity, np_dt)), x)
        clean.type = x.type
        flag = cx.emit("Cast", nan, to=int(DataType.FLOAT))
        flag.type = TensorType(DataType.FLOAT, shape)
        seen = cx.emit("Greater", associative_scan(cx, flag, axis, "Max", 0.0), cx.const(np.asarray(0.0, np.float32)))
        running = associative_scan(cx, clean, axis, "Max" if largest else "Min", identity)
        values = cx.emit("Where", seen, cx.const(np.asarray(np.nan, np_dt)), running)
    else:
        values = associative_scan(cx, x, axis, "Max" if largest else "Min", identity)
    # pairs (i along axis, j along a new axis after it): the last j <= i that holds the value at i
    at_i = cx.emit("Unsqueeze", values, cx.const(np.asarray([axis + 1], np.int64)))
    at_j = cx.emit("Unsqueeze", x, cx.const(np.asarray([axis], np.int64)))
    match = cx.emit("Equal", at_j, at_i)
    if floating:
        nan_j = cx.emit("Unsqueeze", nan, cx.const(np.asarray([axis], np.int64)))
        seen_i = cx.emit("Unsqueeze", seen, cx.const(np.asarray([axis + 1], np.int64)))
        match = cx.emit("Or", match, cx.emit("And", nan_j, seen_i))
    around = [1] * axis, [1] * (rank - axis - 1)
    causal = np.tril(np.ones((n, n), bool)).reshape([*around[0], n, n, *around[1]])
    position = np.arange(n, dtype=np.int64).reshape([*around[0], 1, n, *around[1]])
    picked = cx.emit("Where", cx.emit("And", match, cx.const(causal)), cx.const(position),
                     cx.const(np.asarray(-1, np.int64)))  # fmt: skip
    index = cx.emit("ReduceMax", picked, cx.const(np.asarray([axis + 1], np.int64)), keepdims=0)
    return _outputs(cx, values, index)


@aten("dist.default")
def _dist(cx, a, b, p=2):
    from ....core_ir.types import TensorType
    from ...common import broadcast_shapes

    a, b = cx.tensor(a), cx.tensor(b)
    diff = cx.emit("Sub", a, b)
    diff.type = TensorType(cx.out_dtype, broadcast_shapes(cx.shape(a), cx.shape(b)))
    return _vector_norm(cx, diff, p)
