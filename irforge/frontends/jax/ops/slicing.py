"""Slicing (jax's ``lax.slicing``): slice, dynamic_slice, gather and scatter."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import DataType, to_numpy
from ....core_ir.types import TensorType
from ....core_ir.value import Value
from ...common import NotMapped
from .common import _i64, prim
from .shapes import _shape_vector


@prim("slice")
def _slice(cx, x, start_indices, limit_indices, strides=None, **_):
    axes = list(range(len(start_indices)))
    steps = list(strides) if strides else [1] * len(axes)
    return cx.typed("Slice", x, _shape_vector(cx, start_indices), _shape_vector(cx, limit_indices),
                    cx.const(_i64(axes)), cx.const(_i64(steps)))  # fmt: skip


def _clamped_starts(cx, x, starts, sizes) -> Value:
    """lax's dynamic-slice starts: clamped so the window stays inside ``x``."""
    parts = []
    for axis, (s, size) in enumerate(zip(starts, sizes, strict=True)):
        s = cx.emit("Reshape", cx.emit("Cast", cx.value(s), to=int(DataType.INT64)), cx.const(_i64([1])))
        hi = cx.emit("Sub", cx.dim_value(cx.shape(x)[axis]), cx.dim_value(size))
        parts.append(cx.emit("Min", cx.emit("Max", s, cx.const(_i64([0]))), hi))
    return cx.emit("Concat", *parts, axis=0)


@prim("dynamic_slice")
def _dynamic_slice(cx, x, *starts, slice_sizes, **_):
    x = cx.value(x)
    begin = _clamped_starts(cx, x, starts, slice_sizes)
    end = cx.emit("Add", begin, _shape_vector(cx, slice_sizes))
    axes = cx.const(_i64(range(len(slice_sizes))))
    return cx.typed("Slice", x, begin, end, axes)


@prim("dynamic_update_slice")
def _dynamic_update_slice(cx, x, update, *starts, **_):
    x, update = cx.value(x), cx.value(update)
    sizes = cx.shape(update)
    begin = _clamped_starts(cx, x, starts, sizes)
    # the update's element coordinates, offset by begin: ScatterND indices [*sizes, rank]
    rank = len(sizes)
    grids = []
    for axis, size in enumerate(sizes):
        r = cx.emit("Range", cx.const(np.asarray(0, np.int64)), cx.emit("Squeeze", cx.dim_value(size)),
                    cx.const(np.asarray(1, np.int64)))  # fmt: skip
        offset = cx.emit("Gather", begin, cx.const(np.asarray(axis, np.int64)), axis=0)
        r = cx.emit("Add", r, offset)
        shape = [1] * rank
        shape[axis] = -1
        grids.append(cx.emit("Reshape", r, cx.const(_i64(shape))))
    full = _shape_vector(cx, sizes)
    idx = [cx.emit("Unsqueeze", cx.emit("Expand", g, full), cx.const(_i64([-1]))) for g in grids]
    indices = cx.emit("Concat", *idx, axis=-1)
    return cx.typed("ScatterND", x, indices, update)


def _batching_as_indices(cx, idx: Value, operand_batching, index_batching) -> tuple[Value, list[int]]:
    """Batching dims (vmap's) as explicit index components: operand axis ``operand_batching[i]``
    is indexed by the position along index axis ``index_batching[i]``, an iota appended to each
    index vector.  Returns the extended indices and the operand axes the new components index."""
    operand_batching, index_batching = list(operand_batching or ()), list(index_batching or ())
    if not operand_batching:
        return idx, []
    ishape = cx.shape(idx)
    if not all(isinstance(d, int) for d in ishape[:-1]):
        raise NotMapped("batching dims over symbolic index sizes")
    batch_shape = tuple(ishape[:-1])
    parts = [cx.emit("Cast", idx, to=int(DataType.INT64))]
    for axis in index_batching:
        along = [-1 if d == axis else 1 for d in range(len(batch_shape))]
        iota = np.arange(batch_shape[axis], dtype=np.int64).reshape(along)
        parts.append(cx.const(np.broadcast_to(iota, batch_shape)[..., None].copy()))
    extended = cx.emit("Concat", *parts, axis=-1)
    extended.type = TensorType(DataType.INT64, (*batch_shape, ishape[-1] + len(index_batching)))
    return extended, operand_batching


