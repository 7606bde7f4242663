"""Element-wise primitives (jax's ``lax``): arithmetic, bitwise ops, casts, select, random draws."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import DataType, to_numpy
from ....core_ir.value import Value
from ...common import NotMapped
from ...lib import special
from ..random import RANDOM_PRIMITIVES, convert_random
from .common import prim

_UNARY = {"neg": "Neg", "sign": "Sign", "floor": "Floor", "ceil": "Ceil", "exp": "Exp", "log": "Log",
          "tanh": "Tanh", "logistic": "Sigmoid", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin",
          "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh",
          "atanh": "Atanh", "sqrt": "Sqrt", "abs": "Abs", "erf": "Erf"}  # fmt: skip


_BINARY = {"add": "Add", "add_any": "Add", "sub": "Sub", "mul": "Mul", "max": "Max", "min": "Min", "pow": "Pow",
           "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}  # fmt: skip


def _unary(op: str):
    return lambda cx, x, **_: cx.typed(op, x)


def _binary(op: str):
    return lambda cx, a, b, **_: cx.typed(op, *_same_type(cx, a, b))


def _same_type(cx, *xs):
    """Operands as values of one dtype (a Python-scalar literal takes its partner's dtype)."""
    dtype = next((x.type.dtype for x in xs if isinstance(x, Value)), None)
    return [x if isinstance(x, Value) else cx.value(x, dtype) for x in xs]


for _n, _o in _UNARY.items():
    prim(_n)(_unary(_o))


for _n, _o in _BINARY.items():
    prim(_n)(_binary(_o))


@prim("div")
def _div(cx, a, b, **_):
    return cx.typed("Div", *_same_type(cx, a, b))  # integer Div truncates, as lax.div does


@prim("rem")
def _rem(cx, a, b, **_):
    return cx.typed("Mod", *_same_type(cx, a, b), fmod=1)  # lax.rem takes the dividend's sign


@prim("ne")
def _ne(cx, a, b, **_):
    return cx.typed("Not", cx.emit("Equal", *_same_type(cx, a, b)))


@prim("and", "or", "xor")
def _bitwise(cx, a, b, **_):
    a, b = _same_type(cx, a, b)
    name = cx.eqn.primitive.name
    if cx.out_dtype == DataType.BOOL:
        return cx.typed({"and": "And", "or": "Or", "xor": "Xor"}[name], a, b)
    return cx.typed({"and": "BitwiseAnd", "or": "BitwiseOr", "xor": "BitwiseXor"}[name], a, b)


@prim("not")
def _not(cx, x, **_):
    return cx.typed("Not" if cx.out_dtype == DataType.BOOL else "BitwiseNot", x)


_UNSIGNED = {DataType.INT8: DataType.UINT8, DataType.INT16: DataType.UINT16, DataType.INT32: DataType.UINT32,
             DataType.INT64: DataType.UINT64}  # fmt: skip


@prim("shift_left", "shift_right_logical")
def _shift(cx, a, b, **_):
    a, b = _same_type(cx, a, b)
    dtype = cx.out_dtype
    direction = "LEFT" if "left" in cx.eqn.primitive.name else "RIGHT"
    bits = np.dtype(to_numpy(dtype)).itemsize * 8
    if dtype in _UNSIGNED:  # a logical shift of the same bits, unsigned
        a, b = cx.emit("Cast", a, to=int(_UNSIGNED[dtype])), cx.emit("Cast", b, to=int(_UNSIGNED[dtype]))
    y = cx.emit("BitShift", a, b, direction=direction)
    # lax: a shift by the width or more gives 0 (ONNX leaves it undefined)
    within = cx.emit("Cast", cx.emit("Less", b, cx.value(bits, cx.dtype(b))), to=int(cx.dtype(a)))
    y = cx.emit("Mul", y, within)  # a mask, not Where: onnxruntime has no Where for small integers
    return cx.typed("Cast", y, to=int(dtype)) if dtype in _UNSIGNED else cx.typed("Identity", y)


def _random(cx, *args, **params):
    return convert_random(cx, cx.eqn.primitive.name, list(args), params)


prim(*sorted(RANDOM_PRIMITIVES))(_random)


@prim("bitcast_convert_type")
def _bitcast(cx, x, new_dtype, **_):
    x = cx.value(x)
    if np.dtype(new_dtype).itemsize != np.dtype(to_numpy(cx.dtype(x))).itemsize:
        raise NotMapped("bitcast_convert_type between widths")
    cx.importer.require_opset(special.BITCAST_OPSET)
    return cx.typed("BitCast", x, to=int(cx.out_dtype))


@prim("erfc")
def _erfc(cx, x, **_):
    return cx.typed("Sub", cx.value(1, cx.dtype(x)), cx.emit("Erf", x))


@prim("round")
def _round(cx, x, rounding_method=0, **_):
    if int(rounding_method) == 1:  # TO_NEAREST_EVEN
        return cx.typed("Round", x)
    # AWAY_FROM_ZERO: sign(x) * floor(|x| + 0.5), in float32 at least (|x| + 0.5 must not round)
    dtype = cx.dtype(x)
    wide = dtype in (DataType.FLOAT16, DataType.BFLOAT16)
    xf = cx.emit("Cast", x, to=int(DataType.FLOAT)) if wide else x
    half = cx.value(0.5, cx.dtype(xf))
    y = cx.emit("Mul", cx.emit("Sign", xf), cx.emit("Floor", cx.emit("Add", cx.emit("Abs", xf), half)))
    return cx.typed("Cast", y, to=int(dtype)) if wide else cx.typed("Identity", y)


@prim("exp2")
def _exp2(cx, x, **_):
    return cx.typed("Pow", cx.value(2.0, cx.dtype(x)), x)


@prim("log1p")
def _log1p(cx, x, **_):
    return cx.typed("Identity", special.log1p(cx, cx.value(x)))


@prim("expm1")
def _expm1(cx, x, **_):
    return cx.typed("Identity", special.expm1(cx, cx.value(x)))


@prim("rsqrt")
def _rsqrt(cx, x, **_):
    return cx.typed("Reciprocal", cx.emit("Sqrt", x))


@prim("cbrt")
def _cbrt(cx, x, **_):
    third = cx.value(1 / 3, cx.dtype(x))
    return cx.typed("Mul", cx.emit("Sign", x), cx.emit("Pow", cx.emit("Abs", x), third))


@prim("square")
def _square(cx, x, **_):
    return cx.typed("Mul", x, x)


@prim("integer_pow")
def _integer_pow(cx, x, y, **_):
    if y == 0:
        return cx.typed("Expand", cx.value(1, cx.dtype(x)), cx.emit("Shape", x))
    acc, base, n = None, x, abs(int(y))
    while n:  # exact repeated squaring, as XLA does it
        if n & 1:
            acc = base if acc is None else cx.emit("Mul", acc, base)
        n >>= 1
        if n:
            base = cx.emit("Mul", base, base)
    return cx.typed("Reciprocal", acc) if y < 0 else cx.typed("Identity", acc)


@prim("is_finite")
def _is_finite(cx, x, **_):
    return cx.typed("Not", cx.emit("Or", cx.emit("IsNaN", x), cx.emit("IsInf", x)))


@prim("atan2")
def _atan2(cx, y, x, **_):
    y, x = _same_type(cx, y, x)
    dtype = cx.dtype(x)
    zero, pi = cx.value(0, dtype), cx.value(np.pi, dtype)
    base = cx.emit("Atan", cx.emit("Div", y, x))
    neg_x = cx.emit("Less", x, zero)
    y_neg = cx.emit("Less", y, zero)
    shift = cx.emit("Where", neg_x, cx.emit("Where", y_neg, cx.emit("Neg", pi), pi), zero)
    res = cx.emit("Add", base, shift)
    x_zero = cx.emit("Equal", x, zero)
    half = cx.value(np.pi / 2, dtype)
    at_zero = cx.emit("Where", cx.emit("Greater", y, zero), half,
                      cx.emit("Where", y_neg, cx.emit("Neg", half), zero))  # fmt: skip
    return cx.typed("Where", x_zero, at_zero, res)


@prim("clamp")
def _clamp(cx, lo, x, hi, **_):
    x, lo, hi = _same_type(cx, x, lo, hi)
    return cx.typed("Min", cx.emit("Max", x, lo), hi)


@prim("select_n")
def _select_n(cx, which, *cases):
    cases = _same_type(cx, *cases)
    which = cx.value(which)
    if len(cases) == 1:
        return cx.typed("Identity", cases[0])
    if cx.dtype(which) == DataType.BOOL:
        if cx.dtype(cases[0]) == DataType.BOOL:  # onnxruntime has no boolean Where
            picked = cx.emit("And", which, cases[1])
            return cx.typed("Or", picked, cx.emit("And", cx.emit("Not", which), cases[0]))
        return cx.typed("Where", which, cases[1], cases[0])
    out = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        out = cx.emit("Where", cx.emit("Equal", which, cx.value(i, cx.dtype(which))), cases[i], out)
    return cx.typed("Identity", out)


@prim("convert_element_type")
def _convert(cx, x, new_dtype=None, **_):
    x = cx.value(x)
    return cx.typed("Cast", x, to=int(cx.out_dtype))


@prim("stop_gradient", "copy", "copy_p", "optimization_barrier", "device_put")
def _identity(cx, *xs, **_):
    outs = [cx.emit("Identity", cx.value(x)) for x in xs]
    for o, a in zip(outs, cx.out_avals, strict=False):
        from .. import aval_type

        o.type = aval_type(a)
    return outs if len(outs) != 1 else outs[0]


_POPCOUNT_MASKS = (0x55555555, 0x33333333, 0x0F0F0F0F)


@prim("population_count")
def _population_count(cx, x, **_):
    """Set bits per element, counted on the unsigned 64-bit pattern: pairs, nibbles, bytes, then a
    multiply that sums the bytes into the top one (the classic SWAR count)."""
    x = cx.value(x)
    dtype = cx.dtype(x)
    width = np.dtype(to_numpy(dtype)).itemsize * 8
    unsigned = {8: DataType.UINT8, 16: DataType.UINT16, 32: DataType.UINT32, 64: DataType.UINT64}[width]
    u = cx.emit("Cast", cx.emit("Cast", x, to=int(unsigned)), to=int(DataType.UINT64))  # the same bits, widened

    def c(v: int) -> Value:
        return cx.const(np.asarray(v, np.uint64))

    def shr(v: Value, n: int) -> Value:
        return cx.emit("BitShift", v, c(n), direction="RIGHT")

    m1, m2, m4 = (c(m | (m << 32)) for m in _POPCOUNT_MASKS)
    v = cx.emit("Sub", u, cx.emit("BitwiseAnd", shr(u, 1), m1))
    v = cx.emit("Add", cx.emit("BitwiseAnd", v, m2), cx.emit("BitwiseAnd", shr(v, 2), m2))
    v = cx.emit("BitwiseAnd", cx.emit("Add", v, shr(v, 4)), m4)
    count = shr(cx.emit("Mul", v, c(0x0101010101010101)), 56)
    return cx.typed("Cast", count, to=int(dtype))


@prim("shift_right_arithmetic")
def _shift_right_arithmetic(cx, a, b, **_):
    a, b = _same_type(cx, a, b)
    dtype = cx.out_dtype
    if dtype not in _UNSIGNED:
        return _shift(cx, a, b)  # unsigned: the logical shift
    bits = np.dtype(to_numpy(dtype)).itemsize * 8
    wide = DataType.INT64
    a64, b64 = cx.emit("Cast", a, to=int(wide)), cx.emit("Cast", b, to=int(wide))
    lo, hi = cx.const(np.asarray(0, np.int64)), cx.const(np.asarray(bits - 2, np.int64))
    small = cx.emit("Cast", cx.emit("Min", cx.emit("Max", b64, lo), hi), to=int(DataType.UINT64))
    power = cx.emit("Cast", cx.emit("BitShift", cx.const(np.asarray(1, np.uint64)), small, direction="LEFT"),
                    to=int(wide))  # fmt: skip
    q = cx.emit("Div", a64, power)  # truncates toward zero; an arithmetic shift floors
    inexact = cx.emit("Not", cx.emit("Equal", cx.emit("Mul", q, power), a64))
    negative = cx.emit("Less", a64, cx.const(np.asarray(0, np.int64)))
    q = cx.emit("Sub", q, cx.emit("Cast", cx.emit("And", inexact, negative), to=int(wide)))
    sign = cx.emit("Neg", cx.emit("Cast", negative, to=int(wide)))  # a shift by the width or more leaves the sign
    far = cx.emit("Or", cx.emit("GreaterOrEqual", b64, cx.const(np.asarray(bits - 1, np.int64))),
                  cx.emit("Less", b64, cx.const(np.asarray(0, np.int64))))  # lax reads the amount as unsigned
    return cx.typed("Cast", cx.emit("Where", far, sign, q), to=int(dtype))


@prim("reduce_precision")
def _reduce_precision(cx, x, exponent_bits, mantissa_bits, **_):
    x = cx.value(x)
    native = {(8, 7): DataType.BFLOAT16, (5, 10): DataType.FLOAT16, (8, 23): DataType.FLOAT, (11, 52): DataType.DOUBLE}
    target = native.get((int(exponent_bits), int(mantissa_bits)))
    if target is None:
        raise NotMapped(f"reduce_precision to {exponent_bits} exponent and {mantissa_bits} mantissa bits")
    if target == cx.dtype(x) or np.dtype(to_numpy(target)).itemsize >= np.dtype(to_numpy(cx.dtype(x))).itemsize:
        return cx.typed("Identity", x)
    return cx.typed("Cast", cx.emit("Cast", x, to=int(target)), to=int(cx.dtype(x)))  # Cast rounds to nearest even
