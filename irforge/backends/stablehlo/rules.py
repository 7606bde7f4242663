"""The lowering rule table: how each ONNX op is spelled in JAX's ``lax``/``jax.numpy``, whose own
lowering rules then emit the StableHLO (the same rules ``jax.jit`` uses, so every op lowers the
way XLA expects it).

A rule is ``fn(node, args) -> list of results``; ``args`` are traced arrays, numpy constants or
``None`` for an omitted optional input.  A rule may declare a ``check(node) -> reason | None``
that refuses attribute combinations it does not implement: it runs before lowering, so a model
is refused as a whole rather than half lowered.  Inputs that must be known at compile time (a
``Reshape``'s shape, a ``Slice``'s bounds) are read with :func:`static`, which refuses traced
values: XLA compiles static shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...core_ir.kernels import GRID_MODES, grid_sample
from ...core_ir.node import Node

Rule = Callable[[Node, list], list]
Check = Callable[[Node], "str | None"]


class NotStatic(Exception):
    """An input that must be a compile-time constant is computed at run time."""


@dataclass(frozen=True)
class Lowering:
    fn: Rule
    check: Check | None = None


RULES: dict[str, Lowering] = {}



def rule(*ops: str, check: Check | None = None):
    def register(fn: Rule) -> Rule:
        for op in ops:
            RULES[op] = Lowering(fn, check)
        return fn

    return register


def static(x, what: str = "this input") -> np.ndarray:
    """``x`` as a numpy constant, or :class:`NotStatic` when it is computed at run time."""
    if x is None or isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    raise NotStatic(f"{what} is computed at run time; XLA needs it at compile time")


def _jnp():
    import jax.numpy as jnp

    return jnp


def _lax():
    from jax import lax

    return lax


def _np_dtype(onnx_dtype: int):
    from ...core_ir.dtypes import to_numpy

    return to_numpy(onnx_dtype)


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


# --- element-wise ----------------------------------------------------------------------------


def _unary(fn_name: str) -> Rule:
    return lambda node, args: [fn_name_to(fn_name)(args[0])]


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
def _isinf(node, args):
    jnp, x = _jnp(), args[0]
    pos, neg = node.attr("detect_positive", 1), node.attr("detect_negative", 1)
    return [jnp.isinf(x) & (((x > 0) & bool(pos)) | ((x < 0) & bool(neg)))]


@rule("Elu")
def _elu(node, args):
    jnp, x = _jnp(), args[0]
    return [jnp.where(x > 0, x, _c(x, node.attr("alpha", 1.0)) * jnp.expm1(x))]


@rule("Celu")
def _celu(node, args):
    jnp, x = _jnp(), args[0]
    a = _c(x, node.attr("alpha", 1.0))
    return [jnp.maximum(x, _c(x, 0)) + jnp.minimum(_c(x, 0), a * jnp.expm1(x / a))]


@rule("Selu")
def _selu(node, args):
    jnp, x = _jnp(), args[0]
    a, g = _c(x, node.attr("alpha", 1.67326319217681884765625)), _c(x, node.attr("gamma", 1.05070102214813232421875))
    return [jnp.where(x > 0, g * x, g * (a * jnp.exp(x) - a))]


@rule("LeakyRelu")
def _leaky(node, args):
    jnp, x = _jnp(), args[0]
    return [jnp.where(x >= 0, x, x * _c(x, node.attr("alpha", 0.01)))]


@rule("ThresholdedRelu")
def _thresholded(node, args):
    jnp, x = _jnp(), args[0]
    return [jnp.where(x > _c(x, node.attr("alpha", 1.0)), x, _c(x, 0))]


@rule("HardSigmoid")
def _hard_sigmoid(node, args):
    jnp, x = _jnp(), args[0]
    y = x * _c(x, node.attr("alpha", 0.2)) + _c(x, node.attr("beta", 0.5))
    return [jnp.clip(y, _c(x, 0), _c(x, 1))]


@rule("HardSwish")
def _hard_swish(node, args):
    jnp, x = _jnp(), args[0]
    return [x * jnp.clip(x / _c(x, 6) + _c(x, 0.5), _c(x, 0), _c(x, 1))]


@rule("Mish")
def _mish(node, args):
    jnp, x = _jnp(), args[0]
    return [x * jnp.tanh(jnp.logaddexp(x, _c(x, 0)))]


@rule("Gelu")
def _gelu(node, args):
    import jax

    return [jax.nn.gelu(args[0], approximate=node.attr("approximate", "none") == "tanh")]


@rule("Shrink")
def _shrink(node, args):
    jnp, x = _jnp(), args[0]
    bias, lambd = _c(x, node.attr("bias", 0.0)), _c(x, node.attr("lambd", 0.5))
    return [jnp.where(x < -lambd, x + bias, jnp.where(x > lambd, x - bias, _c(x, 0)))]


@rule("PRelu")
def _prelu(node, args):
    jnp = _jnp()
    x, slope = args
    return [jnp.where(x < 0, x * slope, x)]


def _binary(fn: Callable) -> Rule:
    return lambda node, args: [fn(*args)]


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


def _bitshift(node, args):
    jnp = _jnp()
    x, s = args
    return [jnp.left_shift(x, s) if node.attr("direction") == "LEFT" else jnp.right_shift(x, s)]


def _mod(node, args):
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
    RULES[_op] = Lowering(lambda node, args, _op=_op: [_init_binary()[_op](*args)])
RULES["BitShift"] = Lowering(_bitshift)
RULES["Mod"] = Lowering(_mod)


def _variadic(name: str) -> Rule:
    def fn(node, args):
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
def _where(node, args):
    return [_jnp().where(*args)]


@rule("Clip")
def _clip(node, args):
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
def _cast(node, args):
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
def _bitcast(node, args):
    target = np.dtype(_np_dtype(node.attr("to")))
    if target.itemsize != np.dtype(args[0].dtype).itemsize:
        raise ValueError(f"BitCast between widths: {args[0].dtype} to {target}")
    if target == np.bool_ or args[0].dtype == np.bool_:  # XLA keeps booleans as 1-bit predicates
        x = args[0].astype(np.uint8) if args[0].dtype == np.bool_ else args[0]
        y = _lax().bitcast_convert_type(x, np.uint8)
        return [y != 0 if target == np.bool_ else _lax().bitcast_convert_type(y, target)]
    return [_lax().bitcast_convert_type(args[0], target)]


@rule("CastLike")
def _cast_like(node, args):
    from ...core_ir.dtypes import from_numpy

    if int(from_numpy(np.dtype(args[1].dtype))) in _FLOAT8 and node.attr("saturate", 1):
        return [_saturate(args[0], args[1].dtype)]
    return [_convert(args[0], args[1].dtype)]


# --- shapes and data movement -----------------------------------------------------------------


def _operand_or_attr(node, args, index: int, attr: str, what: str) -> list | None:
    """An operand that older opsets spelled as an attribute (``axes``, ``split``), as numbers."""
    if len(args) > index and args[index] is not None:
        return _ints(args[index], what)
    value = node.attr(attr)
    return None if value is None else list(value)


def _ints(x, what: str) -> list[int]:
    return [int(v) for v in static(x, what).reshape(-1)]


@rule("Reshape")
def _reshape(node, args):
    x = args[0]
    shape = _ints(args[1], "Reshape's shape")
    allowzero = node.attr("allowzero", 0)
    dims = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(shape)]
    return [x.reshape(dims)]


@rule("Flatten")
def _flatten(node, args):
    x = args[0]
    axis = _axis(node.attr("axis", 1), x.ndim)
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


@rule("Squeeze")
def _squeeze(node, args):
    x = args[0]
    axes = _operand_or_attr(node, args, 1, "axes", "Squeeze's axes")
    if axes is None:
        return [_jnp().squeeze(x)]
    return [_jnp().squeeze(x, tuple(_axis(int(a), x.ndim) for a in axes))]


@rule("Unsqueeze")
def _unsqueeze(node, args):
    x = args[0]
    axes = [int(a) for a in _operand_or_attr(node, args, 1, "axes", "Unsqueeze's axes")]
    rank = x.ndim + len(axes)
    return [_jnp().expand_dims(x, tuple(sorted(_axis(a, rank) for a in axes)))]


@rule("Transpose")
def _transpose(node, args):
    perm = node.attr("perm")
    return [_jnp().transpose(args[0], None if perm is None else tuple(perm))]


@rule("Concat")
def _concat(node, args):
    xs = [a for a in args if a is not None]
    return [_jnp().concatenate(xs, axis=node.attr("axis"))]


@rule("Split")
def _split(node, args):
    jnp, x = _jnp(), args[0]
    axis = _axis(node.attr("axis", 0), x.ndim)
    sizes = _operand_or_attr(node, args, 1, "split", "Split's sizes")
    n = len(node.outputs)
    if sizes is not None:
        sizes = [int(v) for v in sizes]
    else:
        length = x.shape[axis]
        if node.attr("num_outputs") is not None:
            chunk = -(-length // n)
            sizes = [min(chunk, length - i * chunk) for i in range(n)]
        else:
            sizes = [length // n] * n
    bounds = np.cumsum(sizes)[:-1].tolist()
    return list(jnp.split(x, bounds, axis=axis))


@rule("Slice")
def _slice(node, args):
    x = args[0]
    starts = _ints(args[1], "Slice's starts")
    ends = _ints(args[2], "Slice's ends")
    axes = _ints(args[3], "Slice's axes") if len(args) > 3 and args[3] is not None else list(range(len(starts)))
    steps = _ints(args[4], "Slice's steps") if len(args) > 4 and args[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        dim = x.shape[_axis(a, x.ndim)]
        index[_axis(a, x.ndim)] = slice(*_clamp_slice(s, e, st, dim))
    return [x[tuple(index)]]


def _clamp_slice(start: int, end: int, step: int, dim: int) -> tuple[int, int | None, int]:
    """ONNX's clamping of Slice bounds, as Python slice arguments."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return start, end, step
    start, end = min(max(start, -1), dim - 1), min(max(end, -1), dim - 1)
    return start, (None if end < 0 else end), step