@prim("gather")
def _gather(cx, operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value=None, **_):
    """The gathers ``x[idx]``, ``jnp.take`` and ``take_along_axis`` make: every indexed axis takes a
    size-1 slice and is collapsed, every other axis is taken whole.  Out-of-bounds indices follow
    ``mode``: clamped (``clip``) or giving the fill value (``fill``)."""
    dn = dimension_numbers
    x, idx = cx.value(operand), cx.value(indices)
    shape = cx.shape(x)
    rank = len(shape)
    idx, batched = _batching_as_indices(cx, idx, getattr(dn, "operand_batching_dims", ()),
                                        getattr(dn, "start_indices_batching_dims", ()))  # fmt: skip
    indices = idx if batched else indices
    smap = list(dn.start_index_map) + batched
    collapsed = list(dn.collapsed_slice_dims) + batched
    if not set(collapsed) <= set(smap) or any(slice_sizes[d] != 1 for d in smap):
        raise NotMapped("gather of windows wider than one element along an indexed axis")
    rest = [d for d in range(rank) if d not in smap]
    partial = [d for d in rest if slice_sizes[d] != shape[d]]
    if partial:  # an unindexed axis's window always starts at 0: cut the operand to it first
        dtype = cx.dtype(x)
        ends = _shape_vector(cx, [slice_sizes[d] for d in partial])
        x = cx.emit("Slice", x, cx.const(_i64([0] * len(partial))), ends, cx.const(_i64(partial)))
        x.type = TensorType(dtype, tuple(slice_sizes[d] if d in partial else shape[d] for d in range(rank)))
        shape = x.type.shape
    perm = smap + rest
    xt = x if perm == list(range(rank)) else cx.emit("Transpose", x, perm=perm)
    idx = cx.emit("Cast", idx, to=int(DataType.INT64))
    bounds = cx.emit("Concat", *(cx.dim_value(shape[d]) for d in smap), axis=0)
    mode_name = str(mode).rsplit(".", 1)[-1].upper()
    inside = None
    if "CLIP" in mode_name:
        idx = cx.emit("Max", cx.emit("Min", idx, cx.emit("Sub", bounds, cx.const(_i64([1])))), cx.const(_i64([0])))
    elif "FILL" in mode_name:
        ok = cx.emit("And", cx.emit("GreaterOrEqual", idx, cx.const(_i64([0]))), cx.emit("Less", idx, bounds))
        inside = cx.emit("Cast", cx.emit("ReduceMin", cx.emit("Cast", ok, to=int(DataType.INT32)),
                                         cx.const(_i64([-1])), keepdims=0), to=int(DataType.BOOL))  # fmt: skip
        idx = cx.emit("Where", ok, idx, cx.const(_i64([0])))
    y = cx.emit("GatherND", xt, idx)  # [batch..., rest...]
    batch_rank = len(cx.shape(indices)) - 1
    if inside is not None:
        fill = fill_value
        if fill is None:
            np_dtype = np.dtype(to_numpy(cx.dtype(x)))
            fill = (np.nan if np_dtype.kind in "fc" else np.iinfo(np_dtype).min if np_dtype.kind == "i"
                    else np.iinfo(np_dtype).max if np_dtype.kind == "u" else True)  # fmt: skip
        mask = cx.emit("Reshape", inside, cx.emit("Concat", cx.emit("Shape", inside),
                                                  cx.const(_i64([1] * len(rest))), axis=0))  # fmt: skip
        y = cx.emit("Where", mask, y, cx.value(fill, cx.dtype(x)))
    # an indexed axis that is not collapsed stays as a size-1 window axis, among the rest in order
    kept = [d for d in range(rank) if d not in collapsed]
    ones = [batch_rank + i for i, d in enumerate(kept) if d in smap]
    if ones:
        y = cx.emit("Unsqueeze", y, cx.const(_i64(ones)))
    # output: the window axes sit at offset_dims, the batch axes fill the others in order
    out_rank = batch_rank + len(kept)
    offsets = list(dn.offset_dims)
    batch_pos = [d for d in range(out_rank) if d not in offsets]
    order = [0] * out_rank
    for i, d in enumerate(batch_pos):
        order[d] = i
    for i, d in enumerate(offsets):
        order[d] = batch_rank + i
    if order == list(range(out_rank)):
        return cx.typed("Identity", y)
    return cx.typed("Transpose", y, perm=order)


