"""JAX primitives → ONNX ops.  ``TABLE`` maps a primitive's name to a converter
``fn(cx, *operands, **params)``: ``cx`` is a :class:`~irforge.frontends.jax.JaxContext`, the
operands are IR values or numpy literals, the params are the equation's.  A converter returns a
value or a list of values, or raises :class:`~irforge.frontends.common.NotMapped` for a use it
cannot express.  Operands of a jaxpr equation already share one dtype (jaxprs are explicitly
typed), so unlike ATen no promotion happens here.
"""

from __future__ import annotations

import math

import numpy as np

from ...core_ir.dtypes import DataType, is_floating, to_numpy
from ...core_ir.graph import Graph
from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import NotMapped, associative_scan
from ..lib import incomplete, jacobi, linalg, special
from .random import RANDOM_PRIMITIVES, convert_random

TABLE: dict = {}
INT64_MAX = 2**63 - 1


def prim(*names: str):
    def register(fn):
        for n in names:
            TABLE[n] = fn
        return fn

    return register


def _i64(values) -> np.ndarray:
    return np.asarray(values, np.int64).reshape(-1)


# -- element-wise ----------------------------------------------------------------------------------

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


_SPECIAL = {"lgamma": special.lgamma, "digamma": special.digamma, "erf_inv": special.erfinv,
            "bessel_i0e": special.bessel_i0e, "bessel_i1e": special.bessel_i1e}  # fmt: skip


@prim(*_SPECIAL)
def _special(cx, x, **_):
    fn = _SPECIAL[cx.eqn.primitive.name]
    return cx.typed("Identity", fn(cx, cx.value(x)))


@prim("igamma", "igammac")
def _igamma(cx, a, x, **_):
    upper = cx.eqn.primitive.name == "igammac"
    p = incomplete.regularized_gamma(cx, cx.value(a), cx.value(x), upper=upper, framework="jax")
    return cx.typed("Identity", p)


@prim("regularized_incomplete_beta")
def _betainc(cx, a, b, x, **_):
    return cx.typed("Identity", incomplete.regularized_beta(cx, cx.value(a), cx.value(b), cx.value(x)))


@prim("nextafter")
def _nextafter(cx, x, y, **_):
    cx.importer.require_opset(special.BITCAST_OPSET)
    return cx.typed("Identity", special.nextafter(cx, cx.value(x), cx.value(y)))


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
        from . import aval_type

        o.type = aval_type(a)
    return outs if len(outs) != 1 else outs[0]


# -- shapes ----------------------------------------------------------------------------------------


def _shape_vector(cx, dims) -> Value:
    """A shape of ints and symbolic dims as an int64 vector."""
    if all(isinstance(d, (int, np.integer)) for d in dims):
        return cx.const(_i64(dims))
    parts = [cx.dim_value(d) for d in dims]
    return cx.emit("Concat", *parts, axis=0)


@prim("broadcast_in_dim")
def _broadcast_in_dim(cx, x, shape, broadcast_dimensions, **_):
    x = cx.value(x)
    rank = len(shape)
    in_shape = cx.shape(x)
    if len(in_shape) != rank:  # put x's dims where they go, 1 elsewhere
        target = [1] * rank
        for src, dst in enumerate(broadcast_dimensions):
            target[dst] = in_shape[src]
        axes = [d for d in range(rank) if d not in broadcast_dimensions]
        x = cx.emit("Unsqueeze", x, cx.const(_i64(axes)))
        x.type = TensorType(cx.dtype(x.producer().inputs[0]), tuple(target))
    if tuple(cx.shape(x)) == tuple(cx.out_shape):
        return cx.typed("Identity", x)
    dims = [1 if cx.shape(x)[i] == cx.out_shape[i] else d for i, d in enumerate(shape)]  # 1 keeps x's dim
    return cx.typed("Expand", x, _shape_vector(cx, dims))


@prim("reshape")
def _reshape(cx, x, new_sizes, dimensions=None, **_):
    if dimensions is not None:
        raise NotMapped("reshape with dimensions")
    x = cx.value(x)
    sizes = list(new_sizes)
    symbolic = [i for i, d in enumerate(sizes) if not isinstance(d, (int, np.integer))]
    if len(symbolic) == 1:
        sizes[symbolic[0]] = -1
    return cx.typed("Reshape", x, _shape_vector(cx, sizes))


@prim("squeeze")
def _squeeze(cx, x, dimensions, **_):
    if not dimensions:
        return cx.typed("Identity", x)
    return cx.typed("Squeeze", x, cx.const(_i64(dimensions)))


@prim("expand_dims")
def _expand_dims(cx, x, dimensions, **_):
    return cx.typed("Unsqueeze", x, cx.const(_i64(dimensions)))


@prim("transpose")
def _transpose(cx, x, permutation, **_):
    return cx.typed("Transpose", x, perm=[int(p) for p in permutation])


@prim("rev")
def _rev(cx, x, dimensions, **_):
    if not dimensions:
        return cx.typed("Identity", x)
    n = len(dimensions)
    return cx.typed("Slice", x, cx.const(_i64([-1] * n)), cx.const(_i64([-INT64_MAX] * n)),
                    cx.const(_i64(dimensions)), cx.const(_i64([-1] * n)))  # fmt: skip


@prim("concatenate")
def _concatenate(cx, *xs, dimension, **_):
    return cx.typed("Concat", *_same_type(cx, *xs), axis=int(dimension))


@prim("stack")
def _stack(cx, *xs, axis, **_):
    xs = _same_type(cx, *xs)
    axes = cx.const(_i64([axis]))
    return cx.typed("Concat", *(cx.emit("Unsqueeze", x, axes) for x in xs), axis=int(axis))


@prim("split")
def _split(cx, x, sizes, axis, **_):
    n = cx.node_typed("Split", [x, cx.const(_i64(sizes))], {"axis": int(axis)}, outputs=len(sizes))
    return list(n.outputs)


@prim("pad")
def _pad(cx, x, value, padding_config, **_):
    x = cx.value(x)
    if any(interior for _, _, interior in padding_config):
        raise NotMapped("pad with interior padding")
    lo = [p[0] for p in padding_config]
    hi = [p[1] for p in padding_config]
    value = cx.value(value, cx.dtype(x))
    if all(p >= 0 for p in lo + hi):
        return cx.typed("Pad", x, cx.const(_i64(lo + hi)), value, mode="constant")
    pads = [max(p, 0) for p in lo] + [max(p, 0) for p in hi]
    y = cx.emit("Pad", x, cx.const(_i64(pads)), value, mode="constant")
    axes = [i for i, (a, b) in enumerate(zip(lo, hi, strict=True)) if a < 0 or b < 0]
    starts = [-min(lo[i], 0) for i in axes]
    ends = [min(hi[i], 0) or INT64_MAX for i in axes]
    return cx.typed("Slice", y, cx.const(_i64(starts)), cx.const(_i64(ends)), cx.const(_i64(axes)))


@prim("slice")
def _slice(cx, x, start_indices, limit_indices, strides=None, **_):
    axes = list(range(len(start_indices)))
    steps = list(strides) if strides else [1] * len(axes)
    return cx.typed("Slice", x, _shape_vector(cx, start_indices), _shape_vector(cx, limit_indices),
                    cx.const(_i64(axes)), cx.const(_i64(steps)))  # fmt: skip


def _clamped_starts(cx, x, starts, sizes) -> Value:
    """lax's dynamic-slice starts: clamped so the window stays inside ``x``."""
    parts = []
    for axis, (s, size) in enumerate(zip(starts, sizes, strict=True)):
        s = cx.emit("Reshape", cx.emit("Cast", cx.value(s), to=int(DataType.INT64)), cx.const(_i64([1])))
        hi = cx.emit("Sub", cx.dim_value(cx.shape(x)[axis]), cx.dim_value(size))
        parts.append(cx.emit("Min", cx.emit("Max", s, cx.const(_i64([0]))), hi))
    return cx.emit("Concat", *parts, axis=0)


