"""Element-wise ATen ops: unary math, activations, arithmetic with torch's type promotion, comparisons."""

from __future__ import annotations

import math

import numpy as np

from ....core_ir.dtypes import DataType, is_floating
from ....core_ir.value import Value
from ...common import NotMapped
from ...lib import special
from .common import _shape_of, _special, aten
from .linalg import _outputs

_UNARY = {
    "abs": "Abs", "acos": "Acos", "acosh": "Acosh", "asin": "Asin", "asinh": "Asinh", "atan": "Atan",
    "atanh": "Atanh", "ceil": "Ceil", "cos": "Cos", "cosh": "Cosh", "erf": "Erf", "exp": "Exp", "floor": "Floor",
    "log": "Log", "neg": "Neg", "reciprocal": "Reciprocal", "relu": "Relu", "sigmoid": "Sigmoid", "sign": "Sign",
    "sin": "Sin", "sinh": "Sinh", "sqrt": "Sqrt", "tan": "Tan", "tanh": "Tanh",
}  # fmt: skip


def _unary(onnx_op: str):
    def convert(cx, x, *rest, **kw):
        return cx.emit_typed(onnx_op, cx.tensor(x))

    return convert


for _name, _op in _UNARY.items():
    aten(f"{_name}.default")(_unary(_op))


aten("i0.default", "special_modified_bessel_i0.default")(_special(special.bessel_i0))


aten("special_i1.default", "special_modified_bessel_i1.default")(_special(special.bessel_i1))


@aten("round.default")
def _round(cx, x):
    return cx.emit_typed("Round", cx.tensor(x)) if is_floating(cx.out_dtype) else x


@aten("round.decimals")
def _round_decimals(cx, x, decimals=0):
    scale = cx.tensor(10.0**decimals)
    return cx.emit_typed("Div", cx.emit("Round", cx.emit("Mul", cx.tensor(x), scale)), scale)


@aten("trunc.default")
def _trunc(cx, x):
    if not is_floating(cx.out_dtype):
        return x
    x = cx.tensor(x)
    return cx.emit_typed("Mul", cx.emit("Sign", x), cx.emit("Floor", cx.emit("Abs", x)))


@aten("frac.default")
def _frac(cx, x):
    return cx.emit_typed("Sub", cx.tensor(x), _trunc(cx, x))


@aten("rsqrt.default")
def _rsqrt(cx, x):
    return cx.emit_typed("Reciprocal", cx.emit("Sqrt", cx.tensor(x)))


@aten("log2.default", "log10.default")
def _log_base(cx, x):
    base = 2.0 if "log2" in str(cx.fx.target) else 10.0
    return cx.emit_typed("Div", cx.emit("Log", cx.tensor(x)), cx.tensor(math.log(base)))


@aten("exp2.default")
def _exp2(cx, x):
    return cx.emit_typed("Pow", cx.tensor(2.0), cx.tensor(x))


@aten("logical_not.default")
def _logical_not(cx, x):
    return cx.emit_typed("Not", _as_bool(cx, x))


@aten("bitwise_not.default")
def _bitwise_not(cx, x):
    if cx.out_dtype == DataType.BOOL:
        return cx.emit_typed("Not", x)
    return cx.emit_typed("BitwiseNot", x)


@aten("isnan.default")
def _isnan(cx, x):
    if not is_floating(cx.dtype(x)):
        return _falses(cx, x)
    return cx.emit_typed("IsNaN", x)


@aten("isinf.default")
def _isinf(cx, x):
    if not is_floating(cx.dtype(x)):
        return _falses(cx, x)
    return cx.emit_typed("IsInf", x)


def _falses(cx, x):
    return cx.emit_typed("Expand", cx.const(np.asarray(False)), _shape_of(cx, x))


def _as_bool(cx, x):
    if isinstance(x, Value) and cx.dtype(x) != DataType.BOOL:
        return cx.emit("Not", cx.emit("Equal", x, cx.tensor(0, cx.dtype(x))))
    return cx.tensor(x, DataType.BOOL)


@aten("gelu.default")
def _gelu(cx, x, approximate="none"):
    return cx.emit_typed("Gelu", cx.tensor(x), approximate=approximate)


@aten("hardtanh.default")
def _hardtanh(cx, x, min_val=-1.0, max_val=1.0):
    return cx.emit_typed("Clip", cx.tensor(x), cx.tensor(min_val), cx.tensor(max_val))


@aten("leaky_relu.default")
def _leaky_relu(cx, x, negative_slope=0.01):
    return cx.emit_typed("LeakyRelu", cx.tensor(x), alpha=float(negative_slope))