_SCATTER = {"scatter": "none", "scatter-add": "add", "scatter_add": "add", "scatter-mul": "mul", "scatter_mul": "mul",
            "scatter-min": "min", "scatter_min": "min", "scatter-max": "max", "scatter_max": "max"}  # fmt: skip


@prim(*_SCATTER)
def _scatter(cx, operand, indices, updates, *, dimension_numbers, mode, **_):
    """The scatters ``x.at[idx].set/add/mul/min/max`` make: each indexed axis takes a one-element
    window and is inserted, every other axis is updated whole.  Out-of-bounds updates follow
    ``mode``: dropped (``fill_or_drop``, through a padding row sliced off afterwards) or clamped."""
    dn = dimension_numbers
    reduction = _SCATTER[cx.eqn.primitive.name]
    x, idx, upd = cx.value(operand), cx.value(indices), cx.value(updates)
    idx, batched = _batching_as_indices(cx, idx, getattr(dn, "operand_batching_dims", ()),
                                        getattr(dn, "scatter_indices_batching_dims", ()))  # fmt: skip
    smap = list(dn.scatter_dims_to_operand_dims) + batched
    if reduction != "none" and cx.dtype(x) == DataType.BOOL:
        raise NotMapped("a combining scatter of booleans")
    shape, ushape = cx.shape(x), cx.shape(upd)
    index_rank = len(cx.shape(idx))
    rank = len(shape)
    rest = [d for d in range(rank) if d not in smap]
    window = list(dn.update_window_dims)
    if sorted(list(dn.inserted_window_dims) + batched) != sorted(smap) or (
            [ushape[w] for w in window] != [shape[d] for d in rest]):  # fmt: skip
        if batched:
            raise NotMapped("a batched scatter of windows wider than one element")
        return _scatter_windows(cx, x, idx, upd, dn, reduction, str(mode).rsplit(".", 1)[-1].upper())
    perm = smap + rest
    xt = x if perm == list(range(rank)) else cx.emit("Transpose", x, perm=perm)
    batch = [d for d in range(len(ushape)) if d not in window]
    uperm = batch + window
    ut = upd if uperm == list(range(len(ushape))) else cx.emit("Transpose", upd, perm=uperm)
    idx = cx.emit("Cast", idx, to=int(DataType.INT64))
    if index_rank == 0 or (len(batch) == 0 and index_rank == 1):
        idx = cx.emit("Reshape", idx, cx.const(_i64([1, len(smap)])))
        ut = cx.emit("Unsqueeze", ut, cx.const(_i64([0])))
    bounds = cx.emit("Concat", *(cx.dim_value(shape[d]) for d in smap), axis=0)
    mode_name = str(mode).rsplit(".", 1)[-1].upper()
    padded = "CLIP" not in mode_name  # XLA drops out-of-bounds updates unless told to clamp
    if padded:  # out-of-bounds indices all point at one extra row per indexed axis, cut off afterwards
        ok = cx.emit("And", cx.emit("GreaterOrEqual", idx, cx.const(_i64([0]))), cx.emit("Less", idx, bounds))
        inside = cx.emit("Cast", cx.emit("ReduceMin", cx.emit("Cast", ok, to=int(DataType.INT32)),
                                         cx.const(_i64([-1])), keepdims=1), to=int(DataType.BOOL))  # fmt: skip
        idx = cx.emit("Where", inside, idx, bounds)
        pads = [0] * len(perm) + [1] * len(smap) + [0] * len(rest)
        xt = cx.emit("Pad", xt, cx.const(_i64(pads)))
    else:
        idx = cx.emit("Max", cx.emit("Min", idx, cx.emit("Sub", bounds, cx.const(_i64([1])))), cx.const(_i64([0])))
    y = cx.emit("ScatterND", xt, idx, ut, reduction=reduction)
    if padded:
        zeros = cx.const(_i64([0] * len(smap)))
        y = cx.emit("Slice", y, zeros, bounds, cx.const(_i64(range(len(smap)))))
    inverse = [perm.index(i) for i in range(rank)]
    if inverse == list(range(rank)):
        return cx.typed("Identity", y)
    return cx.typed("Transpose", y, perm=inverse)