@prim("dynamic_slice")
def _dynamic_slice(cx, x, *starts, slice_sizes, **_):
    x = cx.value(x)
    begin = _clamped_starts(cx, x, starts, slice_sizes)
    end = cx.emit("Add", begin, _shape_vector(cx, slice_sizes))
    axes = cx.const(_i64(range(len(slice_sizes))))
    return cx.typed("Slice", x, begin, end, axes)


@prim("dynamic_update_slice")
def _dynamic_update_slice(cx, x, update, *starts, **_):
    x, update = cx.value(x), cx.value(update)
    sizes = cx.shape(update)
    begin = _clamped_starts(cx, x, starts, sizes)
    # the update's element coordinates, offset by begin: ScatterND indices [*sizes, rank]
    rank = len(sizes)
    grids = []
    for axis, size in enumerate(sizes):
        r = cx.emit("Range", cx.const(np.asarray(0, np.int64)), cx.emit("Squeeze", cx.dim_value(size)),
                    cx.const(np.asarray(1, np.int64)))  # fmt: skip
        offset = cx.emit("Gather", begin, cx.const(np.asarray(axis, np.int64)), axis=0)
        r = cx.emit("Add", r, offset)
        shape = [1] * rank
        shape[axis] = -1
        grids.append(cx.emit("Reshape", r, cx.const(_i64(shape))))
    full = _shape_vector(cx, sizes)
    idx = [cx.emit("Unsqueeze", cx.emit("Expand", g, full), cx.const(_i64([-1]))) for g in grids]
    indices = cx.emit("Concat", *idx, axis=-1)
    return cx.typed("ScatterND", x, indices, update)


@prim("iota")
def _iota(cx, *_, dtype, shape, dimension, **__):
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        n = cx.emit("Squeeze", cx.dim_value(shape[dimension]))
        r = cx.emit("Cast", cx.emit("Range", cx.const(np.asarray(0, np.int64)), n, cx.const(np.asarray(1, np.int64))),
                    to=int(cx.out_dtype))  # fmt: skip
        view = [1] * len(shape)
        view[dimension] = -1
        r = cx.emit("Reshape", r, cx.const(_i64(view)))
        return cx.typed("Expand", r, _shape_vector(cx, shape))
    arr = np.arange(shape[dimension]).astype(to_numpy(cx.out_dtype))
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return cx.typed("Identity", cx.const(np.broadcast_to(arr.reshape(view), shape).copy()))


@prim("dim_as_value")
def _dim_as_value(cx, *_, dim, **__):
    return cx.typed("Cast", cx.emit("Squeeze", cx.dim_value(dim)), to=int(cx.out_dtype))


# -- reductions ------------------------------------------------------------------------------------

_REDUCE = {"reduce_sum": "ReduceSum", "reduce_max": "ReduceMax", "reduce_min": "ReduceMin",
           "reduce_prod": "ReduceProd"}  # fmt: skip


def _reduce(op: str):
    def convert(cx, x, axes, **_):
        x = cx.value(x)
        if not axes:
            return cx.typed("Identity", x)
        if cx.dtype(x) == DataType.BOOL:  # any/all
            y = cx.emit(op, cx.emit("Cast", x, to=int(DataType.INT32)), cx.const(_i64(axes)), keepdims=0)
            return cx.typed("Cast", y, to=int(DataType.BOOL))
        return cx.typed(op, x, cx.const(_i64(axes)), keepdims=0)

    return convert


for _n, _o in _REDUCE.items():
    prim(_n)(_reduce(_o))
prim("reduce_or")(_reduce("ReduceMax"))
prim("reduce_and")(_reduce("ReduceMin"))


_COMBINE = {"add": ("Add", "ReduceSum"), "mul": ("Mul", "ReduceProd"), "max": ("Max", "ReduceMax"),
            "min": ("Min", "ReduceMin"), "and": ("And", "ReduceMin"), "or": ("Or", "ReduceMax")}  # fmt: skip
"""Computations a generic ``reduce``/``reduce_window`` may use: the element-wise op, the reduction."""


def _combiners(jaxpr, n: int) -> list[tuple[str, str]]:
    """Per operand, the ONNX ops of a reduction computation that combines each accumulator with its
    own operand by one binary primitive (``add``, ``max``, ...); NotMapped for anything else."""
    invars, outvars = list(jaxpr.invars), list(jaxpr.outvars)
    made = {e.outvars[0]: e for e in jaxpr.eqns if len(e.outvars) == 1}
    out = []
    for k, v in enumerate(outvars):
        e = made.get(v)
        if len(jaxpr.eqns) != n or e is None or e.primitive.name not in _COMBINE:
            raise NotMapped("a reduction computation other than one add/mul/max/min/and/or per operand")
        if {id(a) for a in e.invars} != {id(invars[k]), id(invars[k + n])} or len(e.invars) != 2:
            raise NotMapped("a reduction computation mixing its operands")
        out.append(_COMBINE[e.primitive.name])
    return out


def _logical(cx, op: str, x: Value) -> tuple[str, Value]:
    """Boolean and/or as the integer min/max ONNX has kernels for."""
    if cx.dtype(x) == DataType.BOOL:
        return {"And": "Min", "Or": "Max"}.get(op, op), cx.emit("Cast", x, to=int(DataType.INT32))
    return op, x


def _reduction_operands(cx, args, jaxpr):
    """Per operand of a generic reduction: its dtype, the element-wise ONNX op and the reduction of
    its computation, and the operand and initial value as those ops take them (booleans as int32)."""
    n = len(args) // 2
    for k, (combine, reduction) in enumerate(_combiners(getattr(jaxpr, "jaxpr", jaxpr), n)):
        x, init = cx.value(args[k]), cx.value(args[k + n])
        op, xi = _logical(cx, combine, x)
        xi.type = TensorType(DataType.INT32 if cx.dtype(x) == DataType.BOOL else cx.dtype(x), tuple(cx.shape(x)))
        yield cx.dtype(x), op, reduction, xi, _logical(cx, combine, init)[1]


def _reduction_results(cx, results: list[tuple[DataType, Value]]) -> list[Value]:
    from . import aval_type

    outs = [cx.emit("Cast", y, to=int(dtype)) if dtype == DataType.BOOL else y for dtype, y in results]
    for o, a in zip(outs, cx.out_avals, strict=True):
        o.type = aval_type(a)
    return outs


@prim("reduce")
def _reduce_generic(cx, *args, jaxpr, dimensions, **_):
    results = []
    for dtype, op, reduction, x, init in _reduction_operands(cx, args, jaxpr):
        y = cx.emit(reduction, x, cx.const(_i64(dimensions)), keepdims=0) if dimensions else x
        results.append((dtype, cx.emit(op, init, y)))  # the initial value enters once, as on XLA's CPU
    return _reduction_results(cx, results)


@prim("reduce_window")
def _reduce_window_generic(cx, *args, jaxpr, consts=(), window_dimensions, window_strides, padding, base_dilation,
                           window_dilation, **_):  # fmt: skip
    """Each output cell combines its window's elements, one strided slice per window offset, with
    the initial value (also the padding)."""
    if consts:
        raise NotMapped("reduce_window with constants in its computation")
    if any(d != 1 for d in base_dilation):
        raise NotMapped("reduce_window with base dilation")
    results = []
    for dtype, op, _, x, init in _reduction_operands(cx, args, jaxpr):
        pieces, _, _ = _window_pieces(cx, x, init, window_dimensions, window_strides, padding, window_dilation)
        acc = init
        for _, piece in pieces:
            acc = cx.emit(op, acc, piece)
        results.append((dtype, acc))
    return _reduction_results(cx, results)


@prim("argmax", "argmin")
def _argmax(cx, x, axes, index_dtype, **_):
    op = "ArgMax" if cx.eqn.primitive.name == "argmax" else "ArgMin"
    y = cx.emit(op, cx.value(x), axis=int(axes[0]), keepdims=0)
    return cx.typed("Cast", y, to=int(cx.out_dtype))