@aten("rrelu_with_noise_functional.default")
def _rrelu(cx, x, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    """Randomized leaky ReLU: in training a slope drawn from [lower, upper] per negative element
    (returned as the new noise, 1 elsewhere); in evaluation the mean slope, the noise untouched."""
    x = cx.tensor(x, cx.dtype(x))
    dt = cx.dtype(x)
    negative = cx.emit("Less", x, cx.tensor(0, dt))
    if not training:
        slope = cx.tensor((lower + upper) / 2, dt)
        return _outputs(cx, cx.emit("Where", negative, cx.emit("Mul", x, slope), x), noise)
    shape = cx.shape(x)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("rrelu in training over symbolic sizes")
    drawn = cx.emit("RandomUniform", dtype=int(dt), shape=list(shape) or [1], low=float(lower), high=float(upper))
    drawn = cx.emit("Reshape", drawn, cx.const(np.asarray(list(shape), np.int64)))
    new_noise = cx.emit("Where", negative, drawn, cx.tensor(1, dt))
    return _outputs(cx, cx.emit("Mul", x, new_noise), new_noise)


@aten("elu.default")
def _elu(cx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    x = cx.tensor(x)
    if input_scale != 1:
        x = cx.emit("Mul", x, cx.tensor(input_scale))
    y = cx.emit("Elu", x, alpha=float(alpha))
    return cx.emit_typed("Mul", y, cx.tensor(scale)) if scale != 1 else y


@aten("_prelu_kernel.default")
def _prelu(cx, x, w):
    rank = cx.rank(x)
    if rank >= 2 and cx.rank(w) == 1:
        w = cx.emit("Reshape", w, cx.const(np.asarray([-1] + [1] * (rank - 2), np.int64)))
    return cx.emit_typed("PRelu", x, w)


@aten("hardsigmoid.default")
def _hardsigmoid(cx, x):
    return cx.emit_typed("HardSigmoid", cx.tensor(x), alpha=1 / 6, beta=0.5)


@aten("silu.default")
def _silu(cx, x):
    """x * sigmoid(x), as core ATen decomposes it (fuse-activation knows the pair)."""
    x = cx.tensor(x)
    return cx.emit_typed("Mul", x, cx.emit("Sigmoid", x))


@aten("hardswish.default")
def _hardswish(cx, x):
    return cx.emit_typed("HardSwish", cx.tensor(x))


@aten("softplus.default")
def _softplus(cx, x, beta=1, threshold=20):
    x = cx.tensor(x)
    bx = cx.emit("Mul", x, cx.tensor(beta)) if beta != 1 else x
    soft = cx.emit("Softplus", bx)
    if beta != 1:
        soft = cx.emit("Div", soft, cx.tensor(beta))
    return cx.emit_typed("Where", cx.emit("Greater", bx, cx.tensor(threshold)), x, soft)


@aten("clamp.default", "clamp.Tensor", "clamp_min.default", "clamp_max.default", "clamp_min.Tensor",
      "clamp_max.Tensor")  # fmt: skip
def _clamp(cx, x, lo=None, hi=None):
    target = str(cx.fx.target)
    if "clamp_max" in target:
        lo, hi = None, lo
    y = cx.tensor(x)
    if lo is not None:
        y = cx.emit("Max", y, cx.tensor(lo))
    if hi is not None:
        y = cx.emit("Min", y, cx.tensor(hi))
    return cx.emit_typed("Identity", y)


def _promoted(cx, *xs) -> DataType:
    """torch.result_type of the operands (tensors, 0-d tensors and Python numbers)."""
    import torch

    samples = []
    for x in xs:
        if isinstance(x, Value):
            t = x.type
            shape = (1,) if t.shape is None or len(t.shape) > 0 else ()
            samples.append(torch.empty(shape, dtype=_torch_dtype(t.dtype)))
        else:
            samples.append(x)
    out = samples[0]
    dtype = None
    for s in samples[1:]:
        dtype = torch.result_type(out, s)
        tensors = [t for t in (out, s) if isinstance(t, torch.Tensor)]
        if not tensors:
            out = s
        else:  # a dimensioned tensor outranks a 0-d one in torch's promotion
            out = torch.empty((1,) if any(t.dim() for t in tensors) else (), dtype=dtype)
    if dtype is None:
        return cx.dtype(xs[0]) if isinstance(xs[0], Value) else cx.out_dtype
    from .. import to_dtype

    return to_dtype(dtype)


def _torch_dtype(dt: DataType):
    import torch

    from .. import to_dtype

    for name in dir(torch):
        obj = getattr(torch, name)
        if isinstance(obj, torch.dtype):
            try:
                if to_dtype(obj) == dt:
                    return obj
            except NotMapped:
                pass
    raise NotMapped(f"dtype {dt.name}")


def _binary(onnx_op: str, bool_op: str | None = None):
    def convert(cx, a, b, *, alpha=1, rounding_mode=None):
        dt = cx.out_dtype
        if dt == DataType.BOOL:
            if bool_op is None:
                raise NotMapped(f"{onnx_op} of booleans")
            return cx.emit_typed(bool_op, cx.tensor(a), cx.tensor(b))
        a, b = cx.tensor(a), cx.tensor(b)
        if alpha != 1:
            b = cx.emit("Mul", b, cx.tensor(alpha))
        return cx.emit_typed(onnx_op, a, b)

    return convert


aten("add.Tensor", "add.Scalar", "add_.Tensor", "add_.Scalar")(_binary("Add", "Or"))


aten("mul.Tensor", "mul.Scalar", "mul_.Tensor", "mul_.Scalar")(_binary("Mul", "And"))


aten("maximum.default", "max.other")(_binary("Max", "Or"))


aten("minimum.default", "min.other")(_binary("Min", "And"))


aten("bitwise_and.Tensor", "bitwise_and.Scalar", "__and__.Tensor", "__and__.Scalar")(_binary("BitwiseAnd", "And"))


aten("bitwise_or.Tensor", "bitwise_or.Scalar", "__or__.Tensor", "__or__.Scalar")(_binary("BitwiseOr", "Or"))


aten("bitwise_xor.Tensor", "bitwise_xor.Scalar", "__xor__.Tensor", "__xor__.Scalar")(_binary("BitwiseXor", "Xor"))


@aten("sub.Tensor", "sub.Scalar")
def _sub(cx, a, b, *, alpha=1):
    return _binary("Sub")(cx, a, b, alpha=alpha)


@aten("rsub.Scalar", "rsub.Tensor")
def _rsub(cx, a, b, *, alpha=1):
    return _binary("Sub")(cx, b, a if alpha == 1 else cx.emit("Mul", cx.tensor(a), cx.tensor(alpha)))


@aten("div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode")
def _div(cx, a, b, *, rounding_mode=None):
    dt = cx.out_dtype
    if rounding_mode is None:
        return cx.emit_typed("Div", cx.tensor(a), cx.tensor(b))
    if is_floating(dt):
        q = cx.emit("Div", cx.tensor(a), cx.tensor(b))
        if rounding_mode == "floor":
            return cx.emit_typed("Floor", q)
        return _trunc(cx, q)
    a, b = cx.tensor(a), cx.tensor(b)
    q = cx.emit("Div", a, b)  # integer Div truncates toward zero
    if rounding_mode == "trunc":
        return cx.emit_typed("Identity", q)
    return _floor_adjust(cx, a, b, q)


def _floor_adjust(cx, a, b, q):
    r = cx.emit("Mod", a, b, fmod=1)
    zero = cx.tensor(0)
    adjust = cx.emit("And", cx.emit("Not", cx.emit("Equal", r, zero)),
                     cx.emit("Xor", cx.emit("Less", a, zero), cx.emit("Less", b, zero)))  # fmt: skip
    return cx.emit_typed("Sub", q, cx.emit("Cast", adjust, to=int(cx.out_dtype)))


@aten("floor_divide.default", "floor_divide.Scalar")
def _floor_divide(cx, a, b):
    return _div(cx, a, b, rounding_mode="floor")


@aten("remainder.Tensor", "remainder.Scalar", "remainder.Scalar_Tensor")
def _remainder(cx, a, b):
    a, b = cx.tensor(a), cx.tensor(b)
    if not is_floating(cx.out_dtype):
        return cx.emit_typed("Mod", a, b, fmod=0)
    r = cx.emit("Mod", a, b, fmod=1)
    zero = cx.tensor(0)
    fix = cx.emit("And", cx.emit("Not", cx.emit("Equal", r, zero)),
                  cx.emit("Xor", cx.emit("Less", r, zero), cx.emit("Less", b, zero)))  # fmt: skip
    return cx.emit_typed("Where", fix, cx.emit("Add", r, b), r)


@aten("fmod.Tensor", "fmod.Scalar")
def _fmod(cx, a, b):
    return cx.emit_typed("Mod", cx.tensor(a), cx.tensor(b), fmod=1)


@aten("pow.Tensor_Tensor", "pow.Tensor_Scalar", "pow.Scalar")
def _pow(cx, a, b):
    if not is_floating(cx.out_dtype):
        raise NotMapped("integer pow (ONNX Pow rounds through floating point)")
    return cx.emit_typed("Pow", cx.tensor(a), cx.tensor(b))


@aten("atan2.default", "atan2.out")
def _atan2(cx, y, x, out=None):  # an out= variant returns what it writes
    y, x = cx.tensor(y), cx.tensor(x)
    base = cx.emit("Atan", cx.emit("Div", y, x))
    pi = cx.tensor(math.pi)
    zero = cx.tensor(0)
    x_neg = cx.emit("Less", x, zero)
    y_neg = cx.emit("Less", y, zero)
    shift = cx.emit("Where", x_neg, cx.emit("Where", y_neg, cx.emit("Neg", pi), pi), zero)
    return cx.emit_typed("Add", base, shift)


@aten("where.self", "where.ScalarOther", "where.ScalarSelf", "where.Scalar")
def _where(cx, cond, a, b):
    return cx.emit_typed("Where", _as_bool(cx, cond), cx.tensor(a), cx.tensor(b))


def _compare(onnx_op: str, negate: bool = False):
    def convert(cx, a, b):
        dt = _promoted(cx, a, b)
        a, b = cx.tensor(a, dt), cx.tensor(b, dt)
        if dt == DataType.BOOL and onnx_op in ("Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
            a, b = cx.cast(a, DataType.INT32), cx.cast(b, DataType.INT32)
        if negate:
            return cx.emit_typed("Not", cx.emit(onnx_op, a, b))
        return cx.emit_typed(onnx_op, a, b)

    return convert


aten("eq.Tensor", "eq.Scalar")(_compare("Equal"))


aten("ne.Tensor", "ne.Scalar")(_compare("Equal", negate=True))


aten("lt.Tensor", "lt.Scalar")(_compare("Less"))


aten("le.Tensor", "le.Scalar")(_compare("LessOrEqual"))


aten("gt.Tensor", "gt.Scalar")(_compare("Greater"))


aten("ge.Tensor", "ge.Scalar")(_compare("GreaterOrEqual"))


def _logical(onnx_op: str):
    def convert(cx, a, b):
        return cx.emit_typed(onnx_op, _as_bool(cx, a), _as_bool(cx, b))

    return convert


aten("logical_and.default")(_logical("And"))


aten("logical_or.default")(_logical("Or"))


aten("logical_xor.default")(_logical("Xor"))


@aten("erfc.default")
def _erfc(cx, x):
    return cx.emit_typed("Sub", cx.tensor(1), cx.emit("Erf", cx.tensor(x)))


@aten("copysign.Tensor", "copysign.Scalar")
def _copysign(cx, a, b):
    a, b = cx.tensor(a), cx.tensor(b)
    negative = cx.emit("Or", cx.emit("Less", b, cx.tensor(0)),  # -0.0 counts as negative: 1/-0 = -inf
                       cx.emit("Less", cx.emit("Reciprocal", b), cx.tensor(0)))  # fmt: skip
    mag = cx.emit("Abs", a)
    return cx.emit_typed("Where", negative, cx.emit("Neg", mag), mag)


@aten("fmax.default", "fmin.default")
def _fmax(cx, a, b):
    op = "Max" if "fmax" in str(cx.fx.target) else "Min"
    a, b = cx.tensor(a), cx.tensor(b)
    if not is_floating(cx.out_dtype):
        return cx.emit_typed(op, a, b)
    both = cx.emit(op, a, b)  # NaN only where both are NaN
    return cx.emit_typed("Where", cx.emit("IsNaN", a), b, cx.emit("Where", cx.emit("IsNaN", b), a, both))


@aten("hypot.default")
def _hypot(cx, a, b):
    a, b = cx.tensor(a), cx.tensor(b)
    return cx.emit_typed("Sqrt", cx.emit("Add", cx.emit("Mul", a, a), cx.emit("Mul", b, b)))


@aten("signbit.default")
def _signbit(cx, x):
    if not is_floating(cx.dtype(x)):
        return cx.emit_typed("Less", x, cx.tensor(0, cx.dtype(x)))
    zero = cx.tensor(0, cx.dtype(x))
    return cx.emit_typed("Or", cx.emit("Less", x, zero), cx.emit("Less", cx.emit("Reciprocal", x), zero))


@aten("ldexp.Tensor")
def _ldexp(cx, x, other):
    return cx.emit_typed("Mul", cx.tensor(x), cx.emit("Pow", cx.tensor(2.0), cx.tensor(other)))


@aten("angle.default")
def _angle(cx, x):
    x = cx.tensor(x)
    if not is_floating(cx.dtype(x)):
        return cx.emit_typed("Mul", cx.cast(cx.emit("Less", x, cx.tensor(0, cx.dtype(x))), cx.out_dtype),
                             cx.tensor(math.pi))  # fmt: skip
    phase = cx.emit("Where", cx.emit("Less", x, cx.tensor(0)), cx.tensor(math.pi), cx.tensor(0))
    return cx.emit_typed("Where", cx.emit("IsNaN", x), x, phase)
