"""Random draws.  ONNX's random ops take no generator state, so these reproduce torch's distributions, not
its numbers."""

from __future__ import annotations

import math

import numpy as np

from ....core_ir.dtypes import DataType, to_numpy
from ....core_ir.value import Value
from ...common import NotMapped
from .common import aten


@aten("rand.default", "randn.default")
def _rand(cx, size, **kw):
    shape = list(size)
    if not all(isinstance(s, int) for s in shape):
        raise NotMapped("random tensors of symbolic shape")
    op = "RandomNormal" if "randn" in str(cx.fx.target) else "RandomUniform"
    if not shape:  # ONNX draws at least one element
        y = cx.emit(op, dtype=int(cx.out_dtype), shape=[1])
        return cx.emit_typed("Reshape", y, cx.const(np.asarray([], np.int64)))
    return cx.emit_typed(op, dtype=int(cx.out_dtype), shape=shape)


@aten("randperm.default")
def _randperm(cx, n, **kw):
    """A uniformly random permutation: the order that sorts ``n`` uniform draws."""
    if not isinstance(n, int):
        raise NotMapped("randperm of a symbolic length")
    if n == 0:
        return cx.emit_typed("Identity", cx.const(np.zeros(0, to_numpy(cx.out_dtype))))
    draws = cx.emit("RandomUniform", dtype=int(DataType.FLOAT), shape=[n])
    order = cx.node("TopK", [draws, cx.const(np.asarray([n], np.int64))], {"axis": 0}, outputs=2).outputs[1]
    return cx.emit_typed("Cast", order, to=int(cx.out_dtype))


@aten("rand_like.default", "randn_like.default")
def _rand_like(cx, x, **kw):
    shape = cx.shape(x)
    if all(isinstance(d, int) for d in shape):  # the static form every runtime implements
        op = "RandomNormal" if "randn" in str(cx.fx.target) else "RandomUniform"
        y = cx.emit(op, dtype=int(cx.out_dtype), shape=list(shape) or [1])
        return cx.emit_typed("Reshape", y, cx.const(np.asarray(list(shape), np.int64)))
    op = "RandomNormalLike" if "randn" in str(cx.fx.target) else "RandomUniformLike"
    return cx.emit_typed(op, x, dtype=int(cx.out_dtype))


@aten("native_dropout.default")
def _native_dropout(cx, x, p, train):
    x = cx.tensor(x)
    if not train or p == 0:
        ones = cx.emit("Expand", cx.const(np.asarray(True)), cx.emit("Shape", x))
        return cx.emit_typed("Identity", x), ones
    n = cx.node_typed("Dropout", [x, cx.tensor(float(p)), cx.const(np.asarray(True))], outputs=2)
    return tuple(n.outputs)


_RANDOM_DTYPES = frozenset({DataType.FLOAT16, DataType.FLOAT, DataType.DOUBLE})


"""What ONNX's RandomUniform/RandomNormal draw; other dtypes draw float32 and cast."""


def _draw(cx, op: str, shape, dtype: DataType = DataType.FLOAT, **attrs) -> Value:
    """``op`` (``RandomUniform`` or ``RandomNormal``) of a static ``shape`` in ``dtype``: ONNX's
    random ops take a shape attribute, and at least one element."""
    shape = list(shape)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("random tensors of symbolic shape")
    draw_dtype = dtype if dtype in _RANDOM_DTYPES else DataType.FLOAT
    attrs = {k: float(v) for k, v in attrs.items()}
    draw = cx.emit(op, dtype=int(draw_dtype), shape=shape or [1], **attrs)
    return cx.cast(cx.emit("Reshape", draw, cx.const(np.asarray(shape, np.int64))), dtype)


@aten("bernoulli.p", "bernoulli.default")
def _bernoulli(cx, x, p=None, **kw):
    x = cx.tensor(x)
    draw = _draw(cx, "RandomUniform", cx.shape(x))
    prob = cx.tensor(float(p), DataType.FLOAT) if p is not None else cx.cast(x, DataType.FLOAT)
    return cx.emit_typed("Cast", cx.emit("Less", draw, prob), to=int(cx.out_dtype))


@aten("uniform.default")
def _uniform(cx, x, low=0.0, high=1.0, *, generator=None):
    return cx.emit_typed("Identity", _draw(cx, "RandomUniform", cx.out_shape, cx.out_dtype, low=low, high=high))


@aten("normal_functional.default")
def _normal_functional(cx, x, mean=0.0, std=1.0, *, generator=None):
    return cx.emit_typed("Identity", _draw(cx, "RandomNormal", cx.out_shape, cx.out_dtype, mean=mean, scale=std))


@aten("normal.Tensor_Tensor", "normal.Tensor_float", "normal.float_Tensor")
def _normal(cx, mean, std=1.0, *, generator=None):
    noise = _draw(cx, "RandomNormal", cx.out_shape, cx.out_dtype)
    return cx.emit_typed("Add", cx.tensor(mean), cx.emit("Mul", cx.tensor(std), noise))


@aten("normal.float_float")
def _normal_sized(cx, mean, std, size, *, generator=None, **kw):
    return cx.emit_typed("Identity", _draw(cx, "RandomNormal", size, cx.out_dtype, mean=mean, scale=std))