@prim("cumsum")
def _cumsum(cx, x, axis, reverse=False, **_):
    return cx.typed("CumSum", x, cx.const(np.asarray(axis, np.int64)), reverse=int(bool(reverse)))


@prim("cumlogsumexp")
def _cumlogsumexp(cx, x, axis, reverse=False, **_):
    return cx.typed("Log", cx.emit("CumSum", cx.emit("Exp", x), cx.const(np.asarray(axis, np.int64)),
                                   reverse=int(bool(reverse))))  # fmt: skip


_WIDENS_TO_INT64 = frozenset({DataType.BOOL, DataType.INT8, DataType.INT16, DataType.UINT8, DataType.UINT16,
                              DataType.UINT32})  # fmt: skip


@prim("sort")
def _sort(cx, *operands, dimension, is_stable=True, num_keys=1, **_):
    if num_keys != 1:
        raise NotMapped("sort on more than one key")
    keys = cx.value(operands[0])
    n = cx.dim_value(cx.shape(keys)[dimension])
    if is_floating(cx.dtype(keys)) or cx.dtype(keys) in (DataType.INT32, DataType.INT64):
        topk = cx.node("TopK", [keys, n], {"axis": int(dimension), "largest": 0, "sorted": 1}, outputs=2)
        values, order = topk.outputs
    elif cx.dtype(keys) in _WIDENS_TO_INT64:  # ranked as int64, which holds every value in order
        wide = cx.emit("Cast", keys, to=int(DataType.INT64))
        order = cx.node("TopK", [wide, n], {"axis": int(dimension), "largest": 0, "sorted": 1}, outputs=2).outputs[1]
        values = cx.emit("GatherElements", keys, order, axis=int(dimension))
    else:
        raise NotMapped(f"sort of {cx.dtype(keys).name}")
    outs = [values]
    for other in operands[1:]:
        outs.append(cx.emit("GatherElements", cx.value(other), order, axis=int(dimension)))
    from . import aval_type

    for o, a in zip(outs, cx.out_avals, strict=True):
        o.type = aval_type(a)
    return outs


@prim("top_k")
def _top_k(cx, x, k, **params):
    x = cx.value(x)
    axis = int(params.get("axis", -1)) if params.get("axis") is not None else -1
    kk = cx.const(_i64([k]))
    if cx.dtype(x) in _WIDENS_TO_INT64:  # ranked as int64 (onnxruntime's TopK has no narrow ints)
        wide = cx.emit("Cast", x, to=int(DataType.INT64))
        idx = cx.node("TopK", [wide, kk], {"axis": axis, "largest": 1, "sorted": 1}, outputs=2).outputs[1]
        values = cx.emit("GatherElements", x, idx, axis=axis)
    elif not is_floating(cx.dtype(x)):
        n = cx.node("TopK", [x, kk], {"axis": axis, "largest": 1, "sorted": 1}, outputs=2)
        values, idx = n.outputs
    else:  # ranked by their bits, as lax ranks floats (ONNX leaves NaN's place open)
        key = _total_order_key(cx, x)
        _, idx = cx.node("TopK", [key, kk], {"axis": axis, "largest": 1, "sorted": 1}, outputs=2).outputs
        values = cx.emit("GatherElements", x, idx, axis=axis)
    from . import aval_type

    values.type = aval_type(cx.out_avals[0])
    return [values, _cast_out(cx, idx, 1)]


def _total_order_key(cx, x: Value) -> Value:
    """Integers that order as XLA orders floats in ``top_k``: -NaN < -inf < ... < -0 < +0 < ... <
    +inf < +NaN, so a NaN's sign decides its place.  The bits read as a signed integer already
    order the non-negative floats; flipping all but the sign bit reverses the negative ones."""
    signed = special.SAME_WIDTH_INT[cx.dtype(x)]
    cx.importer.require_opset(special.BITCAST_OPSET)
    bits = cx.node("BitCast", [x], {"to": int(signed)}, types=[TensorType(signed, tuple(cx.shape(x)))]).outputs[0]
    mask = np.iinfo(to_numpy(signed)).max
    if signed == DataType.INT16:  # onnxruntime's Where and TopK take 32- and 64-bit integers only
        signed, bits = DataType.INT32, cx.emit("Cast", bits, to=int(DataType.INT32))  # sign-extended: same order
    flipped = cx.emit("BitwiseXor", bits, cx.value(mask, signed))
    return cx.emit("Where", cx.emit("Less", bits, cx.value(0, signed)), flipped, bits)


@prim("approx_top_k")
def _approx_top_k(cx, x, *, k, reduction_dimension, is_max_k, aggregate_to_topk=True, **_):
    """On CPU (and in XLA's fallback) the approximate top k is the exact one: sorted, k long."""
    if not aggregate_to_topk:
        raise NotMapped("approx_top_k without aggregate_to_topk (its output length is the TPU algorithm's)")
    x = cx.value(x)
    axis = int(reduction_dimension)
    n = cx.node("TopK", [x, cx.const(_i64([k]))], {"axis": axis, "largest": int(bool(is_max_k)), "sorted": 1},
                outputs=2)  # fmt: skip
    from . import aval_type

    values = cx.emit("Identity", n.outputs[0])
    values.type = aval_type(cx.out_avals[0])
    return [values, _cast_out(cx, n.outputs[1], 1)]


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


@prim("cholesky")
def _cholesky(cx, a, **_):
    """LAPACK's factor in the lower triangle, the input's own entries above it (the primitive, as
    ``potrf`` does, leaves them; ``lax.linalg.cholesky`` masks them after); all NaN for a matrix
    that is not positive definite, as on XLA's CPU."""
    a = cx.value(a)
    n = cx.shape(a)[-1]
    factor, info = linalg.cholesky(cx, a)
    lower = cx.const(np.tril(np.ones((n, n), bool)) if isinstance(n, int) else np.asarray(True))
    factor = cx.emit("Where", lower, factor, a)
    failed = cx.emit("Greater", info, cx.const(np.asarray(0, np.int32)))
    failed = cx.emit("Unsqueeze", failed, cx.const(_i64([-2, -1])))
    return cx.typed("Where", failed, cx.value(np.nan, cx.dtype(a)), factor)


@prim("triangular_solve")
def _triangular_solve(cx, a, b, *, left_side, lower, transpose_a, conjugate_a=False, unit_diagonal=False, **_):
    a, b = cx.value(a), cx.value(b)
    rank = len(cx.shape(a))
    if not left_side:  # x a = b: aᵀ xᵀ = bᵀ, and the transposed matrix has the other triangle
        a, b, lower = linalg.transposed_square(cx, a), linalg.transpose(cx, b, rank), not lower
    if transpose_a:
        a, lower = linalg.transposed_square(cx, a), not lower
    x = linalg.solve_triangular(cx, a, b, lower=lower, unit_diagonal=unit_diagonal)
    if not left_side:
        x = linalg.transpose(cx, x, rank)
    return cx.typed("Identity", x)


@prim("lu")
def _lu(cx, a, **_):
    """(packed LU, pivots, permutation) as XLA's CPU gives them (LAPACK's getrf, 0-based)."""
    packed, pivots, perm = linalg.lu(cx, cx.value(a))
    from . import aval_type

    packed = cx.emit("Identity", packed)
    packed.type = aval_type(cx.out_avals[0])
    return [packed, _cast_out(cx, pivots, 1), _cast_out(cx, perm, 2)]


