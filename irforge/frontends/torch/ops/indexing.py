"""Indexing: gather, scatter, index_put, boolean masks and data-dependent sizes (nonzero, unique)."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import DataType, is_floating, to_numpy
from ....core_ir.types import TensorType
from ....core_ir.value import Value
from ...common import NotMapped
from .common import INT64_MAX, _axis, aten
from .shapes import _flat


@aten("index.Tensor")
def _index(cx, x, indices):
    rank = cx.rank(x)
    positions = [i for i, t in enumerate(indices) if t is not None]
    for i in positions:
        if cx.dtype(indices[i]) == DataType.BOOL:
            raise NotMapped("indexing with a boolean mask (data-dependent shape)")
    if len(positions) == 1:
        p = positions[0]
        return cx.emit_typed("Gather", x, cx.cast(indices[p], DataType.INT64), axis=p)
    # several index tensors: move the indexed dims to the front, GatherND, move the result back
    idx = [cx.cast(indices[p], DataType.INT64) for p in positions]
    target = cx.emit("Shape", cx.emit("Add", *idx[:2])) if len(idx) == 2 else None
    if target is None:
        acc = idx[0]
        for t in idx[1:]:
            acc = cx.emit("Add", acc, t)
        target = cx.emit("Shape", acc)
    minus1 = cx.const(np.asarray([-1], np.int64))
    stacked = cx.emit("Concat", *(cx.emit("Unsqueeze", cx.emit("Expand", t, target), minus1) for t in idx), axis=-1)
    rest = [d for d in range(rank) if d not in positions]
    xt = x if positions == list(range(len(positions))) else cx.emit("Transpose", x, perm=positions + rest)
    y = cx.emit("GatherND", xt, stacked)
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    first = positions[0]
    if adjacent and first > 0:
        bl = cx.out_rank - len(rest)  # rank of the broadcast index shape
        perm = list(range(bl, bl + first)) + list(range(bl)) + list(range(bl + first, cx.out_rank))
        y = cx.emit("Transpose", y, perm=perm)
    return cx.emit_typed("Identity", y)


@aten("index_put.default")
def _index_put(cx, x, indices, values, accumulate=False):
    positions = [i for i, t in enumerate(indices) if t is not None]
    if positions != list(range(len(positions))):
        raise NotMapped("index_put with a leading None index")
    idx = []
    shape = cx.emit("Shape", x)
    for p in positions:
        t = cx.cast(indices[p], DataType.INT64)
        if cx.dtype(indices[p]) == DataType.BOOL:
            raise NotMapped("index_put with a boolean mask")
        size = cx.emit("Gather", shape, cx.const(np.asarray(p, np.int64)))
        t = cx.emit("Where", cx.emit("Less", t, cx.const(np.asarray(0, np.int64))), cx.emit("Add", t, size), t)
        idx.append(t)
    acc = idx[0]
    for t in idx[1:]:
        acc = cx.emit("Add", acc, t)
    bshape = cx.emit("Shape", acc)
    minus1 = cx.const(np.asarray([-1], np.int64))
    stacked = cx.emit("Concat", *(cx.emit("Unsqueeze", cx.emit("Expand", t, bshape), minus1) for t in idx), axis=-1)
    start, end = cx.const(np.asarray([len(idx)], np.int64)), cx.const(np.asarray([INT64_MAX], np.int64))
    tail = cx.emit("Slice", shape, start, end)
    upd_shape = cx.emit("Concat", bshape, tail, axis=0)
    upd = cx.emit("Expand", cx.tensor(values), upd_shape)
    return cx.emit_typed("ScatterND", cx.tensor(x), stacked, upd, reduction="add" if accumulate else "none")


@aten("index_copy.default", "index_copy_.default")
def _index_copy(cx, x, dim, index, source):
    """Rows of ``source`` written at ``index`` along ``dim`` (a static key/value cache filled at its
    current length): ScatterElements with the index broadcast along the other dims."""
    rank = cx.rank(x)
    if rank == 0 or cx.rank(index) != 1 or cx.rank(source) != rank:
        raise NotMapped("index_copy of a 0-d tensor or with a source of another rank")
    axis = _axis(dim, rank)
    shape = np.ones(rank, np.int64)
    shape[axis] = -1
    index = cx.emit("Reshape", cx.cast(index, DataType.INT64), cx.const(shape))
    index = cx.emit("Expand", index, cx.emit("Shape", source))
    return cx.emit_typed("ScatterElements", cx.tensor(x), index, cx.tensor(source), axis=axis)


@aten("index_select.default")
def _index_select(cx, x, dim, index):
    if cx.rank(x) == 0:
        return cx.emit_typed("Reshape", x, cx.const(np.asarray([], np.int64)))
    return cx.emit_typed("Gather", x, cx.cast(index, DataType.INT64), axis=_axis(dim, cx.rank(x)))


@aten("gather.default")
def _gather(cx, x, dim, index, sparse_grad=False):
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("GatherElements", x, cx.cast(index, DataType.INT64), axis=_axis(dim, cx.rank(x)))


@aten("scatter.src", "scatter.value", "scatter_add.default", "scatter.reduce", "scatter.value_reduce")
def _scatter(cx, x, dim, index, src, reduce=None):
    target = str(cx.fx.target)
    reduction = "add" if "scatter_add" in target else {None: "none", "add": "add", "multiply": "mul"}[reduce]
    if cx.rank(x) == 0:
        raise NotMapped("scatter into a 0-d tensor")
    index = cx.cast(index, DataType.INT64)
    if not isinstance(src, Value):
        src = cx.emit("Expand", cx.tensor(src), cx.emit("Shape", index))
    else:
        src = _crop_to(cx, cx.tensor(src), index)
    return cx.emit_typed("ScatterElements", cx.tensor(x), index, src, axis=_axis(dim, cx.rank(x)),
                         reduction=reduction)  # fmt: skip


def _crop_to(cx, src, index):
    """torch reads only the leading index.shape block of ``src``; ONNX wants them the same shape."""
    if cx.shape(src) == cx.shape(index):
        return src
    rank = cx.rank(index)
    return cx.emit("Slice", src, cx.const(np.zeros(rank, np.int64)), cx.emit("Shape", index),
                   cx.const(np.arange(rank, dtype=np.int64)))  # fmt: skip


@aten("scatter_reduce.two")
def _scatter_reduce(cx, x, dim, index, src, reduce, *, include_self=True):
    return cx.emit_typed("Identity", _scatter_reduced(cx, x, dim, index, src, reduce, include_self))


def _scatter_reduced(cx, x, dim, index, src, reduce, include_self) -> Value:
    """ScatterElements with a reduction; without ``include_self`` the scattered-to positions are
    first reset to the reduction's identity; ``mean`` divides a scattered sum by its count."""
    x = cx.tensor(x)
    axis = _axis(dim, cx.rank(x))
    index = cx.cast(index, DataType.INT64)
    src = _crop_to(cx, cx.tensor(src), index)
    dtype = np.dtype(to_numpy(cx.dtype(x)))
    floating = dtype.kind == "f"
    identity = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf if floating else np.iinfo(dtype).min,
                "amin": np.inf if floating else np.iinfo(dtype).max}.get(reduce)  # fmt: skip
    if identity is None:
        raise NotMapped(f"scatter_reduce reduce={reduce!r}")
    reduction = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}[reduce]
    shape_of_index = cx.emit("Shape", index)
    base = x
    if not include_self:
        fill = cx.emit("Expand", cx.tensor(identity), shape_of_index)
        base = cx.emit("ScatterElements", x, index, fill, axis=axis)
    y = cx.emit("ScatterElements", base, index, src, axis=axis, reduction=reduction)
    if reduce != "mean":
        return y
    ones = cx.emit("Expand", cx.tensor(1), shape_of_index)
    start = cx.emit("Expand", cx.tensor(1 if include_self else 0), cx.emit("Shape", x))
    count = cx.emit("ScatterElements", start, index, ones, axis=axis, reduction="add")
    safe = cx.emit("Max", count, cx.tensor(1))
    mean = cx.emit("Div", y, safe)
    if not floating:  # torch floors an integer mean; ONNX's Div truncates towards zero
        inexact = cx.emit("Not", cx.emit("Equal", cx.emit("Mod", y, safe), cx.tensor(0)))
        below = cx.emit("And", inexact, cx.emit("Less", y, cx.tensor(0)))
        mean = cx.emit("Sub", mean, cx.emit("Cast", below, to=int(cx.dtype(x))))
    return mean