def _unit_open_above(cx, dtype: DataType) -> Value:
    """1 - U for U uniform in [0, 1): uniform in (0, 1], so its logarithm is finite."""
    return cx.emit("Sub", cx.tensor(1.0, dtype), _draw(cx, "RandomUniform", cx.out_shape, dtype))


@aten("exponential.default")
def _exponential(cx, x, lambd=1.0, *, generator=None):
    dt = cx.out_dtype
    log = cx.emit("Log", _unit_open_above(cx, dt))
    return cx.emit_typed("Div", cx.emit("Neg", log), cx.tensor(float(lambd), dt))


@aten("cauchy.default")
def _cauchy(cx, x, median=0.0, sigma=1.0, *, generator=None):
    dt = cx.out_dtype
    centred = cx.emit("Sub", _draw(cx, "RandomUniform", cx.out_shape, dt), cx.tensor(0.5, dt))
    tan = cx.emit("Tan", cx.emit("Mul", centred, cx.tensor(math.pi, dt)))
    return cx.emit_typed("Add", cx.tensor(float(median), dt), cx.emit("Mul", cx.tensor(float(sigma), dt), tan))


@aten("geometric.default")
def _geometric(cx, x, p, *, generator=None):
    """The number of Bernoulli(p) trials up to the first success: at least 1."""
    log = cx.emit("Log", _unit_open_above(cx, DataType.DOUBLE))
    trials = cx.emit("Ceil", cx.emit("Div", log, cx.tensor(math.log1p(-p), DataType.DOUBLE)))
    trials = cx.emit("Max", trials, cx.tensor(1.0, DataType.DOUBLE))
    return cx.emit_typed("Cast", trials, to=int(cx.out_dtype))


@aten("log_normal.default")
def _log_normal(cx, x, mean=1.0, std=2.0, *, generator=None):
    return cx.emit_typed("Exp", _draw(cx, "RandomNormal", cx.out_shape, cx.out_dtype, mean=mean, scale=std))


@aten("randint.default", "randint.low", "randint_like.default", "randint_like.low_dtype")
def _randint(cx, *args, **kw):
    """Integers uniform in [low, high) (low 0 where only high is given): the floor of a float64
    draw scaled to the range."""
    bounds = [a for a in args if not isinstance(a, (Value, list, tuple))]
    low, high = (0, *bounds) if len(bounds) == 1 else bounds
    if not isinstance(low, int) or not isinstance(high, int):
        raise NotMapped("randint with symbolic bounds")
    draw = _draw(cx, "RandomUniform", cx.out_shape, DataType.DOUBLE)
    value = cx.emit("Floor", cx.emit("Mul", draw, cx.tensor(float(high - low), DataType.DOUBLE)))
    value = cx.emit("Min", value, cx.tensor(float(high - low - 1), DataType.DOUBLE))  # a draw rounded up to 1
    return cx.emit_typed("Cast", cx.emit("Add", value, cx.tensor(float(low), DataType.DOUBLE)), to=int(cx.out_dtype))


@aten("multinomial.default")
def _multinomial(cx, weights, num_samples, replacement=False, *, generator=None):
    """Category indices drawn with probability proportional to ``weights`` (rows of a 1-D or 2-D
    tensor).  Without replacement, as ATen draws them: the ``num_samples`` largest of
    ``weight / E`` for ``E`` exponential; with replacement, each draw's uniform number located in
    the cumulative weights (zero weights own empty intervals, so they are never drawn)."""
    w = cx.cast(weights, DataType.DOUBLE)
    shape = cx.shape(w)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("multinomial over symbolic sizes")
    n = shape[-1]
    k = cx.const(np.asarray([num_samples], np.int64))
    if not replacement:
        exponential = cx.emit("Neg", cx.emit("Log", cx.emit("Sub", cx.tensor(1.0, DataType.DOUBLE),
                                                            _draw(cx, "RandomUniform", shape, DataType.DOUBLE))))
        keys = cx.emit("Div", w, exponential)
        _, picked = cx.node("TopK", [keys, k], {"axis": -1, "largest": 1, "sorted": 1}, outputs=2).outputs
        return cx.emit_typed("Identity", picked)
    cdf = cx.emit("CumSum", w, cx.const(np.asarray(-1, np.int64)))
    total = cx.emit("Gather", cdf, cx.const(np.asarray([n - 1], np.int64)), axis=-1)  # [..., 1]
    draws = cx.emit("Mul", _draw(cx, "RandomUniform", [*shape[:-1], num_samples], DataType.DOUBLE), total)
    below = cx.emit("LessOrEqual", cx.emit("Unsqueeze", cdf, cx.const(np.asarray([-2], np.int64))),
                    cx.emit("Unsqueeze", draws, cx.const(np.asarray([-1], np.int64))))  # [..., samples, n]
    index = cx.emit("ReduceSum", cx.emit("Cast", below, to=int(DataType.INT64)), cx.const(np.asarray([-1], np.int64)),
                    keepdims=0)  # fmt: skip
    # a draw that rounds up onto the total belongs to the last category that has weight
    positive = cx.emit("Cast", cx.emit("Greater", w, cx.tensor(0.0, DataType.DOUBLE)), to=int(DataType.INT32))
    last = cx.emit("ArgMax", positive, axis=-1, keepdims=1, select_last_index=1)
    past_end = cx.emit("GreaterOrEqual", index, cx.const(np.asarray(n, np.int64)))
    return cx.emit_typed("Where", past_end, last, index)