@prim("lu_pivots_to_permutation")
def _lu_pivots_to_permutation(cx, pivots, *, permutation_size, **_):
    """The row order that LAPACK's swaps (row i with row pivots[i], in turn) leave."""
    pivots = cx.value(pivots)
    count = cx.shape(pivots)[-1]
    if not isinstance(count, int):
        raise NotMapped("lu_pivots_to_permutation of a symbolic number of pivots")
    dtype = cx.dtype(pivots)
    order = cx.const(np.arange(permutation_size).astype(to_numpy(dtype)))
    perm = cx.emit("Expand", order, cx.emit("Concat", cx.emit("Shape", pivots, end=-1),
                                            cx.const(_i64([permutation_size])), axis=0))  # fmt: skip
    positions = cx.const(np.arange(permutation_size).astype(to_numpy(dtype)))
    for i in range(count):
        target = cx.emit("Slice", pivots, cx.const(_i64([i])), cx.const(_i64([i + 1])), cx.const(_i64([-1])))
        here = cx.emit("Slice", perm, cx.const(_i64([i])), cx.const(_i64([i + 1])), cx.const(_i64([-1])))
        there = cx.emit("GatherElements", perm, cx.emit("Cast", target, to=int(DataType.INT64)), axis=-1)
        at_target = cx.emit("Equal", positions, target)
        perm = cx.emit("Where", at_target, here, cx.emit("Where", cx.const(np.arange(permutation_size) == i), there,
                                                           perm))  # fmt: skip
    return cx.typed("Identity", perm)


@prim("householder_product")
def _householder_product(cx, a, taus, **_):
    """LAPACK's orgqr: the first n columns of the product of the reflectors stored below a's diagonal."""
    return cx.typed("Identity", linalg.orgqr(cx, cx.value(a), cx.value(taus)))


@prim("tridiagonal_solve")
def _tridiagonal_solve(cx, dl, d, du, b, *, perturb_singular=False, **_):
    """LAPACK's gtsv, as XLA's CPU calls it (NaN for a singular system)."""
    if perturb_singular:
        raise NotMapped("tridiagonal_solve with perturb_singular")
    x = linalg.tridiagonal_solve(cx, cx.value(dl), cx.value(d), cx.value(du), cx.value(b))
    return cx.typed("Identity", x)


@prim("svd")
def _svd(cx, a, *, full_matrices, compute_uv, subset_by_index=None, **_):
    """One-sided Jacobi (:mod:`irforge.frontends.lib.jacobi`): ``s`` and, with ``compute_uv``, valid
    ``u`` and ``vt``, whose signs may differ from LAPACK's."""
    if subset_by_index is not None and tuple(subset_by_index) != (0, -1):
        raise NotMapped("svd of a subset of the singular values")
    u, s, vt = jacobi.svd(cx, cx.value(a), vectors=bool(compute_uv), full_matrices=bool(full_matrices))
    return _typed_outputs(cx, [s, u, vt] if compute_uv else [s])


@prim("eigh")
def _eigh(cx, a, *, lower, subset_by_index=None, **_):
    """Two-sided Jacobi: ``v`` (valid eigenvectors, signs may differ from LAPACK's) and ``w`` ascending
    (``sort_eigenvalues=False`` lets XLA return any order; ascending is one of them)."""
    if subset_by_index is not None and tuple(subset_by_index) != (0, cx.value(a).type.shape[-1]):
        raise NotMapped("eigh of a subset of the eigenvalues")
    values, vectors = jacobi.symmetric_eigen(cx, cx.value(a), lower=bool(lower), vectors=True)
    return _typed_outputs(cx, [vectors, values])


def _typed_outputs(cx, values: list) -> list:
    from . import aval_type

    outs = [cx.emit("Identity", v) for v in values]
    for o, aval in zip(outs, cx.out_avals, strict=True):
        o.type = aval_type(aval)
    return outs


@prim("qr")
def _qr(cx, a, *, full_matrices, pivoting=False, **_):
    """Householder QR with LAPACK's reflectors (geqrf, orgqr), as XLA's CPU computes it."""
    if pivoting:
        raise NotMapped("QR with column pivoting")
    a = cx.value(a)
    shape = linalg.static_matrix(a, "a QR factorization")
    m, n = shape[-2:]
    k = min(m, n)
    packed, taus = linalg.householder_qr(cx, a)
    packed.type = a.type
    q = linalg.householder_product(cx, packed, taus, k, m if full_matrices else k, shape)
    r_rows = m if full_matrices else k
    top = cx.emit("Slice", packed, cx.const(_i64([0])), cx.const(_i64([r_rows])), cx.const(_i64([-2])))
    r = cx.emit("Mul", top, cx.const(np.triu(np.ones((r_rows, n), to_numpy(cx.dtype(a))))))

    return _typed_outputs(cx, [q, r])


def _cast_out(cx, v, i):
    from . import aval_type, to_dtype

    out = cx.emit("Cast", v, to=int(to_dtype(cx.out_avals[i].dtype)))
    out.type = aval_type(cx.out_avals[i])
    return out


# -- linear algebra and convolution ----------------------------------------------------------------


@prim("dot_general")
def _dot_general(cx, lhs, rhs, dimension_numbers, preferred_element_type=None, **_):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = cx.value(lhs), cx.value(rhs)
    out_dtype = cx.out_dtype
    if cx.dtype(lhs) != out_dtype:
        lhs = cx.emit("Cast", lhs, to=int(out_dtype))
    if cx.dtype(rhs) != out_dtype:
        rhs = cx.emit("Cast", rhs, to=int(out_dtype))
    lr, rr = len(cx.shape(lhs)), len(cx.shape(rhs))
    lfree = [d for d in range(lr) if d not in lc and d not in lb]
    rfree = [d for d in range(rr) if d not in rc and d not in rb]
    if len(lc) == 1 and len(lfree) <= 1 and len(rfree) <= 1:
        # [batch..., m, k] @ [batch..., k, n]: MatMul, which fusion and every backend know best
        lperm, rperm = [*lb, *lfree, *lc], [*rb, *rc, *rfree]
        a = lhs if lperm == list(range(lr)) else cx.emit("Transpose", lhs, perm=lperm)
        b = rhs if rperm == list(range(rr)) else cx.emit("Transpose", rhs, perm=rperm)
        if not lfree:
            a = cx.emit("Unsqueeze", a, cx.const(_i64([len(lb)])))
        if not rfree:
            b = cx.emit("Unsqueeze", b, cx.const(_i64([len(rb) + 1])))
        y = cx.emit("MatMul", a, b)
        squeeze = ([len(lb)] if not lfree else []) + ([len(lb) + (1 if lfree else 0)] if not rfree else [])
        if squeeze:
            return cx.typed("Squeeze", y, cx.const(_i64(sorted(squeeze))))
        return cx.typed("Identity", y)
    if not lb and not rb and rr == 2 and list(lc) == [lr - 1] and lfree == list(range(lr - 1)):
        # [..., k] @ [k, n] (a dense layer over leading dims): MatMul broadcasts them
        b = rhs if list(rc) == [0] else cx.emit("Transpose", rhs, perm=[1, 0])
        return cx.typed("MatMul", lhs, b)
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub, rsub = [""] * lr, [""] * rr
    for a, b in zip(lb, rb, strict=True):
        lsub[a] = rsub[b] = next(letters)
    for a, b in zip(lc, rc, strict=True):
        lsub[a] = rsub[b] = next(letters)
    for d in lfree:
        lsub[d] = next(letters)
    for d in rfree:
        rsub[d] = next(letters)
    out = [lsub[d] for d in lb] + [lsub[d] for d in lfree] + [rsub[d] for d in rfree]
    eq = f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}"
    return cx.typed("Einsum", lhs, rhs, equation=eq)


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
        from ...core_ir.dtypes import to_numpy as numpy_of

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


# -- windows (pooling) -----------------------------------------------------------------------------