@aten("index_reduce.default")
def _index_reduce(cx, x, dim, index, source, reduce, *, include_self=True):
    """scatter_reduce with the 1-D ``index`` spread over ``source``'s shape along ``dim``."""
    x, source = cx.tensor(x), cx.tensor(source)
    rank = cx.rank(x)
    if rank == 0:  # one element: as a 1-element vector
        one = cx.const(np.asarray([1], np.int64))
        x, source = cx.emit("Reshape", x, one), cx.emit("Reshape", source, one)
        x.type = source.type = TensorType(cx.out_dtype, (1,))
        dim, rank = 0, 1
    axis = _axis(dim, rank)
    along = [1] * rank
    along[axis] = -1
    spread = cx.emit("Reshape", cx.cast(index, DataType.INT64), cx.const(np.asarray(along, np.int64)))
    spread = cx.emit("Expand", spread, cx.emit("Shape", source))
    spread.type = TensorType(DataType.INT64, tuple(cx.shape(source)))
    y = _scatter_reduced(cx, x, axis, spread, source, reduce, include_self)
    return cx.emit_typed("Reshape", y, cx.const(np.asarray(cx.out_shape, np.int64)))


@aten("nonzero.default")
def _nonzero(cx, x):
    """The indices of the nonzero elements, one row each: the size depends on the data."""
    x = cx.tensor(x)
    if cx.rank(x) == 0:  # one row of no indices if x is nonzero (onnxruntime reads a 0-d tensor as 1-d)
        rows = cx.emit("Transpose", cx.emit("NonZero", _flat(cx, x)), perm=[1, 0])  # [count, 1]
        none = cx.const(np.asarray([0], np.int64))
        return cx.emit_typed("Slice", rows, none, none, cx.const(np.asarray([1], np.int64)))
    return cx.emit_typed("Transpose", cx.emit("NonZero", x), perm=[1, 0])


