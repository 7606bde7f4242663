"""Shape primitives: broadcast_in_dim, reshape, transpose, concatenate, pad, iota."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import to_numpy
from ....core_ir.types import TensorType
from ....core_ir.value import Value
from ...common import NotMapped
from .common import INT64_MAX, _i64, prim
from .elementwise import _same_type


def _shape_vector(cx, dims) -> Value:
    """A shape of ints and symbolic dims as an int64 vector."""
    if all(isinstance(d, (int, np.integer)) for d in dims):
        return cx.const(_i64(dims))
    parts = [cx.dim_value(d) for d in dims]
    return cx.emit("Concat", *parts, axis=0)


@prim("broadcast_in_dim")
def _broadcast_in_dim(cx, x, shape, broadcast_dimensions, **_):
    x = cx.value(x)
    rank = len(shape)
    in_shape = cx.shape(x)
    if len(in_shape) != rank:  # put x's dims where they go, 1 elsewhere
        target = [1] * rank
        for src, dst in enumerate(broadcast_dimensions):
            target[dst] = in_shape[src]
        axes = [d for d in range(rank) if d not in broadcast_dimensions]
        x = cx.emit("Unsqueeze", x, cx.const(_i64(axes)))
        x.type = TensorType(cx.dtype(x.producer().inputs[0]), tuple(target))
    if tuple(cx.shape(x)) == tuple(cx.out_shape):
        return cx.typed("Identity", x)
    dims = [1 if cx.shape(x)[i] == cx.out_shape[i] else d for i, d in enumerate(shape)]  # 1 keeps x's dim
    return cx.typed("Expand", x, _shape_vector(cx, dims))


@prim("reshape")
def _reshape(cx, x, new_sizes, dimensions=None, **_):
    if dimensions is not None:
        raise NotMapped("reshape with dimensions")
    x = cx.value(x)
    sizes = list(new_sizes)
    symbolic = [i for i, d in enumerate(sizes) if not isinstance(d, (int, np.integer))]
    if len(symbolic) == 1:
        sizes[symbolic[0]] = -1
    return cx.typed("Reshape", x, _shape_vector(cx, sizes))


@prim("squeeze")
def _squeeze(cx, x, dimensions, **_):
    if not dimensions:
        return cx.typed("Identity", x)
    return cx.typed("Squeeze", x, cx.const(_i64(dimensions)))


@prim("expand_dims")
def _expand_dims(cx, x, dimensions, **_):
    return cx.typed("Unsqueeze", x, cx.const(_i64(dimensions)))


@prim("transpose")
def _transpose(cx, x, permutation, **_):
    return cx.typed("Transpose", x, perm=[int(p) for p in permutation])


@prim("rev")
def _rev(cx, x, dimensions, **_):
    if not dimensions:
        return cx.typed("Identity", x)
    n = len(dimensions)
    return cx.typed("Slice", x, cx.const(_i64([-1] * n)), cx.const(_i64([-INT64_MAX] * n)),
                    cx.const(_i64(dimensions)), cx.const(_i64([-1] * n)))  # fmt: skip


@prim("concatenate")
def _concatenate(cx, *xs, dimension, **_):
    return cx.typed("Concat", *_same_type(cx, *xs), axis=int(dimension))


@prim("stack")
def _stack(cx, *xs, axis, **_):
    xs = _same_type(cx, *xs)
    axes = cx.const(_i64([axis]))
    return cx.typed("Concat", *(cx.emit("Unsqueeze", x, axes) for x in xs), axis=int(axis))


@prim("split")
def _split(cx, x, sizes, axis, **_):
    n = cx.node_typed("Split", [x, cx.const(_i64(sizes))], {"axis": int(axis)}, outputs=len(sizes))
    return list(n.outputs)


@prim("pad")
def _pad(cx, x, value, padding_config, **_):
    x = cx.value(x)
    if any(interior for _, _, interior in padding_config):
        raise NotMapped("pad with interior padding")
    lo = [p[0] for p in padding_config]
    hi = [p[1] for p in padding_config]
    value = cx.value(value, cx.dtype(x))
    if all(p >= 0 for p in lo + hi):
        return cx.typed("Pad", x, cx.const(_i64(lo + hi)), value, mode="constant")
    pads = [max(p, 0) for p in lo] + [max(p, 0) for p in hi]
    y = cx.emit("Pad", x, cx.const(_i64(pads)), value, mode="constant")
    axes = [i for i, (a, b) in enumerate(zip(lo, hi, strict=True)) if a < 0 or b < 0]
    starts = [-min(lo[i], 0) for i in axes]
    ends = [min(hi[i], 0) or INT64_MAX for i in axes]
    return cx.typed("Slice", y, cx.const(_i64(starts)), cx.const(_i64(ends)), cx.const(_i64(axes)))


@prim("iota")
def _iota(cx, *_, dtype, shape, dimension, **__):
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        n = cx.emit("Squeeze", cx.dim_value(shape[dimension]))
        r = cx.emit("Cast", cx.emit("Range", cx.const(np.asarray(0, np.int64)), n, cx.const(np.asarray(1, np.int64))),
                    to=int(cx.out_dtype))  # fmt: skip
        view = [1] * len(shape)
        view[dimension] = -1
        r = cx.emit("Reshape", r, cx.const(_i64(view)))
        return cx.typed("Expand", r, _shape_vector(cx, shape))
    arr = np.arange(shape[dimension]).astype(to_numpy(cx.out_dtype))
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return cx.typed("Identity", cx.const(np.broadcast_to(arr.reshape(view), shape).copy()))


@prim("dim_as_value")
def _dim_as_value(cx, *_, dim, **__):
    return cx.typed("Cast", cx.emit("Squeeze", cx.dim_value(dim)), to=int(cx.out_dtype))