@rule("Gather")
def _gather(node, args):
    jnp = _jnp()
    x, idx = args
    axis = _axis(node.attr("axis", 0), x.ndim)
    idx = jnp.where(idx < 0, idx + x.shape[axis], idx)
    return [jnp.take(x, idx, axis=axis, mode="clip")]


@rule("GatherElements")
def _gather_elements(node, args):
    jnp = _jnp()
    x, idx = args
    axis = _axis(node.attr("axis", 0), x.ndim)
    idx = jnp.where(idx < 0, idx + x.shape[axis], idx)
    return [jnp.take_along_axis(x, idx, axis=axis, mode="clip")]


@rule("GatherND")
def _gather_nd(node, args):
    jnp = _jnp()
    x, idx = jnp.asarray(args[0]), args[1]  # a constant's numpy array cannot be indexed by traced indices
    b = node.attr("batch_dims", 0)
    k = idx.shape[-1]
    dims = jnp.asarray(x.shape[b : b + k], dtype=idx.dtype)
    idx = jnp.where(idx < 0, idx + dims, idx)

    def one(xb, ib):
        flat = ib.reshape(-1, k)
        out = xb[tuple(flat[:, j] for j in range(k))]
        return out.reshape(*ib.shape[:-1], *xb.shape[k:])

    if b == 0:
        return [one(x, idx)]
    import jax

    lead = x.shape[:b]
    xf = x.reshape(-1, *x.shape[b:])
    idf = idx.reshape(-1, *idx.shape[b:])
    out = jax.vmap(one)(xf, idf)
    return [out.reshape(*lead, *out.shape[1:])]


@rule("Expand")
def _expand(node, args):
    jnp = _jnp()
    x = args[0]
    shape = _ints(args[1], "Expand's shape")
    target = np.broadcast_shapes(tuple(x.shape), tuple(shape))
    return [jnp.broadcast_to(x, target)]


@rule("Tile")
def _tile(node, args):
    return [_jnp().tile(args[0], _ints(args[1], "Tile's repeats"))]


def _pad_check(node):
    mode = node.attr("mode", "constant")
    return None if mode in ("constant", "reflect", "edge", "wrap") else f"Pad mode {mode!r}"