def _window(cx, x, op, window_dimensions, window_strides, padding, base_dilation, window_dilation):
    if any(d != 1 for d in base_dilation):
        raise NotMapped("reduce_window with base dilation")
    rank = len(window_dimensions)
    spatial = [i for i in range(rank) if window_dimensions[i] != 1 or window_strides[i] != 1
               or tuple(padding[i]) != (0, 0) or window_dilation[i] != 1]  # fmt: skip
    other = [i for i in range(rank) if i not in spatial]
    if not spatial or len(other) > 2:
        raise NotMapped("reduce_window whose window spans no axis or more than two batch/feature axes")
    perm = other + spatial
    y = cx.emit("Transpose", x, perm=perm) if perm != list(range(rank)) else x
    added = list(range(2 - len(other)))  # pooling wants [N, C, spatial...]
    if added:
        y = cx.emit("Unsqueeze", y, cx.const(_i64(added)))
    attrs = {"kernel_shape": [window_dimensions[i] for i in spatial], "strides": [window_strides[i] for i in spatial],
             "pads": [padding[i][0] for i in spatial] + [padding[i][1] for i in spatial]}  # fmt: skip
    if op == "MaxPool":
        attrs["dilations"] = [window_dilation[i] for i in spatial]
        y = cx.emit("MaxPool", y, **attrs)
    else:
        if any(window_dilation[i] != 1 for i in spatial):
            raise NotMapped("a summing reduce_window with window dilation")
        y = cx.emit("AveragePool", y, count_include_pad=1, **attrs)
        size = int(np.prod(attrs["kernel_shape"]))
        y = cx.emit("Mul", y, cx.value(size, cx.dtype(x)))
    if added:
        y = cx.emit("Squeeze", y, cx.const(_i64(added)))
    inverse = [perm.index(i) for i in range(rank)]
    if inverse == list(range(rank)):
        return cx.typed("Identity", y)
    return cx.typed("Transpose", y, perm=inverse)


@prim("reduce_window_max")
def _reduce_window_max(cx, x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation, **_):
    return _window(cx, cx.value(x), "MaxPool", window_dimensions, window_strides, padding, base_dilation,
                   window_dilation)  # fmt: skip


@prim("reduce_window_min")
def _reduce_window_min(cx, x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation, **_):
    """The max of the negated window, negated (so a padded cell counts as +inf, lax's identity)."""
    x = cx.value(x)
    if not is_floating(cx.dtype(x)):
        raise NotMapped("an integer min reduce_window")
    y = _window(cx, cx.emit("Neg", x), "MaxPool", window_dimensions, window_strides, padding, base_dilation,
                window_dilation)  # fmt: skip
    return cx.typed("Neg", y)