def _runs(cx, x, values: Value, order: Value | None, wanted: set[int]):
    """torch's unique outputs from ``values`` (the flat input, sorted by ``order`` if given): one
    value per run of equal neighbours (NaN equals nothing, -0 equals 0), each input element's run
    (in the input's shape) and the run lengths.  Sizes depend on the data."""
    i64, one = DataType.INT64, cx.const(np.asarray([1], np.int64))
    n = cx.emit("Shape", values)
    first = cx.const(np.asarray([0], np.int64))
    previous = cx.emit("Slice", values, first, cx.const(np.asarray([-1], np.int64)))
    differs = cx.emit("Not", cx.emit("Equal", cx.emit("Slice", values, one, n), previous))
    starts = cx.emit("Slice", cx.emit("Concat", cx.const(np.asarray([True])), differs, axis=0), first, n)
    run = cx.emit("Sub", cx.emit("CumSum", cx.cast(starts, i64), cx.const(np.asarray(0))), one)
    outs = [cx.emit("Compress", values, starts, axis=0), None, None]
    if 1 in wanted:
        inverse = run if order is None else cx.emit("ScatterElements", run, order, run, axis=0)
        outs[1] = cx.emit("Reshape", inverse, cx.emit("Shape", x))
    if 2 in wanted:
        zeros = cx.emit("ConstantOfShape", cx.emit("ReduceSum", cx.cast(starts, i64), keepdims=1),
                        value=np.zeros(1, np.int64))  # fmt: skip
        ones = cx.emit("Expand", cx.const(np.asarray(1, np.int64)), n)
        outs[2] = cx.emit("ScatterND", zeros, cx.emit("Unsqueeze", run, one), ones, reduction="add")
    for out, val in zip(outs, cx.val, strict=True):
        if out is not None:
            out.type = cx.meta_type(val)
    return tuple(outs)