@rule("Pad", check=_pad_check)
def _pad(node, args):
    jnp = _jnp()
    x = args[0]
    pads = _ints(args[1], "Pad's pads") if len(args) > 1 and args[1] is not None else list(node.attr("pads"))
    value = args[2] if len(args) > 2 and args[2] is not None else None
    axes = _ints(args[3], "Pad's axes") if len(args) > 3 and args[3] is not None else list(range(x.ndim))
    axes = [_axis(a, x.ndim) for a in axes]
    widths = [(0, 0)] * x.ndim
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[i + len(axes)])
    # negative pads crop
    crop = tuple(slice(-lo if lo < 0 else 0, (x.shape[a] + hi) if hi < 0 else None)
                 for a, (lo, hi) in enumerate(widths))  # fmt: skip
    x = x[crop]
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    mode = node.attr("mode", "constant")
    if mode == "constant":
        cval = jnp.zeros((), x.dtype) if value is None else jnp.asarray(value, x.dtype).reshape(())
        return [jnp.pad(x, widths, mode="constant", constant_values=cval)]
    return [jnp.pad(x, widths, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])]


@rule("Shape")
def _shape(node, args):
    shape = np.array(args[0].shape, dtype=np.int64) if _static_shape(args[0]) else None
    if shape is None:
        return [_jnp().asarray(args[0].shape, dtype=np.int64)[node.attr("start", 0) : node.attr("end", None)]]
    return [shape[node.attr("start", 0) : node.attr("end", None)]]


def _static_shape(x) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in x.shape)


@rule("Size")
def _size(node, args):
    x = args[0]
    if _static_shape(x):
        return [np.array(int(np.prod(x.shape)), dtype=np.int64)]
    return [_jnp().asarray(x.size, dtype=np.int64)]


@rule("ConstantOfShape")
def _constant_of_shape(node, args):
    shape = _ints(args[0], "ConstantOfShape's shape")
    value = node.attr("value")
    fill = np.zeros(1, np.float32) if value is None else value.numpy().reshape(-1)
    return [_jnp().full(shape, fill[0], dtype=fill.dtype)]


@rule("Range")
def _range(node, args):
    start, limit, delta = (static(a, "Range's bounds") for a in args)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return [(start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)]


@rule("EyeLike")
def _eye_like(node, args):
    jnp, x = _jnp(), args[0]
    dtype = _np_dtype(node.attr("dtype")) if node.attr("dtype") is not None else x.dtype
    return [jnp.eye(x.shape[0], x.shape[1], k=node.attr("k", 0), dtype=dtype)]


@rule("Trilu")
def _trilu(node, args):
    jnp, x = _jnp(), args[0]
    k = int(static(args[1], "Trilu's k")) if len(args) > 1 and args[1] is not None else 0
    return [jnp.triu(x, k) if node.attr("upper", 1) else jnp.tril(x, k)]


@rule("OneHot")
def _one_hot(node, args):
    jnp = _jnp()
    idx, depth, values = args
    depth = int(static(depth, "OneHot's depth").reshape(-1)[0])
    axis = node.attr("axis", -1)
    idx = jnp.where(idx < 0, idx + depth, idx)
    hot = jnp.arange(depth, dtype=idx.dtype)
    rank = idx.ndim + 1
    axis = _axis(axis, rank)
    mask = jnp.expand_dims(idx, axis) == hot.reshape([depth if i == axis else 1 for i in range(rank)])
    return [jnp.where(mask, values[1], values[0])]


def _cumulative(kind: str) -> Rule:
    def fn(node, args):
        from jax import lax

        jnp = _jnp()
        x = args[0]
        axis = _axis(int(static(args[1], f"{node.op_type}'s axis").reshape(-1)[0]), x.ndim)
        reverse = bool(node.attr("reverse", 0))
        scan = lax.cumsum if kind == "sum" else lax.cumprod
        y = scan(x, axis=axis, reverse=reverse)
        if node.attr("exclusive", 0):  # shift by one along the axis, the identity coming in
            identity = jnp.zeros_like if kind == "sum" else jnp.ones_like
            n = x.shape[axis]
            first = lax.slice_in_dim(identity(y), 0, 1, axis=axis)
            if reverse:
                y = jnp.concatenate([lax.slice_in_dim(y, 1, n, axis=axis), first], axis=axis)
            else:
                y = jnp.concatenate([first, lax.slice_in_dim(y, 0, n - 1, axis=axis)], axis=axis)
        return [y]

    return fn


RULES["CumSum"] = Lowering(_cumulative("sum"))
RULES["CumProd"] = Lowering(_cumulative("prod"))


