"""Views and data movement: reshape, permute, slice, concatenate, pad, strided views."""

from __future__ import annotations

import math

import numpy as np

from ....core_ir.dtypes import DataType
from ....core_ir.value import Value
from ...common import NotMapped
from .common import INT64_MAX, _axis, aten


@aten("view.default", "_unsafe_view.default", "reshape.default", "view_copy.default")
def _view(cx, x, shape):
    if any(isinstance(d, int) and d == 0 for d in shape):
        return cx.emit_typed("Reshape", x, cx.int64s(shape), allowzero=1)
    return cx.emit_typed("Reshape", x, cx.int64s(_static_sizes(cx, x, shape)))


def _static_sizes(cx, x, sizes):
    """Symbolic sizes of a reshape target as Reshape's 0 (same as the input's dim) or a single -1,
    so the target is a constant whenever that is enough: backends then see a static reshape."""
    out = cx.out_shape
    sizes = list(sizes)
    symbolic = [i for i, s in enumerate(sizes) if not isinstance(s, int)]
    if not symbolic or len(out) != len(sizes):
        return sizes
    mine = cx.shape(x) if x.type is not None and x.type.shape is not None else ()
    for i in symbolic:
        if i < len(mine) and isinstance(out[i], str) and mine[i] == out[i]:
            sizes[i] = 0
    left = [i for i, s in enumerate(sizes) if not isinstance(s, int)]
    if len(left) == 1 and -1 not in sizes:
        sizes[left[0]] = -1
    return sizes


@aten("permute.default", "permute_copy.default")
def _permute(cx, x, dims):
    rank = cx.rank(x)
    if rank == 0:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("Transpose", x, perm=[_axis(d, rank) for d in dims])


@aten("t.default")
def _t(cx, x):
    return cx.emit_typed("Transpose", x, perm=[1, 0]) if cx.rank(x) == 2 else cx.emit_typed("Identity", x)


