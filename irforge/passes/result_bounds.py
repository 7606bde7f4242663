"""How large a node's results can be, computed from its constant inputs without running it.

Constant folding asks before it computes: ONNX's shape inference gives most results' sizes, and
for the ops whose result size depends on input *values* in ways inference may not resolve
(Range, NonZero, Unique, Compress, TopK, Tile, Expand, Resize, Pad, OneHot, windows, ...) this
module gives an explicit upper bound from those values.  An op with neither is never evaluated:
a model holding ``Range(0, 10**10, 1)`` is valid, and the optimizer must leave that op alone and
still optimize the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

Bound = Callable[[Sequence[np.ndarray | None], dict], int | None]
"""(input arrays, attributes) -> an upper bound on the total bytes of all results, or None."""

_ITEM = 16  # no ONNX tensor element is wider (complex128); strings are bounded separately


def _numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def _scalar(a: np.ndarray | None) -> float | None:
    if a is None or a.size != 1:
        return None
    return float(a.reshape(-1)[0])


def _range(args, attrs) -> int | None:
    start, limit, delta = (_scalar(a) for a in args[:3])
    if None in (start, limit, delta) or delta == 0 or not all(map(math.isfinite, (start, limit, delta))):
        return None
    return max(math.ceil((limit - start) / delta), 0) * _ITEM


def _broadcast_numel(shapes: Sequence[Sequence[int]]) -> int:
    rank = max((len(s) for s in shapes), default=0)
    dims = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, rank - len(s)):
            dims[i] = max(dims[i], int(d))
    return _numel(dims)


def _expand(args, attrs) -> int | None:
    x, shape = args[0], args[1]
    if x is None or shape is None:
        return None
    return _broadcast_numel([x.shape, [max(int(d), 0) for d in shape.reshape(-1)]]) * _ITEM


def _tile(args, attrs) -> int | None:
    x, repeats = args[0], args[1]
    if x is None or repeats is None:
        return None
    return x.size * _numel(max(int(r), 0) for r in repeats.reshape(-1)) * _ITEM


def _constant_of_shape(args, attrs) -> int | None:
    shape = args[0]
    return None if shape is None else _numel(max(int(d), 0) for d in shape.reshape(-1)) * _ITEM


def _pad(args, attrs) -> int | None:
    x = args[0]
    pads = args[1] if len(args) > 1 and args[1] is not None else np.asarray(attrs.get("pads", ()))
    if x is None or pads.size == 0:
        return None
    pads = [int(p) for p in pads.reshape(-1)]
    axes = args[3] if len(args) > 3 and args[3] is not None else None
    axes_list = list(range(x.ndim)) if axes is None else [int(a) % x.ndim for a in axes.reshape(-1)]
    if len(pads) != 2 * len(axes_list):
        return None
    dims = list(x.shape)
    for k, axis in enumerate(axes_list):
        dims[axis] = max(dims[axis] + pads[k] + pads[k + len(axes_list)], 0)
    return _numel(dims) * _ITEM


def _resize(args, attrs) -> int | None:
    x = args[0]
    if x is None:
        return None
    scales = args[2] if len(args) > 2 and args[2] is not None and args[2].size else None
    sizes = args[3] if len(args) > 3 and args[3] is not None and args[3].size else None
    axes = attrs.get("axes")
    targets = [int(a) % max(x.ndim, 1) for a in axes] if axes is not None else list(range(x.ndim))
    dims = list(x.shape)
    if sizes is not None:
        for axis, size in zip(targets, sizes.reshape(-1), strict=False):
            dims[axis] = max(int(size), 0)
    elif scales is not None:
        factors = [float(v) for v in scales.reshape(-1)]
        if not all(math.isfinite(f) and f >= 0 for f in factors):
            return None
        for axis, f in zip(targets, factors, strict=False):
            dims[axis] = math.floor(dims[axis] * f) + 1
    else:
        return None
    return _numel(dims) * _ITEM


def _upsample(args, attrs) -> int | None:
    return _resize([args[0], None, args[1] if len(args) > 1 else None], attrs)


def _one_hot(args, attrs) -> int | None:
    indices, depth = args[0], _scalar(args[1]) if len(args) > 1 else None
    if indices is None or depth is None or not math.isfinite(depth):
        return None
    return indices.size * max(int(depth), 0) * _ITEM


def _window(args, attrs) -> int | None:
    size = _scalar(args[0])
    return None if size is None or not math.isfinite(size) else max(int(size), 0) * _ITEM


def _mel(args, attrs) -> int | None:
    bins, dft = _scalar(args[0]), _scalar(args[1])
    if bins is None or dft is None or not (math.isfinite(bins) and math.isfinite(dft)):
        return None
    return max(int(bins), 0) * (max(int(dft), 0) // 2 + 1) * _ITEM


def _input_sized(factor: int) -> Bound:
    """Results no larger than ``factor`` times the first input's element count (NonZero: one
    index per dimension per element; Unique: four outputs of at most the input's size)."""

    def bound(args, attrs) -> int | None:
        x = args[0]
        return None if x is None else max(x.size, 1) * max(x.ndim, 1) * factor * _ITEM

    return bound


def _top_k(args, attrs) -> int | None:
    x, k = args[0], _scalar(args[1]) if len(args) > 1 else None
    if x is None or k is None or x.ndim == 0:
        return None
    axis = int(attrs.get("axis", -1)) % x.ndim
    rows = x.size // max(x.shape[axis], 1)
    return rows * min(max(int(k), 0), x.shape[axis]) * 2 * _ITEM


BOUNDS: dict[str, Bound] = {
    "Range": _range,
    "Expand": _expand,
    "Tile": _tile,
    "ConstantOfShape": _constant_of_shape,
    "Pad": _pad,
    "Resize": _resize,
    "Upsample": _upsample,
    "OneHot": _one_hot,
    "HannWindow": _window,
    "HammingWindow": _window,
    "BlackmanWindow": _window,
    "MelWeightMatrix": _mel,
    "NonZero": _input_sized(1),
    "Unique": _input_sized(4),
    "Compress": _input_sized(1),
    "TopK": _top_k,
}
"""Ops whose result size may hang on input values, with a bound computed from those values."""


def result_bound(op_type: str, args: Sequence[np.ndarray | None], attrs: dict) -> int | None:
    """An upper bound, in bytes, on what ``op_type`` produces from ``args``; ``None`` when this
    module cannot bound it (the caller must then not evaluate the op)."""
    bound = BOUNDS.get(op_type)
    if bound is None:
        return None
    try:
        return bound(args, attrs)
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
