"""Element-wise ops in lax/jax.numpy: activations, arithmetic, comparisons, casts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...table import Lowering, Rule
from .common import RULES, _jnp, _lax, _np_dtype, rule

# --- element-wise ----------------------------------------------------------------------------


def _unary(fn_name: str) -> Rule:
    return lambda ctx, node, args: [fn_name_to(fn_name)(args[0])]


def fn_name_to(name: str) -> Callable:
    import jax
    import jax.numpy as jnp
    from jax import lax

    table = {
        "Abs": jnp.abs, "Neg": jnp.negative, "Exp": jnp.exp, "Log": jnp.log, "Sqrt": jnp.sqrt,
        "Sin": jnp.sin, "Cos": jnp.cos, "Tan": jnp.tan, "Asin": jnp.arcsin, "Acos": jnp.arccos,
        "Atan": jnp.arctan, "Sinh": jnp.sinh, "Cosh": jnp.cosh, "Asinh": jnp.arcsinh,
        "Acosh": jnp.arccosh, "Atanh": jnp.arctanh, "Tanh": jnp.tanh, "Sigmoid": jax.nn.sigmoid,
        "Floor": jnp.floor, "Ceil": jnp.ceil, "Round": jnp.round, "Sign": jnp.sign, "Erf": lax.erf,
        "Not": jnp.logical_not, "IsNaN": jnp.isnan, "BitwiseNot": jnp.invert,
        "Softsign": lambda x: x / (1 + jnp.abs(x)), "Reciprocal": lambda x: 1 / x,
        "Relu": lambda x: jnp.maximum(x, jnp.zeros((), x.dtype)),
        "Softplus": lambda x: jnp.logaddexp(x, jnp.zeros((), x.dtype)),
        "Identity": lambda x: x,
    }  # fmt: skip
    return table[name]


for _op in ("Abs", "Neg", "Exp", "Log", "Sqrt", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh",
            "Asinh", "Acosh", "Atanh", "Tanh", "Sigmoid", "Floor", "Ceil", "Round", "Sign", "Erf", "Not",
            "IsNaN", "BitwiseNot", "Softsign", "Reciprocal", "Relu", "Softplus", "Identity"):  # fmt: skip
    RULES[_op] = Lowering(_unary(_op))


def _c(x, value):
    """A scalar of ``x``'s dtype."""
    return _jnp().asarray(value, dtype=x.dtype)


@rule("IsInf")
def _isinf(ctx, node, args):
    jnp, x = _jnp(), args[0]
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    return [jnp.isinf(x) & (((x > 0) & bool(pos)) | ((x < 0) & bool(neg)))]


@rule("Elu")
def _elu(ctx, node, args):
    jnp, x = _jnp(), args[0]
    return [jnp.where(x > 0, x, _c(x, node.attr("alpha", 1.0)) * jnp.expm1(x))]


@rule("Celu")
def _celu(ctx, node, args):
    jnp, x = _jnp(), args[0]
    a = _c(x, node.attr("alpha", 1.0))
    return [jnp.maximum(x, _c(x, 0)) + jnp.minimum(_c(x, 0), a * jnp.expm1(x / a))]


@rule("Selu")
def _selu(ctx, node, args):
    jnp, x = _jnp(), args[0]
    a, g = _c(x, node.attr("alpha", 1.67326319217681884765625)), _c(x, node.attr("gamma", 1.05070102214813232421875))
    return [jnp.where(x > 0, g * x, g * (a * jnp.exp(x) - a))]


@rule("LeakyRelu")
def _leaky(ctx, node, args):
    jnp, x = _jnp(), args[0]
    return [jnp.where(x >= 0, x, x * _c(x, node.attr("alpha", 0.01)))]


@rule("ThresholdedRelu")
def _thresholded(ctx, node, args):
    jnp, x = _jnp(), args[0]
    return [jnp.where(x > _c(x, node.attr("alpha", 1.0)), x, _c(x, 0))]


@rule("HardSigmoid")
def _hard_sigmoid(ctx, node, args):
    jnp, x = _jnp(), args[0]
    y = x * _c(x, node.attr("alpha", 0.2)) + _c(x, node.attr("beta", 0.5))
    return [jnp.clip(y, _c(x, 0), _c(x, 1))]


@rule("HardSwish")
def _hard_swish(ctx, node, args):
    jnp, x = _jnp(), args[0]
    return [x * jnp.clip(x / _c(x, 6) + _c(x, 0.5), _c(x, 0), _c(x, 1))]


@rule("Mish")
def _mish(ctx, node, args):
    jnp, x = _jnp(), args[0]
    return [x * jnp.tanh(jnp.logaddexp(x, _c(x, 0)))]


@rule("Gelu")
def _gelu(ctx, node, args):
    import jax

    return [jax.nn.gelu(args[0], approximate=node.attr("approximate", "none") == "tanh")]


@rule("Shrink")
def _shrink(ctx, node, args):
    jnp, x = _jnp(), args[0]
    bias, lambd = _c(x, node.attr("bias", 0.0)), _c(x, node.attr("lambd", 0.5))
    return [jnp.where(x < -lambd, x + bias, jnp.where(x > lambd, x - bias, _c(x, 0)))]


@rule("PRelu")
def _prelu(ctx, node, args):
    jnp = _jnp()
    x, slope = args
    return [jnp.where(x < 0, x * slope, x)]


def _binary(fn: Callable) -> Rule:
    return lambda ctx, node, args: [fn(*args)]


def _div(a, b):
    jnp = _jnp()
    if jnp.issubdtype(a.dtype, jnp.integer):
        from jax import lax

        return lax.div(a, b)  # truncates toward zero, as ONNX's integer division does
    return a / b


