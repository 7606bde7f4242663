"""Reductions, the generic ``reduce``, sorting, top-k and cumulative ops."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import DataType, is_floating, to_numpy
from ....core_ir.types import TensorType
from ....core_ir.value import Value
from ...common import NotMapped, associative_scan
from ...lib import special
from .common import _i64, prim
from .linalg import _cast_out

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
    from .. import aval_type

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
    from .. import aval_type

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
    from .. import aval_type

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
    from .. import aval_type

    values = cx.emit("Identity", n.outputs[0])
    values.type = aval_type(cx.out_avals[0])
    return [values, _cast_out(cx, n.outputs[1], 1)]


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
