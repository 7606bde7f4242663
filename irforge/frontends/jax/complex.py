"""Complex values in the JAX frontend, held as (real, imaginary) pairs (:mod:`complex_pairs`).

An equation that reads or makes a complex value is looked up in :data:`TABLE` only, so a
primitive without a converter for the layout is reported as unsupported "on complex numbers"
(never computed on the pairs as if they were reals, never kept); the call wrappers (``pjit``,
``custom_jvp_call``, ...) only pass values through to the equations they inline, each checked on
its own.  Complex function arguments and results are refused: a function takes and returns
``(real, imag)`` arrays or ``jnp.stack`` of them instead.  ``fft`` covers every ``jnp.fft``
function: FFT and IFFT on pairs, RFFT and IRFFT between real signals and half spectra.
"""

from __future__ import annotations

import numpy as np

from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import NotMapped
from ..lib import complex_pairs as pairs

TABLE: dict = {}
"""Primitive name → converter for equations that read or make a complex value."""
WRAPPERS = frozenset({"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call",
                      "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin", "remat2"})  # fmt: skip
"""Primitives that inline a sub-jaxpr: complex values pass through them untouched."""


def complex_prim(*names: str):
    def register(fn):
        for n in names:
            TABLE[n] = fn
        return fn

    return register


def is_complex(aval) -> bool:
    dtype = getattr(aval, "dtype", None)
    try:
        return dtype is not None and np.dtype(dtype).kind == "c"
    except TypeError:  # key arrays and other extended dtypes
        return False


def touches_complex(eqn) -> bool:
    """Whether equation ``eqn`` reads or makes a complex value (the wrappers count as neither)."""
    if eqn.primitive.name in WRAPPERS:
        return False
    return any(is_complex(getattr(v, "aval", None)) for v in (*eqn.invars, *eqn.outvars))


def evaluate(eqn, args: list) -> list | np.ndarray:
    """An equation on constants only, computed by JAX itself (its results stay numpy constants,
    turned into pairs where a converter reads them)."""
    out = eqn.primitive.bind(*args, **eqn.params)
    outs = [np.asarray(o) for o in (out if eqn.primitive.multiple_results else [out])]
    return outs if eqn.primitive.multiple_results else outs[0]


def _pair_type(aval) -> TensorType:
    from . import dim_of, to_dtype

    return TensorType(pairs.part_dtype(to_dtype(aval.dtype)), (*(dim_of(d) for d in aval.shape), 2))


def _typed(cx, v: Value, index: int = 0) -> Value:
    """``v`` typed as output ``index`` of the equation: a pair type where that output is complex."""
    from . import aval_type

    aval = cx.eqn.outvars[index].aval
    v = cx.emit("Identity", v)
    v.type = _pair_type(aval) if is_complex(aval) else aval_type(aval)
    return v


def _part_dtype(cx):
    """The part dtype of the equation's first complex value (its output's, else an input's)."""
    for v in (*cx.eqn.outvars, *cx.eqn.invars):
        if is_complex(getattr(v, "aval", None)):
            return _pair_type(v.aval).dtype
    raise NotMapped("no complex value")


def _operand(cx, x, index: int) -> Value:
    """Operand ``index`` as a pair tensor of the equation's part dtype (literals and real operands
    converted)."""
    part = _part_dtype(cx)
    aval = cx.eqn.invars[index].aval
    if not isinstance(x, Value):
        return pairs.constant(cx, np.asarray(x), part)
    if is_complex(aval):
        return cx.cast(x, part)
    return pairs.from_real(cx, x, part)


def _rank(cx, index: int = 0) -> int:
    return len(cx.eqn.invars[index].aval.shape)


# -- conversions and parts -----------------------------------------------------------------------


@complex_prim("convert_element_type")
def _convert(cx, x, *, new_dtype, **_):
    was, now = is_complex(cx.eqn.invars[0].aval), is_complex(cx.eqn.outvars[0].aval)
    if now:
        return _typed(cx, _operand(cx, x, 0))
    from . import to_dtype

    real = pairs.part(cx, _operand(cx, x, 0), 0) if was else cx.value(x)
    return _typed(cx, cx.cast(real, to_dtype(new_dtype)))  # complex → real keeps the real part


@complex_prim("real", "imag")
def _part(cx, x, **_):
    return _typed(cx, pairs.part(cx, _operand(cx, x, 0), 0 if cx.eqn.primitive.name == "real" else 1))


@complex_prim("complex")
def _complex(cx, re, im, **_):
    part = _part_dtype(cx)  # lax.complex takes operands of one shape
    return _typed(cx, pairs.pair(cx, cx.cast(cx.value(re), part), cx.cast(cx.value(im), part)))


@complex_prim("conj")
def _conj(cx, x, **_):
    return _typed(cx, pairs.conjugate(cx, _operand(cx, x, 0), _part_dtype(cx)))


@complex_prim("abs")
def _abs(cx, x, **_):
    return _typed(cx, pairs.magnitude(cx, _operand(cx, x, 0)))


@complex_prim("copy", "copy_p", "optimization_barrier")
def _copy(cx, *xs, **_):
    outs = [_typed(cx, _operand(cx, x, i) if is_complex(cx.eqn.invars[i].aval) else cx.value(x), i)
            for i, x in enumerate(xs)]  # fmt: skip
    return outs if len(outs) > 1 else outs[0]


# -- arithmetic ----------------------------------------------------------------------------------