def _pow(a, b):
    jnp = _jnp()
    if jnp.issubdtype(a.dtype, jnp.integer) and jnp.issubdtype(b.dtype, jnp.integer):
        return jnp.power(a, b.astype(a.dtype))
    out = jnp.power(a.astype(jnp.promote_types(a.dtype, b.dtype)) if jnp.issubdtype(b.dtype, jnp.floating) else a,
                    b.astype(a.dtype) if not jnp.issubdtype(b.dtype, jnp.floating) else b)  # fmt: skip
    return out.astype(a.dtype)


def _bitshift(ctx, node, args):
    jnp = _jnp()
    x, s = args
    return [jnp.left_shift(x, s) if node.attr("direction") == "LEFT" else jnp.right_shift(x, s)]


def _mod(ctx, node, args):
    jnp = _jnp()
    a, b = args
    return [jnp.fmod(a, b) if node.attr("fmod", 0) else jnp.mod(a, b)]


def _init_binary():
    import jax.numpy as jnp

    table = {
        "Add": jnp.add, "Sub": jnp.subtract, "Mul": jnp.multiply, "Div": _div, "Pow": _pow,
        "And": jnp.logical_and, "Or": jnp.logical_or, "Xor": jnp.logical_xor, "Equal": jnp.equal,
        "Greater": jnp.greater, "Less": jnp.less, "GreaterOrEqual": jnp.greater_equal,
        "LessOrEqual": jnp.less_equal, "BitwiseAnd": jnp.bitwise_and, "BitwiseOr": jnp.bitwise_or,
        "BitwiseXor": jnp.bitwise_xor,
    }  # fmt: skip
    return table


for _op in ("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less", "GreaterOrEqual",
            "LessOrEqual", "BitwiseAnd", "BitwiseOr", "BitwiseXor"):  # fmt: skip
    RULES[_op] = Lowering(lambda ctx, node, args, _op=_op: [_init_binary()[_op](*args)])
RULES["BitShift"] = Lowering(_bitshift)
RULES["Mod"] = Lowering(_mod)


def _variadic(name: str) -> Rule:
    def fn(ctx, node, args):
        jnp = _jnp()
        step = {"Max": jnp.maximum, "Min": jnp.minimum, "Sum": jnp.add, "Mean": jnp.add}[name]
        out = args[0]
        for a in args[1:]:
            out = step(out, a)
        if name == "Mean":
            out = out / _c(out, len(args))
        return [out]

    return fn


for _op in ("Max", "Min", "Sum", "Mean"):
    RULES[_op] = Lowering(_variadic(_op))


@rule("Where")
def _where(ctx, node, args):
    return [_jnp().where(*args)]


@rule("Clip")
def _clip(ctx, node, args):
    jnp = _jnp()
    x = args[0]
    lo = args[1] if len(args) > 1 else None
    hi = args[2] if len(args) > 2 else None
    if lo is not None:
        x = jnp.maximum(x, lo)
    if hi is not None:
        x = jnp.minimum(x, hi)
    return [x]


_CAST_OK = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16, 17, 18, 19, 20}
_FLOAT8 = {17, 18, 19, 20}


def _cast_check(node):
    to = node.attr("to")
    if to is not None and to not in _CAST_OK:
        return f"cast to ONNX dtype {to} is not supported"
    return None


@rule("Cast", check=_cast_check)
def _cast(ctx, node, args):
    to = node.attr("to")
    if to in _FLOAT8 and node.attr("saturate", 1):
        return [_saturate(args[0], _np_dtype(to))]
    return [_convert(args[0], _np_dtype(to))]


def _saturate(x, dtype):
    """ONNX's saturating cast to a float8 type: out-of-range values (infinities too) become the
    largest finite value of that sign; NaN stays NaN."""
    import ml_dtypes

    jnp = _jnp()
    big = float(ml_dtypes.finfo(dtype).max)
    if jnp.issubdtype(x.dtype, jnp.floating):
        x = jnp.clip(x, -big, big)
    return x.astype(dtype)


def _convert(x, dtype):
    jnp = _jnp()
    if dtype == np.bool_:
        return x != 0
    if jnp.issubdtype(x.dtype, jnp.floating) and np.issubdtype(dtype, np.integer):
        x = jnp.trunc(x)
    return x.astype(dtype)


def _bitcast_check(node):
    to = node.attr("to")
    if to is None or to not in _CAST_OK or to in _FLOAT8:
        return f"bitcast to ONNX dtype {to} is not supported"
    return None


@rule("BitCast", check=_bitcast_check)
def _bitcast(ctx, node, args):
    target = np.dtype(_np_dtype(node.attr("to")))
    if target.itemsize != np.dtype(args[0].dtype).itemsize:
        raise ValueError(f"BitCast between widths: {args[0].dtype} to {target}")
    if target == np.bool_ or args[0].dtype == np.bool_:  # XLA keeps booleans as 1-bit predicates
        x = args[0].astype(np.uint8) if args[0].dtype == np.bool_ else args[0]
        y = _lax().bitcast_convert_type(x, np.uint8)
        return [y != 0 if target == np.bool_ else _lax().bitcast_convert_type(y, target)]
    return [_lax().bitcast_convert_type(args[0], target)]


@rule("CastLike")
def _cast_like(ctx, node, args):
    from ....core_ir.dtypes import from_numpy

    if int(from_numpy(np.dtype(args[1].dtype))) in _FLOAT8 and node.attr("saturate", 1):
        return [_saturate(args[0], args[1].dtype)]
    return [_convert(args[0], args[1].dtype)]
