"""Shapes and data movement, and the values known when the module is built (Size, Range, ...)."""

from __future__ import annotations

import numpy as np

from ....ops.geometry import clamp_slice
from ...table import static
from .common import _axis, _ints, _op, _s, rule

# --- shapes -----------------------------------------------------------------------------------


@rule("Reshape")
def _reshape(ctx, node, args):
    x = ctx.expr(args[0])
    shape = _ints(args[1], "Reshape's shape")
    dims = ctx.shape(x)
    allowzero = node.attr("allowzero", 0)
    target = [dims[i] if d == 0 and not allowzero else d for i, d in enumerate(shape)]
    if allowzero and 0 in target:  # Relax reads 0 as "keep this dim": the result is empty anyway
        if -1 in target:
            target = [0 if d == -1 else d for d in target]
        return [_op().zeros(target, ctx.dtype(x))]
    return [_op().reshape(x, target)]


@rule("Flatten")
def _flatten(ctx, node, args):
    x = ctx.expr(args[0])
    dims = ctx.shape(x)
    axis = _axis(node.attr("axis", 1), len(dims))
    lead = int(np.prod(dims[:axis])) if axis else 1
    return [_op().reshape(x, [lead, int(np.prod(dims[axis:]))])]


@rule("Transpose")
def _transpose(ctx, node, args):
    perm = node.attr("perm")
    return [_op().permute_dims(ctx.expr(args[0]), None if perm is None else list(perm))]


@rule("Concat")
def _concat(ctx, node, args):
    return [_op().concat([ctx.expr(a) for a in args if a is not None], axis=node.attr("axis"))]


@rule("Squeeze")
def _squeeze(ctx, node, args):
    x = ctx.expr(args[0])
    axes = _ints(args[1], "Squeeze's axes") if len(args) > 1 and args[1] is not None else node.attr("axes")
    return [_op().squeeze(x, None if axes is None else [_axis(a, len(ctx.shape(x))) for a in axes])]


@rule("Unsqueeze")
def _unsqueeze(ctx, node, args):
    x = ctx.expr(args[0])
    axes = _ints(args[1], "Unsqueeze's axes") if len(args) > 1 and args[1] is not None else list(node.attr("axes"))
    rank = len(ctx.shape(x)) + len(axes)
    for a in sorted(_axis(a, rank) for a in axes):
        x = _op().expand_dims(x, a)
    return [x]


@rule("Gather")
def _gather(ctx, node, args):
    x = ctx.expr(args[0])
    axis = _axis(node.attr("axis", 0), len(ctx.shape(x)))
    op, idx = _op(), args[1]
    if isinstance(idx, np.ndarray):
        idx = ctx.expr(np.where(idx < 0, idx + ctx.shape(x)[axis], idx).astype(np.int64))
    else:  # negative indices count from the end
        dim = _s(ctx, ctx.shape(x)[axis], idx)
        idx = op.where(op.less(idx, _s(ctx, 0, idx)), op.add(idx, dim), idx)
    return [op.take(x, idx, axis=axis, mode="clip")]  # out of range clips, as XLA does, never reads past


@rule("Slice")
def _slice(ctx, node, args):
    x = ctx.expr(args[0])
    dims = ctx.shape(x)
    starts, ends = _ints(args[1], "Slice's starts"), _ints(args[2], "Slice's ends")
    axes = _ints(args[3], "Slice's axes") if len(args) > 3 and args[3] is not None else list(range(len(starts)))
    steps = _ints(args[4], "Slice's steps") if len(args) > 4 and args[4] is not None else [1] * len(starts)
    if any(s < 0 for s in steps):  # a gather of the indices Python's slice gives
        for s, en, a, st in zip(starts, ends, axes, steps, strict=True):
            a = _axis(a, len(dims))
            index = np.arange(dims[a])[slice(*clamp_slice(s, en, st, dims[a]))].astype(np.int64)
            x = _op().take(x, ctx.expr(index), axis=a)
        return [x]
    b, e, ax = [], [], []
    for s, en, a, st in zip(starts, ends, axes, steps, strict=True):
        a = _axis(a, len(dims))
        lo, hi, _ = clamp_slice(s, en, st, dims[a])
        b.append(lo)
        e.append(hi)
        ax.append(a)
    return [_op().strided_slice(x, ax, b, e, steps, assume_inbound=True)]