@aten("transpose.int")
def _transpose(cx, x, a, b):
    rank = cx.rank(x)
    if rank == 0:
        return cx.emit_typed("Identity", x)
    perm = list(range(rank))
    a, b = _axis(a, rank), _axis(b, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return cx.emit_typed("Transpose", x, perm=perm)


@aten("unsqueeze.default", "unsqueeze_copy.default")
def _unsqueeze(cx, x, dim):
    return cx.emit_typed("Unsqueeze", x, cx.const(np.asarray([_axis(dim, cx.rank(x) + 1)], np.int64)))


@aten("squeeze.dim", "squeeze.dims", "squeeze.default", "squeeze_copy.dims", "squeeze_copy.dim")
def _squeeze(cx, x, dims=None):
    shape = cx.shape(x)
    rank = len(shape)
    if dims is None:
        dims = list(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    axes = sorted({_axis(d, rank) for d in dims if rank and shape[_axis(d, rank)] == 1})
    if not axes:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("Squeeze", x, cx.const(np.asarray(axes, np.int64)))


@aten("expand.default", "expand_copy.default")
def _expand(cx, x, sizes, *, implicit=False):
    sizes = [1 if isinstance(s, int) and s == -1 else s for s in sizes]
    mine, out = cx.shape(x), cx.out_shape
    for i, s in enumerate(sizes):  # a symbolic size the input already has: Expand's 1 keeps it
        j = i - (len(sizes) - len(mine))
        if not isinstance(s, int) and j >= 0 and isinstance(out[i], str) and mine[j] == out[i]:
            sizes[i] = 1
    return cx.emit_typed("Expand", x, cx.int64s(sizes))


@aten("cat.default")
def _cat(cx, tensors, dim=0):
    rank = cx.out_rank
    keep = [t for t in tensors if not (cx.rank(t) == 1 and cx.shape(t)[0] == 0 and rank > 1)]
    if not keep:
        return cx.emit_typed("Identity", tensors[0])
    return cx.emit_typed("Concat", *(cx.tensor(t) for t in keep), axis=_axis(dim, rank))


@aten("stack.default")
def _stack(cx, tensors, dim=0):
    axis = _axis(dim, cx.out_rank)
    ax = cx.const(np.asarray([axis], np.int64))
    return cx.emit_typed("Concat", *(cx.emit("Unsqueeze", cx.tensor(t), ax) for t in tensors), axis=axis)


@aten("split_with_sizes.default", "split_with_sizes_copy.default")
def _split_with_sizes(cx, x, sizes, dim=0):
    axis = _axis(dim, cx.rank(x))
    n = cx.node_typed("Split", [x, cx.int64s(sizes)], {"axis": axis}, outputs=len(sizes))
    return list(n.outputs)


@aten("split.Tensor", "split_copy.Tensor")
def _split(cx, x, size, dim=0):
    axis = _axis(dim, cx.rank(x))
    total = cx.shape(x)[axis]
    if not isinstance(total, int) or not isinstance(size, int):
        raise NotMapped("split of a symbolic size")
    sizes = [min(size, total - i) for i in range(0, total, size)] or [0]
    return _split_with_sizes(cx, x, sizes, dim)


@aten("unbind.int", "unbind_copy.int")
def _unbind(cx, x, dim=0):
    axis = _axis(dim, cx.rank(x))
    n = cx.shape(x)[axis]
    if not isinstance(n, int):
        raise NotMapped("unbind of a symbolic size")
    parts = cx.node("Split", [x, cx.const(np.ones(n, np.int64))], {"axis": axis}, outputs=n).outputs
    ax = cx.const(np.asarray([axis], np.int64))
    return [cx.emit("Squeeze", p, ax) for p in parts]


@aten("slice.Tensor", "slice_copy.Tensor")
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    axis = _axis(dim, cx.rank(x))
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    if isinstance(start, int) and isinstance(end, int) and isinstance(cx.shape(x)[axis], int):
        size = cx.shape(x)[axis]
        if start == 0 and end >= size and step == 1:
            return cx.emit_typed("Identity", x)
    return cx.emit_typed("Slice", x, cx.int64s([start]), cx.int64s([end]),
                         cx.const(np.asarray([axis], np.int64)), cx.int64s([step]))  # fmt: skip


@aten("select.int", "select_copy.int")
def _select(cx, x, dim, index):
    axis = _axis(dim, cx.rank(x))
    idx = cx.const(np.asarray(index, np.int64)) if isinstance(index, int) else cx.cast(index, DataType.INT64)
    return cx.emit_typed("Gather", x, idx, axis=axis)


@aten("narrow.default")
def _narrow(cx, x, dim, start, length):
    end = start + length if isinstance(start, int) and isinstance(length, int) else None
    if end is None:
        raise NotMapped("narrow with a symbolic start")
    return _slice(cx, x, dim, start, end)


@aten("_to_copy.default", "clone.default", "alias.default", "lift_fresh_copy.default", "detach.default",
      "detach_.default", "contiguous.default", "_to_dim_order_copy.default", "alias_copy.default")  # fmt: skip
def _to_copy(cx, x, *args, dtype=None, **kwargs):
    if cx.val is not None and hasattr(cx.val, "dtype") and cx.out_dtype != cx.dtype(x):
        return cx.emit_typed("Cast", x, to=int(cx.out_dtype))
    return cx.emit_typed("Identity", x)


@aten("copy.default")
def _copy(cx, dst, src, non_blocking=False):
    return cx.emit_typed("Expand", cx.tensor(src), cx.emit("Shape", dst))


@aten("constant_pad_nd.default")
def _pad(cx, x, pad, value=0):
    rank = cx.rank(x)
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
    return cx.emit_typed("Pad", cx.tensor(x), cx.int64s(begins + ends), cx.tensor(value), mode="constant")


@aten("reflection_pad1d.default", "reflection_pad2d.default", "reflection_pad3d.default",
      "replication_pad1d.default", "replication_pad2d.default", "replication_pad3d.default")  # fmt: skip
def _pad_mode(cx, x, pad):
    mode = "reflect" if "reflection" in str(cx.fx.target) else "edge"
    rank = cx.rank(x)
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
    return cx.emit_typed("Pad", x, cx.int64s(begins + ends), mode=mode)


@aten("flip.default")
def _flip(cx, x, dims):
    rank = cx.rank(x)
    if rank == 0 or not dims:
        return cx.emit_typed("Identity", x)
    axes = [_axis(d, rank) for d in dims]
    n = len(axes)
    return cx.emit_typed("Slice", x, cx.const(np.full(n, -1, np.int64)), cx.const(np.full(n, -(2**63), np.int64)),
                         cx.const(np.asarray(axes, np.int64)), cx.const(np.full(n, -1, np.int64)))  # fmt: skip


@aten("repeat.default")
def _repeat(cx, x, repeats):
    rank = cx.rank(x)
    extra = len(repeats) - rank
    if extra:
        x = cx.emit("Unsqueeze", x, cx.const(np.arange(extra, dtype=np.int64)))
    return cx.emit_typed("Tile", x, cx.int64s(list(repeats)))


@aten("tril.default", "triu.default")
def _trilu(cx, x, diagonal=0):
    upper = int("triu" in str(cx.fx.target))
    return cx.emit_typed("Trilu", x, cx.const(np.asarray(diagonal, np.int64)), upper=upper)


def _diagonal_positions(cx, x, offset: int, dim1: int, dim2: int) -> tuple[list[int], np.ndarray]:
    """The axis order that puts ``dim1`` and ``dim2`` first, and the (row, column) positions of
    the diagonal at ``offset`` in those two axes."""
    shape = cx.shape(x)
    rank = len(shape)
    d1, d2 = _axis(dim1, rank), _axis(dim2, rank)
    n1, n2 = shape[d1], shape[d2]
    if not (isinstance(n1, int) and isinstance(n2, int)):
        raise NotMapped("a diagonal of symbolic size")
    rows = np.arange(max(0, -offset), max(max(0, -offset), min(n1, n2 - offset)))
    positions = np.stack([rows, rows + offset], -1).astype(np.int64)
    return [d1, d2, *(d for d in range(rank) if d not in (d1, d2))], positions


@aten("diagonal.default", "diagonal_copy.default")
def _diagonal(cx, x, offset=0, dim1=0, dim2=1):
    perm, idx = _diagonal_positions(cx, x, offset, dim1, dim2)
    y = cx.emit("GatherND", cx.emit("Transpose", x, perm=perm), cx.const(idx))  # [n, rest...]
    return cx.emit_typed("Transpose", y, perm=[*range(1, len(perm) - 1), 0])


@aten("diagonal_scatter.default")
def _diagonal_scatter(cx, x, src, offset=0, dim1=0, dim2=1):
    perm, idx = _diagonal_positions(cx, x, offset, dim1, dim2)
    rest = len(perm) - 2
    updates = cx.emit("Transpose", cx.tensor(src, cx.dtype(x)), perm=[rest, *range(rest)])  # [n, rest...]
    y = cx.emit("ScatterND", cx.emit("Transpose", x, perm=perm), cx.const(idx), updates)
    return cx.emit_typed("Transpose", y, perm=[int(i) for i in np.argsort(perm)])


_STRIDED_LIMIT = 1 << 22


"""Most elements an ``as_strided`` view may have: its element positions are a constant."""


def _strided_positions(cx, x, size, stride, storage_offset) -> np.ndarray:
    """The positions in ``x``'s (contiguous) elements that a strided view reads, shaped as the view."""
    size, stride = list(size), list(stride)
    offset = 0 if storage_offset is None else storage_offset
    numel = math.prod(cx.shape(x)) if all(isinstance(d, int) for d in cx.shape(x)) else None
    if numel is None or not all(isinstance(v, int) for v in (*size, *stride, offset)):
        raise NotMapped("as_strided with symbolic sizes")
    if math.prod(size) > _STRIDED_LIMIT:
        raise NotMapped("as_strided of more than 4M elements")
    positions = np.full(size, offset, np.int64)
    for axis, (n, step) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[axis] = n
        positions = positions + (np.arange(n, dtype=np.int64) * step).reshape(shape)
    if positions.size and (positions.min() < 0 or positions.max() >= numel):
        raise NotMapped("as_strided reaching outside its input's elements")
    return positions


def _flat(cx, x) -> Value:
    return cx.emit("Reshape", x, cx.const(np.asarray([-1], np.int64)))


@aten("as_strided.default", "as_strided_copy.default")
def _as_strided(cx, x, size, stride, storage_offset=None):
    """A view of the input's elements as laid out contiguously (as torch.export hands them over)."""
    positions = _strided_positions(cx, x, size, stride, storage_offset)
    return cx.emit_typed("Gather", _flat(cx, x), cx.const(positions), axis=0)


@aten("as_strided_scatter.default")
def _as_strided_scatter(cx, x, src, size, stride, storage_offset=None):
    positions = _strided_positions(cx, x, size, stride, storage_offset)
    flat = cx.emit("ScatterElements", _flat(cx, x), cx.const(positions.reshape(-1)), _flat(cx, cx.tensor(src)), axis=0)
    return cx.emit_typed("Reshape", flat, cx.emit("Shape", x))


@aten("narrow_copy.default")
def _narrow_copy(cx, x, dim, start, length):
    axis = _axis(dim, cx.rank(x))
    return cx.emit_typed("Slice", x, cx.int64s([start]), cx.emit("Add", cx.int64s([start]), cx.int64s([length])),
                         cx.const(np.asarray([axis], np.int64)))  # fmt: skip


@aten("resize.default", "resize_.default")
def _resize(cx, x, size, memory_format=None):
    """The functional ``resize_``: the first ``prod(size)`` elements of ``x`` in the new shape.  Growing
    is refused: torch leaves the new elements uninitialized."""
    shape = cx.shape(x)
    if not all(isinstance(d, int) for d in (*shape, *size)):
        raise NotMapped("resize to or from a symbolic size")
    have, want = math.prod(shape), math.prod(size)
    if want > have:
        raise NotMapped("resize that grows a tensor (torch leaves the new elements uninitialized)")
    flat = cx.emit("Reshape", x, cx.int64s([-1])) if want < have else x
    if want < have:
        flat = cx.emit("Slice", flat, cx.int64s([0]), cx.int64s([want]), cx.int64s([0]))
    return cx.emit_typed("Reshape", flat, cx.int64s(list(size)))


@aten("slice_scatter.default")
def _slice_scatter(cx, x, src, dim=0, start=None, end=None, step=1):
    """``src`` written over ``x[start:end:step]`` along ``dim``: ScatterND over that axis moved first."""
    shape = cx.shape(x)
    axis = _axis(dim, len(shape))
    n = shape[axis]
    if not isinstance(n, int) or not all(isinstance(v, int) or v is None for v in (start, end, step)):
        raise NotMapped("slice_scatter over symbolic bounds")
    rows = np.arange(n)[slice(start, end, step)]
    perm = [axis, *[d for d in range(len(shape)) if d != axis]]
    xt = cx.emit("Transpose", cx.tensor(x), perm=perm)
    st = cx.emit("Transpose", cx.tensor(src), perm=perm)
    y = cx.emit("ScatterND", xt, cx.const(rows.reshape(-1, 1).astype(np.int64)), st)
    inverse = [perm.index(i) for i in range(len(shape))]
    return cx.emit_typed("Transpose", y, perm=inverse)


@aten("select_scatter.default")
def _select_scatter(cx, x, src, dim, index):
    shape = cx.shape(x)
    axis = _axis(dim, len(shape))
    n = shape[axis]
    if not isinstance(n, int) or not isinstance(index, int):
        raise NotMapped("select_scatter at a symbolic position")
    index = index + n if index < 0 else index
    row = cx.emit("Unsqueeze", cx.tensor(src), cx.const(np.asarray([axis], np.int64)))
    return _slice_scatter(cx, x, row, axis, index, index + 1)


@aten("unfold.default")
def _unfold(cx, x, dim, size, step):
    """Windows of ``size`` every ``step`` along ``dim``, as a new last axis: a Gather of an index grid."""
    shape = cx.shape(x)
    if not shape:
        return cx.emit_typed("Reshape", x, cx.const(np.asarray([1], np.int64)))
    axis = _axis(dim, len(shape))
    n = shape[axis]
    if not isinstance(n, int):
        raise NotMapped("unfold over a symbolic size")
    starts = np.arange(0, n - size + 1, step)
    grid = (starts[:, None] + np.arange(size)[None, :]).astype(np.int64)  # [windows, size]
    y = cx.emit("Gather", x, cx.const(grid), axis=axis)  # [..., windows, size, ...]
    rank = len(shape) + 1
    perm = [d for d in range(rank) if d != axis + 1] + [axis + 1]
    return cx.emit_typed("Transpose", y, perm=perm)
