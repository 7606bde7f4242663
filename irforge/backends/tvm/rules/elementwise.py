"""Element-wise ops in relax.op: activations, arithmetic, comparisons, casts."""

from __future__ import annotations

import numpy as np

from ....ops.checks import dropout_draws
from ...table import Refused
from .common import RULES, _op, _s, rule

# --- element-wise ------------------------------------------------------------------------------

_UNARY = {
    "Relu": "nn.relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Erf": "erf", "Abs": "abs", "Neg": "negative", "Floor": "floor", "Ceil": "ceil", "Sin": "sin", "Cos": "cos",
    "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh",
    "Acosh": "acosh", "Atanh": "atanh", "Not": "logical_not", "IsNaN": "isnan", "Sign": "sign", "Round": "round",
    "BitwiseNot": "bitwise_not",
}  # fmt: skip


def _resolve(path: str):
    obj = _op()
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


for _name, _path in _UNARY.items():
    RULES.add(_name, lambda ctx, node, args, _path=_path: [_resolve(_path)(ctx.expr(args[0]))])


@rule("Identity")
def _identity(ctx, node, args):
    return [ctx.expr(args[0])]


@rule("Dropout")
def _dropout(ctx, node, args):
    """Dropout that drops nothing (inference, or a ratio of 0): the input, and a mask of trues."""
    why = dropout_draws(node)
    if why:
        raise Refused(why)
    x = ctx.expr(args[0])
    mask = _op().ones(ctx.shape(x), "bool") if len(node.outputs) > 1 and node.outputs[1] is not None else None
    return [x, mask]


@rule("Reciprocal")
def _reciprocal(ctx, node, args):
    x = ctx.expr(args[0])
    return [_op().divide(ctx.scalar(1, x), x)]


_BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Equal": "equal", "Less": "less",
    "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal", "And": "logical_and",
    "Or": "logical_or", "Xor": "logical_xor", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
}  # fmt: skip

for _name, _path in _BINARY.items():
    RULES.add(_name, lambda ctx, node, args, _path=_path: [_resolve(_path)(ctx.expr(args[0]), ctx.expr(args[1]))])


@rule("Pow")
def _pow(ctx, node, args):
    """The result has the base's type, as ONNX says: a float exponent of an integer base is
    computed in float64 and truncated; integer powers are exact (wrapping as numpy's do), by
    repeated squaring over the exponent's bits."""
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    base, exponent = ctx.dtype(a), ctx.dtype(b)
    if base.startswith("float"):
        return [op.power(a, b if exponent == base else op.astype(b, base))]
    if exponent.startswith("float"):
        return [op.astype(op.trunc(op.power(op.astype(a, "float64"), op.astype(b, "float64"))), base)]
    return [_integer_power(ctx, a, b, args[1])]


def _integer_power(ctx, a, b, given):
    op = _op()
    if isinstance(given, np.ndarray):
        bits = max(int(np.max(np.abs(given.astype(np.int64)), initial=0)).bit_length(), 1)
    else:
        bits = np.dtype(ctx.dtype(b)).itemsize * 8
    result, square = op.ones_like(op.add(a, op.zeros_like(op.astype(b, ctx.dtype(a))))), a
    for i in range(bits):
        bit = op.not_equal(op.bitwise_and(op.right_shift(b, _s(ctx, i, b)), _s(ctx, 1, b)), _s(ctx, 0, b))
        result = op.where(bit, op.multiply(result, square), result)
        square = op.multiply(square, square)
    if not ctx.dtype(b).startswith("uint"):  # a negative exponent: 1/a**n toward zero
        one, minus_one = _s(ctx, 1, a), _s(ctx, -1, a) if not ctx.dtype(a).startswith("uint") else None
        odd = op.not_equal(op.bitwise_and(b, _s(ctx, 1, b)), _s(ctx, 0, b))
        inverse = op.where(op.equal(a, one), one, op.zeros_like(result))
        if minus_one is not None:
            inverse = op.where(op.equal(a, minus_one), op.where(odd, minus_one, one), inverse)
        result = op.where(op.less(b, _s(ctx, 0, b)), inverse, result)
    return result


@rule("Div")
def _div(ctx, node, args):
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    op = _op()
    if ctx.dtype(a).startswith(("float", "bfloat")):
        return [op.divide(a, b)]
    return [trunc_divide(ctx, a, b)]


def trunc_divide(ctx, a, b):
    """Integer division rounding toward zero (C's, ONNX's): floor division is one less where the
    signs differ and the division is not exact."""
    op = _op()
    q = op.floor_divide(a, b)
    if ctx.dtype(a).startswith("uint"):
        return q
    inexact = op.not_equal(op.multiply(q, b), a)
    signs_differ = op.logical_xor(op.less(a, _s(ctx, 0, a)), op.less(b, _s(ctx, 0, b)))
    return op.where(op.logical_and(inexact, signs_differ), op.add(q, _s(ctx, 1, q)), q)


@rule("Max", "Min", "Sum", "Mean")
def _variadic(ctx, node, args):
    op = _op()
    step = {"Max": op.maximum, "Min": op.minimum, "Sum": op.add, "Mean": op.add}[node.op_type]
    out = ctx.expr(args[0])
    for a in args[1:]:
        out = step(out, ctx.expr(a))
    if node.op_type == "Mean":
        out = op.divide(out, ctx.scalar(len(args), out))
    return [out]


@rule("Where")
def _where(ctx, node, args):
    return [_op().where(*(ctx.expr(a) for a in args))]


@rule("Clip")
def _clip(ctx, node, args):
    op = _op()
    x = ctx.expr(args[0])
    if len(args) > 1 and args[1] is not None:
        x = op.maximum(x, ctx.expr(args[1]))
    if len(args) > 2 and args[2] is not None:
        x = op.minimum(x, ctx.expr(args[2]))
    return [x]


@rule("LeakyRelu")
def _leaky(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    return [op.where(op.greater_equal(x, ctx.scalar(0, x)), x, op.multiply(x, ctx.scalar(node.attr("alpha", 0.01), x)))]


@rule("Cast")
def _cast(ctx, node, args):
    from ....core_ir.dtypes import to_numpy

    op, x = _op(), ctx.expr(args[0])
    dtype = np.dtype(to_numpy(node.attr("to")))
    if dtype == np.bool_:  # any non-zero value is true
        return [op.not_equal(x, ctx.scalar(0, x))]
    if ctx.dtype(x).startswith("float") and np.issubdtype(dtype, np.integer):
        x = op.trunc(x)  # toward zero, as ONNX (and C) converts
    return [op.astype(x, str(dtype))]
