"""Shapes and data movement: reshapes, slices, gathers and scatters, pads, ranges."""

from __future__ import annotations

import math

import numpy as np

from ....ops.checks import dropout_draws
from ....ops.geometry import clamp_slice as _clamp_slice
from ...table import Lowering, Refused, Rule, static
from .common import RULES, _axis, _jnp, _np_dtype, rule

# --- shapes and data movement -----------------------------------------------------------------


def _operand_or_attr(node, args, index: int, attr: str, what: str) -> list | None:
    """An operand that older opsets spelled as an attribute (``axes``, ``split``), as numbers."""
    if len(args) > index and args[index] is not None:
        return _ints(args[index], what)
    value = node.attr(attr)
    return None if value is None else list(value)


def _ints(x, what: str) -> list[int]:
    return [int(v) for v in static(x, what).reshape(-1)]


@rule("Reshape")
def _reshape(ctx, node, args):
    x = args[0]
    shape = _ints(args[1], "Reshape's shape")
    allowzero = node.attr("allowzero", 0)
    dims = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(shape)]
    return [x.reshape(dims)]


@rule("Flatten")
def _flatten(ctx, node, args):
    x = args[0]
    axis = _axis(node.attr("axis", 1), x.ndim)
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


@rule("Squeeze")
def _squeeze(ctx, node, args):
    x = args[0]
    axes = _operand_or_attr(node, args, 1, "axes", "Squeeze's axes")
    if axes is None:
        return [_jnp().squeeze(x)]
    return [_jnp().squeeze(x, tuple(_axis(int(a), x.ndim) for a in axes))]


@rule("Unsqueeze")
def _unsqueeze(ctx, node, args):
    x = args[0]
    axes = [int(a) for a in _operand_or_attr(node, args, 1, "axes", "Unsqueeze's axes")]
    rank = x.ndim + len(axes)
    return [_jnp().expand_dims(x, tuple(sorted(_axis(a, rank) for a in axes)))]


@rule("Transpose")
def _transpose(ctx, node, args):
    perm = node.attr("perm")
    return [_jnp().transpose(args[0], None if perm is None else tuple(perm))]


@rule("Concat")
def _concat(ctx, node, args):
    xs = [a for a in args if a is not None]
    return [_jnp().concatenate(xs, axis=node.attr("axis"))]


