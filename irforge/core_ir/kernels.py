"""Kernels for the standard ops whose ONNX reference kernel is wrong or fails on valid input.

The reference interpreter runs these instead (it is the oracle of the tests and the engine of
constant folding, so a wrong kernel there is a wrong answer everywhere); ``grid_sample`` takes
the array module it computes with, so the StableHLO lowering traces the very same code.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np


def gather_elements(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """ONNX's reference kernel goes through ``np.choose``, which takes at most 64 choices: it
    fails on any axis longer than that (past rank 2).  ``take_along_axis`` has no such limit."""
    axis = axis + data.ndim if axis < 0 else axis
    indices = np.asarray(indices, dtype=np.int64)
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    # the other dims of the indices may be shorter than the data's: those elements are not read
    data = data[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(indices.shape))]
    return np.take_along_axis(data, indices, axis=axis)


def max_pool(x: np.ndarray, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None,
              storage_order=0, strides=None):  # fmt: skip
    """ONNX's reference MaxPool gives wrong ``Indices`` in 3-D and fails on some 3-D pads; this
    one takes every window at once.  A window's maximum is its first largest element (a NaN
    wins, as in XLA and torch); ``Indices`` are positions in the flattened input, row-major (or,
    with ``storage_order=1``, column-major within each plane)."""
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    kernel = [int(k) for k in kernel_shape]
    n = len(kernel)
    spatial = x.shape[2:]
    strides = [int(s) for s in strides] if strides else [1] * n
    dilations = [int(d) for d in dilations] if dilations else [1] * n
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    begin, end, out = [], [], []
    for i in range(n):
        size, s, e = spatial[i], strides[i], extent[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // s)
            total = max((o - 1) * s + e - size, 0)
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            hi = total - lo
        else:
            lo, hi = (0, 0) if auto_pad == "VALID" else (int(pads[i]), int(pads[i + n])) if pads else (0, 0)
            room = size + lo + hi - e
            o = (-(-room // s) if ceil_mode else room // s) + 1
            if ceil_mode and (o - 1) * s >= size + lo:
                o -= 1  # the last window must start inside the input or the left pad
        begin.append(lo)
        end.append(max(hi, (o - 1) * s + e - size - lo))
        out.append(o)
    low = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    width = [(0, 0), (0, 0), *zip(begin, end, strict=True)]
    padded = np.pad(x, width, constant_values=low)
    planes = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2] + (1,) * n) * int(np.prod(spatial))
    grids = np.meshgrid(*[np.arange(d, dtype=np.int64) for d in spatial], indexing="ij")
    order = list(range(n)) if not storage_order else list(range(n))[::-1]
    place = np.zeros(spatial, np.int64)
    for i in order:  # row-major: the last dim varies fastest; column-major: the first
        place = place * spatial[i] + grids[i]
    positions = np.pad(planes + place, width, constant_values=np.iinfo(np.int64).max)
    axes = tuple(range(2, 2 + n))
    views = []
    for a in (padded, positions):
        w = np.lib.stride_tricks.sliding_window_view(a, extent, axis=axes)
        w = w[(Ellipsis, *[slice(None, None, d) for d in dilations])]  # the dilated taps
        w = w[(slice(None), slice(None), *[slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides, strict=True)])]
        views.append(w.reshape((*w.shape[: 2 + n], -1)))
    values, where = views
    nan = np.isnan(values) if np.issubdtype(values.dtype, np.floating) else np.zeros(values.shape, bool)
    best = np.where(nan.any(axis=-1), nan.argmax(axis=-1), values.argmax(axis=-1))[..., None]
    y = np.take_along_axis(values, best, axis=-1)[..., 0]
    return y, np.take_along_axis(where, best, axis=-1)[..., 0]


GRID_MODES = {"bilinear": "linear", "bicubic": "cubic", "linear": "linear", "nearest": "nearest", "cubic": "cubic"}
"""GridSample's modes by their names at opset 16 and from opset 20 on."""