@complex_prim("add", "sub", "add_any")
def _add(cx, a, b, **_):
    op = "Sub" if cx.eqn.primitive.name == "sub" else "Add"
    return _typed(cx, cx.emit(op, _operand(cx, a, 0), _operand(cx, b, 1)))


@complex_prim("neg")
def _neg(cx, x, **_):
    return _typed(cx, cx.emit("Neg", _operand(cx, x, 0)))


@complex_prim("mul")
def _mul(cx, a, b, **_):
    return _typed(cx, pairs.multiply(cx, _operand(cx, a, 0), _operand(cx, b, 1)))


@complex_prim("div")
def _div(cx, a, b, **_):
    """a / b = a conj(b) / |b|²."""
    a, b = _operand(cx, a, 0), _operand(cx, b, 1)
    norm = cx.emit("ReduceSumSquare", b, cx.const(np.asarray([-1], np.int64)), keepdims=1)
    return _typed(cx, cx.emit("Div", pairs.multiply(cx, a, pairs.conjugate(cx, b, _part_dtype(cx))), norm))


@complex_prim("reduce_sum")
def _reduce_sum(cx, x, *, axes, **_):
    return _typed(cx, cx.emit("ReduceSum", _operand(cx, x, 0), cx.const(np.asarray(axes, np.int64)), keepdims=0))


# -- shapes --------------------------------------------------------------------------------------


@complex_prim("reshape")
def _reshape(cx, x, *, new_sizes, dimensions=None, **_):
    if dimensions is not None:
        raise NotMapped("reshape with dimensions")
    sizes = [cx.importer.dim_value(cx, d) if not isinstance(d, (int, np.integer)) else int(d) for d in new_sizes]
    return _typed(cx, cx.emit("Reshape", _operand(cx, x, 0), cx.int64s([*sizes, 2])))


@complex_prim("transpose")
def _transpose(cx, x, *, permutation, **_):
    return _typed(cx, cx.emit("Transpose", _operand(cx, x, 0), perm=[*permutation, len(permutation)]))


@complex_prim("squeeze")
def _squeeze(cx, x, *, dimensions, **_):
    if not dimensions:
        return _typed(cx, _operand(cx, x, 0))
    return _typed(cx, cx.emit("Squeeze", _operand(cx, x, 0), cx.const(np.asarray(dimensions, np.int64))))


@complex_prim("expand_dims")
def _expand_dims(cx, x, *, dimensions, **_):
    return _typed(cx, cx.emit("Unsqueeze", _operand(cx, x, 0), cx.const(np.asarray(dimensions, np.int64))))


@complex_prim("broadcast_in_dim")
def _broadcast_in_dim(cx, x, *, shape, broadcast_dimensions, **_):
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        raise NotMapped("broadcasting a complex value to a symbolic shape")
    x = _operand(cx, x, 0)
    placed = [1] * len(shape)
    for src, dst in enumerate(broadcast_dimensions):
        placed[dst] = cx.eqn.invars[0].aval.shape[src]
    x = cx.emit("Reshape", x, cx.int64s([*placed, 2]))
    return _typed(cx, cx.emit("Expand", x, cx.int64s([*shape, 2])))


@complex_prim("pad")
def _pad(cx, x, value, *, padding_config, **_):
    if isinstance(value, Value) or np.asarray(value).any():
        raise NotMapped("padding a complex value with anything but 0")
    if any(lo < 0 or hi < 0 or interior for lo, hi, interior in padding_config):
        raise NotMapped("complex pad with negative or interior padding")
    begins, ends = [lo for lo, _, _ in padding_config], [hi for _, hi, _ in padding_config]
    return _typed(cx, cx.emit("Pad", _operand(cx, x, 0), cx.int64s([*begins, 0, *ends, 0])))


@complex_prim("slice")
def _slice(cx, x, *, start_indices, limit_indices, strides=None, **_):
    axes = list(range(len(start_indices)))
    steps = list(strides) if strides else [1] * len(axes)
    starts, limits = cx.int64s(list(start_indices)), cx.int64s(list(limit_indices))
    return _typed(cx, cx.emit("Slice", _operand(cx, x, 0), starts, limits, cx.int64s(axes), cx.int64s(steps)))


@complex_prim("concatenate")
def _concatenate(cx, *xs, dimension, **_):
    return _typed(cx, cx.emit("Concat", *(_operand(cx, x, i) for i, x in enumerate(xs)), axis=int(dimension)))


# -- FFT -----------------------------------------------------------------------------------------


@complex_prim("fft")
def _fft(cx, x, *, fft_type, fft_lengths, **_):
    """``lax.fft`` over the last ``len(fft_lengths)`` axes: FFT and IFFT (normalized by 1/n, as
    numpy's) on pairs; RFFT from a real signal to its half spectrum; IRFFT back."""
    kind = getattr(fft_type, "name", str(fft_type)).rsplit(".", 1)[-1]
    rank = _rank(cx)
    axes = list(range(rank - len(fft_lengths), rank))
    if kind == "RFFT":
        return _typed(cx, pairs.real_to_complex(cx, cx.value(x), axes, _part_dtype(cx)))
    y = _operand(cx, x, 0)
    if kind == "IRFFT":
        return _typed(cx, pairs.complex_to_real(cx, y, axes, int(fft_lengths[-1]), scaled=True))
    if kind not in ("FFT", "IFFT"):
        raise NotMapped(f"fft of type {kind}")
    for axis in axes:
        y = pairs.dft(cx, y, axis, inverse=kind == "IFFT", scaled=True)
    return _typed(cx, y)