@rule("Split")
def _split(ctx, node, args):
    jnp, x = _jnp(), args[0]
    axis = _axis(node.attr("axis", 0), x.ndim)
    sizes = _operand_or_attr(node, args, 1, "split", "Split's sizes")
    n = len(node.outputs)
    if sizes is not None:
        sizes = [int(v) for v in sizes]
    else:
        length = x.shape[axis]
        if node.attr("num_outputs") is not None:
            chunk = -(-length // n)
            sizes = [min(chunk, length - i * chunk) for i in range(n)]
        else:
            sizes = [length // n] * n
    bounds = np.cumsum(sizes)[:-1].tolist()
    return list(jnp.split(x, bounds, axis=axis))


@rule("Slice")
def _slice(ctx, node, args):
    x = args[0]
    starts = _ints(args[1], "Slice's starts")
    ends = _ints(args[2], "Slice's ends")
    axes = _ints(args[3], "Slice's axes") if len(args) > 3 and args[3] is not None else list(range(len(starts)))
    steps = _ints(args[4], "Slice's steps") if len(args) > 4 and args[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        dim = x.shape[_axis(a, x.ndim)]
        index[_axis(a, x.ndim)] = slice(*_clamp_slice(s, e, st, dim))
    return [x[tuple(index)]]


@rule("Gather")
def _gather(ctx, node, args):
    jnp = _jnp()
    x, idx = args
    axis = _axis(node.attr("axis", 0), x.ndim)
    idx = jnp.where(idx < 0, idx + x.shape[axis], idx)
    return [jnp.take(x, idx, axis=axis, mode="clip")]


@rule("GatherElements")
def _gather_elements(ctx, node, args):
    jnp = _jnp()
    x, idx = args
    axis = _axis(node.attr("axis", 0), x.ndim)
    idx = jnp.where(idx < 0, idx + x.shape[axis], idx)
    return [jnp.take_along_axis(x, idx, axis=axis, mode="clip")]


@rule("GatherND")
def _gather_nd(ctx, node, args):
    jnp = _jnp()
    x, idx = jnp.asarray(args[0]), args[1]  # a constant's numpy array cannot be indexed by traced indices
    b = node.attr("batch_dims", 0)
    k = idx.shape[-1]
    dims = jnp.asarray(x.shape[b : b + k], dtype=idx.dtype)
    idx = jnp.where(idx < 0, idx + dims, idx)

    def one(xb, ib):
        flat = ib.reshape(-1, k)
        out = xb[tuple(flat[:, j] for j in range(k))]
        return out.reshape(*ib.shape[:-1], *xb.shape[k:])

    if b == 0:
        return [one(x, idx)]
    import jax

    lead = x.shape[:b]
    xf = x.reshape(-1, *x.shape[b:])
    idf = idx.reshape(-1, *idx.shape[b:])
    out = jax.vmap(one)(xf, idf)
    return [out.reshape(*lead, *out.shape[1:])]


@rule("Expand")
def _expand(ctx, node, args):
    jnp = _jnp()
    x = args[0]
    shape = _ints(args[1], "Expand's shape")
    target = np.broadcast_shapes(tuple(x.shape), tuple(shape))
    return [jnp.broadcast_to(x, target)]


@rule("Tile")
def _tile(ctx, node, args):
    return [_jnp().tile(args[0], _ints(args[1], "Tile's repeats"))]


def _pad_check(node):
    mode = node.attr("mode", "constant")
    return None if mode in ("constant", "reflect", "edge", "wrap") else f"Pad mode {mode!r}"


@rule("Pad", check=_pad_check)
def _pad(ctx, node, args):
    jnp = _jnp()
    x = args[0]
    pads = _ints(args[1], "Pad's pads") if len(args) > 1 and args[1] is not None else list(node.attr("pads"))
    value = args[2] if len(args) > 2 and args[2] is not None else None
    axes = _ints(args[3], "Pad's axes") if len(args) > 3 and args[3] is not None else list(range(x.ndim))
    axes = [_axis(a, x.ndim) for a in axes]
    widths = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[i + len(axes)])
    # negative pads crop
    crop = tuple(slice(-lo if lo < 0 else 0, (x.shape[a] + hi) if hi < 0 else None)
                 for a, (lo, hi) in enumerate(widths))  # fmt: skip
    x = x[crop]
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    mode = node.attr("mode", "constant")
    if mode == "constant":
        cval = jnp.zeros((), x.dtype) if value is None else jnp.asarray(value, x.dtype).reshape(())
        return [jnp.pad(x, widths, mode="constant", constant_values=cval)]
    return [jnp.pad(x, widths, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])]


@rule("Shape")
def _shape(ctx, node, args):
    shape = np.array(args[0].shape, dtype=np.int64) if _static_shape(args[0]) else None
    if shape is None:
        return [_jnp().asarray(args[0].shape, dtype=np.int64)[node.attr("start", 0) : node.attr("end", None)]]
    return [shape[node.attr("start", 0) : node.attr("end", None)]]


def _static_shape(x) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in x.shape)


@rule("Size")
def _size(ctx, node, args):
    x = args[0]
    if _static_shape(x):
        return [np.array(int(np.prod(x.shape)), dtype=np.int64)]
    return [_jnp().asarray(x.size, dtype=np.int64)]


@rule("ConstantOfShape")
def _constant_of_shape(ctx, node, args):
    shape = _ints(args[0], "ConstantOfShape's shape")
    value = node.attr("value")
    fill = np.zeros(1, np.float32) if value is None else value.numpy().reshape(-1)
    return [_jnp().full(shape, fill[0], dtype=fill.dtype)]


@rule("Range")
def _range(ctx, node, args):
    start, limit, delta = (static(a, "Range's bounds") for a in args)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return [(start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)]


@rule("EyeLike")
def _eye_like(ctx, node, args):
    jnp, x = _jnp(), args[0]
    dtype = _np_dtype(node.attr("dtype")) if node.attr("dtype") is not None else x.dtype
    return [jnp.eye(x.shape[0], x.shape[1], k=node.attr("k", 0), dtype=dtype)]


@rule("Trilu")
def _trilu(ctx, node, args):
    jnp, x = _jnp(), args[0]
    k = int(static(args[1], "Trilu's k")) if len(args) > 1 and args[1] is not None else 0
    return [jnp.triu(x, k) if node.attr("upper", 1) else jnp.tril(x, k)]