@rule("DepthToSpace")
def _depth_to_space(node, args):
    jnp, x = _jnp(), args[0]
    b = node.attr("blocksize")
    n, c, h, w = x.shape
    if node.attr("mode", "DCR") == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [jnp.reshape(y, (n, c // (b * b), h * b, w * b))]


@rule("SpaceToDepth")
def _space_to_depth(node, args):
    x = args[0]
    b = node.attr("blocksize")
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.transpose(0, 1, 3, 5, 2, 4) if node.attr("mode", "DCR") == "CRD" else y.transpose(0, 3, 5, 1, 2, 4)
    return [y.reshape(n, c * b * b, h // b, w // b)]


@rule("Einsum")
def _einsum(node, args):
    return [_jnp().einsum(node.attr("equation"), *args)]


def _scatter_check(node):
    red = node.attr("reduction", "none")
    return None if red in ("none", "add", "mul", "max", "min") else f"reduction {red!r}"


def _scatter_update(ref, index, updates, reduction: str):
    at = _jnp().asarray(ref).at[index]  # a constant operand arrives as numpy
    return {"none": at.set, "add": at.add, "mul": at.multiply, "max": at.max, "min": at.min}[reduction](
        updates, mode="promise_in_bounds" if reduction == "none" else None
    )


@rule("ScatterElements", "Scatter", check=_scatter_check)
def _scatter_elements(node, args):
    jnp = _jnp()
    x, idx, upd = args
    axis = _axis(node.attr("axis", 0), x.ndim)
    idx = jnp.where(idx < 0, idx + x.shape[axis], idx)
    grids = jnp.meshgrid(*[jnp.arange(d) for d in idx.shape], indexing="ij")
    index = tuple(idx if i == axis else grids[i] for i in range(x.ndim))
    return [_scatter_update(x, index, upd, node.attr("reduction", "none"))]


@rule("ScatterND", check=_scatter_check)
def _scatter_nd(node, args):
    jnp = _jnp()
    x, idx, upd = args
    k = idx.shape[-1]
    dims = jnp.asarray(x.shape[:k], dtype=idx.dtype)
    idx = jnp.where(idx < 0, idx + dims, idx)
    index = tuple(idx[..., j] for j in range(k))
    return [_scatter_update(x, index, upd, node.attr("reduction", "none"))]


@rule("Dropout")
def _dropout(node, args):
    jnp, x = _jnp(), args[0]
    training = static(args[2], "Dropout's training_mode") if len(args) > 2 and args[2] is not None else None
    ratio = static(args[1], "Dropout's ratio") if len(args) > 1 and args[1] is not None else None
    if training is not None and bool(training) and (ratio is None or float(ratio) != 0):
        raise NotStatic("Dropout in training mode draws random numbers")
    outs = [x]
    if len(node.outputs) > 1:
        outs.append(jnp.ones(x.shape, dtype=bool))
    return outs


# --- reductions -------------------------------------------------------------------------------


def _reduce_axes(node, args, x):
    axes = args[1] if len(args) > 1 and args[1] is not None else None
    if axes is not None:
        axes = _ints(axes, "the reduction's axes")
    elif node.attr("axes") is not None:
        axes = list(node.attr("axes"))
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return None
        return tuple(range(x.ndim))
    return tuple(sorted(_axis(a, x.ndim) for a in axes))


def _reduction(kind: str) -> Rule:
    def fn(node, args):
        jnp, x = _jnp(), args[0]
        axes = _reduce_axes(node, args, x)
        if axes is None:
            return [x]
        keep = bool(node.attr("keepdims", 1))
        if kind == "Sum":
            y = jnp.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
        elif kind == "Mean":
            y = jnp.mean(x, axis=axes, keepdims=keep).astype(x.dtype)
        elif kind == "Max":
            y = _extreme(jnp.max, x, axes, keep, -np.inf)
        elif kind == "Min":
            y = _extreme(jnp.min, x, axes, keep, np.inf)
        elif kind == "Prod":
            y = jnp.prod(x, axis=axes, keepdims=keep, dtype=x.dtype)
        elif kind == "L1":
            y = jnp.sum(jnp.abs(x), axis=axes, keepdims=keep, dtype=x.dtype)
        elif kind == "L2":
            y = jnp.sqrt(jnp.sum(x * x, axis=axes, keepdims=keep)).astype(x.dtype)
        elif kind == "LogSum":
            y = jnp.log(jnp.sum(x, axis=axes, keepdims=keep))
        elif kind == "LogSumExp":
            import jax

            y = jax.nn.logsumexp(x.astype(np.float64) if x.dtype == np.float64 else x, axis=axes, keepdims=keep)
            y = y.astype(x.dtype)
        else:  # SumSquare
            y = jnp.sum(x * x, axis=axes, keepdims=keep, dtype=x.dtype)
        return [y]

    return fn


def _extreme(fn, x, axes, keep, empty):
    jnp = _jnp()
    if any(x.shape[a] == 0 for a in axes):
        shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if keep else [
            d for a, d in enumerate(x.shape) if a not in axes]  # fmt: skip
        if x.dtype == bool:
            fill = empty > 0
        elif jnp.issubdtype(x.dtype, jnp.floating):
            fill = empty
        else:
            fill = jnp.iinfo(x.dtype).min if empty < 0 else jnp.iinfo(x.dtype).max
        return jnp.full(shape, fill, dtype=x.dtype)
    return fn(x, axis=axes, keepdims=keep)


for _kind in ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "LogSum", "LogSumExp", "SumSquare"):
    RULES[f"Reduce{_kind}"] = Lowering(_reduction(_kind))


def _arg(kind: str) -> Rule:
    def fn(node, args):
        jnp, x = _jnp(), args[0]
        axis = _axis(node.attr("axis", 0), x.ndim)
        keep = bool(node.attr("keepdims", 1))
        if node.attr("select_last_index", 0):
            flipped = jnp.flip(x, axis)
            i = (jnp.argmax if kind == "Max" else jnp.argmin)(flipped, axis=axis, keepdims=keep)
            y = x.shape[axis] - 1 - i
        else:
            y = (jnp.argmax if kind == "Max" else jnp.argmin)(x, axis=axis, keepdims=keep)
        return [y.astype(np.int64)]

    return fn


RULES["ArgMax"] = Lowering(_arg("Max"))
RULES["ArgMin"] = Lowering(_arg("Min"))


@rule("TopK")
def _topk(node, args):
    jnp = _jnp()
    x = args[0]
    k = int(static(args[1], "TopK's k").reshape(-1)[0])
    axis = _axis(node.attr("axis", -1), x.ndim)
    largest = node.attr("largest", 1)
    xt = jnp.moveaxis(x, axis, -1)
    n = xt.shape[-1]
    idx = jnp.broadcast_to(jnp.arange(n), xt.shape)
    # a stable sort on (value, index): ties keep the lower index first, as ONNX asks
    key = -xt if largest else xt
    if jnp.issubdtype(x.dtype, jnp.unsignedinteger) and largest:
        key = jnp.invert(xt)  # max - x, without a Python int that overflows int64
    from jax import lax

    _, order = lax.sort((key, idx), dimension=xt.ndim - 1, num_keys=2)
    order = order[..., :k]
    values = jnp.take_along_axis(xt, order, axis=-1)
    return [jnp.moveaxis(values, -1, axis), jnp.moveaxis(order, -1, axis).astype(np.int64)]


# --- neural-network ops -----------------------------------------------------------------------


def _softmax_family(kind: str) -> Rule:
    def fn(node, args):
        import jax

        jnp, x = _jnp(), args[0]
        axis = node.attr("axis", -1)
        if kind == "Softmax":
            return [jax.nn.softmax(x, axis=axis)]
        if kind == "LogSoftmax":
            return [jax.nn.log_softmax(x, axis=axis)]
        i = jnp.argmax(x, axis=axis, keepdims=True)
        return [(jnp.arange(x.shape[axis]).reshape([-1 if a == _axis(axis, x.ndim) else 1 for a in range(x.ndim)])
                 == i).astype(x.dtype)]  # fmt: skip

    return fn


for _op in ("Softmax", "LogSoftmax", "Hardmax"):
    RULES[_op] = Lowering(_softmax_family(_op))


def _precision():
    from jax import lax

    return lax.Precision.HIGHEST


@rule("MatMul")
def _matmul(node, args):
    return [_jnp().matmul(args[0], args[1], precision=_precision())]


@rule("Gemm")
def _gemm(node, args):
    jnp = _jnp()
    a, b = args[0], args[1]
    if node.attr("transA", 0):
        a = a.T
    if node.attr("transB", 0):
        b = b.T
    y = jnp.matmul(a, b, precision=_precision())
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        y = y * _c(y, alpha)
    if len(args) > 2 and args[2] is not None:
        y = y + (args[2] * _c(y, beta) if beta != 1.0 else args[2])
    return [y]


def _spatial(node, x, kernel: list[int]) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """Strides, explicit (low, high) pads and dilations of a Conv/pool, with ``auto_pad`` resolved."""
    n = len(kernel)
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for i in range(n):
            size = x.shape[2 + i]
            out = -(-size // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size, 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads.append((lo, total - lo))
    elif auto == "VALID":
        pads = [(0, 0)] * n
    else:
        p = list(node.attr("pads") or [0] * (2 * n))
        pads = [(p[i], p[i + n]) for i in range(n)]
    return strides, pads, dilations


@rule("Conv")
def _conv(node, args):
    from jax import lax

    x, w = args[0], args[1]
    kernel = list(node.attr("kernel_shape") or w.shape[2:])
    strides, pads, dilations = _spatial(node, x, kernel)
    n = len(kernel)
    group = node.attr("group", 1)
    if _depthwise(x, w, group, kernel):
        y = _depthwise_taps(x, w, strides, pads, dilations, kernel)
    else:
        spec = ("NC" + "DHW"[-n:] if n <= 3 else None, "OI" + "DHW"[-n:], "NC" + "DHW"[-n:])
        y = lax.conv_general_dilated(x, w, strides, pads, rhs_dilation=dilations, dimension_numbers=spec,
                                     feature_group_count=group, precision=_precision())  # fmt: skip
    if len(args) > 2 and args[2] is not None:
        y = y + args[2].reshape(-1, *([1] * n))
    return [y]


def _depthwise(x, w, group: int, kernel: list[int]) -> bool:
    """A depthwise 2-D conv with a small kernel: XLA's CPU convolution is slow on these."""
    return (len(kernel) == 2 and group > 1 and w.shape[0] == group and w.shape[1] == 1
            and _static_shape(x) and x.shape[1] == group and kernel[0] * kernel[1] <= 25)  # fmt: skip


def _depthwise_taps(x, w, strides, pads, dilations, kernel):
    """The depthwise conv as a sum over kernel taps of strided slices times per-channel weights:
    element-wise work XLA fuses into one loop."""
    from jax import lax

    jnp = _jnp()
    xp = jnp.pad(x, ((0, 0), (0, 0), *pads))
    n, c, h, wd = xp.shape
    out_h = (h - (kernel[0] - 1) * dilations[0] - 1) // strides[0] + 1
    out_w = (wd - (kernel[1] - 1) * dilations[1] - 1) // strides[1] + 1
    y = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            r0, c0 = i * dilations[0], j * dilations[1]
            end = (n, c, r0 + (out_h - 1) * strides[0] + 1, c0 + (out_w - 1) * strides[1] + 1)
            tap = lax.slice(xp, (0, 0, r0, c0), end, (1, 1, strides[0], strides[1]))
            term = tap * w[:, 0, i, j].reshape(1, c, 1, 1)
            y = term if y is None else y + term
    return y


def _conv_check(node):
    ks = node.attr("kernel_shape")
    if ks is not None and len(ks) > 3:
        return "more than 3 spatial dims"
    return None


RULES["Conv"] = Lowering(_conv, _conv_check)


def _conv_transpose_check(node):
    if node.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return f"auto_pad {node.attr('auto_pad')!r}"
    return _conv_check(node)


@rule("ConvTranspose", check=_conv_transpose_check)
def _conv_transpose(node, args):
    from jax import lax

    jnp = _jnp()
    x, w = args[0], args[1]
    n = x.ndim - 2
    group = node.attr("group", 1)
    kernel = list(node.attr("kernel_shape") or w.shape[2:])
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    p = list(node.attr("pads") or [0] * (2 * n))
    out_pad = list(node.attr("output_padding") or [0] * n)
    if node.attr("output_shape") is not None:
        want = node.attr("output_shape")
        total = [strides[i] * (x.shape[2 + i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - want[i]
                 for i in range(n)]  # fmt: skip
        p = [t - t // 2 for t in total] + [t // 2 for t in total]  # NOTSET: the extra pad goes first
    # a transposed conv is a conv over the stride-dilated input with the flipped, swapped kernel
    cin, cout_g = w.shape[0], w.shape[1]
    wk = w.reshape(group, cin // group, cout_g, *w.shape[2:])
    wk = jnp.swapaxes(wk, 1, 2).reshape(group * cout_g, cin // group, *w.shape[2:])
    wk = jnp.flip(wk, axis=tuple(range(2, 2 + n)))
    pads = [((kernel[i] - 1) * dilations[i] - p[i], (kernel[i] - 1) * dilations[i] - p[i + n] + out_pad[i])
            for i in range(n)]  # fmt: skip
    spec = ("NC" + "DHW"[-n:], "OI" + "DHW"[-n:], "NC" + "DHW"[-n:])
    y = lax.conv_general_dilated(x, wk, [1] * n, pads, lhs_dilation=strides, rhs_dilation=dilations,
                                 dimension_numbers=spec, feature_group_count=group, precision=_precision())  # fmt: skip
    if len(args) > 2 and args[2] is not None:
        y = y + args[2].reshape(-1, *([1] * n))
    return [y]


def _pool_check(node):
    if node.attr("storage_order", 0):
        return "storage_order=1"
    return None


def _pool(kind: str) -> Rule:
    def fn(node, args):
        from jax import lax

        jnp, x = _jnp(), args[0]
        kernel = list(node.attr("kernel_shape"))
        n = len(kernel)
        strides, pads, dilations = _spatial(node, x, kernel)
        if node.attr("ceil_mode", 0):
            for i in range(n):
                size = x.shape[2 + i] + pads[i][0] + pads[i][1]
                eff = (kernel[i] - 1) * dilations[i] + 1
                out = -(-(size - eff) // strides[i]) + 1
                if (out - 1) * strides[i] >= x.shape[2 + i] + pads[i][0]:
                    out -= 1  # the last window must start inside the input or the left pad
                need = (out - 1) * strides[i] + eff - size
                pads[i] = (pads[i][0], pads[i][1] + max(need, 0))
        window, wstrides = (1, 1, *kernel), (1, 1, *strides)
        wdil, wpads = (1, 1, *dilations), ((0, 0), (0, 0), *pads)
        if kind == "Max":
            init = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
            if len(node.outputs) > 1 and node.outputs[1] is not None:
                return _max_pool_with_indices(x, jnp.asarray(init, x.dtype), window, wstrides, wpads, wdil)
            y = lax.reduce_window(x, jnp.asarray(init, x.dtype), lax.max, window, wstrides, wpads, window_dilation=wdil)
            return [y]
        total = lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, window, wstrides, wpads, window_dilation=wdil)
        if kind == "Lp":
            pw = node.attr("p", 2)
            total = lax.reduce_window(jnp.abs(x) ** pw, jnp.zeros((), x.dtype), lax.add, window, wstrides, wpads,
                                      window_dilation=wdil)  # fmt: skip
            return [total ** (1.0 / pw)]
        if node.attr("count_include_pad", 0):
            # the explicit pads count, the extra ceil-mode pad does not
            declared = _declared_pads(node, x, kernel, strides, dilations)
            ones = jnp.pad(jnp.ones(x.shape, x.dtype), ((0, 0), (0, 0), *declared), constant_values=1)
            extra = [(lo - d[0], hi - d[1]) for (lo, hi), d in zip(pads, declared, strict=True)]
            count = lax.reduce_window(ones, jnp.zeros((), x.dtype), lax.add, window, wstrides,
                                      ((0, 0), (0, 0), *extra), window_dilation=wdil)  # fmt: skip
        else:
            count = lax.reduce_window(jnp.ones(x.shape, x.dtype), jnp.zeros((), x.dtype), lax.add, window, wstrides,
                                      wpads, window_dilation=wdil)  # fmt: skip
        return [total / count]

    return fn


def _max_pool_with_indices(x, init, window, strides, pads, dilations) -> list:
    """Each window's maximum and its position in the flattened input (ONNX's ``Indices``), as one
    reduction over (value, position) pairs ordered by value, NaN highest, then by the lower
    position: a total order, so the order XLA reduces in does not matter.  Padding holds the
    lowest value at a position past every real one, so it is never picked over an element."""
    from jax import lax

    jnp = _jnp()
    positions = jnp.arange(x.size, dtype=jnp.int64).reshape(x.shape)

    def pick(a, b):
        (av, ai), (bv, bi) = a, b
        a_nan, b_nan = jnp.isnan(av), jnp.isnan(bv)
        b_wins = (bv > av) | (b_nan & ~a_nan) | (((bv == av) | (a_nan & b_nan)) & (bi < ai))
        return jnp.where(b_wins, bv, av), jnp.where(b_wins, bi, ai)

    last = jnp.asarray(jnp.iinfo(jnp.int64).max, jnp.int64)
    y, where = lax.reduce_window((x, positions), (init, last), pick, window, strides, pads, window_dilation=dilations)
    return [y, where]


def _declared_pads(node, x, kernel, strides, dilations):
    _, pads, _ = _spatial(node, x, kernel)
    return pads


RULES["MaxPool"] = Lowering(_pool("Max"), _pool_check)
RULES["AveragePool"] = Lowering(_pool("Average"))
RULES["LpPool"] = Lowering(_pool("Lp"))


@rule("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(node, args):
    jnp, x = _jnp(), args[0]
    axes = tuple(range(2, x.ndim))
    if node.op_type == "GlobalAveragePool":
        return [jnp.mean(x, axis=axes, keepdims=True)]
    if node.op_type == "GlobalMaxPool":
        return [jnp.max(x, axis=axes, keepdims=True)]
    p = node.attr("p", 2)
    return [jnp.sum(jnp.abs(x) ** p, axis=axes, keepdims=True) ** (1.0 / p)]


def _bn_check(node):
    if node.attr("training_mode", 0) or len([o for o in node.outputs if o is not None]) > 1:
        return "training mode (running statistics outputs)"
    return None


@rule("BatchNormalization", check=_bn_check)
def _batch_norm(node, args):
    jnp = _jnp()
    x, scale, bias, mean, var = args
    shape = [-1] + [1] * (x.ndim - 2)
    inv = scale.reshape(shape) / jnp.sqrt(var.reshape(shape) + _c(var, node.attr("epsilon", 1e-5)))
    return [((x - mean.reshape(shape)) * inv + bias.reshape(shape)).astype(x.dtype)]


@rule("InstanceNormalization")
def _instance_norm(node, args):
    jnp = _jnp()
    x, scale, bias = args
    axes = tuple(range(2, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    shape = [-1] + [1] * (x.ndim - 2)
    y = (x - mean) / jnp.sqrt(var + _c(x, node.attr("epsilon", 1e-5)))
    return [y * scale.reshape(shape) + bias.reshape(shape)]


@rule("LayerNormalization")
def _layer_norm(node, args):
    jnp = _jnp()
    x, scale = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    axis = _axis(node.attr("axis", -1), x.ndim)
    stash = _np_dtype(node.attr("stash_type", 1))
    xs = x.astype(stash)
    axes = tuple(range(axis, x.ndim))
    mean = jnp.mean(xs, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(xs - mean), axis=axes, keepdims=True)
    inv = 1 / jnp.sqrt(var + jnp.asarray(node.attr("epsilon", 1e-5), stash))
    y = ((xs - mean) * inv).astype(x.dtype) * scale
    if bias is not None:
        y = y + bias
    return [y, mean, inv][: len(node.outputs)]


@rule("GroupNormalization")
def _group_norm(node, args):
    jnp = _jnp()
    x, scale, bias = args
    g = node.attr("num_groups")
    n, c = x.shape[:2]
    xs = x.astype(_np_dtype(node.attr("stash_type", 1)))
    xg = xs.reshape(n, g, -1)
    mean = jnp.mean(xg, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xg - mean), axis=-1, keepdims=True)
    y = ((xg - mean) / jnp.sqrt(var + jnp.asarray(node.attr("epsilon", 1e-5), xs.dtype))).reshape(x.shape)
    shape = [1, c] + [1] * (x.ndim - 2)
    return [(y.astype(x.dtype) * scale.reshape(shape) + bias.reshape(shape))]


@rule("RMSNormalization")
def _rms_norm(node, args):
    jnp = _jnp()
    x, scale = args
    axis = _axis(node.attr("axis", -1), x.ndim)
    xs = x.astype(_np_dtype(node.attr("stash_type", 1)))
    ms = jnp.mean(jnp.square(xs), axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xs / jnp.sqrt(ms + jnp.asarray(node.attr("epsilon", 1e-5), xs.dtype))
    return [y.astype(x.dtype) * scale]


@rule("LpNormalization")
def _lp_norm(node, args):
    jnp, x = _jnp(), args[0]
    axis, p = node.attr("axis", -1), node.attr("p", 2)
    if p == 1:
        norm = jnp.sum(jnp.abs(x), axis=axis, keepdims=True)
    else:
        norm = jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=True))
    return [jnp.where(norm == 0, _c(x, 0), x / jnp.where(norm == 0, _c(x, 1), norm))]  # a zero vector stays zero


@rule("MeanVarianceNormalization")
def _mvn(node, args):
    jnp, x = _jnp(), args[0]
    axes = tuple(node.attr("axes") or (0, 2, 3))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x), axis=axes, keepdims=True) - mean * mean
    return [(x - mean) / (jnp.sqrt(var) + _c(x, 1e-9))]


@rule("LRN")
def _lrn(node, args):
    from jax import lax

    jnp, x = _jnp(), args[0]
    size = node.attr("size")
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = lax.reduce_window(x * x, jnp.zeros((), x.dtype), lax.add, (1, size) + (1,) * (x.ndim - 2),
                           (1,) * x.ndim, ((0, 0), (lo, hi)) + ((0, 0),) * (x.ndim - 2))  # fmt: skip
    return [x / (_c(x, bias) + _c(x, alpha / size) * sq) ** _c(x, beta)]


# --- Resize -----------------------------------------------------------------------------------


def _resize_check(node):
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        return f"keep_aspect_ratio_policy {node.attr('keep_aspect_ratio_policy')!r}"
    return None


@rule("Resize", check=_resize_check)
def _resize(node, args):
    """Resize is separable: along each resized axis the output is ``W @ x + b`` for a matrix ``W``
    and a bias ``b`` (``extrapolation_value`` outside a ``tf_crop_and_resize`` box).  ``W`` and
    ``b`` are read off ONNX's reference kernel, run on the identity and on zeros of that axis, so
    every mode and coordinate transformation means exactly what ONNX says."""
    jnp = _jnp()
    x = args[0]
    roi = static(args[1], "Resize's roi") if len(args) > 1 and args[1] is not None and args[1].size else None
    scales = static(args[2], "Resize's scales") if len(args) > 2 and args[2] is not None and args[2].size else None
    sizes = static(args[3], "Resize's sizes") if len(args) > 3 and args[3] is not None and args[3].size else None
    r = x.ndim
    axes = [_axis(a, r) for a in (node.attr("axes") or range(r))]
    out = x
    for i, a in enumerate(axes):
        n = x.shape[a]
        box = None if roi is None else (roi[i], roi[len(axes) + i])
        if sizes is not None:
            m, given = int(sizes[i]), ("sizes", np.array([n, int(sizes[i])], np.int64))
        else:
            s = float(np.float32(scales[i]))
            m, given = int(s * n), ("scales", np.array([1.0, scales[i]], np.float32))
        if m == n and (given[0] == "sizes" or given[1][1] == 1) and (box is None or tuple(box) == (0, 1)):
            continue
        weights, bias = _resize_weights(node, n, given, box, roi.dtype if roi is not None else np.float32)
        onehot = np.all((weights == 0) | (weights == 1)) and np.all(weights.sum(0) == 1) and not bias.any()
        moved = jnp.moveaxis(out, a, -1)
        if onehot:  # nearest: a gather, exact for every dtype
            moved = jnp.take(moved, np.argmax(weights, axis=0), axis=-1)
        elif jnp.issubdtype(out.dtype, jnp.floating):
            moved = jnp.matmul(moved, weights.astype(out.dtype), precision=_precision()) + bias.astype(out.dtype)
        else:
            raise NotStatic(f"{node.attr('mode', 'nearest')} interpolation of {out.dtype} data is not lowered")
        out = jnp.moveaxis(moved, -1, a)
    return [out]


_RESIZE_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def _resize_weights(node, n: int, given: tuple[str, np.ndarray], box, roi_dtype):
    """``(W, b)`` with ``W`` of shape (n, m): row ``i`` is the output for the ``i``-th unit input."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    attrs = {k: a.value for k, a in node.attributes.items() if k not in ("axes", "keep_aspect_ratio_policy")}
    key = (tuple(sorted((k, repr(v)) for k, v in attrs.items())), n, given[0], given[1].tobytes(),
           None if box is None else tuple(float(b) for b in box))  # fmt: skip
    if key in _RESIZE_CACHE:
        return _RESIZE_CACHE[key]
    roi = np.zeros(0, roi_dtype) if box is None else np.array([0, box[0], 1, box[1]], dtype=roi_dtype)
    inputs = ["x", "roi", "scales" if given[0] == "scales" else "", "sizes" if given[0] == "sizes" else ""]
    resize = helper.make_node("Resize", inputs, ["y"], **attrs)
    graph = helper.make_graph(
        [resize], "resize",
        [helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [n, n])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, None)],
        initializer=[onnx.numpy_helper.from_array(roi, "roi"), onnx.numpy_helper.from_array(given[1], given[0])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(onnx.defs.onnx_opset_version(), 19))])
    ref = ReferenceEvaluator(model)
    (zero,) = ref.run(None, {"x": np.zeros((n, n))})
    (unit,) = ref.run(None, {"x": np.eye(n)})
    weights, bias = unit - zero, zero[0]
    _RESIZE_CACHE[key] = (weights, bias)
    return weights, bias


# --- quantization (integer types) ---------------------------------------------------------------

_QUANT_RANGES = {np.dtype(t): (np.iinfo(t).min, np.iinfo(t).max)
                 for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32)}  # fmt: skip
_QUANT_ONNX = {3: np.int8, 2: np.uint8, 5: np.int16, 4: np.uint16, 6: np.int32}


def _per_axis(value, x, node):
    """A scale or zero point broadcastable to ``x``: per tensor, per axis or per block."""
    jnp = _jnp()
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    axis = _axis(node.attr("axis", 1), x.ndim)
    block = node.attr("block_size", 0)
    if not block:
        return value.reshape([value.size if i == axis else 1 for i in range(x.ndim)])
    return jnp.repeat(value, block, axis=axis, total_repeat_length=value.shape[axis] * block)[
        tuple(slice(0, x.shape[axis]) if i == axis else slice(None) for i in range(x.ndim))
    ]


def _quant_check(node):
    if node.attr("precision") is not None:
        return "QuantizeLinear with a precision attribute"
    to = node.attr("output_dtype")
    if to and to not in _QUANT_ONNX:
        return f"quantization to ONNX dtype {to}"
    return None


@rule("QuantizeLinear", check=_quant_check)
def _quantize(node, args):
    jnp = _jnp()
    x, scale = args[0], args[1]
    zp = args[2] if len(args) > 2 else None
    if zp is not None:
        dtype = np.dtype(zp.dtype)
    else:
        dtype = np.dtype(_QUANT_ONNX.get(node.attr("output_dtype") or 2, np.uint8))
    if dtype not in _QUANT_RANGES:
        raise NotStatic(f"quantization to {dtype} is not lowered")
    q = jnp.round(x / _per_axis(scale, x, node)).astype(np.int32)  # round half to even, as np.rint
    if zp is not None:
        q = q + _per_axis(zp, x, node).astype(np.int32)
    lo, hi = _QUANT_RANGES[dtype]
    return [jnp.clip(q, lo, hi).astype(dtype)]


def _dequant_check(node):
    to = node.attr("output_dtype")
    return None if not to or to in (1, 10, 16) else f"dequantization to ONNX dtype {to}"


@rule("DequantizeLinear", check=_dequant_check)
def _dequantize(node, args):
    x, scale = args[0], args[1]
    zp = args[2] if len(args) > 2 else None
    if np.dtype(x.dtype) not in _QUANT_RANGES:
        raise NotStatic(f"dequantization of {x.dtype} is not lowered")
    dx = x.astype(np.float32)
    if zp is not None:
        dx = dx - _per_axis(zp, x, node).astype(np.float32)
    y = dx * _per_axis(scale, x, node)
    to = node.attr("output_dtype")
    return [y.astype(_np_dtype(to) if to else scale.dtype)]



def _grid_sample_check(node):
    mode = GRID_MODES.get(node.attr("mode", "linear"))
    if mode is None:
        return f"mode={node.attr('mode')!r}"
    if node.attr("padding_mode", "zeros") not in ("zeros", "border", "reflection"):
        return f"padding_mode={node.attr('padding_mode')!r}"
    return None


@rule("GridSample", check=_grid_sample_check)
def _grid_sample(node, args):
    return [grid_sample(*args, mode=node.attr("mode", "linear"), padding_mode=node.attr("padding_mode", "zeros"),
                        align_corners=node.attr("align_corners", 0), xp=_jnp())]


def _dft_check(node):
    if node.attr("axis") is None and (len(node.inputs) < 3 or node.inputs[2] is None):
        return "DFT without an axis (its default differs between opsets 17 and 20)"
    return None


@rule("DFT", check=_dft_check)
def _dft(node, args):
    """ONNX's DFT on (real, imaginary) pairs, or ``[..., 1]`` reals, as ``jnp.fft`` on complex numbers
    of the input's precision."""
    jnp = _jnp()
    x = args[0]
    axis = node.attr("axis")
    if len(args) > 2 and args[2] is not None:
        axis = int(static(args[2], "DFT's axis"))
    axis %= x.ndim
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if len(args) > 1 and args[1] is not None:
        n = int(static(args[1], "DFT's length"))
    else:
        n = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    signal = x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]
    if inverse and onesided:
        return [jnp.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)]
    y = jnp.fft.ifft(signal, n=n, axis=axis) if inverse else jnp.fft.fft(signal, n=n, axis=axis)
    if onesided:
        y = jnp.take(y, jnp.arange(n // 2 + 1), axis=axis)
    return [jnp.stack([y.real, y.imag], axis=-1).astype(x.dtype)]


@rule("Col2Im")
def _col2im(node, args):
    """Each block position's column added into the padded image at its strided, dilated offsets."""
    import itertools

    jnp = _jnp()
    x = args[0]
    image, block = _ints(args[1], "Col2Im's image shape"), _ints(args[2], "Col2Im's block shape")
    nd = len(image)
    dilations = list(node.attr("dilations") or [1] * nd)
    pads = list(node.attr("pads") or [0] * (2 * nd))
    strides = list(node.attr("strides") or [1] * nd)
    padded_size = [image[i] + pads[i] + pads[i + nd] for i in range(nd)]
    grid = [(padded_size[i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    n, per_block = x.shape[0], x.shape[1]
    channels = per_block // math.prod(block)
    cols = x.reshape(n, channels, *block, *grid)
    out = jnp.zeros((n, channels, *padded_size), x.dtype)
    whole = (slice(None), slice(None))
    for offset in itertools.product(*(range(b) for b in block)):
        spots = tuple(slice(o * d, o * d + (g - 1) * s + 1, s)
                      for o, d, g, s in zip(offset, dilations, grid, strides, strict=True))  # fmt: skip
        out = out.at[(*whole, *spots)].add(cols[(*whole, *offset)])
    return [out[(*whole, *(slice(pads[i], pads[i] + image[i]) for i in range(nd)))]]
