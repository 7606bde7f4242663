"""Complex tensors as real ones with a trailing axis of 2 (real, imaginary): the layout of
``torch.view_as_real`` and of ONNX's ``DFT``, which is the one ONNX op that computes on complex
numbers.  The frontends (:mod:`~irforge.frontends.torch.complex`, :mod:`~irforge.frontends.jax.complex`)
hold every complex value this way; these are the operations on the layout they share.

``cx`` is a frontend's emitter: typed values in, typed values out (their shapes include the pair
axis), and ``cx.importer.require_opset`` raises the model's opset where ``DFT`` needs it.
"""

from __future__ import annotations

import numpy as np

from ...core_ir.dtypes import DataType
from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import NotMapped

DFT_OPSET = 20
"""``DFT`` takes its axis as an input from opset 20."""
PART_DTYPE = {DataType.COMPLEX64: DataType.FLOAT, DataType.COMPLEX128: DataType.DOUBLE}
"""The dtype of a complex dtype's real and imaginary parts."""

_LAST = np.asarray([-1], np.int64)


def part_dtype(complex_dtype: DataType) -> DataType:
    if complex_dtype not in PART_DTYPE:
        raise NotMapped(f"complex dtype {complex_dtype.name}")
    return PART_DTYPE[complex_dtype]


def static_size(cx, v: Value, axis: int) -> int:
    n = v.type.shape[axis]
    if not isinstance(n, int):
        raise NotMapped("an FFT or complex op over a symbolic size")
    return n


def part(cx, x: Value, index: int) -> Value:
    """The real (0) or imaginary (1) part of pair tensor ``x``."""
    out = cx.emit("Gather", x, cx.const(np.asarray(index, np.int64)), axis=-1)
    if x.type is not None and x.type.shape is not None:
        out.type = TensorType(x.type.dtype, x.type.shape[:-1])
    return out


def pair(cx, re: Value, im: Value) -> Value:
    last = cx.const(_LAST)
    return cx.emit("Concat", cx.emit("Unsqueeze", re, last), cx.emit("Unsqueeze", im, last), axis=-1)


def from_real(cx, x: Value, dtype: DataType) -> Value:
    """Real tensor ``x`` as a pair tensor of part dtype ``dtype``, its imaginary part zero (not
    ``x * 0``: that is NaN where ``x`` is infinite)."""
    rank = len(x.type.shape)
    real = cx.emit("Unsqueeze", cx.cast(x, dtype), cx.const(_LAST))
    out = cx.emit("Pad", real, cx.const(np.asarray([0] * (2 * rank + 1) + [1], np.int64)))
    out.type = TensorType(dtype, (*x.type.shape, 2))
    return out


def constant(cx, array: np.ndarray, dtype: DataType) -> Value:
    """A complex (or real) numpy constant in the pair layout."""
    array = np.asarray(array)
    return cx.const(np.stack([array.real, array.imag], axis=-1), dtype)


def conjugate(cx, x: Value, dtype: DataType | None = None) -> Value:
    return cx.emit("Mul", x, cx.const(np.asarray([1, -1]), dtype or x.type.dtype))


def multiply(cx, a: Value, b: Value) -> Value:
    """The complex product of pair tensors ``a`` and ``b`` (broadcasting)."""
    ar, ai, br, bi = part(cx, a, 0), part(cx, a, 1), part(cx, b, 0), part(cx, b, 1)
    re = cx.emit("Sub", cx.emit("Mul", ar, br), cx.emit("Mul", ai, bi))
    im = cx.emit("Add", cx.emit("Mul", ar, bi), cx.emit("Mul", ai, br))
    return pair(cx, re, im)


def magnitude(cx, x: Value) -> Value:
    return cx.emit("ReduceL2", x, cx.const(_LAST), keepdims=0)


def dft(cx, x: Value, axis: int, *, inverse: bool = False, onesided: bool = False, scaled: bool = False) -> Value:
    """One ``DFT`` along ``axis`` of pair (or ``[..., 1]`` real) tensor ``x``.  ONNX's inverse divides
    by n; with ``scaled=False`` that is undone, so both directions are plain sums."""
    cx.importer.require_opset(DFT_OPSET)
    n = static_size(cx, x, axis)
    dtype = x.type.dtype
    y = cx.emit("DFT", x, None, cx.const(np.asarray(axis, np.int64)), inverse=int(inverse), onesided=int(onesided))
    shape = list(x.type.shape)
    shape[axis], shape[-1] = (n // 2 + 1 if onesided else n), 2
    y.type = TensorType(dtype, tuple(shape))
    if inverse and not scaled:
        y = cx.emit("Mul", y, cx.const(np.asarray(n), dtype))
        y.type = TensorType(dtype, tuple(shape))
    return y


def real_to_complex(cx, x: Value, axes: list[int], dtype: DataType) -> Value:
    """The forward transform of real ``x`` over ``axes`` (axes of ``x``), the last one one-sided
    (n // 2 + 1 terms): real-to-complex along it first, then complex along the others, as
    pocketfft and XLA order them.  Unnormalized."""
    y = cx.emit("Unsqueeze", cx.cast(x, dtype), cx.const(_LAST))
    y.type = TensorType(dtype, (*x.type.shape, 1))
    y = dft(cx, y, axes[-1], onesided=True)
    for axis in axes[:-1]:
        y = dft(cx, y, axis)
    return y


def complex_to_real(cx, x: Value, axes: list[int], n: int, *, scaled: bool) -> Value:
    """The inverse transform over ``axes`` of pair tensor ``x`` whose last axis holds the
    ``n // 2 + 1`` terms of a real signal of length ``n``: complex inverses over the other axes,
    then the last from its half spectrum, the other half being its conjugate mirror.  The real
    part of that inverse is the signal (the imaginary parts of the DC and Nyquist terms drop out,
    as in pocketfft's c2r).  ``scaled`` divides by the signal sizes as an inverse FFT does."""
    for axis in axes[:-1]:
        x = dft(cx, x, axis, inverse=True, scaled=scaled)
    axis = axes[-1]
    half = n // 2 + 1
    have = static_size(cx, x, axis)
    dtype, shape = x.type.dtype, list(x.type.shape)
    ax = cx.const(np.asarray([axis], np.int64))
    if have > half:
        x = cx.emit("Slice", x, cx.int64s([0]), cx.int64s([half]), ax)
    elif have < half:
        pads = [0] * (2 * len(shape))
        pads[len(shape) + axis] = half - have
        x = cx.emit("Pad", x, cx.int64s(pads))
    shape[axis] = half
    x.type = TensorType(dtype, tuple(shape))
    if n - half > 0:
        mirror = cx.emit("Slice", x, cx.int64s([n - half]), cx.int64s([0]), ax, cx.int64s([-1]))
        x = cx.emit("Concat", x, conjugate(cx, mirror, dtype), axis=axis)
        shape[axis] = n
        x.type = TensorType(dtype, tuple(shape))
    return part(cx, dft(cx, x, axis, inverse=True, scaled=scaled), 0)
