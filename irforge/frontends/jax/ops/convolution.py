"""Convolution (jax's ``lax.convolution``): conv_general_dilated with its dimension numbers."""

from __future__ import annotations

import numpy as np

from ....core_ir.value import Value
from ...common import NotMapped
from .common import _i64, prim


@prim("conv_general_dilated")
def _conv(cx, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
          feature_group_count, batch_group_count, preferred_element_type=None, **_):  # fmt: skip
    """Conv on NC... / OI... layouts transposed from any dimension numbers; an lhs dilation (what
    a transposed convolution is in JAX) spreads the input with zeros first, and negative padding
    crops it."""
    if batch_group_count != 1:
        raise NotMapped("convolution with batch_group_count")
    if isinstance(padding, str):
        raise NotMapped(f"convolution padding {padding!r}")
    if any(d == 0 for d in cx.out_shape):
        from ....core_ir.dtypes import to_numpy as numpy_of

        return cx.typed("Identity", cx.const(np.zeros(cx.out_shape, numpy_of(cx.out_dtype))))
    lhs, rhs = cx.value(lhs), cx.value(rhs)
    if cx.dtype(lhs) != cx.out_dtype:  # preferred_element_type: compute in the result's type
        lhs = cx.emit("Cast", lhs, to=int(cx.out_dtype))
    if cx.dtype(rhs) != cx.out_dtype:
        rhs = cx.emit("Cast", rhs, to=int(cx.out_dtype))
    lspec, rspec, ospec = dimension_numbers
    lperm, rperm = list(lspec), list(rspec)
    in_shape = [cx.shape(lhs)[d] for d in lperm]
    x = lhs if lperm == sorted(lperm) else cx.emit("Transpose", lhs, perm=lperm)
    w = rhs if rperm == sorted(rperm) else cx.emit("Transpose", rhs, perm=rperm)
    for k, d in enumerate(lhs_dilation):
        if d != 1:
            x, in_shape = _dilate(cx, x, in_shape, 2 + k, int(d))
    lo, hi = [p[0] for p in padding], [p[1] for p in padding]
    if any(p < 0 for p in lo + hi):  # crop, then pad only what is left to pad
        axes = [2 + k for k in range(len(lo))]
        if not all(isinstance(in_shape[a], int) for a in axes):
            raise NotMapped("negative convolution padding over symbolic sizes")
        starts = [max(-p, 0) for p in lo]
        ends = [in_shape[a] - max(-p, 0) for a, p in zip(axes, hi, strict=True)]
        x = cx.emit("Slice", x, cx.const(_i64(starts)), cx.const(_i64(ends)), cx.const(_i64(axes)))
        lo, hi = [max(p, 0) for p in lo], [max(p, 0) for p in hi]
    y = cx.emit("Conv", x, w, strides=list(window_strides), pads=lo + hi, dilations=list(rhs_dilation),
                group=int(feature_group_count))  # fmt: skip
    operm = [0] * len(ospec)  # NCHW → the output layout: output axis ospec[i] holds NCHW axis i
    for i, axis in enumerate(ospec):
        operm[axis] = i
    if operm == sorted(operm):
        return cx.typed("Identity", y)
    return cx.typed("Transpose", y, perm=operm)


def _dilate(cx, x: Value, shape: list, axis: int, d: int) -> tuple[Value, list]:
    """``d - 1`` zeros between neighbours along ``axis``: n elements become (n - 1) * d + 1."""
    if not all(isinstance(s, int) for s in shape):
        raise NotMapped("lhs dilation over symbolic sizes")
    n = shape[axis]
    y = cx.emit("Unsqueeze", x, cx.const(_i64([axis + 1])))
    pads = [0] * (2 * (len(shape) + 1))
    pads[len(shape) + 1 + axis + 1] = d - 1
    y = cx.emit("Pad", y, cx.const(_i64(pads)))
    merged = [*shape[:axis], n * d, *shape[axis + 1:]]
    y = cx.emit("Reshape", y, cx.const(_i64(merged)))
    size = max((n - 1) * d + 1, 0)
    y = cx.emit("Slice", y, cx.const(_i64([0])), cx.const(_i64([size])), cx.const(_i64([axis])))
    return y, [*shape[:axis], size, *shape[axis + 1:]]