@aten("_unique2.default")
def _unique2(cx, x, sorted=True, return_inverse=False, return_counts=False):
    """torch.unique of all elements: ATen's CPU kernel sorts whether or not ``sorted`` is asked."""
    wanted = cx.used_outputs()
    if (1 in wanted and not return_inverse) or (2 in wanted and not return_counts):
        raise NotMapped("an output unique was not asked for")
    if not is_floating(cx.dtype(x)) and cx.dtype(x) not in (DataType.INT32, DataType.INT64):
        raise NotMapped(f"unique of {cx.dtype(x).name}")
    flat = _flat(cx, x)
    ordered = cx.node("TopK", [flat, cx.emit("Shape", flat)], {"axis": 0, "largest": 0, "sorted": 1}, outputs=2)
    return _runs(cx, x, ordered.outputs[0], ordered.outputs[1], wanted)


@aten("unique_consecutive.default")
def _unique_consecutive(cx, x, return_inverse=False, return_counts=False, dim=None):
    wanted = cx.used_outputs()
    if dim is not None or (1 in wanted and not return_inverse) or (2 in wanted and not return_counts):
        raise NotMapped("unique_consecutive along a dim, or an output it was not asked for")
    return _runs(cx, x, _flat(cx, x), None, wanted)


def _slice0(cx, v: Value, start: int, end: int | None) -> Value:
    stop = np.iinfo(np.int64).max if end is None else end
    return cx.emit("Slice", v, cx.const(np.asarray([start], np.int64)), cx.const(np.asarray([stop], np.int64)),
                   cx.const(np.asarray([0], np.int64)))  # fmt: skip


@aten("nonzero_static.default")
def _nonzero_static(cx, x, *, size, fill_value=-1):
    """The first ``size`` rows of ``nonzero``, padded with ``fill_value`` rows: a static shape."""
    x = cx.tensor(x, cx.dtype(x))
    rank = cx.rank(x)
    if rank == 0:  # rows of no indices: nothing to compute
        return cx.emit_typed("Identity", cx.const(np.zeros((size, 0), np.int64)))
    rows = cx.emit("Transpose", cx.emit("NonZero", x), perm=[1, 0])
    padded = cx.emit("Concat", rows, cx.const(np.full((size, rank), fill_value, np.int64)), axis=0)
    zero, end = cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([size], np.int64))
    return cx.emit_typed("Slice", padded, zero, end, zero)


@aten("masked_select.default")
def _masked_select(cx, x, mask):
    """The elements where ``mask`` (broadcast with ``x``) holds, in order: the size depends on the data."""
    x, mask = cx.tensor(x), cx.cast(mask, DataType.BOOL)
    x = cx.emit("Expand", x, cx.emit("Shape", mask))  # Expand broadcasts both ways
    shape = cx.emit("Shape", x)
    flat_x = _flat(cx, x)
    flat_mask = _flat(cx, cx.emit("Expand", mask, shape))
    return cx.emit_typed("Compress", flat_x, flat_mask, axis=0)


@aten("masked_scatter.default")
def _masked_scatter(cx, x, mask, source):
    """The elements of ``x`` where ``mask`` holds, replaced in order by ``source``'s first ones."""
    x = cx.tensor(x)
    full = cx.emit("Expand", cx.cast(mask, DataType.BOOL), cx.emit("Shape", x))
    flat_mask = _flat(cx, full)
    taken = cx.emit("CumSum", cx.emit("Cast", flat_mask, to=int(DataType.INT64)), cx.const(np.asarray(0, np.int64)))
    which = cx.emit("Max", cx.emit("Sub", taken, cx.const(np.asarray(1, np.int64))), cx.const(np.asarray(0, np.int64)))
    picked = cx.emit("Gather", _flat(cx, cx.tensor(source)), which, axis=0)
    merged = cx.emit("Where", flat_mask, picked, _flat(cx, x))
    return cx.emit_typed("Reshape", merged, cx.emit("Shape", x))


@aten("put.default")
def _put(cx, x, index, source, accumulate=False):
    """Elements of ``x`` by flat index (negative from the end), set or (``accumulate``) added to."""
    x = cx.tensor(x)
    flat = cx.emit("ScatterElements", _flat(cx, x), _flat(cx, cx.cast(index, DataType.INT64)),
                   _flat(cx, cx.tensor(source)), axis=0, reduction="add" if accumulate else "none")  # fmt: skip
    return cx.emit_typed("Reshape", flat, cx.emit("Shape", x))