def grid_sample(x, grid, *, mode: Any = "linear", padding_mode: Any = "zeros", align_corners: int = 0, xp: Any = np):
    """GridSample as onnxruntime and torch compute it.  Each output point's normalized
    coordinates (the grid's last axis, innermost dim first) are mapped onto the input; the 1,
    2^n or 4^n taps around it (nearest, linear, cubic) are weighted, and a tap outside the input
    reads 0, the border or its mirror.  For nearest and linear sampling a coordinate outside the
    input is first moved in by the padding mode, as ONNX's reference does; cubic sampling with
    border padding clamps its taps only (ONNX's reference clamps the coordinate first, which
    onnxruntime and torch do not)."""
    mode = GRID_MODES[mode.decode() if isinstance(mode, bytes) else mode]
    padding = padding_mode.decode() if isinstance(padding_mode, bytes) else padding_mode
    align = bool(align_corners)
    n, dims = x.ndim - 2, x.shape[2:]
    batch, out = x.shape[0], grid.shape[1:-1]
    taps_per_dim = []
    for i, d in enumerate(dims):
        g = grid[..., n - 1 - i]
        pos = (g + 1) / 2 * (d - 1) if align else ((g + 1) * d - 1) / 2
        if mode == "nearest":
            pos = xp.round(pos)  # half to even, as torch rounds
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        outside = (pos < lo) | (pos > hi)
        if padding == "border" and mode != "cubic":
            pos = xp.where(outside, xp.clip(pos, 0, d - 1), pos)
        elif padding == "reflection":
            pos = xp.where(outside, _reflect(pos, lo, hi, xp), pos)
        if mode == "nearest":
            starts, weights = [xp.trunc(pos)], [xp.ones_like(pos)]
        else:
            base = xp.floor(pos)
            t = pos - base
            if mode == "linear":
                starts, weights = [base, base + 1], [1 - t, t]
            else:
                starts, weights = [base - 1, base, base + 1, base + 2], _cubic_weights(t)
        taps = []
        for start, weight in zip(starts, weights, strict=True):
            if padding == "reflection":
                start = xp.trunc(_reflect(start, lo, hi, xp))
            index = start.astype(xp.int64)
            if padding == "zeros":
                weight = xp.where((index >= 0) & (index < d), weight, 0)
            taps.append((xp.clip(index, 0, d - 1), weight))
        taps_per_dim.append(taps)
    flat = x.reshape(batch, x.shape[1], -1)
    strides = [int(np.prod(dims[i + 1:])) for i in range(n)]
    total = None
    for combo in itertools.product(*taps_per_dim):
        place = sum(index * stride for (index, _), stride in zip(combo, strides, strict=True))
        weight = combo[0][1]
        for _, w in combo[1:]:
            weight = weight * w
        picked = xp.take_along_axis(flat, place.reshape(batch, 1, -1), axis=2).reshape(batch, x.shape[1], *out)
        term = picked * weight.reshape(batch, 1, *out).astype(x.dtype)
        total = term if total is None else total + term
    return total


def _reflect(pos, lo: float, hi: float, xp):
    """``pos`` folded back into ``[lo, hi]`` by mirroring at the near border, again and again."""
    span = hi - lo
    if span <= 0:
        return xp.full_like(pos, lo)
    below = pos < lo
    dist = xp.where(below, lo - pos, pos - hi)
    turns = xp.floor(dist / span)
    rest = dist - turns * span
    even = xp.mod(turns, 2) == 0
    folded = xp.where(below, xp.where(even, lo + rest, hi - rest), xp.where(even, hi - rest, lo + rest))
    return xp.where((pos < lo) | (pos > hi), folded, pos)


def _cubic_weights(t):
    """Keys' cubic convolution weights (a = -0.75) of the four taps around ``t`` in [0, 1)."""
    a = -0.75
    return [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
            ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]  # fmt: skip


def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, group: int = 1, **attrs):
    """ONNX's reference ConvTranspose is right for one group only: with more it slices the weights by
    output instead of input channel and keeps one output channel per group.  Each group goes
    through it alone here, the bias added once."""
    from onnx.reference.ops.op_conv_transpose import ConvTranspose

    def one_group(xs, ws, bs):  # its one-group path reads nothing from the kernel instance
        return ConvTranspose._run(None, xs, ws, bs, group=1, **attrs)[0]

    if group == 1:
        return one_group(x, w, b)
    per_group = x.shape[1] // group
    parts = [one_group(x[:, g * per_group:(g + 1) * per_group], w[g * per_group:(g + 1) * per_group], None)
             for g in range(group)]  # fmt: skip
    y = np.concatenate(parts, axis=1)
    if b is not None:
        y = y + b.reshape(1, -1, *[1] * (y.ndim - 2))
    return y.astype(x.dtype)


def batch_normalization(x, scale, bias, mean, var, *, epsilon=1e-5, momentum=None, training_mode=0, **_):
    """ONNX's reference BatchNormalization of opsets 9 to 13 normalises with the batch's own
    statistics whenever ``momentum`` is set, and the schema's default always sets it; inference
    (the only mode before opset 14) uses the running mean and variance."""
    from onnx.reference.ops.op_batch_normalization import _batchnorm_test_mode, _batchnorm_training_mode

    if training_mode:
        y, _, _, running_mean, running_var = _batchnorm_training_mode(
            x, scale, bias, mean, var, 0.9 if momentum is None else momentum, epsilon
        )
        return y, running_mean, running_var
    return _batchnorm_test_mode(x, scale, bias, mean, var, epsilon=epsilon)