@rule("Split")
def _split(ctx, node, args):
    x = ctx.expr(args[0])
    dims = ctx.shape(x)
    axis = _axis(node.attr("axis", 0), len(dims))
    sizes = _ints(args[1], "Split's sizes") if len(args) > 1 and args[1] is not None else node.attr("split")
    n = len(node.outputs)
    if sizes is None:
        if node.attr("num_outputs") is not None:
            chunk = -(-dims[axis] // n)
            sizes = [min(chunk, dims[axis] - i * chunk) for i in range(n)]
        else:
            sizes = [dims[axis] // n] * n
    if any(int(v) <= 0 for v in sizes):  # empty parts: each a slice of its own (or zeros)
        out, start = [], 0
        for size in (int(v) for v in sizes):
            if size == 0:
                shape = list(dims)
                shape[axis] = 0
                out.append(_op().zeros(shape, ctx.dtype(x)))
            else:
                out.append(_op().strided_slice(x, [axis], [start], [start + size], assume_inbound=True))
            start += size
        return out
    bounds = np.cumsum(sizes)[:-1].tolist()
    parts = ctx.emit(_op().split(x, bounds, axis=axis))
    from tvm import relax

    return [relax.TupleGetItem(parts, i) for i in range(n)]


@rule("Expand")
def _expand(ctx, node, args):
    x = ctx.expr(args[0])
    target = np.broadcast_shapes(tuple(ctx.shape(x)), tuple(_ints(args[1], "Expand's shape")))
    return [_op().broadcast_to(x, list(target))]


@rule("Shape")
def _shape(ctx, node, args):
    dims = ctx.shape(ctx.expr(args[0]))
    return [np.array(dims, np.int64)[node.attr("start", 0) : node.attr("end", None)]]


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


@rule("Pad")
def _pad(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    mode = _PAD_MODES[node.attr("mode", "constant")]
    given_pads = _ints(args[1], "Pad's pads")
    dims = ctx.shape(x)
    rank = len(dims)
    axes = _ints(args[3], "Pad's axes") if len(args) > 3 and args[3] is not None else list(range(rank))
    pads = [0] * (2 * rank)
    for i, a in enumerate(axes):
        a = _axis(a, rank)
        pads[a], pads[a + rank] = given_pads[i], given_pads[i + len(axes)]
    if any(p < 0 for p in pads):  # negative pads crop: a slice first
        begin = [max(-pads[i], 0) for i in range(rank)]
        end = [dims[i] - max(-pads[i + rank], 0) for i in range(rank)]
        x = op.strided_slice(x, list(range(rank)), begin, end, assume_inbound=True)
        pads = [max(p, 0) for p in pads]
    value, traced = 0.0, None
    if len(args) > 2 and args[2] is not None:
        if isinstance(args[2], np.ndarray):
            value = float(args[2].reshape(-1)[0])
        else:  # a value known only at run time: pad with zeros, then put it where the pads are
            traced = op.reshape(args[2], [])
    width = [v for i in range(rank) for v in (pads[i], pads[i + rank])]
    if not any(width):
        return [x]
    padded = op.nn.pad(x, width, pad_mode=mode, pad_value=value)
    if traced is not None:
        inside = op.nn.pad(op.ones_like(x), width, pad_value=0.0)
        padded = op.where(op.equal(inside, _s(ctx, 1, x)), padded, traced)
    return [padded]


# --- values known when the module is built -------------------------------------------------------


@rule("Size")
def _size(ctx, node, args):
    return [np.array(int(np.prod(ctx.shape(ctx.expr(args[0])))), np.int64)]


@rule("ConstantOfShape")
def _constant_of_shape(ctx, node, args):
    shape = _ints(args[0], "ConstantOfShape's shape")
    value = node.attr("value")
    fill = np.zeros(1, np.float32) if value is None else value.numpy().reshape(-1)
    return [_op().full(shape, ctx.expr(fill[:1].reshape(())), str(fill.dtype))]


@rule("Range")
def _range(ctx, node, args):
    start, limit, delta = (static(a, "Range's bounds") for a in args)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return [(start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)]