def _window_pieces(cx, x: Value, fill, window_dimensions, window_strides, padding, window_dilation):
    """``x`` padded with ``fill`` (a Value), then for each window offset (row-major) the strided
    slice of the elements at that offset in every window; also the padded shape and the
    windows' count per axis."""
    shape = cx.shape(x)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("window ops over symbolic sizes")
    if math.prod(window_dimensions) > 256:
        raise NotMapped("window ops over windows of more than 256 elements")
    pads = [lo for lo, _ in padding] + [hi for _, hi in padding]
    if any(p < 0 for p in pads):
        raise NotMapped("window ops with negative padding")
    if any(pads):
        x = cx.emit("Pad", x, cx.const(_i64(pads)), fill, mode="constant")
    padded = [d + lo + hi for d, (lo, hi) in zip(shape, padding, strict=True)]
    counts = [max((p - (w - 1) * dl - 1) // st + 1, 0)
              for p, w, dl, st in zip(padded, window_dimensions, window_dilation, window_strides, strict=True)]
    axes, steps = cx.const(_i64(range(len(shape)))), cx.const(_i64(window_strides))
    pieces = []
    for offset in np.ndindex(*window_dimensions):
        starts = [o * dl for o, dl in zip(offset, window_dilation, strict=True)]
        ends = [st + (c - 1) * step + 1 for st, c, step in zip(starts, counts, window_strides, strict=True)]
        pieces.append((starts, cx.emit("Slice", x, cx.const(_i64(starts)), cx.const(_i64(ends)), axes, steps)))
    return pieces, padded, counts


def _selection_init(cx, select_prim, dtype) -> tuple[str, Value]:
    """The comparison that replaces the selected element (strict, so the first of equals stays, as
    XLA's ``ge``/``le`` selection keeps it) and the padding that is never selected."""
    name = getattr(select_prim, "name", str(select_prim))
    if name not in ("ge", "le") or not is_floating(dtype):
        raise NotMapped(f"window selection by {name} of {dtype.name}")
    return ("Greater", cx.value(-np.inf, dtype)) if name == "ge" else ("Less", cx.value(np.inf, dtype))


@prim("select_and_gather_add")
def _select_and_gather_add(cx, tangents, operand, *, select_prim, window_dimensions, window_strides, padding,
                           base_dilation, window_dilation, **_):  # fmt: skip
    """Per window, the tangent at the operand's selected (max for ``ge``, min for ``le``) element."""
    if any(d != 1 for d in base_dilation):
        raise NotMapped("select_and_gather_add with base dilation")
    t, x = cx.value(tangents), cx.value(operand)
    better, never = _selection_init(cx, select_prim, cx.dtype(x))
    values, _, _ = _window_pieces(cx, x, never, window_dimensions, window_strides, padding, window_dilation)
    tans, _, _ = _window_pieces(cx, t, cx.value(0, cx.dtype(t)), window_dimensions, window_strides, padding,
                                window_dilation)  # fmt: skip
    best, chosen = values[0][1], tans[0][1]
    for (_, v), (_, tv) in zip(values[1:], tans[1:], strict=True):
        take = cx.emit(better, v, best)
        best, chosen = cx.emit("Where", take, v, best), cx.emit("Where", take, tv, chosen)
    return cx.typed("Identity", chosen)


@prim("select_and_scatter_add")
def _select_and_scatter_add(cx, source, operand, *, select_prim, window_dimensions, window_strides, padding, **_):
    """Each window's source value added at the operand's selected element: the winning offset per
    window, then per offset the source values placed back at their strided positions."""
    src, x = cx.value(source), cx.value(operand)
    shape = cx.shape(x)
    rank = len(shape)
    better, never = _selection_init(cx, select_prim, cx.dtype(x))
    dilation = [1] * rank
    pieces, padded, counts = _window_pieces(cx, x, never, window_dimensions, window_strides, padding, dilation)
    best, winner = pieces[0][1], cx.const(np.asarray(0, np.int64))
    for k, (_, v) in enumerate(pieces[1:], start=1):
        take = cx.emit(better, v, best)
        best = cx.emit("Where", take, v, best)
        winner = cx.emit("Where", take, cx.const(np.asarray(k, np.int64)), winner)
    zero = cx.value(0, cx.dtype(src))
    total = None
    for k, (starts, _) in enumerate(pieces):
        part = cx.emit("Where", cx.emit("Equal", winner, cx.const(np.asarray(k, np.int64))), src, zero)
        part_shape = list(counts)
        for axis, step in enumerate(window_strides):  # back to the padded grid: strided, then shifted
            if step > 1:
                part, part_shape = _dilate(cx, part, part_shape, axis, step)
        pads = list(starts) + [p - st - n for p, st, n in zip(padded, starts, part_shape, strict=True)]
        if any(pads):
            part = cx.emit("Pad", part, cx.const(_i64(pads)), zero, mode="constant")
        total = part if total is None else cx.emit("Add", total, part)
    lo = [p[0] for p in padding]
    total = cx.emit("Slice", total, cx.const(_i64(lo)), cx.const(_i64([lo[i] + shape[i] for i in range(rank)])),
                    cx.const(_i64(range(rank))))  # fmt: skip
    return cx.typed("Identity", total)


@prim("reduce_window_sum")
def _reduce_window_sum(cx, x, *, window_dimensions, window_strides, padding, base_dilation, window_dilation, **_):
    x = cx.value(x)
    if not is_floating(cx.dtype(x)):
        raise NotMapped("an integer summing reduce_window")
    return _window(cx, x, "Sum", window_dimensions, window_strides, padding, base_dilation, window_dilation)


# -- gather ----------------------------------------------------------------------------------------


def _batching_as_indices(cx, idx: Value, operand_batching, index_batching) -> tuple[Value, list[int]]:
    """Batching dims (vmap's) as explicit index components: operand axis ``operand_batching[i]``
    is indexed by the position along index axis ``index_batching[i]``, an iota appended to each
    index vector.  Returns the extended indices and the operand axes the new components index."""
    operand_batching, index_batching = list(operand_batching or ()), list(index_batching or ())
    if not operand_batching:
        return idx, []
    ishape = cx.shape(idx)
    if not all(isinstance(d, int) for d in ishape[:-1]):
        raise NotMapped("batching dims over symbolic index sizes")
    batch_shape = tuple(ishape[:-1])
    parts = [cx.emit("Cast", idx, to=int(DataType.INT64))]
    for axis in index_batching:
        along = [-1 if d == axis else 1 for d in range(len(batch_shape))]
        iota = np.arange(batch_shape[axis], dtype=np.int64).reshape(along)
        parts.append(cx.const(np.broadcast_to(iota, batch_shape)[..., None].copy()))
    extended = cx.emit("Concat", *parts, axis=-1)
    extended.type = TensorType(DataType.INT64, (*batch_shape, ishape[-1] + len(index_batching)))
    return extended, operand_batching


@prim("gather")
def _gather(cx, operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value=None, **_):
    """The gathers ``x[idx]``, ``jnp.take`` and ``take_along_axis`` make: every indexed axis takes a
    size-1 slice and is collapsed, every other axis is taken whole.  Out-of-bounds indices follow
    ``mode``: clamped (``clip``) or giving the fill value (``fill``)."""
    dn = dimension_numbers
    x, idx = cx.value(operand), cx.value(indices)
    shape = cx.shape(x)
    rank = len(shape)
    idx, batched = _batching_as_indices(cx, idx, getattr(dn, "operand_batching_dims", ()),
                                        getattr(dn, "start_indices_batching_dims", ()))  # fmt: skip
    indices = idx if batched else indices
    smap = list(dn.start_index_map) + batched
    collapsed = list(dn.collapsed_slice_dims) + batched
    if not set(collapsed) <= set(smap) or any(slice_sizes[d] != 1 for d in smap):
        raise NotMapped("gather of windows wider than one element along an indexed axis")
    rest = [d for d in range(rank) if d not in smap]
    partial = [d for d in rest if slice_sizes[d] != shape[d]]
    if partial:  # an unindexed axis's window always starts at 0: cut the operand to it first
        dtype = cx.dtype(x)
        ends = _shape_vector(cx, [slice_sizes[d] for d in partial])
        x = cx.emit("Slice", x, cx.const(_i64([0] * len(partial))), ends, cx.const(_i64(partial)))
        x.type = TensorType(dtype, tuple(slice_sizes[d] if d in partial else shape[d] for d in range(rank)))
        shape = x.type.shape
    perm = smap + rest
    xt = x if perm == list(range(rank)) else cx.emit("Transpose", x, perm=perm)
    idx = cx.emit("Cast", idx, to=int(DataType.INT64))
    bounds = cx.emit("Concat", *(cx.dim_value(shape[d]) for d in smap), axis=0)
    mode_name = str(mode).rsplit(".", 1)[-1].upper()
    inside = None
    if "CLIP" in mode_name:
        idx = cx.emit("Max", cx.emit("Min", idx, cx.emit("Sub", bounds, cx.const(_i64([1])))), cx.const(_i64([0])))
    elif "FILL" in mode_name:
        ok = cx.emit("And", cx.emit("GreaterOrEqual", idx, cx.const(_i64([0]))), cx.emit("Less", idx, bounds))
        inside = cx.emit("Cast", cx.emit("ReduceMin", cx.emit("Cast", ok, to=int(DataType.INT32)),
                                         cx.const(_i64([-1])), keepdims=0), to=int(DataType.BOOL))  # fmt: skip
        idx = cx.emit("Where", ok, idx, cx.const(_i64([0])))
    y = cx.emit("GatherND", xt, idx)  # [batch..., rest...]
    batch_rank = len(cx.shape(indices)) - 1
    if inside is not None:
        fill = fill_value
        if fill is None:
            np_dtype = np.dtype(to_numpy(cx.dtype(x)))
            fill = (np.nan if np_dtype.kind in "fc" else np.iinfo(np_dtype).min if np_dtype.kind == "i"
                    else np.iinfo(np_dtype).max if np_dtype.kind == "u" else True)  # fmt: skip
        mask = cx.emit("Reshape", inside, cx.emit("Concat", cx.emit("Shape", inside),
                                                  cx.const(_i64([1] * len(rest))), axis=0))  # fmt: skip
        y = cx.emit("Where", mask, y, cx.value(fill, cx.dtype(x)))
    # an indexed axis that is not collapsed stays as a size-1 window axis, among the rest in order
    kept = [d for d in range(rank) if d not in collapsed]
    ones = [batch_rank + i for i, d in enumerate(kept) if d in smap]
    if ones:
        y = cx.emit("Unsqueeze", y, cx.const(_i64(ones)))
    # output: the window axes sit at offset_dims, the batch axes fill the others in order
    out_rank = batch_rank + len(kept)
    offsets = list(dn.offset_dims)
    batch_pos = [d for d in range(out_rank) if d not in offsets]
    order = [0] * out_rank
    for i, d in enumerate(batch_pos):
        order[d] = i
    for i, d in enumerate(offsets):
        order[d] = batch_rank + i
    if order == list(range(out_rank)):
        return cx.typed("Identity", y)
    return cx.typed("Transpose", y, perm=order)


# -- call wrappers and control flow ----------------------------------------------------------------


@prim("pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call", "custom_vjp_call",
      "custom_vjp_call_jaxpr", "custom_lin", "remat2")  # fmt: skip
def _call(cx, *args, **params):
    closed = params.get("jaxpr") or params.get("call_jaxpr") or params.get("fun_jaxpr")
    if closed is None:
        raise NotMapped(f"{cx.eqn.primitive.name} without a jaxpr")
    jaxpr = getattr(closed, "jaxpr", closed)
    n = len(jaxpr.invars)
    outs = cx.inline(closed, list(args)[-n:] if len(args) > n else list(args))
    return outs if len(cx.eqn.outvars) != 1 else outs[0]


@prim("custom_linear_solve")
def _custom_linear_solve(cx, *args, const_lengths, jaxprs, **_):
    """The forward solve: the ``solve`` jaxpr on its constants and the right-hand side (the other
    jaxprs serve differentiation)."""
    lengths = list(const_lengths)
    start = sum(lengths[:2])  # matvec's and vecmat's constants come first
    consts = list(args[start : start + lengths[2]])
    b = list(args[sum(lengths) :])
    outs = cx.inline(jaxprs.solve, consts + b)
    return outs if len(cx.eqn.outvars) != 1 else outs[0]


def _owned(cx, g: Graph, v, aval=None) -> Value:
    """``v`` as a value produced inside ``g`` (ONNX subgraph outputs must be)."""
    from ...core_ir.builder import Builder
    from . import aval_type

    b = Builder(g, names=cx.importer.names)
    if not isinstance(v, Value):
        v = b.constant(np.asarray(v))
    if v.producer() is not None and v.producer().graph is g and not v.is_graph_output():
        return v
    out = b.add_node("Identity", [v]).outputs[0]
    out.type = v.type if v.type is not None else (aval_type(aval) if aval is not None else None)
    return out


@prim("cond")
def _cond(cx, index, *operands, branches, **_):
    """``lax.cond`` → If; ``lax.switch`` (n branches) → Ifs nested in the else branches."""
    from ...core_ir.builder import Builder
    from ..common import Emitter
    from . import aval_type

    index = cx.value(index)
    n_out = len(cx.eqn.outvars)
    types = [aval_type(a) for a in cx.out_avals]

    def branch(k):
        g = Graph(name=cx.importer.names.fresh(f"branch{k}"))
        outs = cx.inline(branches[k], list(operands), g, prefix=f"b{k}.")
        g.set_outputs([_owned(cx, g, v, a) for v, a in zip(outs, cx.out_avals, strict=True)])
        return g

    def scalar(e, v):
        return e.emit("Reshape", v, e.const(np.asarray([], np.int64)))

    if cx.dtype(index) == DataType.BOOL:  # a True predicate takes branches[1]
        n = cx.node("If", [scalar(cx, index)], {"then_branch": branch(1), "else_branch": branch(0)},
                    outputs=n_out, types=types)  # fmt: skip
        return list(n.outputs) if n_out != 1 else n.outputs[0]

    def from_branch(k):  # a graph choosing among branches k.. by the index
        if k == len(branches) - 1:
            return branch(k)
        g = Graph(name=cx.importer.names.fresh(f"switch{k}"))
        e = Emitter(g, Builder(g, names=cx.importer.names))
        e.metadata = dict(cx.metadata)
        pred = scalar(e, e.emit("Equal", index, e.const(np.asarray(k, to_numpy(cx.dtype(index))))))
        inner = e.node("If", [pred], {"then_branch": branch(k), "else_branch": from_branch(k + 1)},
                       outputs=n_out, types=types)  # fmt: skip
        g.set_outputs(list(inner.outputs))
        return g

    pred = scalar(cx, cx.emit("Equal", index, cx.value(0, cx.dtype(index))))
    n = cx.node("If", [pred], {"then_branch": branch(0), "else_branch": from_branch(1)}, outputs=n_out, types=types)
    return list(n.outputs) if n_out != 1 else n.outputs[0]


@prim("while")
def _while(cx, *operands, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **_):
    """A Loop.  A batched predicate (a vmapped ``while_loop``: one flag per batch element) runs
    the loop while any flag is set and keeps the state of the elements whose flag is clear, as
    JAX's lowering does: their leading dims take the old values."""
    from ..common import Emitter, any_true
    from . import aval_type

    cconsts = list(operands[:cond_nconsts])
    bconsts = list(operands[cond_nconsts:cond_nconsts + body_nconsts])
    init = [cx.value(v) for v in operands[cond_nconsts + body_nconsts:]]
    batched = bool(cond_jaxpr.out_avals[0].shape)
    first = cx.inline(cond_jaxpr, cconsts + init)[0]
    if batched:
        first = any_true(cx, cx.value(first))
    names = cx.importer.names
    it = Value(names.fresh("while_iter"), TensorType(DataType.INT64, ()))
    cond_in = Value(names.fresh("while_cond"), TensorType(DataType.BOOL, ()))
    state = [Value(names.fresh("while_state"), aval_type(a)) for a in cx.out_avals]
    body = Graph(inputs=[it, cond_in, *state], name=names.fresh("while_body"))
    new = list(cx.inline(body_jaxpr, bconsts + state, body, prefix="body."))
    again = cx.inline(cond_jaxpr, cconsts + new, body, prefix="cond.")[0]
    if batched:
        from ...core_ir.builder import Builder

        e = Emitter(body, Builder(body, names=names))
        e.metadata = dict(cx.metadata)
        live = cx.inline(cond_jaxpr, cconsts + state, body, prefix="live.")[0]  # the flags before this step
        rank = len(cond_jaxpr.out_avals[0].shape)
        for i, (old, v) in enumerate(zip(state, new, strict=True)):
            extra = len(old.type.shape) - rank
            flags = e.emit("Unsqueeze", live, e.const(np.arange(rank, rank + extra, dtype=np.int64))) if extra else live
            new[i] = e.emit("Where", flags, v if isinstance(v, Value) else e.const(np.asarray(v)), old)
            new[i].type = old.type
        again = any_true(e, again)
    body.set_outputs([_owned(cx, body, again), *(_owned(cx, body, v, a) for v, a in zip(new, cx.out_avals,
                                                                                      strict=True))])  # fmt: skip
    n = cx.node_typed("Loop", [None, cx.value(first), *init], {"body": body}, outputs=len(init))
    return list(n.outputs) if len(init) != 1 else n.outputs[0]


@prim("scan")
def _scan(cx, *operands, jaxpr, length, reverse, num_consts, num_carry, **_):
    """A Loop of ``length`` trips; the stacked outputs are carried buffers updated in place at the
    trip's row, so their shapes are static (XLA takes that; a Loop's scan outputs it does not)."""
    from . import aval_type

    consts = list(operands[:num_consts])
    carry = [cx.value(v) for v in operands[num_consts:num_consts + num_carry]]
    xs = [cx.value(v) for v in operands[num_consts + num_carry:]]
    ys_avals = cx.out_avals[num_carry:]
    names = cx.importer.names
    buffers = []
    for a in ys_avals:
        t = aval_type(a)
        zero = cx.const(np.zeros((), to_numpy(t.dtype)))
        buf = cx.emit("Expand", zero, _shape_vector(cx, list(a.shape)))
        buf.type = t
        buffers.append(buf)
    it = Value(names.fresh("scan_iter"), TensorType(DataType.INT64, ()))
    cond_in = Value(names.fresh("scan_cond"), TensorType(DataType.BOOL, ()))
    state = [Value(names.fresh("scan_carry"), v.type) for v in carry]
    bufs_in = [Value(names.fresh("scan_ys"), b.type) for b in buffers]
    body = Graph(inputs=[it, cond_in, *state, *bufs_in], name=names.fresh("scan_body"))
    from ...core_ir.builder import Builder
    from ..common import Emitter

    e = Emitter(body, Builder(body, names=names))
    e.metadata = dict(cx.metadata)
    row = it
    if reverse:
        if not isinstance(length, (int, np.integer)):
            raise NotMapped("a reversed scan of symbolic length")
        row = e.emit("Sub", e.const(np.asarray(int(length) - 1, np.int64)), it)
    slices = [e.emit("Gather", x, row, axis=0) for x in xs]
    for s, x in zip(slices, xs, strict=True):
        s.type = TensorType(x.type.dtype, tuple(x.type.shape[1:]))
    outs = cx.inline(jaxpr, consts + state + slices, body, prefix="scan.")
    new_carry, ys = outs[:num_carry], outs[num_carry:]
    where = e.emit("Reshape", row, e.const(_i64([1, 1])))
    new_bufs = []
    for buf, y in zip(bufs_in, ys, strict=True):
        y = y if isinstance(y, Value) else e.const(np.asarray(y))
        nb = e.emit("ScatterND", buf, where, e.emit("Unsqueeze", y, e.const(_i64([0]))))
        nb.type = buf.type
        new_bufs.append(nb)
    keep = e.emit("Identity", cond_in)
    keep.type = cond_in.type
    body.set_outputs([keep, *(_owned(cx, body, v) for v in new_carry), *(_owned(cx, body, v) for v in new_bufs)])
    trips = cx.const(np.asarray(length, np.int64)) if isinstance(length, (int, np.integer)) else cx.emit(
        "Squeeze", cx.dim_value(length))
    n = cx.node_typed("Loop", [trips, cx.const(np.asarray(True)), *carry, *buffers], {"body": body},
                      outputs=len(carry) + len(buffers))  # fmt: skip
    return list(n.outputs)


# -- scatter ---------------------------------------------------------------------------------------

_SCATTER = {"scatter": "none", "scatter-add": "add", "scatter_add": "add", "scatter-mul": "mul", "scatter_mul": "mul",
            "scatter-min": "min", "scatter_min": "min", "scatter-max": "max", "scatter_max": "max"}  # fmt: skip


@prim(*_SCATTER)
def _scatter(cx, operand, indices, updates, *, dimension_numbers, mode, **_):
    """The scatters ``x.at[idx].set/add/mul/min/max`` make: each indexed axis takes a one-element
    window and is inserted, every other axis is updated whole.  Out-of-bounds updates follow
    ``mode``: dropped (``fill_or_drop``, through a padding row sliced off afterwards) or clamped."""
    dn = dimension_numbers
    reduction = _SCATTER[cx.eqn.primitive.name]
    x, idx, upd = cx.value(operand), cx.value(indices), cx.value(updates)
    idx, batched = _batching_as_indices(cx, idx, getattr(dn, "operand_batching_dims", ()),
                                        getattr(dn, "scatter_indices_batching_dims", ()))  # fmt: skip
    smap = list(dn.scatter_dims_to_operand_dims) + batched
    if reduction != "none" and cx.dtype(x) == DataType.BOOL:
        raise NotMapped("a combining scatter of booleans")
    shape, ushape = cx.shape(x), cx.shape(upd)
    index_rank = len(cx.shape(idx))
    rank = len(shape)
    rest = [d for d in range(rank) if d not in smap]
    window = list(dn.update_window_dims)
    if sorted(list(dn.inserted_window_dims) + batched) != sorted(smap) or (
            [ushape[w] for w in window] != [shape[d] for d in rest]):  # fmt: skip
        if batched:
            raise NotMapped("a batched scatter of windows wider than one element")
        return _scatter_windows(cx, x, idx, upd, dn, reduction, str(mode).rsplit(".", 1)[-1].upper())
    perm = smap + rest
    xt = x if perm == list(range(rank)) else cx.emit("Transpose", x, perm=perm)
    batch = [d for d in range(len(ushape)) if d not in window]
    uperm = batch + window
    ut = upd if uperm == list(range(len(ushape))) else cx.emit("Transpose", upd, perm=uperm)
    idx = cx.emit("Cast", idx, to=int(DataType.INT64))
    if index_rank == 0 or (len(batch) == 0 and index_rank == 1):
        idx = cx.emit("Reshape", idx, cx.const(_i64([1, len(smap)])))
        ut = cx.emit("Unsqueeze", ut, cx.const(_i64([0])))
    bounds = cx.emit("Concat", *(cx.dim_value(shape[d]) for d in smap), axis=0)
    mode_name = str(mode).rsplit(".", 1)[-1].upper()
    padded = "CLIP" not in mode_name  # XLA drops out-of-bounds updates unless told to clamp
    if padded:  # out-of-bounds indices all point at one extra row per indexed axis, cut off afterwards
        ok = cx.emit("And", cx.emit("GreaterOrEqual", idx, cx.const(_i64([0]))), cx.emit("Less", idx, bounds))
        inside = cx.emit("Cast", cx.emit("ReduceMin", cx.emit("Cast", ok, to=int(DataType.INT32)),
                                         cx.const(_i64([-1])), keepdims=1), to=int(DataType.BOOL))  # fmt: skip
        idx = cx.emit("Where", inside, idx, bounds)
        pads = [0] * len(perm) + [1] * len(smap) + [0] * len(rest)
        xt = cx.emit("Pad", xt, cx.const(_i64(pads)))
    else:
        idx = cx.emit("Max", cx.emit("Min", idx, cx.emit("Sub", bounds, cx.const(_i64([1])))), cx.const(_i64([0])))
    y = cx.emit("ScatterND", xt, idx, ut, reduction=reduction)
    if padded:
        zeros = cx.const(_i64([0] * len(smap)))
        y = cx.emit("Slice", y, zeros, bounds, cx.const(_i64(range(len(smap)))))
    inverse = [perm.index(i) for i in range(rank)]
    if inverse == list(range(rank)):
        return cx.typed("Identity", y)
    return cx.typed("Transpose", y, perm=inverse)


def _scatter_windows(cx, x, idx, upd, dn, reduction: str, mode: str):
    """The general scatter: every update window, whatever its size along indexed and unindexed
    axes, spelled out element by element (its start plus each offset in the window) for one
    element-wise ScatterND.  A window that does not fit is dropped whole (XLA's rule; padding takes
    its elements, cut off afterwards), or with ``CLIP`` moved to fit."""
    shape, ushape = cx.shape(x), cx.shape(upd)
    if not all(isinstance(d, int) for d in (*shape, *ushape)):
        raise NotMapped("a scatter of wide windows with symbolic sizes")
    rank, window = len(shape), list(dn.update_window_dims)
    inserted = set(dn.inserted_window_dims)
    window_axes = [d for d in range(rank) if d not in inserted]  # the operand axes the window spans, in order
    sizes = {d: 1 for d in inserted} | {d: ushape[w] for d, w in zip(window_axes, window, strict=True)}
    smap = list(dn.scatter_dims_to_operand_dims)
    idx = cx.emit("Cast", idx, to=int(DataType.INT64))
    index_shape = cx.shape(idx)
    batch = [d for d in range(len(ushape)) if d not in window]
    if len(index_shape) == len(batch):  # index_vector_dim at the end, implicit
        idx = cx.emit("Unsqueeze", idx, cx.const(_i64([-1])))
    count = int(np.prod([ushape[d] for d in batch]))
    starts = cx.emit("Reshape", idx, cx.const(_i64([count, len(smap)])))
    # the start in every operand axis: the index component for scattered axes, 0 elsewhere
    padded = cx.emit("Concat", starts, cx.const(np.zeros((count, 1), np.int64)), axis=1)
    columns = [smap.index(d) if d in smap else len(smap) for d in range(rank)]
    start = cx.emit("Gather", padded, cx.const(_i64(columns)), axis=1)  # [count, rank]
    dims = np.asarray(shape, np.int64)
    size = np.asarray([sizes[d] for d in range(rank)], np.int64)
    if mode == "CLIP":
        start = cx.emit("Max", cx.emit("Min", start, cx.const(dims - size)), cx.const(np.zeros(rank, np.int64)))
    else:  # a window that does not fit is dropped: its start moves into the padding
        fits = cx.emit("And", cx.emit("GreaterOrEqual", start, cx.const(np.zeros(rank, np.int64))),
                       cx.emit("LessOrEqual", start, cx.const(dims - size)))  # fmt: skip
        every = cx.emit("ReduceMin", cx.emit("Cast", fits, to=int(DataType.INT32)), cx.const(_i64([1])), keepdims=1)
        start = cx.emit("Where", cx.emit("Cast", every, to=int(DataType.BOOL)), start, cx.const(dims))
        x = cx.emit("Pad", x, cx.const(np.concatenate([np.zeros(rank, np.int64), size])))
    axes = np.meshgrid(*(np.arange(sizes[d]) for d in window_axes), indexing="ij")
    grid = np.stack(axes, -1).reshape(-1, len(window_axes))
    offsets = np.zeros((grid.shape[0], rank), np.int64)
    offsets[:, window_axes] = grid
    where = cx.emit("Add", cx.emit("Unsqueeze", start, cx.const(_i64([1]))), cx.const(offsets[None]))
    where = cx.emit("Reshape", where, cx.const(_i64([-1, rank])))
    ordered = cx.emit("Transpose", upd, perm=batch + window) if batch + window != list(range(len(ushape))) else upd
    values = cx.emit("Reshape", ordered, cx.const(_i64([-1])))
    y = cx.emit("ScatterND", x, where, values, reduction=reduction)
    if mode != "CLIP":
        y = cx.emit("Slice", y, cx.const(np.zeros(rank, np.int64)), cx.const(dims), cx.const(_i64(range(rank))))
    return cx.typed("Identity", y)


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


# -- cumulative ops other than sum, and reduced precision -------------------------------------------


_CUMULATIVE = {"cumprod": ("Mul", 1), "cummax": ("Max", None), "cummin": ("Min", None)}


@prim(*_CUMULATIVE)
def _cumulative(cx, x, axis, reverse=False, **_):
    x = cx.value(x)
    op, identity = _CUMULATIVE[cx.eqn.primitive.name]
    if identity is None:  # the lowest (highest) value of the dtype
        if is_floating(cx.dtype(x)):
            big = np.inf
        else:
            big = np.iinfo(np.dtype(to_numpy(cx.dtype(x)))).max if cx.dtype(x) != DataType.BOOL else True
        low = -np.inf if is_floating(cx.dtype(x)) else (
            np.iinfo(np.dtype(to_numpy(cx.dtype(x)))).min if cx.dtype(x) != DataType.BOOL else False)
        identity = low if op == "Max" else big
    if cx.dtype(x) == DataType.BOOL:
        raise NotMapped(f"{cx.eqn.primitive.name} of booleans")
    return cx.typed("Identity", associative_scan(cx, x, int(axis), op, identity, bool(reverse)))


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