def _scatter_windows(cx, x, idx, upd, dn, reduction: str, mode: str):
    """The general scatter: every update window, whatever its size along indexed and unindexed
    axes, spelled out element by element (its start plus each offset in the window) for one
    element-wise ScatterND.  A window that does not fit is dropped whole (XLA's rule; padding takes
    its elements, cut off afterwards), or with ``CLIP`` moved to fit."""
    shape, ushape = cx.shape(x), cx.shape(upd)
    if not all(isinstance(d, int) for d in (*shape, *ushape)):
        raise NotMapped("a scatter of wide windows with symbolic sizes")
    rank, window = len(shape), list(dn.update_window_dims)
    inserted = set(dn.inserted_window_dims)
    window_axes = [d for d in range(rank) if d not in inserted]  # the operand axes the window spans, in order
    sizes = {d: 1 for d in inserted} | {d: ushape[w] for d, w in zip(window_axes, window, strict=True)}
    smap = list(dn.scatter_dims_to_operand_dims)
    idx = cx.emit("Cast", idx, to=int(DataType.INT64))
    index_shape = cx.shape(idx)
    batch = [d for d in range(len(ushape)) if d not in window]
    if len(index_shape) == len(batch):  # index_vector_dim at the end, implicit
        idx = cx.emit("Unsqueeze", idx, cx.const(_i64([-1])))
    count = int(np.prod([ushape[d] for d in batch]))
    starts = cx.emit("Reshape", idx, cx.const(_i64([count, len(smap)])))
    # the start in every operand axis: the index component for scattered axes, 0 elsewhere
    padded = cx.emit("Concat", starts, cx.const(np.zeros((count, 1), np.int64)), axis=1)
    columns = [smap.index(d) if d in smap else len(smap) for d in range(rank)]
    start = cx.emit("Gather", padded, cx.const(_i64(columns)), axis=1)  # [count, rank]
    dims = np.asarray(shape, np.int64)
    size = np.asarray([sizes[d] for d in range(rank)], np.int64)
    if mode == "CLIP":
        start = cx.emit("Max", cx.emit("Min", start, cx.const(dims - size)), cx.const(np.zeros(rank, np.int64)))
    else:  # a window that does not fit is dropped: its start moves into the padding
        fits = cx.emit("And", cx.emit("GreaterOrEqual", start, cx.const(np.zeros(rank, np.int64))),
                       cx.emit("LessOrEqual", start, cx.const(dims - size)))  # fmt: skip
        every = cx.emit("ReduceMin", cx.emit("Cast", fits, to=int(DataType.INT32)), cx.const(_i64([1])), keepdims=1)
        start = cx.emit("Where", cx.emit("Cast", every, to=int(DataType.BOOL)), start, cx.const(dims))
        x = cx.emit("Pad", x, cx.const(np.concatenate([np.zeros(rank, np.int64), size])))
    axes = np.meshgrid(*(np.arange(sizes[d]) for d in window_axes), indexing="ij")
    grid = np.stack(axes, -1).reshape(-1, len(window_axes))
    offsets = np.zeros((grid.shape[0], rank), np.int64)
    offsets[:, window_axes] = grid
    where = cx.emit("Add", cx.emit("Unsqueeze", start, cx.const(_i64([1]))), cx.const(offsets[None]))
    where = cx.emit("Reshape", where, cx.const(_i64([-1, rank])))
    ordered = cx.emit("Transpose", upd, perm=batch + window) if batch + window != list(range(len(ushape))) else upd
    values = cx.emit("Reshape", ordered, cx.const(_i64([-1])))
    y = cx.emit("ScatterND", x, where, values, reduction=reduction)
    if mode != "CLIP":
        y = cx.emit("Slice", y, cx.const(np.zeros(rank, np.int64)), cx.const(dims), cx.const(_i64(range(rank))))
    return cx.typed("Identity", y)