@rule("OneHot")
def _one_hot(ctx, node, args):
    jnp = _jnp()
    idx, depth, values = args
    depth = int(static(depth, "OneHot's depth").reshape(-1)[0])
    axis = node.attr("axis", -1)
    idx = jnp.where(idx < 0, idx + depth, idx)
    hot = jnp.arange(depth, dtype=idx.dtype)
    rank = idx.ndim + 1
    axis = _axis(axis, rank)
    mask = jnp.expand_dims(idx, axis) == hot.reshape([depth if i == axis else 1 for i in range(rank)])
    return [jnp.where(mask, values[1], values[0])]


def _cumulative(kind: str) -> Rule:
    def fn(ctx, node, args):
        from jax import lax

        jnp = _jnp()
        x = args[0]
        axis = _axis(int(static(args[1], f"{node.op_type}'s axis").reshape(-1)[0]), x.ndim)
        reverse = bool(node.attr("reverse", 0))
        scan = lax.cumsum if kind == "sum" else lax.cumprod
        y = scan(x, axis=axis, reverse=reverse)
        if node.attr("exclusive", 0):  # shift by one along the axis, the identity coming in
            identity = jnp.zeros_like if kind == "sum" else jnp.ones_like
            n = x.shape[axis]
            first = lax.slice_in_dim(identity(y), 0, 1, axis=axis)
            if reverse:
                y = jnp.concatenate([lax.slice_in_dim(y, 1, n, axis=axis), first], axis=axis)
            else:
                y = jnp.concatenate([first, lax.slice_in_dim(y, 0, n - 1, axis=axis)], axis=axis)
        return [y]

    return fn


RULES["CumSum"] = Lowering(_cumulative("sum"))
RULES["CumProd"] = Lowering(_cumulative("prod"))


@rule("DepthToSpace")
def _depth_to_space(ctx, node, args):
    jnp, x = _jnp(), args[0]
    b = node.attr("blocksize")
    n, c, h, w = x.shape
    if node.attr("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [jnp.reshape(y, (n, c // (b * b), h * b, w * b))]


@rule("SpaceToDepth")
def _space_to_depth(ctx, node, args):
    x = args[0]
    b = node.attr("blocksize")
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.transpose(0, 1, 3, 5, 2, 4) if node.attr("mode", "DCR") == "CRD" else y.transpose(0, 3, 5, 1, 2, 4)
    return [y.reshape(n, c * b * b, h // b, w // b)]


@rule("Einsum")
def _einsum(ctx, node, args):
    return [_jnp().einsum(node.attr("equation"), *args)]


def _scatter_check(node):
    red = node.attr("reduction", "none")
    return None if red in ("none", "add", "mul", "max", "min") else f"reduction {red!r}"


def _scatter_update(ref, index, updates, reduction: str):
    at = _jnp().asarray(ref).at[index]  # a constant operand arrives as numpy
    return {"none": at.set, "add": at.add, "mul": at.multiply, "max": at.max, "min": at.min}[reduction](
        updates, mode="promise_in_bounds" if reduction == "none" else None
    )


@rule("ScatterElements", "Scatter", check=_scatter_check)
def _scatter_elements(ctx, node, args):
    jnp = _jnp()
    x, idx, upd = args
    axis = _axis(node.attr("axis", 0), x.ndim)
    idx = jnp.where(idx < 0, idx + x.shape[axis], idx)
    grids = jnp.meshgrid(*[jnp.arange(d) for d in idx.shape], indexing="ij")
    index = tuple(idx if i == axis else grids[i] for i in range(x.ndim))
    return [_scatter_update(x, index, upd, node.attr("reduction", "none"))]


@rule("ScatterND", check=_scatter_check)
def _scatter_nd(ctx, node, args):
    jnp = _jnp()
    x, idx, upd = args
    k = idx.shape[-1]
    dims = jnp.asarray(x.shape[:k], dtype=idx.dtype)
    idx = jnp.where(idx < 0, idx + dims, idx)
    index = tuple(idx[..., j] for j in range(k))
    return [_scatter_update(x, index, upd, node.attr("reduction", "none"))]


@rule("Dropout", check=dropout_draws)
def _dropout(ctx, node, args):
    jnp, x = _jnp(), args[0]
    why = dropout_draws(node)
    if why:
        raise Refused(why)
    outs = [x]
    if len(node.outputs) > 1:
        outs.append(jnp.ones(x.shape, dtype=bool))
    return outs
