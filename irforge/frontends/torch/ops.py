"""Core ATen ops → ONNX ops.  ``TABLE`` maps ``aten.name.overload`` (or ``aten.name.*`` for every
overload) to a converter ``fn(cx, *args, **kwargs)``: ``cx`` is a
:class:`~irforge.frontends.torch.TorchContext`, the arguments are the FX node's with tensors
replaced by IR values.  A converter returns a value or a tuple of values (``None`` for an output
nobody reads), or raises :class:`~irforge.frontends.common.NotMapped` for a use it cannot express.

Type promotion is torch's: the FX node's output dtype (``cx.out_dtype``) is what operands are
cast to, so ``int_tensor * 0.5`` computes in float.
"""

from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from ...core_ir.dtypes import DataType, is_floating, to_numpy
from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import NotMapped
from ..lib import incomplete, jacobi, ldl, linalg, polynomials, special
from . import backward as torch_backward

TABLE: dict = {}
INT64_MAX = 2**63 - 1


_NAMESPACES = ("operator.", "torch.", "torch_nn.", "higher_order.", "aten.")


def aten(*names: str):
    def register(fn):
        for n in names:
            TABLE[n if n.startswith(_NAMESPACES) else "aten." + n] = fn
        return fn

    return register


def _axis(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _shape_of(cx, v: Value) -> Value:
    return cx.emit("Shape", v)


def _dim_size(cx, v: Value, axis: int) -> Value:
    """The size of ``v`` along ``axis`` as a 1-element int64 tensor."""
    d = cx.shape(v)[axis] if v.type is not None and v.type.shape is not None else None
    if isinstance(d, int):
        return cx.const(np.asarray([d], np.int64))
    return cx.emit("Shape", v, start=axis, end=axis + 1 if axis != -1 else None) if axis != -1 else cx.emit(
        "Shape", v, start=-1)


# -- element-wise -------------------------------------------------------------------------------

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


def _special(fn):
    def convert(cx, x):
        x = cx.tensor(x)
        if not is_floating(x.type.dtype):  # integer inputs promote to the default float
            x = cx.cast(x, cx.out_dtype)
        return cx.emit_typed("Identity", fn(cx, x))

    return convert


def _torch_digamma(cx, x: Value) -> Value:
    """ψ with torch's value at zero: -inf at +0, +inf at -0 (the pole's one-sided limits)."""
    at_zero = cx.emit("Neg", cx.emit("Reciprocal", x))
    return cx.emit("Where", cx.emit("Equal", x, cx.const(np.asarray(0, to_numpy(x.type.dtype)))), at_zero,
                   special.digamma(cx, x))  # fmt: skip


aten("lgamma.default")(_special(special.lgamma))
aten("digamma.default")(_special(_torch_digamma))
aten("erfinv.default")(_special(special.erfinv))
aten("i0.default", "special_modified_bessel_i0.default")(_special(special.bessel_i0))
aten("special_i0e.default")(_special(special.bessel_i0e))
aten("special_i1.default", "special_modified_bessel_i1.default")(_special(special.bessel_i1))
aten("special_i1e.default")(_special(special.bessel_i1e))
aten("special_ndtri.default")(_special(special.ndtri))
aten("special_erfcx.default")(_special(special.erfcx))
aten("special_log_ndtr.default")(_special(special.log_ndtr))
aten("special_bessel_j0.default")(_special(lambda e, x: special.bessel_j(e, x, 0)))
aten("special_bessel_j1.default")(_special(lambda e, x: special.bessel_j(e, x, 1)))
aten("special_bessel_y0.default")(_special(lambda e, x: special.bessel_y(e, x, 0)))
aten("special_bessel_y1.default")(_special(lambda e, x: special.bessel_y(e, x, 1)))
aten("special_spherical_bessel_j0.default")(_special(special.spherical_bessel_j0))
aten("special_airy_ai.default")(_special(special.airy_ai))
aten("special_modified_bessel_k0.default")(_special(lambda e, x: special.bessel_k(e, x, 0)))
aten("special_modified_bessel_k1.default")(_special(lambda e, x: special.bessel_k(e, x, 1)))
aten("special_scaled_modified_bessel_k0.default")(_special(lambda e, x: special.bessel_k(e, x, 0, scaled=True)))
aten("special_scaled_modified_bessel_k1.default")(_special(lambda e, x: special.bessel_k(e, x, 1, scaled=True)))


@aten("nextafter.default")
def _nextafter(cx, x, other):
    dt = _promoted(cx, x, other)
    cx.importer.require_opset(special.BITCAST_OPSET)
    return cx.emit_typed("Identity", special.nextafter(cx, cx.tensor(x, dt), cx.tensor(other, dt)))


@aten("frexp.Tensor")
def _frexp(cx, x):
    return _outputs(cx, *special.frexp(cx, cx.tensor(x, cx.dtype(x))))


_HISTC_LIMIT = 1 << 24
"""Most element-bin comparisons ``histc`` may build (its counts are a comparison per bin)."""


@aten("histc.default")
def _histc(cx, x, bins=100, min=0, max=0):  # torch's argument names
    """Counts over ``bins`` equal bins of [min, max] (the data's range when they are equal), with
    torch's bin arithmetic: ``trunc((x - min) * bins / (max - min))``, the right edge in the last
    bin; elements outside the range and NaN are not counted."""
    x = cx.tensor(x, cx.dtype(x))
    dt, shape = cx.dtype(x), cx.shape(x)
    if not is_floating(dt) or not all(isinstance(d, int) for d in shape) or math.prod(shape) * bins > _HISTC_LIMIT:
        raise NotMapped("histc of a non-float, symbolic or very large input")
    np_dt = to_numpy(dt)
    flat = _flat(cx, x)
    if min == max:  # ATen takes the data's range then (the docs say: when both are 0)
        lo, hi = cx.emit("ReduceMin", flat, keepdims=0), cx.emit("ReduceMax", flat, keepdims=0)
        same = cx.emit("Equal", lo, hi)
        one = cx.const(np.asarray(1, np_dt))
        lo = cx.emit("Where", same, cx.emit("Sub", lo, one), lo)
        hi = cx.emit("Where", same, cx.emit("Add", hi, one), hi)
    else:
        lo, hi = cx.const(np.asarray(min, np_dt)), cx.const(np.asarray(max, np_dt))
    inside = cx.emit("And", cx.emit("GreaterOrEqual", flat, lo), cx.emit("LessOrEqual", flat, hi))
    scaled = cx.emit("Div", cx.emit("Mul", cx.emit("Sub", flat, lo), cx.const(np.asarray(bins, np_dt))),
                     cx.emit("Sub", hi, lo))  # fmt: skip
    safe = cx.emit("Where", inside, scaled, cx.const(np.asarray(0, np_dt)))
    position = cx.emit("Min", cx.emit("Cast", safe, to=int(DataType.INT64)), cx.const(np.asarray(bins - 1, np.int64)))
    position = cx.emit("Where", inside, position, cx.const(np.asarray(-1, np.int64)))
    hits = cx.emit("Equal", cx.emit("Unsqueeze", position, cx.const(np.asarray([1], np.int64))),
                   cx.const(np.arange(bins, dtype=np.int64).reshape(1, bins)))  # fmt: skip
    counts = cx.emit("ReduceSum", cx.emit("Cast", hits, to=int(DataType.INT64)), cx.const(np.asarray([0], np.int64)),
                     keepdims=0)  # fmt: skip
    return cx.emit_typed("Cast", counts, to=int(dt))


@aten("histogram.bin_ct")
def _histogram(cx, x, bins=100, *, range=None, weight=None, density=False):  # torch's argument names
    """Counts (or summed weights) over ``bins`` bins whose edges are ``torch.linspace`` of the
    range (the data's, widened by 0.5 each way when it is one value): each element goes to the
    last edge at or below it, the right edge into the last bin, elements outside (and NaN) nowhere;
    ``density`` divides by the total and the bin widths."""
    x = cx.tensor(x, cx.dtype(x))
    flat = _histogram_input(cx, x, 1, bins + 1)
    edges = _histogram_edges(cx, flat, bins, range, cx.dtype(x))
    position, inside = _histogram_bins(cx, flat, edges, bins)
    hist = _histogram_counts(cx, position, inside, weight, bins, cx.dtype(x))
    if density:
        hist = cx.emit("Div", hist, cx.emit("Mul", cx.emit("ReduceSum", hist, keepdims=0), _widths(cx, edges, bins)))
    return _outputs(cx, hist, edges)


@aten("_histogramdd_bin_edges.default", "_histogramdd_from_bin_cts.default")
def _histogramdd(cx, x, bins, *, range=None, weight=None, density=False):
    """``histogramdd`` of points (the last axis holds their coordinates): the edges of each
    coordinate as ``histogram`` makes them, and the counts (or summed weights) of the points
    inside every edge range, over the grid of bins; ``density`` divides by the total and each
    cell's volume."""
    x = cx.tensor(x, cx.dtype(x))
    shape, dt = cx.shape(x), cx.dtype(x)
    dims = shape[-1] if shape and isinstance(shape[-1], int) else None
    if dims is None or len(bins) != dims:
        raise NotMapped("histogramdd with a symbolic coordinate count")
    points = _histogram_input(cx, x, dims, max(bins) + 1)
    all_edges, position, inside = [], None, None
    for d, n in enumerate(bins):
        column = cx.emit("Gather", points, cx.const(np.asarray(d, np.int64)), axis=1)
        edges = _histogram_edges(cx, column, n, None if range is None else range[2 * d:2 * d + 2], dt)
        pos, ok = _histogram_bins(cx, column, edges, n)
        all_edges.append(edges)
        stride = cx.const(np.asarray(math.prod(bins[d + 1:]), np.int64))
        offset = cx.emit("Mul", pos, stride)
        position = offset if position is None else cx.emit("Add", position, offset)
        inside = ok if inside is None else cx.emit("And", inside, ok)
    total = math.prod(bins)
    if "bin_edges" in str(cx.fx.target):
        return _outputs(cx, *all_edges)
    hist = _histogram_counts(cx, position, inside, weight, total, dt)
    if density:
        volume = None
        for d, (edges, n) in enumerate(zip(all_edges, bins, strict=True)):
            view = np.where(np.arange(len(bins)) == d, n, 1).astype(np.int64)
            width = cx.emit("Reshape", _widths(cx, edges, n), cx.const(view))
            volume = width if volume is None else cx.emit("Mul", volume, width)
        hist = cx.emit("Reshape", hist, cx.const(np.asarray(bins, np.int64)))
        hist = cx.emit("Div", hist, cx.emit("Mul", cx.emit("ReduceSum", hist, keepdims=0), volume))
    return cx.emit_typed("Reshape", hist, cx.const(np.asarray(bins, np.int64)))


def _histogram_input(cx, x: Value, columns: int, edges: int) -> Value:
    """``x`` as rows of ``columns`` coordinates, refused where the comparisons would not fit."""
    dt, shape = cx.dtype(x), cx.shape(x)
    if not is_floating(dt) or not all(isinstance(d, int) for d in shape) or math.prod(shape) == 0 or (
            math.prod(shape) * edges > _HISTC_LIMIT):  # fmt: skip
        raise NotMapped("histogram of a non-float, empty, symbolic or very large input")
    return cx.emit("Reshape", x, cx.const(np.asarray([-1, columns] if columns > 1 else [-1], np.int64)))


def _histogram_edges(cx, flat: Value, bins: int, bounds, dt: DataType) -> Value:
    """``torch.linspace`` of the range (given, or the data's widened by 0.5 each way when it is
    one value) in ``bins + 1`` steps: start + step·i for the first half, end - step·(steps-1-i)
    for the rest."""
    np_dt = to_numpy(dt)
    if bounds is not None:
        lo, hi = (cx.const(np.asarray(v, np.float64)) for v in bounds)
    else:
        lo = cx.emit("Cast", cx.emit("ReduceMin", flat, keepdims=0), to=int(DataType.DOUBLE))
        hi = cx.emit("Cast", cx.emit("ReduceMax", flat, keepdims=0), to=int(DataType.DOUBLE))
    same = cx.emit("Equal", lo, hi)
    half = cx.const(np.asarray(0.5, np.float64))
    lo = cx.emit("Cast", cx.emit("Where", same, cx.emit("Sub", lo, half), lo), to=int(dt))
    hi = cx.emit("Cast", cx.emit("Where", same, cx.emit("Add", hi, half), hi), to=int(dt))
    steps = bins + 1
    step = cx.emit("Div", cx.emit("Sub", hi, lo), cx.const(np.asarray(bins, np_dt)))
    i = np.arange(steps)
    first = cx.emit("Add", lo, cx.emit("Mul", step, cx.const(i.astype(np_dt))))
    second = cx.emit("Sub", hi, cx.emit("Mul", step, cx.const((steps - 1 - i).astype(np_dt))))
    return cx.emit("Where", cx.const(i < steps // 2), first, second)


def _histogram_bins(cx, flat: Value, edges: Value, bins: int) -> tuple[Value, Value]:
    """Each element's bin (the last edge at or below it, the right edge in the last bin) and
    whether it lies within the edges at all (NaN does not)."""
    zero, one = cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([1], np.int64))
    lo = cx.emit("Gather", edges, cx.const(np.asarray(0, np.int64)), axis=0)
    hi = cx.emit("Gather", edges, cx.const(np.asarray(bins, np.int64)), axis=0)
    inside = cx.emit("And", cx.emit("GreaterOrEqual", flat, lo), cx.emit("LessOrEqual", flat, hi))
    at_or_below = cx.emit("LessOrEqual", cx.emit("Unsqueeze", edges, zero), cx.emit("Unsqueeze", flat, one))
    position = cx.emit("ReduceSum", cx.cast(at_or_below, DataType.INT64), one, keepdims=0)
    position = cx.emit("Min", cx.emit("Sub", position, cx.const(np.asarray(1, np.int64))),
                       cx.const(np.asarray(bins - 1, np.int64)))  # fmt: skip
    return cx.emit("Max", position, cx.const(np.asarray(0, np.int64))), inside


def _histogram_counts(cx, position: Value, inside: Value, weight, bins: int, dt: DataType) -> Value:
    """Ones (or the weights) summed per bin; elements outside go to a spare bin, dropped."""
    np_dt = to_numpy(dt)
    position = cx.emit("Where", inside, position, cx.const(np.asarray(bins, np.int64)))
    amount = cx.emit("Expand", cx.const(np.asarray(1, np_dt)), cx.emit("Shape", position))
    if weight is not None:
        amount = _flat(cx, cx.tensor(weight, dt))
    where = cx.emit("Unsqueeze", position, cx.const(np.asarray([1], np.int64)))
    hist = cx.emit("ScatterND", cx.const(np.zeros(bins + 1, np_dt)), where, amount, reduction="add")
    return cx.emit("Slice", hist, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([bins], np.int64)))


def _widths(cx, edges: Value, bins: int) -> Value:
    return cx.emit("Sub", cx.emit("Slice", edges, cx.const(np.asarray([1], np.int64)),
                                  cx.const(np.asarray([bins + 1], np.int64))),
                   cx.emit("Slice", edges, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([bins], np.int64))))


@aten("polygamma.default")
def _polygamma(cx, n, x):
    if not isinstance(n, int) or n < 0:
        raise NotMapped(f"polygamma of order {n!r}")
    if n == 0:
        return _special(_torch_digamma)(cx, x)
    if n == 1:
        return _special(special.trigamma)(cx, x)
    return _special(lambda e, v: special.polygamma(e, n, v))(cx, x)


@aten("special_zeta.default")
def _zeta(cx, x, q):
    dt = _promoted(cx, x, q)
    if not is_floating(dt):
        raise NotMapped(f"zeta of {dt.name}")
    return cx.emit_typed("Identity", special.zeta(cx, cx.tensor(x, dt), cx.tensor(q, dt)))


def _polynomial(name: str):
    def convert(cx, x, n):
        dt = cx.out_dtype
        value = polynomials.orthogonal_polynomial(cx, name, cx.tensor(x, dt), cx.tensor(n, dt))
        return cx.emit_typed("Identity", value)

    return convert


for _name in polynomials.FAMILIES:
    aten(f"special_{_name}.default", f"special_{_name}.x_scalar", f"special_{_name}.n_scalar")(_polynomial(_name))


@aten("igamma.default", "igammac.default")
def _igamma(cx, a, x):
    dt = _promoted(cx, a, x)
    if not is_floating(dt):
        raise NotMapped(f"the incomplete gamma function of {dt.name}")
    upper = "igammac" in str(cx.fx.target)
    p = incomplete.regularized_gamma(cx, cx.tensor(a, dt), cx.tensor(x, dt), upper=upper, framework="torch")
    return cx.emit_typed("Identity", p)


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


aten("log1p.default")(_special(special.log1p))
aten("expm1.default")(_special(special.expm1))


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


@aten("_trilinear.default")
def _trilinear(cx, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """The product of three tensors, each unsqueezed at its ``expand`` dims, summed over ``sumdim``
    (what ``bilinear`` decomposes into)."""
    parts = []
    for t, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        t = cx.tensor(t, cx.dtype(t))
        parts.append(cx.emit("Unsqueeze", t, cx.const(np.asarray(sorted(expand), np.int64))) if expand else t)
    product = cx.emit("Mul", cx.emit("Mul", parts[0], parts[1]), parts[2])
    if not sumdim:
        return cx.emit_typed("Identity", product)
    return cx.emit_typed("ReduceSum", product, cx.const(np.asarray(sorted(sumdim), np.int64)), keepdims=0)


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


# -- binary --------------------------------------------------------------------------------------


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
    from . import to_dtype

    return to_dtype(dtype)


def _torch_dtype(dt: DataType):
    import torch

    from . import to_dtype

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


aten("add.Tensor", "add.Scalar")(_binary("Add", "Or"))
aten("mul.Tensor", "mul.Scalar")(_binary("Mul", "And"))
aten("maximum.default")(_binary("Max", "Or"))
aten("minimum.default")(_binary("Min", "And"))
aten("bitwise_and.Tensor", "bitwise_and.Scalar")(_binary("BitwiseAnd", "And"))
aten("bitwise_or.Tensor", "bitwise_or.Scalar")(_binary("BitwiseOr", "Or"))
aten("bitwise_xor.Tensor", "bitwise_xor.Scalar")(_binary("BitwiseXor", "Xor"))


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


@aten("where.self")
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


# -- reductions ----------------------------------------------------------------------------------


def _axes(cx, x, dims) -> list[int] | None:
    rank = cx.rank(x)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return None
    dims = [dims] if isinstance(dims, int) else dims
    return sorted(_axis(d, rank) for d in dims) if rank else None


def _reduce(cx, onnx_op: str, x, dims, keepdim: bool, dtype=None) -> Value:
    """``onnx_op`` over ``dims``; with ``dtype`` it computes in that type, untyped for the caller to cast."""
    x = cx.tensor(x, cx.out_dtype if dtype is None else dtype)
    axes = _axes(cx, x, dims)
    emit = cx.emit if dtype is not None else cx.emit_typed
    if cx.rank(x) == 0:
        return emit("Identity", x)
    inputs = [x] if axes is None else [x, cx.const(np.asarray(axes, np.int64))]
    return emit(onnx_op, *inputs, keepdims=int(bool(keepdim)))


@aten("sum.dim_IntList", "sum.default")
def _sum(cx, x, dims=None, keepdim=False, *, dtype=None):
    return _reduce(cx, "ReduceSum", x, dims, keepdim)


@aten("mean.dim", "mean.default")
def _mean(cx, x, dims=None, keepdim=False, *, dtype=None):
    return _reduce(cx, "ReduceMean", x, dims, keepdim)


@aten("prod.dim_int", "prod.default")
def _prod(cx, x, dim=None, keepdim=False, *, dtype=None):
    return _reduce(cx, "ReduceProd", x, dim, keepdim)


@aten("amax.default", "max.default")
def _amax(cx, x, dims=None, keepdim=False):
    return _reduce_bool_aware(cx, "ReduceMax", x, dims, keepdim)


@aten("amin.default", "min.default")
def _amin(cx, x, dims=None, keepdim=False):
    return _reduce_bool_aware(cx, "ReduceMin", x, dims, keepdim)


def _reduce_bool_aware(cx, onnx_op, x, dims, keepdim):
    if cx.out_dtype == DataType.BOOL:
        y = _reduce(cx, onnx_op, cx.cast(x, DataType.INT32), dims, keepdim, dtype=DataType.INT32)
        return cx.emit_typed("Cast", y, to=int(DataType.BOOL))
    return _reduce(cx, onnx_op, x, dims, keepdim)


@aten("any.dim", "any.dims", "any.default", "all.dim", "all.dims", "all.default")
def _any_all(cx, x, dims=None, keepdim=False):
    op = "ReduceMax" if "any" in str(cx.fx.target) else "ReduceMin"
    flags = cx.cast(_as_bool(cx, x), DataType.INT32)
    y = _reduce(cx, op, flags, dims, keepdim, dtype=DataType.INT32)
    return cx.emit_typed("Cast", y, to=int(DataType.BOOL))


@aten("var.correction", "var.dim")
def _var(cx, x, dims=None, *, correction=None, keepdim=False, unbiased=None):
    return _variance(cx, x, dims, correction, keepdim)


def _variance(cx, x, dims, correction, keepdim, out=True):
    x = cx.tensor(x)
    axes = _axes(cx, x, dims)
    axes_v = [] if axes is None else [cx.const(np.asarray(axes, np.int64))]
    mean = cx.emit("ReduceMean", x, *axes_v, keepdims=1)
    d = cx.emit("Sub", x, mean)
    ss = cx.emit("ReduceSum", cx.emit("Mul", d, d), *axes_v, keepdims=int(bool(keepdim)))
    n = cx.emit("Div", cx.cast(cx.emit("Size", x), cx.out_dtype), cx.cast(cx.emit("Size", mean), cx.out_dtype))
    c = 1 if correction is None else correction
    denom = cx.emit("Max", cx.emit("Sub", n, cx.tensor(c)), cx.tensor(0))
    return (cx.emit_typed if out else cx.emit)("Div", ss, denom)


@aten("argmax.default", "argmin.default")
def _argmax(cx, x, dim=None, keepdim=False):
    op = "ArgMax" if "argmax" in str(cx.fx.target) else "ArgMin"
    x = _orderable(cx, x)
    if dim is None:
        flat = cx.emit("Reshape", x, cx.const(np.asarray([-1], np.int64)))
        y = cx.emit(op, flat, axis=0, keepdims=0)
        if keepdim:
            return cx.emit_typed("Reshape", y, cx.const(np.ones(cx.rank(x), np.int64)))
        return cx.emit_typed("Identity", y)
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", cx.const(np.asarray(0)))
    return cx.emit_typed(op, x, axis=_axis(dim, cx.rank(x)), keepdims=int(bool(keepdim)))


def _orderable(cx, x):
    return cx.cast(x, DataType.INT32) if cx.dtype(x) == DataType.BOOL else x


@aten("max.dim", "min.dim")
def _max_dim(cx, x, dim, keepdim=False):
    is_max = str(cx.fx.target).startswith("aten.max")
    x = _orderable(cx, x)
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, cx.rank(x))
    n = cx.node_typed("TopK", [x, cx.const(np.asarray([1], np.int64))], {"axis": axis, "largest": int(is_max)},
                      outputs=2)  # fmt: skip
    values, indices = n.outputs
    values.type = indices.type = None
    if not keepdim:
        ax = cx.const(np.asarray([axis], np.int64))
        values, indices = cx.emit("Squeeze", values, ax), cx.emit("Squeeze", indices, ax)
    if cx.out_dtype != cx.dtype(x):
        values = cx.cast(values, cx.out_dtype)
    return values, indices


@aten("cumsum.default")
def _cumsum(cx, x, dim, *, dtype=None):
    x = cx.tensor(x)
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("CumSum", x, cx.const(np.asarray(_axis(dim, cx.rank(x)), np.int64)))


@aten("sort.default", "sort.stable")
def _sort(cx, x, *args, stable=None, dim=-1, descending=False):
    if args:  # sort.default(x, dim, descending)
        dim = args[0]
        if len(args) > 1:
            descending = args[1]
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    if not is_floating(cx.dtype(x)) and cx.dtype(x) != DataType.INT64:
        raise NotMapped(f"sort of {cx.dtype(x).name}")
    axis = _axis(dim, cx.rank(x))
    k = _dim_size(cx, x, axis)
    n = cx.node_typed("TopK", [x, k], {"axis": axis, "largest": int(bool(descending)), "sorted": 1}, outputs=2)
    return tuple(n.outputs)


@aten("topk.default")
def _topk(cx, x, k, dim=-1, largest=True, sorted=True):
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, cx.rank(x))
    n = cx.node_typed("TopK", [x, cx.int64s([k])], {"axis": axis, "largest": int(bool(largest)), "sorted": 1},
                      outputs=2)  # fmt: skip
    return tuple(n.outputs)


@aten("kthvalue.default")
def _kthvalue(cx, x, k, dim=-1, keepdim=False):
    """The k-th smallest along ``dim``: the last of the k smallest."""
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, cx.rank(x))
    smallest = cx.node("TopK", [x, cx.int64s([k])], {"axis": axis, "largest": 0, "sorted": 1}, outputs=2)
    last = cx.int64s([k - 1]) if isinstance(k, int) else cx.emit("Sub", cx.int64s([k]), cx.int64s([1]))
    outs = []
    for v in smallest.outputs:
        picked = cx.emit("Gather", v, last, axis=axis)
        outs.append(picked if keepdim else cx.emit("Squeeze", picked, cx.const(np.asarray([axis], np.int64))))
    return _outputs(cx, *outs)


def _count_below(cx, boundaries: Value, x: Value, right: bool, out_int32: bool) -> Value:
    """For each element of ``x``: how many of ``boundaries`` (sorted along their last axis) lie
    below it (``right``: at or below it), by comparing it with every boundary.  The comparison is
    torch's binary search's, ``not (b >= x)``, so a NaN ``x`` counts every boundary as below."""
    dt = _promoted(cx, boundaries, x)
    b = cx.cast(boundaries, dt)  # [n] broadcasts as it is; [..., n] becomes [..., 1, n]
    if cx.rank(boundaries) > 1:
        b = cx.emit("Unsqueeze", b, cx.const(np.asarray([-2], np.int64)))
    v = cx.emit("Unsqueeze", cx.cast(x, dt), cx.const(np.asarray([-1], np.int64)))  # [..., k, 1]
    below = cx.emit("Not", cx.emit("Greater" if right else "GreaterOrEqual", b, v))
    count = cx.emit("ReduceSum", cx.emit("Cast", below, to=int(DataType.INT64)), cx.const(np.asarray([-1], np.int64)),
                    keepdims=0)  # fmt: skip
    return cx.emit_typed("Cast", count, to=int(DataType.INT32 if out_int32 else DataType.INT64))


@aten("bucketize.Tensor")
def _bucketize(cx, x, boundaries, *, out_int32=False, right=False):
    if cx.rank(boundaries) != 1:
        raise NotMapped("bucketize with boundaries of rank other than 1")
    return _count_below(cx, boundaries, x, right, out_int32)


@aten("searchsorted.Tensor")
def _searchsorted(cx, sorted_sequence, x, *, out_int32=False, right=False, side=None, sorter=None):
    right = side == "right" if side is not None else right
    rank = cx.rank(sorted_sequence)
    if rank != 1 and rank != cx.rank(x):
        raise NotMapped("searchsorted with a sequence of another rank than the values")
    if sorter is not None:
        t = sorted_sequence.type
        sorted_sequence = cx.emit("GatherElements", sorted_sequence, sorter, axis=rank - 1)
        sorted_sequence.type = t
    return _count_below(cx, sorted_sequence, x, right, out_int32)


# -- shapes and data movement ------------------------------------------------------------------


@aten("view.default", "_unsafe_view.default", "reshape.default", "view_copy.default")
def _view(cx, x, shape):
    if any(isinstance(d, int) and d == 0 for d in shape):
        return cx.emit_typed("Reshape", x, cx.int64s(shape), allowzero=1)
    return cx.emit_typed("Reshape", x, cx.int64s(_static_sizes(cx, x, shape)))


def _static_sizes(cx, x, sizes):
    """Symbolic sizes of a reshape target as Reshape's 0 (same as the input's dim) or a single -1,
    so the target is a constant whenever that is enough: backends then see a static reshape."""
    out = cx.out_shape
    sizes = list(sizes)
    symbolic = [i for i, s in enumerate(sizes) if not isinstance(s, int)]
    if not symbolic or len(out) != len(sizes):
        return sizes
    mine = cx.shape(x) if x.type is not None and x.type.shape is not None else ()
    for i in symbolic:
        if i < len(mine) and isinstance(out[i], str) and mine[i] == out[i]:
            sizes[i] = 0
    left = [i for i, s in enumerate(sizes) if not isinstance(s, int)]
    if len(left) == 1 and -1 not in sizes:
        sizes[left[0]] = -1
    return sizes


@aten("permute.default", "permute_copy.default")
def _permute(cx, x, dims):
    rank = cx.rank(x)
    if rank == 0:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("Transpose", x, perm=[_axis(d, rank) for d in dims])


@aten("t.default")
def _t(cx, x):
    return cx.emit_typed("Transpose", x, perm=[1, 0]) if cx.rank(x) == 2 else cx.emit_typed("Identity", x)


@aten("transpose.int")
def _transpose(cx, x, a, b):
    rank = cx.rank(x)
    if rank == 0:
        return cx.emit_typed("Identity", x)
    perm = list(range(rank))
    a, b = _axis(a, rank), _axis(b, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return cx.emit_typed("Transpose", x, perm=perm)


@aten("unsqueeze.default", "unsqueeze_copy.default")
def _unsqueeze(cx, x, dim):
    return cx.emit_typed("Unsqueeze", x, cx.const(np.asarray([_axis(dim, cx.rank(x) + 1)], np.int64)))


@aten("squeeze.dim", "squeeze.dims", "squeeze.default", "squeeze_copy.dims", "squeeze_copy.dim")
def _squeeze(cx, x, dims=None):
    shape = cx.shape(x)
    rank = len(shape)
    if dims is None:
        dims = list(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    axes = sorted({_axis(d, rank) for d in dims if rank and shape[_axis(d, rank)] == 1})
    if not axes:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("Squeeze", x, cx.const(np.asarray(axes, np.int64)))


@aten("expand.default", "expand_copy.default")
def _expand(cx, x, sizes, *, implicit=False):
    sizes = [1 if isinstance(s, int) and s == -1 else s for s in sizes]
    mine, out = cx.shape(x), cx.out_shape
    for i, s in enumerate(sizes):  # a symbolic size the input already has: Expand's 1 keeps it
        j = i - (len(sizes) - len(mine))
        if not isinstance(s, int) and j >= 0 and isinstance(out[i], str) and mine[j] == out[i]:
            sizes[i] = 1
    return cx.emit_typed("Expand", x, cx.int64s(sizes))


@aten("cat.default")
def _cat(cx, tensors, dim=0):
    rank = cx.out_rank
    keep = [t for t in tensors if not (cx.rank(t) == 1 and cx.shape(t)[0] == 0 and rank > 1)]
    if not keep:
        return cx.emit_typed("Identity", tensors[0])
    return cx.emit_typed("Concat", *(cx.tensor(t) for t in keep), axis=_axis(dim, rank))


@aten("stack.default")
def _stack(cx, tensors, dim=0):
    axis = _axis(dim, cx.out_rank)
    ax = cx.const(np.asarray([axis], np.int64))
    return cx.emit_typed("Concat", *(cx.emit("Unsqueeze", cx.tensor(t), ax) for t in tensors), axis=axis)


@aten("split_with_sizes.default", "split_with_sizes_copy.default")
def _split_with_sizes(cx, x, sizes, dim=0):
    axis = _axis(dim, cx.rank(x))
    n = cx.node_typed("Split", [x, cx.int64s(sizes)], {"axis": axis}, outputs=len(sizes))
    return list(n.outputs)


@aten("split.Tensor", "split_copy.Tensor")
def _split(cx, x, size, dim=0):
    axis = _axis(dim, cx.rank(x))
    total = cx.shape(x)[axis]
    if not isinstance(total, int) or not isinstance(size, int):
        raise NotMapped("split of a symbolic size")
    sizes = [min(size, total - i) for i in range(0, total, size)] or [0]
    return _split_with_sizes(cx, x, sizes, dim)


@aten("unbind.int", "unbind_copy.int")
def _unbind(cx, x, dim=0):
    axis = _axis(dim, cx.rank(x))
    n = cx.shape(x)[axis]
    if not isinstance(n, int):
        raise NotMapped("unbind of a symbolic size")
    parts = cx.node("Split", [x, cx.const(np.ones(n, np.int64))], {"axis": axis}, outputs=n).outputs
    ax = cx.const(np.asarray([axis], np.int64))
    return [cx.emit("Squeeze", p, ax) for p in parts]


@aten("slice.Tensor", "slice_copy.Tensor")
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    axis = _axis(dim, cx.rank(x))
    start = 0 if start is None else start
    end = INT64_MAX if end is None else end
    if isinstance(start, int) and isinstance(end, int) and isinstance(cx.shape(x)[axis], int):
        size = cx.shape(x)[axis]
        if start == 0 and end >= size and step == 1:
            return cx.emit_typed("Identity", x)
    return cx.emit_typed("Slice", x, cx.int64s([start]), cx.int64s([end]),
                         cx.const(np.asarray([axis], np.int64)), cx.int64s([step]))  # fmt: skip


@aten("select.int", "select_copy.int")
def _select(cx, x, dim, index):
    axis = _axis(dim, cx.rank(x))
    idx = cx.const(np.asarray(index, np.int64)) if isinstance(index, int) else cx.cast(index, DataType.INT64)
    return cx.emit_typed("Gather", x, idx, axis=axis)


@aten("narrow.default")
def _narrow(cx, x, dim, start, length):
    end = start + length if isinstance(start, int) and isinstance(length, int) else None
    if end is None:
        raise NotMapped("narrow with a symbolic start")
    return _slice(cx, x, dim, start, end)


@aten("index.Tensor")
def _index(cx, x, indices):
    rank = cx.rank(x)
    positions = [i for i, t in enumerate(indices) if t is not None]
    for i in positions:
        if cx.dtype(indices[i]) == DataType.BOOL:
            raise NotMapped("indexing with a boolean mask (data-dependent shape)")
    if len(positions) == 1:
        p = positions[0]
        return cx.emit_typed("Gather", x, cx.cast(indices[p], DataType.INT64), axis=p)
    # several index tensors: move the indexed dims to the front, GatherND, move the result back
    idx = [cx.cast(indices[p], DataType.INT64) for p in positions]
    target = cx.emit("Shape", cx.emit("Add", *idx[:2])) if len(idx) == 2 else None
    if target is None:
        acc = idx[0]
        for t in idx[1:]:
            acc = cx.emit("Add", acc, t)
        target = cx.emit("Shape", acc)
    minus1 = cx.const(np.asarray([-1], np.int64))
    stacked = cx.emit("Concat", *(cx.emit("Unsqueeze", cx.emit("Expand", t, target), minus1) for t in idx), axis=-1)
    rest = [d for d in range(rank) if d not in positions]
    xt = x if positions == list(range(len(positions))) else cx.emit("Transpose", x, perm=positions + rest)
    y = cx.emit("GatherND", xt, stacked)
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    first = positions[0]
    if adjacent and first > 0:
        bl = cx.out_rank - len(rest)  # rank of the broadcast index shape
        perm = list(range(bl, bl + first)) + list(range(bl)) + list(range(bl + first, cx.out_rank))
        y = cx.emit("Transpose", y, perm=perm)
    return cx.emit_typed("Identity", y)


@aten("index_put.default")
def _index_put(cx, x, indices, values, accumulate=False):
    positions = [i for i, t in enumerate(indices) if t is not None]
    if positions != list(range(len(positions))):
        raise NotMapped("index_put with a leading None index")
    idx = []
    shape = cx.emit("Shape", x)
    for p in positions:
        t = cx.cast(indices[p], DataType.INT64)
        if cx.dtype(indices[p]) == DataType.BOOL:
            raise NotMapped("index_put with a boolean mask")
        size = cx.emit("Gather", shape, cx.const(np.asarray(p, np.int64)))
        t = cx.emit("Where", cx.emit("Less", t, cx.const(np.asarray(0, np.int64))), cx.emit("Add", t, size), t)
        idx.append(t)
    acc = idx[0]
    for t in idx[1:]:
        acc = cx.emit("Add", acc, t)
    bshape = cx.emit("Shape", acc)
    minus1 = cx.const(np.asarray([-1], np.int64))
    stacked = cx.emit("Concat", *(cx.emit("Unsqueeze", cx.emit("Expand", t, bshape), minus1) for t in idx), axis=-1)
    start, end = cx.const(np.asarray([len(idx)], np.int64)), cx.const(np.asarray([INT64_MAX], np.int64))
    tail = cx.emit("Slice", shape, start, end)
    upd_shape = cx.emit("Concat", bshape, tail, axis=0)
    upd = cx.emit("Expand", cx.tensor(values), upd_shape)
    return cx.emit_typed("ScatterND", cx.tensor(x), stacked, upd, reduction="add" if accumulate else "none")


@aten("index_select.default")
def _index_select(cx, x, dim, index):
    if cx.rank(x) == 0:
        return cx.emit_typed("Reshape", x, cx.const(np.asarray([], np.int64)))
    return cx.emit_typed("Gather", x, cx.cast(index, DataType.INT64), axis=_axis(dim, cx.rank(x)))


@aten("gather.default")
def _gather(cx, x, dim, index, sparse_grad=False):
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("GatherElements", x, cx.cast(index, DataType.INT64), axis=_axis(dim, cx.rank(x)))


@aten("scatter.src", "scatter.value", "scatter_add.default", "scatter.reduce", "scatter.value_reduce")
def _scatter(cx, x, dim, index, src, reduce=None):
    target = str(cx.fx.target)
    reduction = "add" if "scatter_add" in target else {None: "none", "add": "add", "multiply": "mul"}[reduce]
    if cx.rank(x) == 0:
        raise NotMapped("scatter into a 0-d tensor")
    index = cx.cast(index, DataType.INT64)
    if not isinstance(src, Value):
        src = cx.emit("Expand", cx.tensor(src), cx.emit("Shape", index))
    else:
        src = _crop_to(cx, cx.tensor(src), index)
    return cx.emit_typed("ScatterElements", cx.tensor(x), index, src, axis=_axis(dim, cx.rank(x)),
                         reduction=reduction)  # fmt: skip


def _crop_to(cx, src, index):
    """torch reads only the leading index.shape block of ``src``; ONNX wants them the same shape."""
    if cx.shape(src) == cx.shape(index):
        return src
    rank = cx.rank(index)
    return cx.emit("Slice", src, cx.const(np.zeros(rank, np.int64)), cx.emit("Shape", index),
                   cx.const(np.arange(rank, dtype=np.int64)))  # fmt: skip


@aten("scatter_reduce.two")
def _scatter_reduce(cx, x, dim, index, src, reduce, *, include_self=True):
    return cx.emit_typed("Identity", _scatter_reduced(cx, x, dim, index, src, reduce, include_self))


def _scatter_reduced(cx, x, dim, index, src, reduce, include_self) -> Value:
    """ScatterElements with a reduction; without ``include_self`` the scattered-to positions are
    first reset to the reduction's identity; ``mean`` divides a scattered sum by its count."""
    x = cx.tensor(x)
    axis = _axis(dim, cx.rank(x))
    index = cx.cast(index, DataType.INT64)
    src = _crop_to(cx, cx.tensor(src), index)
    dtype = np.dtype(to_numpy(cx.dtype(x)))
    floating = dtype.kind == "f"
    identity = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf if floating else np.iinfo(dtype).min,
                "amin": np.inf if floating else np.iinfo(dtype).max}.get(reduce)  # fmt: skip
    if identity is None:
        raise NotMapped(f"scatter_reduce reduce={reduce!r}")
    reduction = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}[reduce]
    shape_of_index = cx.emit("Shape", index)
    base = x
    if not include_self:
        fill = cx.emit("Expand", cx.tensor(identity), shape_of_index)
        base = cx.emit("ScatterElements", x, index, fill, axis=axis)
    y = cx.emit("ScatterElements", base, index, src, axis=axis, reduction=reduction)
    if reduce != "mean":
        return y
    ones = cx.emit("Expand", cx.tensor(1), shape_of_index)
    start = cx.emit("Expand", cx.tensor(1 if include_self else 0), cx.emit("Shape", x))
    count = cx.emit("ScatterElements", start, index, ones, axis=axis, reduction="add")
    safe = cx.emit("Max", count, cx.tensor(1))
    mean = cx.emit("Div", y, safe)
    if not floating:  # torch floors an integer mean; ONNX's Div truncates towards zero
        inexact = cx.emit("Not", cx.emit("Equal", cx.emit("Mod", y, safe), cx.tensor(0)))
        below = cx.emit("And", inexact, cx.emit("Less", y, cx.tensor(0)))
        mean = cx.emit("Sub", mean, cx.emit("Cast", below, to=int(cx.dtype(x))))
    return mean


@aten("index_reduce.default")
def _index_reduce(cx, x, dim, index, source, reduce, *, include_self=True):
    """scatter_reduce with the 1-D ``index`` spread over ``source``'s shape along ``dim``."""
    x, source = cx.tensor(x), cx.tensor(source)
    rank = cx.rank(x)
    if rank == 0:  # one element: as a 1-element vector
        one = cx.const(np.asarray([1], np.int64))
        x, source = cx.emit("Reshape", x, one), cx.emit("Reshape", source, one)
        x.type = source.type = TensorType(cx.out_dtype, (1,))
        dim, rank = 0, 1
    axis = _axis(dim, rank)
    along = [1] * rank
    along[axis] = -1
    spread = cx.emit("Reshape", cx.cast(index, DataType.INT64), cx.const(np.asarray(along, np.int64)))
    spread = cx.emit("Expand", spread, cx.emit("Shape", source))
    spread.type = TensorType(DataType.INT64, tuple(cx.shape(source)))
    y = _scatter_reduced(cx, x, axis, spread, source, reduce, include_self)
    return cx.emit_typed("Reshape", y, cx.const(np.asarray(cx.out_shape, np.int64)))


@aten("embedding.default")
def _embedding(cx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return cx.emit_typed("Gather", weight, cx.cast(indices, DataType.INT64), axis=0)


@aten("_embedding_bag_forward_only.default", "_embedding_bag.default")
def _embedding_bag(cx, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):  # fmt: skip
    """Bags of embedding rows, summed (mode 0), averaged (1) or maxed (2), empty bags zero.  An
    index's bag is the number of offsets at or before its position, less one; rows at
    ``padding_idx``, and past the last offset when it only closes the last bag, go to a spare bag
    that is dropped.  Rows are accumulated by ScatterND in index order, as ATen adds them."""
    if cx.used_outputs() != {0} or cx.rank(indices) != 1:
        raise NotMapped("embedding_bag's offset2bag, bag_size or max_indices, or 2-D indices")
    dt, i64 = cx.dtype(weight), DataType.INT64
    np_dt = to_numpy(dt)
    idx, offs = cx.cast(indices, i64), cx.cast(offsets, i64)
    first, one = cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([1], np.int64))
    rows = cx.emit("Gather", weight, idx, axis=0)
    if per_sample_weights is not None:
        rows = cx.emit("Mul", rows, cx.emit("Unsqueeze", cx.tensor(per_sample_weights, dt), one))
    n, bags = cx.emit("Shape", idx), cx.emit("Shape", offs)

    def counts(length: Value, where: Value, amount: np.ndarray, size: Value) -> Value:
        start = cx.emit("ConstantOfShape", length, value=np.zeros(1, amount.dtype))
        return cx.emit("ScatterND", start, where, cx.emit("Expand", cx.const(amount), size), reduction="add")

    marks = counts(cx.emit("Add", n, one), cx.emit("Unsqueeze", offs, one), np.asarray(1, np.int64), bags)
    bag = cx.emit("CumSum", cx.emit("Slice", marks, first, n), cx.const(np.asarray(0)))
    bag = cx.emit("Sub", bag, cx.const(np.asarray(1, np.int64)))
    if include_last_offset:
        bags = cx.emit("Sub", bags, one)
    spare = cx.emit("Reshape", bags, cx.const(np.asarray([], np.int64)))
    bag = cx.emit("Min", bag, spare)
    if padding_idx is not None and padding_idx >= 0:
        bag = cx.emit("Where", cx.emit("Equal", idx, cx.const(np.asarray(padding_idx, np.int64))), spare, bag)
    where, slots = cx.emit("Unsqueeze", bag, one), cx.emit("Add", bags, one)
    table = cx.emit("Concat", slots, cx.emit("Shape", weight, start=1), axis=0)
    zero = np.zeros(1, np_dt)
    if mode == 2:
        lowest = np.full(1, -np.inf if is_floating(dt) else np.iinfo(np_dt).min, np_dt)
        top = cx.emit("ScatterND", cx.emit("ConstantOfShape", table, value=lowest), where, rows, reduction="max")
        filled = cx.emit("Greater", counts(slots, where, np.asarray(1, np.int64), n), cx.const(np.asarray(0, np.int64)))
        out = cx.emit("Where", cx.emit("Unsqueeze", filled, one), top, cx.const(zero.reshape(())))
    else:
        out = cx.emit("ScatterND", cx.emit("ConstantOfShape", table, value=zero), where, rows, reduction="add")
        if mode == 1:
            size = cx.emit("Max", counts(slots, where, np.asarray(1, np_dt), n), cx.const(np.asarray(1, np_dt)))
            out = cx.emit("Div", out, cx.emit("Unsqueeze", size, one))
    result = cx.emit("Slice", out, first, bags)  # the spare bag dropped
    return cx.emit_typed("Identity", result), None, None, None


def _linear_cross_entropy(cx, x, linear_weight, target, linear_bias, weight, reduction: str, ignore_index) -> Value:
    """Cross-entropy of a linear layer's logits, which torch computes chunk by chunk to save
    memory: the logits whole, log-softmax, the target's log-probability weighted per class, and
    targets at ``ignore_index`` left out of the loss and of the mean's weight."""
    if cx.rank(x) != 2 or cx.rank(target) != 1:
        raise NotMapped("linear cross-entropy of inputs that are not [N, features]")
    dt = cx.dtype(x)
    logits = cx.emit("MatMul", x, cx.emit("Transpose", linear_weight, perm=[1, 0]))
    if linear_bias is not None:
        logits = cx.emit("Add", logits, linear_bias)
    target = cx.cast(target, DataType.INT64)
    kept = cx.emit("Not", cx.emit("Equal", target, cx.const(np.asarray(ignore_index, np.int64))))
    safe = cx.emit("Where", kept, target, cx.const(np.asarray(0, np.int64)))
    column = cx.emit("Unsqueeze", safe, cx.const(np.asarray([1], np.int64)))
    picked = cx.emit("GatherElements", cx.emit("LogSoftmax", logits, axis=-1), column, axis=1)
    nll = cx.emit("Neg", cx.emit("Squeeze", picked, cx.const(np.asarray([1], np.int64))))
    w = cx.emit("Cast", kept, to=int(dt))
    if weight is not None:
        w = cx.emit("Mul", w, cx.emit("Gather", weight, safe, axis=0))
    loss = cx.emit("Where", kept, cx.emit("Mul", nll, w), cx.const(np.asarray(0, to_numpy(dt))))
    if reduction == "none":
        return loss
    total = cx.emit("ReduceSum", loss, keepdims=0)
    return total if reduction == "sum" else cx.emit("Div", total, cx.emit("ReduceSum", w, keepdims=0))


@aten("torch_nn._linear_cross_entropy_batch_chunked.default")
def _linear_cross_entropy_chunked(cx, x, linear_weight, target, linear_bias=None, weight=None, reduction="mean",
                                  ignore_index=-100, label_smoothing=0.0, *rest):  # fmt: skip
    if cx.used_outputs() != {0} or label_smoothing:
        raise NotMapped("linear cross-entropy with label smoothing or gradients")
    loss = _linear_cross_entropy(cx, x, linear_weight, target, linear_bias, weight, reduction, ignore_index)
    return cx.emit_typed("Identity", loss), None, None, None


@aten("torch_nn._linear_cross_entropy_batch_chunked_no_reduction.default")
def _linear_cross_entropy_each(cx, x, linear_weight, target, linear_bias=None, weight=None, ignore_index=-100,
                               *rest):  # fmt: skip
    loss = _linear_cross_entropy(cx, x, linear_weight, target, linear_bias, weight, "none", ignore_index)
    return cx.emit_typed("Identity", loss)


@aten("_to_copy.default", "clone.default", "alias.default", "lift_fresh_copy.default", "detach.default",
      "contiguous.default", "_to_dim_order_copy.default", "alias_copy.default")  # fmt: skip
def _to_copy(cx, x, *args, dtype=None, **kwargs):
    if cx.val is not None and hasattr(cx.val, "dtype") and cx.out_dtype != cx.dtype(x):
        return cx.emit_typed("Cast", x, to=int(cx.out_dtype))
    return cx.emit_typed("Identity", x)


@aten("copy.default")
def _copy(cx, dst, src, non_blocking=False):
    return cx.emit_typed("Expand", cx.tensor(src), cx.emit("Shape", dst))


@aten("constant_pad_nd.default")
def _pad(cx, x, pad, value=0):
    rank = cx.rank(x)
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
    return cx.emit_typed("Pad", cx.tensor(x), cx.int64s(begins + ends), cx.tensor(value), mode="constant")


@aten("reflection_pad1d.default", "reflection_pad2d.default", "reflection_pad3d.default",
      "replication_pad1d.default", "replication_pad2d.default", "replication_pad3d.default")  # fmt: skip
def _pad_mode(cx, x, pad):
    mode = "reflect" if "reflection" in str(cx.fx.target) else "edge"
    rank = cx.rank(x)
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        axis = rank - 1 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
    return cx.emit_typed("Pad", x, cx.int64s(begins + ends), mode=mode)


@aten("flip.default")
def _flip(cx, x, dims):
    rank = cx.rank(x)
    if rank == 0 or not dims:
        return cx.emit_typed("Identity", x)
    axes = [_axis(d, rank) for d in dims]
    n = len(axes)
    return cx.emit_typed("Slice", x, cx.const(np.full(n, -1, np.int64)), cx.const(np.full(n, -(2**63), np.int64)),
                         cx.const(np.asarray(axes, np.int64)), cx.const(np.full(n, -1, np.int64)))  # fmt: skip


@aten("repeat.default")
def _repeat(cx, x, repeats):
    rank = cx.rank(x)
    extra = len(repeats) - rank
    if extra:
        x = cx.emit("Unsqueeze", x, cx.const(np.arange(extra, dtype=np.int64)))
    return cx.emit_typed("Tile", x, cx.int64s(list(repeats)))


@aten("tril.default", "triu.default")
def _trilu(cx, x, diagonal=0):
    upper = int("triu" in str(cx.fx.target))
    return cx.emit_typed("Trilu", x, cx.const(np.asarray(diagonal, np.int64)), upper=upper)


# -- creation --------------------------------------------------------------------------------------


@aten("full.default", "new_full.default")
def _full(cx, *args, dtype=None, layout=None, device=None, pin_memory=None, **kw):
    size, value = (args[0], args[1]) if len(args) == 2 else (args[1], args[2])
    return cx.emit_typed("Expand", cx.tensor(value), cx.int64s(list(size)))


@aten("full_like.default")
def _full_like(cx, x, value, **kw):
    return cx.emit_typed("Expand", cx.tensor(value), cx.emit("Shape", x))


@aten("zeros_like.default", "ones_like.default", "empty_like.default")
def _zeros_like(cx, x, **kw):
    value = 1 if "ones" in str(cx.fx.target) else 0
    return cx.emit_typed("Expand", cx.tensor(value), cx.emit("Shape", x))


@aten("empty.memory_format", "zeros.default", "ones.default", "new_zeros.default", "new_ones.default",
      "new_empty.default", "empty_strided.default", "new_empty_strided.default")  # fmt: skip
def _empty(cx, *args, **kw):
    size = args[1] if isinstance(args[0], Value) else args[0]
    value = 1 if "ones" in str(cx.fx.target) else 0
    return cx.emit_typed("Expand", cx.tensor(value), cx.int64s(list(size)))


@aten("fill.Scalar", "fill.Tensor")
def _fill(cx, x, value):
    return cx.emit_typed("Expand", cx.tensor(value), cx.emit("Shape", x))


@aten("scalar_tensor.default")
def _scalar_tensor(cx, value, **kw):
    return cx.emit_typed("Identity", cx.tensor(value))


@aten("arange.start_step", "arange.default", "arange.start")
def _arange(cx, *args, dtype=None, layout=None, device=None, pin_memory=None, **kw):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if all(not isinstance(a, Value) for a in (start, end, step)):
        import torch

        from . import tensor_array

        arr = tensor_array(torch.arange(start, end, step, dtype=cx.val.dtype))
        return cx.emit_typed("Identity", cx.const(np.array(arr)))
    dt = cx.out_dtype
    return cx.emit_typed("Range", *(cx.emit("Reshape", cx.tensor(a, dt), cx.const(np.asarray([], np.int64)))
                                    if isinstance(a, Value) else cx.tensor(a, dt) for a in (start, end, step)))


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


# -- neural-network ops --------------------------------------------------------------------------


@aten("convolution.default")
def _convolution(cx, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    nd = cx.rank(x) - 2
    if nd < 1:
        raise NotMapped("convolution of an unbatched input")
    attrs = {"strides": list(stride) * (nd // len(stride)) if len(stride) == 1 else list(stride),
             "pads": list(padding) * (2 if len(padding) == nd else 2 * nd) if len(padding) in (1, nd) else None,
             "dilations": list(dilation) * (nd // len(dilation)) if len(dilation) == 1 else list(dilation),
             "group": int(groups)}  # fmt: skip
    if len(padding) == 1:
        attrs["pads"] = list(padding) * 2 * nd
    inputs = [cx.tensor(x), cx.tensor(w)] + ([cx.tensor(b)] if b is not None else [])
    if transposed:
        op = list(output_padding)
        attrs["output_padding"] = op * (nd // len(op)) if len(op) == 1 else op
        return cx.emit_typed("ConvTranspose", *inputs, **attrs)
    return cx.emit_typed("Conv", *inputs, **attrs)


def _channels_const(cx, x, value: float) -> Value:
    c = cx.shape(x)[1]
    if not isinstance(c, int):
        raise NotMapped("normalization over a symbolic channel count without weights")
    return cx.const(np.full(c, value, to_numpy(cx.dtype(x))))


@aten("_native_batch_norm_legit_no_training.default")
def _batch_norm_eval(cx, x, w, b, mean, var, momentum, eps):
    w = w if w is not None else _channels_const(cx, x, 1.0)
    b = b if b is not None else _channels_const(cx, x, 0.0)
    if cx.rank(x) < 2:
        raise NotMapped("batch norm of rank < 2")
    n = cx.node_typed("BatchNormalization", [x, w, b, mean, var], {"epsilon": float(eps)}, outputs=1)
    empty = cx.const(np.zeros(0, to_numpy(cx.dtype(x))))  # eval mode saves no statistics
    return n.outputs[0], empty, empty


@aten("_native_batch_norm_legit.no_stats", "_native_batch_norm_legit.default",
      "_native_batch_norm_legit_functional.default")  # fmt: skip
def _batch_norm_train(cx, x, w, b, *rest):
    functional = "functional" in str(cx.fx.target)
    if "no_stats" in str(cx.fx.target):
        running_mean = running_var = None
        _, momentum, eps = rest
    else:
        running_mean, running_var, training, momentum, eps = rest
        if not training and running_mean is not None and not functional:
            return _batch_norm_eval(cx, x, w, b, running_mean, running_var, momentum, eps)
    return _batch_norm_batch_stats(cx, x, w, b, running_mean, running_var, momentum, eps, functional)


@aten("_batch_norm_with_update_functional.default")
def _batch_norm_with_update(cx, x, w, b, running_mean, running_var, momentum, eps):
    """Training-mode batch norm that also returns the updated running statistics (and an empty
    reserve, cuDNN's workspace on the CPU)."""
    y, mean, rstd, new_mean, new_var = _batch_norm_batch_stats(cx, x, w, b, running_mean, running_var, momentum,
                                                               eps, functional=True)  # fmt: skip
    return y, mean, rstd, cx.const(np.zeros(0, np.uint8)), new_mean, new_var


def _batch_norm_batch_stats(cx, x, w, b, running_mean, running_var, momentum, eps, functional: bool):
    """Normalized by the batch's own statistics; with ``functional``, the running statistics
    updated as torch does (the variance unbiased)."""
    rank = cx.rank(x)
    axes = cx.const(np.asarray([0, *range(2, rank)], np.int64))
    mean = cx.emit("ReduceMean", x, axes, keepdims=1)
    d = cx.emit("Sub", x, mean)
    var = cx.emit("ReduceMean", cx.emit("Mul", d, d), axes, keepdims=1)
    rstd = cx.emit("Reciprocal", cx.emit("Sqrt", cx.emit("Add", var, cx.tensor(eps, cx.dtype(x)))))
    y = cx.emit("Mul", d, rstd)
    bshape = cx.const(np.asarray([-1] + [1] * (rank - 2), np.int64))
    if w is not None:
        y = cx.emit("Mul", y, cx.emit("Reshape", w, bshape))
    if b is not None:
        y = cx.emit("Add", y, cx.emit("Reshape", b, bshape))
    flat = cx.const(np.asarray([-1], np.int64))
    outs = [cx.emit_typed("Identity", y), cx.emit("Reshape", mean, flat), cx.emit("Reshape", rstd, flat)]
    if functional:
        m = cx.tensor(momentum, cx.dtype(x))
        one_m = cx.tensor(1 - momentum, cx.dtype(x))
        count = cx.emit("Div", cx.cast(cx.emit("Size", x), cx.dtype(x)), cx.cast(cx.emit("Size", mean), cx.dtype(x)))
        unbiased = cx.emit("Mul", cx.emit("Reshape", var, flat),
                           cx.emit("Div", count, cx.emit("Sub", count, cx.tensor(1, cx.dtype(x)))))  # fmt: skip
        outs.append(cx.emit("Add", cx.emit("Mul", running_mean, one_m), cx.emit("Mul", outs[1], m)))
        outs.append(cx.emit("Add", cx.emit("Mul", running_var, one_m), cx.emit("Mul", unbiased, m)))
    return tuple(outs)


@aten("native_layer_norm.default")
def _layer_norm(cx, x, normalized_shape, w, b, eps):
    axis = cx.rank(x) - len(normalized_shape)
    if w is None:
        if not all(isinstance(d, int) for d in normalized_shape):
            raise NotMapped("layer norm without weight over symbolic dims")
        w = cx.const(np.ones(list(normalized_shape), to_numpy(cx.dtype(x))))
    inputs = [x, w] + ([b] if b is not None else [])
    n = cx.node_typed("LayerNormalization", inputs, {"axis": axis, "epsilon": float(eps)}, outputs=3)
    return tuple(n.outputs)


@aten("native_group_norm.default")
def _group_norm(cx, x, w, b, n_batch, channels, hxw, group, eps):
    rank = cx.rank(x)
    grouped = cx.emit("Reshape", x, cx.int64s([n_batch, group, -1]))
    axes = cx.const(np.asarray([2], np.int64))
    mean = cx.emit("ReduceMean", grouped, axes, keepdims=1)
    d = cx.emit("Sub", grouped, mean)
    var = cx.emit("ReduceMean", cx.emit("Mul", d, d), axes, keepdims=1)
    rstd = cx.emit("Reciprocal", cx.emit("Sqrt", cx.emit("Add", var, cx.tensor(eps, cx.dtype(x)))))
    y = cx.emit("Reshape", cx.emit("Mul", d, rstd), cx.emit("Shape", x))
    bshape = cx.const(np.asarray([-1] + [1] * (rank - 2), np.int64))
    if w is not None:
        y = cx.emit("Mul", y, cx.emit("Reshape", w, bshape))
    if b is not None:
        y = cx.emit("Add", y, cx.emit("Reshape", b, bshape))
    ng = cx.int64s([n_batch, group])
    return cx.emit_typed("Identity", y), cx.emit("Reshape", mean, ng), cx.emit("Reshape", rstd, ng)


def _pool_attrs(nd, kernel, stride, padding, dilation=None, ceil_mode=False):
    def full(v, default):
        v = list(v) if v else list(default)
        return v * nd if len(v) == 1 else v

    kernel = full(kernel, kernel)
    attrs = {"kernel_shape": kernel, "strides": full(stride, kernel), "pads": full(padding, [0]) * 2,
             "ceil_mode": int(bool(ceil_mode))}  # fmt: skip
    if dilation is not None:
        attrs["dilations"] = full(dilation, [1])
    return attrs


@aten("max_pool2d_with_indices_backward.default", "max_pool3d_with_indices_backward.default")
def _max_pool_backward(cx, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each output gradient added at the input position its maximum came from (``indices`` are flat
    positions in each spatial plane, as the forward op gives them)."""
    grad, x = cx.tensor(grad, cx.dtype(grad)), cx.tensor(x, cx.dtype(x))
    nd = 3 if "3d" in str(cx.fx.target) else 2
    lead = cx.rank(x) - nd
    planes = cx.const(np.asarray([0] * lead + [-1], np.int64))
    flat_x = cx.emit("Reshape", x, planes)
    zeros = cx.emit("Mul", flat_x, cx.tensor(0, cx.dtype(x)))
    zeros = cx.emit("Where", cx.emit("IsNaN", zeros), cx.tensor(0, cx.dtype(x)), zeros)  # inf * 0
    summed = cx.emit("ScatterElements", zeros, cx.emit("Reshape", indices, planes), cx.emit("Reshape", grad, planes),
                     axis=lead, reduction="add")  # fmt: skip
    return cx.emit_typed("Reshape", summed, cx.emit("Shape", x))


@aten("max_pool2d_with_indices.default", "max_pool3d_with_indices.default", "max_pool1d_with_indices.default")
def _max_pool(cx, x, kernel, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    nd = len(kernel)
    if cx.rank(x) != nd + 2:
        raise NotMapped("pooling of an unbatched input")
    attrs = _pool_attrs(nd, kernel, stride, padding, dilation, ceil_mode)
    if 1 not in cx.used_outputs():
        return cx.node_typed("MaxPool", [x], attrs).outputs[0], None
    n = cx.node_typed("MaxPool", [x], attrs, outputs=2)
    y, flat = n.outputs
    flat.type = None
    plane = cx.emit("ReduceProd", cx.emit("Shape", x, start=2), keepdims=1)
    return y, cx.emit("Mod", flat, plane)


@aten("avg_pool2d.default", "avg_pool3d.default", "avg_pool1d.default")
def _avg_pool(cx, x, kernel, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
              divisor_override=None):  # fmt: skip
    nd = len(kernel)
    if cx.rank(x) != nd + 2:
        raise NotMapped("pooling of an unbatched input")
    attrs = _pool_attrs(nd, kernel, stride, padding, None, ceil_mode)
    if divisor_override is not None:  # the window sums (a depthwise conv of ones) over the given divisor
        channels, spatial = cx.shape(x)[1], cx.shape(x)[2:]
        out = cx.out_shape[2:]
        if not all(isinstance(d, int) for d in (channels, *spatial, *out)):
            raise NotMapped("avg_pool with divisor_override over symbolic sizes")
        k, st, begin = attrs["kernel_shape"], attrs["strides"], attrs["pads"][:nd]
        end = [(o - 1) * si + ki - n - b for o, si, ki, n, b in zip(out, st, k, spatial, begin, strict=True)]
        ones = cx.const(np.ones([channels, 1, *k], to_numpy(cx.dtype(x))))
        sums = cx.emit("Conv", cx.tensor(x), ones, strides=st, pads=begin + [max(e, 0) for e in end], group=channels)
        return cx.emit_typed("Div", sums, cx.tensor(float(divisor_override)))
    attrs["count_include_pad"] = int(bool(count_include_pad))
    return cx.emit_typed("AveragePool", x, **attrs)


@aten("_adaptive_avg_pool2d.default", "_adaptive_avg_pool3d.default", "adaptive_avg_pool1d.default",
      "adaptive_avg_pool2d.default", "adaptive_avg_pool3d.default")  # fmt: skip
def _adaptive_avg_pool(cx, x, output_size):
    nd = len(output_size)
    unbatched = cx.rank(x) == nd + 1
    if cx.rank(x) not in (nd + 1, nd + 2):
        raise NotMapped(f"adaptive pooling of a rank-{cx.rank(x)} input")
    spatial = cx.shape(x)[-nd:]
    if all(o == 1 for o in output_size) and not unbatched:
        return cx.emit_typed("GlobalAveragePool", x)
    if not all(isinstance(s, int) for s in spatial):
        raise NotMapped("adaptive pooling over symbolic sizes")
    if not unbatched and all(s % o == 0 for s, o in zip(spatial, output_size, strict=True)):
        k = [s // o for s, o in zip(spatial, output_size, strict=True)]
        return cx.emit_typed("AveragePool", x, kernel_shape=k, strides=k)
    return cx.emit_typed("Identity", _adaptive_windows(cx, cx.tensor(x), output_size, "ReduceMean"))


def _adaptive_windows(cx, x: Value, output_size, reduce: str) -> Value:
    """torch's adaptive windows [floor(i*n/o), ceil((i+1)*n/o)) along each trailing axis, reduced
    with ``reduce`` one axis at a time (a box mean is a mean of means; a box max a max of maxes)."""
    nd, rank = len(output_size), cx.rank(x)
    y = x
    for k, (n, o) in enumerate(zip(cx.shape(x)[-nd:], output_size, strict=True)):
        axis = rank - nd + k
        if n == o:
            continue
        parts = []
        for i in range(o):
            lo, hi = (i * n) // o, -((-(i + 1) * n) // o)
            window = cx.emit("Slice", y, cx.const(np.asarray([lo], np.int64)), cx.const(np.asarray([hi], np.int64)),
                             cx.const(np.asarray([axis], np.int64)))  # fmt: skip
            parts.append(cx.emit(reduce, window, cx.const(np.asarray([axis], np.int64)), keepdims=1))
        y = cx.emit("Concat", *parts, axis=axis) if len(parts) > 1 else parts[0]
    return y


@aten("mm.default", "bmm.default", "matmul.default")
def _mm(cx, a, b):
    return cx.emit_typed("MatMul", cx.tensor(a), cx.tensor(b))


@aten("addmm.default", "baddbmm.default", "addmv.default")
def _addmm(cx, bias, a, b, *, beta=1, alpha=1):
    return _scaled_sum(cx, cx.emit("MatMul", cx.tensor(a), cx.tensor(b)), bias, alpha, beta)


def _scaled_sum(cx, prod: Value, bias, alpha, beta) -> Value:
    """``alpha * prod + beta * bias``, torch's add-matmul convention (``beta == 0`` ignores bias)."""
    if alpha != 1:
        prod = cx.emit("Mul", prod, cx.tensor(alpha))
    if beta == 0:
        return cx.emit_typed("Identity", prod)
    bias = cx.tensor(bias)
    if beta != 1:
        bias = cx.emit("Mul", bias, cx.tensor(beta))
    return cx.emit_typed("Add", prod, bias)


@aten("_softmax.default", "_log_softmax.default", "_safe_softmax.default")
def _softmax(cx, x, dim, half_to_float=False):
    op = "LogSoftmax" if "log_softmax" in str(cx.fx.target) else "Softmax"
    if cx.rank(x) == 0:
        return _softmax_scalar(cx, x, op)
    axis = _axis(dim, cx.rank(x))
    if "safe_softmax" in str(cx.fx.target):  # a row that is all -inf gives zeros, not NaN
        x = cx.tensor(x)
        top = cx.emit("ReduceMax", x, cx.const(np.asarray([axis], np.int64)), keepdims=1)
        empty = cx.emit("Equal", top, cx.tensor(-np.inf))
        return cx.emit_typed("Where", empty, cx.tensor(0), cx.emit(op, x, axis=axis))
    return cx.emit_typed(op, cx.tensor(x), axis=axis)


def _softmax_scalar(cx, x, op):
    one = cx.const(np.asarray([1], np.int64))
    y = cx.emit(op, cx.emit("Reshape", cx.tensor(x), one), axis=0)
    return cx.emit_typed("Reshape", y, cx.const(np.asarray([], np.int64)))


_RESIZE_MODES = {"nearest": "nearest", "bilinear": "linear", "linear": "linear", "trilinear": "linear",
                 "bicubic": "cubic"}  # fmt: skip


@aten("upsample_nearest1d.vec", "upsample_nearest2d.vec", "upsample_nearest3d.vec", "upsample_bilinear2d.vec",
      "upsample_linear1d.vec", "upsample_trilinear3d.vec", "upsample_bicubic2d.vec",
      "upsample_nearest2d.default", "upsample_bilinear2d.default")  # fmt: skip
def _upsample(cx, x, output_size, *args):
    target = str(cx.fx.target)
    kind = next(k for k in ("nearest", "bilinear", "trilinear", "bicubic", "linear") if f"upsample_{k}" in target)
    align_corners, scales = False, None
    if kind != "nearest":
        align_corners = bool(args[0]) if args else False
        scales = args[1] if len(args) > 1 else None
    else:
        scales = args[0] if args else None
    if ".default" in target and kind == "nearest":
        scales = [s for s in args if s is not None] or None
    attrs = {"mode": _RESIZE_MODES[kind]}
    if kind == "nearest":
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        attrs["coordinate_transformation_mode"] = "align_corners" if align_corners else "pytorch_half_pixel"
        if kind == "bicubic":
            attrs.update(cubic_coeff_a=-0.75, coordinate_transformation_mode="align_corners" if align_corners
                         else "half_pixel")  # fmt: skip
    if output_size is not None and not (scales and kind == "nearest"):
        sizes = cx.emit("Concat", cx.emit("Shape", x, end=2), cx.int64s(list(output_size)), axis=0)
        return cx.emit_typed("Resize", x, None, None, sizes, **attrs)
    if scales is None:
        raise NotMapped("upsample without sizes or scales")
    return cx.emit_typed("Resize", x, None, cx.const(np.asarray([1.0, 1.0, *scales], np.float32)), **attrs)


def _aa_weights(size_in: int, size_out: int, align_corners: bool, scale_factor, cubic: bool) -> np.ndarray:
    """ATen's antialiased resampling weights along one axis (after PIL): a triangle (or Keys
    cubic, a = -0.5) filter stretched by the downscale factor, cut at the input's edges and
    normalised per output sample, as a dense [out, in] matrix."""
    if align_corners:
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor else size_in / size_out
    scale = np.float32(scale)
    interp = 4 if cubic else 2
    support = np.float32(interp * 0.5 * scale if scale >= 1.0 else interp * 0.5)
    invscale = np.float32(1.0 / scale if scale >= 1.0 else 1.0)

    def kernel(x):
        x = np.abs(x)
        if not cubic:
            return np.where(x < 1.0, 1.0 - x, 0.0)
        a = -0.5
        return np.where(x < 1.0, ((a + 2) * x - (a + 3)) * x * x + 1,
                        np.where(x < 2.0, ((a * x - 5 * a) * x + 8 * a) * x - 4 * a, 0.0))  # fmt: skip

    weights = np.zeros((size_out, size_in), np.float32)
    for i in range(size_out):
        center = np.float32(scale * (i + 0.5))
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), size_in)
        w = kernel((np.arange(lo, hi, dtype=np.float32) - center + np.float32(0.5)) * invscale).astype(np.float32)
        total = w.sum()
        weights[i, lo:hi] = w / total if total != 0 else w
    return weights


@aten("_upsample_bilinear2d_aa.default", "_upsample_bicubic2d_aa.default", "_upsample_bilinear2d_aa.vec",
      "_upsample_bicubic2d_aa.vec")  # fmt: skip
def _upsample_aa(cx, x, output_size, align_corners, *scales):
    """Antialiased 2-D resampling as two matrix products with ATen's weights (sizes static)."""
    scales = list(scales[0]) if len(scales) == 1 and isinstance(scales[0], (list, tuple)) else list(scales)
    scales = [*scales, None, None][:2]
    h, w = cx.shape(x)[-2:]
    if output_size is None:
        if not all(isinstance(d, int) for d in (h, w)) or None in scales:
            raise NotMapped("antialiased resampling of a symbolic size or without sizes")
        output_size = [math.floor(h * scales[0]), math.floor(w * scales[1])]
    if cx.rank(x) != 4 or not all(isinstance(d, int) for d in (h, w, *output_size)):
        raise NotMapped("antialiased resampling of a symbolic size")
    cubic = "bicubic" in str(cx.fx.target)
    np_dt = to_numpy(cx.dtype(x))
    rows = _aa_weights(h, output_size[0], align_corners, scales[0], cubic).astype(np_dt)
    cols = _aa_weights(w, output_size[1], align_corners, scales[1], cubic).astype(np_dt)
    across = cx.emit("MatMul", x, cx.const(cols.T.copy()))
    return cx.emit_typed("MatMul", cx.const(rows), across)


@aten("grid_sampler_2d.default", "grid_sampler_3d.default")
def _grid_sampler(cx, x, grid, interpolation_mode, padding_mode, align_corners):
    mode = ["linear", "nearest", "cubic"][interpolation_mode]
    pad = ["zeros", "border", "reflection"][padding_mode]
    return cx.emit_typed("GridSample", x, grid, mode=mode, padding_mode=pad, align_corners=int(bool(align_corners)))


@aten("pixel_shuffle.default")
def _pixel_shuffle(cx, x, r):
    return cx.emit_typed("DepthToSpace", x, blocksize=int(r), mode="CRD")


# -- symbolic sizes and bookkeeping ---------------------------------------------------------------


@aten("sym_size.int")
def _sym_size(cx, x, dim):
    d = cx.shape(x)[_axis(dim, cx.rank(x))]
    if isinstance(d, int):
        return cx.const(np.asarray(d, np.int64))
    return cx.emit("Reshape", _dim_size(cx, x, _axis(dim, cx.rank(x))), cx.const(np.asarray([], np.int64)))


@aten("sym_stride.int")
def _sym_stride(cx, x, dim):
    """The stride of a contiguous tensor (what ``torch.export`` traces): the product of the later sizes."""
    axis = _axis(dim, cx.rank(x))
    later = cx.shape(x)[axis + 1:]
    if all(isinstance(d, int) for d in later):
        return cx.const(np.asarray(math.prod(later), np.int64))
    return cx.emit("ReduceProd", cx.emit("Shape", x, start=axis + 1), keepdims=0)


@aten("sym_is_contiguous.default")
def _sym_is_contiguous(cx, x, memory_format=None):
    """True: IR tensors have no strides, and ``torch.export`` traces contiguous inputs."""
    return cx.const(np.asarray(True))


@aten("sym_numel.default")
def _sym_numel(cx, x):
    return cx.emit("Size", x)


def _sym_binary(fn, onnx_op):
    def convert(cx, a, b):
        if not isinstance(a, Value) and not isinstance(b, Value):
            return fn(a, b)
        a = a if isinstance(a, Value) else cx.const(np.asarray(a, np.int64))
        b = b if isinstance(b, Value) else cx.const(np.asarray(b, np.int64))
        if onnx_op == "FloorDiv":
            q = cx.emit("Div", a, b)
            return _floor_adjust_int(cx, a, b, q)
        return cx.emit(onnx_op, a, b, **({"fmod": 0} if onnx_op == "Mod" else {}))

    return convert


def _floor_adjust_int(cx, a, b, q):
    r = cx.emit("Mod", a, b, fmod=1)
    zero = cx.const(np.asarray(0, np.int64))
    adjust = cx.emit("And", cx.emit("Not", cx.emit("Equal", r, zero)),
                     cx.emit("Xor", cx.emit("Less", a, zero), cx.emit("Less", b, zero)))  # fmt: skip
    return cx.emit("Sub", q, cx.emit("Cast", adjust, to=int(DataType.INT64)))


aten("operator.add")(_sym_binary(operator.add, "Add"))
aten("operator.sub")(_sym_binary(operator.sub, "Sub"))
aten("operator.mul")(_sym_binary(operator.mul, "Mul"))
aten("operator.floordiv")(_sym_binary(operator.floordiv, "FloorDiv"))
aten("operator.mod")(_sym_binary(operator.mod, "Mod"))


@aten("operator.getitem")
def _getitem(cx, seq, i):
    return seq[i]


@aten("_local_scalar_dense.default")
def _item(cx, x):
    """``t.item()``: a 0-d tensor (the size or index it becomes is data)."""
    return cx.emit("Reshape", x, cx.const(np.asarray([], np.int64)))


_CHECKS = frozenset({"aten._assert_scalar.default", "aten._assert_async.msg"})


@aten("sym_storage_offset.default")
def _storage_offset(cx, x):
    """A view's storage offset, which an export reads only to assert it is not negative: the
    check is dropped like every other, so the value is never needed.  Any other use is refused."""
    import operator

    from . import op_name

    for user in cx.fx.users:
        checks = {op_name(u.target) for u in user.users}
        if user.target is not operator.ge or user.args[1] != 0 or not checks <= _CHECKS:
            raise NotMapped("a storage offset read for more than a non-negativity check")
    return cx.const(np.asarray(0, np.int64))


@aten("aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default", "aten._assert_async.msg",
      "aten.sym_constrain_range.default", "aten._assert_tensor_metadata.default")  # fmt: skip
def _assertion(cx, *args, **kwargs):
    return None


# -- control flow ---------------------------------------------------------------------------------


@aten("higher_order.cond", "torch.cond")
def _cond(cx, pred, true_gm, false_gm, operands):
    operands = list(operands)
    then_g, then_outs = cx.subgraph(true_gm, operands, f"{cx.fx.name}.then")
    else_g, else_outs = cx.subgraph(false_gm, operands, f"{cx.fx.name}.else")
    for g, outs in ((then_g, then_outs), (else_g, else_outs)):
        g.set_outputs([_owned_output(cx, g, v) for v in outs])
    p = pred if isinstance(pred, Value) else cx.const(np.asarray(bool(pred)))
    p = cx.emit("Reshape", _as_bool(cx, p), cx.const(np.asarray([], np.int64)))
    n = cx.node_typed("If", [p], {"then_branch": then_g, "else_branch": else_g}, outputs=len(then_outs))
    return tuple(n.outputs)


def _owned_output(cx, g, v):
    """A subgraph output defined in the subgraph itself (ONNX requires one per output)."""
    from ...core_ir.builder import Builder

    e_b = Builder(g, names=cx.importer.names)
    if not isinstance(v, Value):
        v = e_b.constant(np.asarray(v))
    if v.producer() is not None and v.producer().graph is g and not v.is_graph_output():
        return v
    n = e_b.add_node("Identity", [v])
    n.outputs[0].type = v.type
    return n.outputs[0]


_DROPPED_EFFECTS = frozenset({"aten._linalg_check_errors.default"})
"""Side-effecting ops a model may carry that the imported graph leaves out: checks that raise on a
failed factorization (the factorization's ``info`` output still reports it)."""


@aten("higher_order.with_effects", "torch.with_effects")
def _with_effects(cx, token, op, *args, **kwargs):
    from . import op_name

    if op_name(op) not in _DROPPED_EFFECTS:
        raise NotMapped(f"the side effect {op_name(op)}")
    return token, None


@aten("higher_order.while_loop", "torch.while_loop")
def _while_loop(cx, cond_gm, body_gm, carried, additional):
    from ...core_ir.graph import Graph
    from ...core_ir.types import TensorType

    carried, additional = list(carried), list(additional)
    first, _ = _inline(cx, cond_gm, carried + additional)
    cond0 = cx.emit("Reshape", _as_bool(cx, first[0]), cx.const(np.asarray([], np.int64)))
    names = cx.importer.names
    it = Value(names.fresh(f"{cx.fx.name}.iter"), TensorType(DataType.INT64, ()))
    cond_in = Value(names.fresh(f"{cx.fx.name}.cond"), TensorType(DataType.BOOL, ()))
    state = [Value(names.fresh(f"{cx.fx.name}.state"), v.type if isinstance(v, Value) else None) for v in carried]
    body = Graph(inputs=[it, cond_in, *state], name=f"{cx.fx.name}.body")
    new_state = cx.importer.subgraph_into(body_gm, body, state + additional, f"{cx.fx.name}.body.")
    cond_out = cx.importer.subgraph_into(cond_gm, body, list(new_state) + additional, f"{cx.fx.name}.cond.")
    cond_v = _owned_output(cx, body, _reshape_scalar_bool(cx, body, cond_out[0]))
    body.set_outputs([cond_v, *(_owned_output(cx, body, v) for v in new_state)])
    init = [c if isinstance(c, Value) else cx.const(np.asarray(c)) for c in carried]
    n = cx.node_typed("Loop", [None, cond0, *init], {"body": body}, outputs=len(carried))
    return tuple(n.outputs)


def _reshape_scalar_bool(cx, g, v):
    from ...core_ir.builder import Builder

    b = Builder(g, names=cx.importer.names)
    if v.type is not None and v.type.dtype != DataType.BOOL:
        v = b.add_node("Cast", [v], {"to": int(DataType.BOOL)}).outputs[0]
    return b.add_node("Reshape", [v, b.constant(np.asarray([], np.int64))]).outputs[0]


def _inline(cx, gm, bindings):
    outs = cx.importer.subgraph_into(gm, cx.graph, bindings, f"{cx.fx.name}.init.")
    return outs, None


# -- ops torch.export keeps before run_decompositions ----------------------------------------------
# A program whose every op is mapped imports without decomposition: fewer, larger nodes
# (LayerNormalization, not its arithmetic) and no second trace.  Any use these converters refuse
# sends the whole program through run_decompositions instead.


@aten("linear.default")
def _linear(cx, x, w, b=None):
    y = cx.emit("MatMul", cx.tensor(x), cx.emit("Transpose", cx.tensor(w), perm=[1, 0]) if cx.rank(w) == 2 else w)
    return cx.emit_typed("Add", y, cx.tensor(b)) if b is not None else cx.emit_typed("Identity", y)


@aten("conv1d.default", "conv2d.default", "conv3d.default")
def _conv_nd(cx, x, w, b=None, stride=(1,), padding=(0,), dilation=(1,), groups=1):
    if cx.rank(x) != cx.rank(w):
        raise NotMapped("convolution of an unbatched input")
    return _convolution(cx, x, w, b, stride, padding, dilation, False, (0,), groups)


@aten("conv1d.padding", "conv2d.padding", "conv3d.padding")
def _conv_nd_padding(cx, x, w, b=None, stride=(1,), padding="valid", dilation=(1,), groups=1):
    if cx.rank(x) != cx.rank(w):
        raise NotMapped("convolution of an unbatched input")
    nd = cx.rank(x) - 2
    if padding == "valid":
        return _convolution(cx, x, w, b, stride, (0,) * nd, dilation, False, (0,), groups)
    kernel = cx.shape(w)[2:]
    dil = list(dilation) * nd if len(dilation) == 1 else list(dilation)
    if not all(isinstance(k, int) for k in kernel):
        raise NotMapped("'same' padding with a symbolic kernel")
    total = [d * (k - 1) for d, k in zip(dil, kernel, strict=True)]
    attrs = {"strides": [1] * nd, "dilations": dil, "group": int(groups),
             "pads": [t // 2 for t in total] + [t - t // 2 for t in total]}  # torch puts the odd one at the end
    inputs = [cx.tensor(x), cx.tensor(w)] + ([cx.tensor(b)] if b is not None else [])
    return cx.emit_typed("Conv", *inputs, **attrs)


@aten("batch_norm.default")
def _batch_norm(cx, x, w, b, mean, var, training, momentum, eps, cudnn_enabled=True):
    if training or mean is None:
        raise NotMapped("batch norm in training mode")
    return _batch_norm_eval(cx, x, w, b, mean, var, momentum, eps)[0]


@aten("layer_norm.default")
def _layer_norm_public(cx, x, normalized_shape, w=None, b=None, eps=1e-5, cudnn_enable=True):
    axis = cx.rank(x) - len(normalized_shape)
    if w is None:
        if not all(isinstance(d, int) for d in normalized_shape):
            raise NotMapped("layer norm without weight over symbolic dims")
        w = cx.const(np.ones(list(normalized_shape), to_numpy(cx.dtype(x))))
    inputs = [x, w] + ([b] if b is not None else [])
    return cx.node_typed("LayerNormalization", inputs, {"axis": axis, "epsilon": float(eps)}).outputs[0]


@aten("dropout.default", "feature_dropout.default", "alpha_dropout.default")
def _dropout(cx, x, p, train):
    if train and p > 0:
        raise NotMapped("dropout in training mode")
    return cx.emit_typed("Identity", x)


@aten("flatten.using_ints")
def _flatten(cx, x, start_dim=0, end_dim=-1):
    rank = cx.rank(x)
    if rank == 0:
        return cx.emit_typed("Reshape", x, cx.const(np.asarray([1], np.int64)))
    start, end = _axis(start_dim, rank), _axis(end_dim, rank)
    sizes = [0] * start + [-1] + [0] * (rank - end - 1)
    return cx.emit_typed("Reshape", x, cx.const(np.asarray(sizes, np.int64)))


@aten("unflatten.int")
def _unflatten(cx, x, dim, sizes):
    rank = cx.rank(x)
    dim = _axis(dim, rank)
    target = [0] * dim + list(sizes) + [0] * (rank - dim - 1)
    if not all(isinstance(t, int) for t in target):
        return cx.emit_typed("Reshape", x, cx.int64s(_static_sizes(cx, x, list(cx.out_shape))))
    return cx.emit_typed("Reshape", x, cx.const(np.asarray(target, np.int64)))


@aten("max_pool1d.default", "max_pool2d.default", "max_pool3d.default")
def _max_pool_plain(cx, x, kernel, stride=(), padding=(0,), dilation=(1,), ceil_mode=False):
    nd = len(kernel)
    if cx.rank(x) != nd + 2:
        raise NotMapped("pooling of an unbatched input")
    return cx.node_typed("MaxPool", [x], _pool_attrs(nd, kernel, stride, padding, dilation, ceil_mode)).outputs[0]


@aten("softmax.int", "log_softmax.int")
def _softmax_int(cx, x, dim, dtype=None):
    op = "LogSoftmax" if "log_softmax" in str(cx.fx.target) else "Softmax"
    x = cx.tensor(x)
    if cx.rank(x) == 0:
        return _softmax_scalar(cx, x, op)
    return cx.emit_typed(op, x, axis=_axis(dim, cx.rank(x)))


@aten("to.dtype", "to.dtype_layout", "to.device", "type_as.default")
def _to(cx, x, *args, **kwargs):
    if cx.dtype(x) == cx.out_dtype:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("Cast", x, to=int(cx.out_dtype))


@aten("masked_fill.Scalar", "masked_fill.Tensor")
def _masked_fill(cx, x, mask, value):
    return cx.emit_typed("Where", _as_bool(cx, mask), cx.tensor(value), cx.tensor(x))


@aten("scaled_dot_product_attention.default")
def _sdpa(cx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False):
    """softmax(q kᵀ · scale + mask) v, in ONNX ops (opset 21 has no Attention op)."""
    if dropout_p and dropout_p > 0:
        raise NotMapped("attention dropout")
    if enable_gqa:
        raise NotMapped("grouped-query attention")
    q, k, v = cx.tensor(q), cx.tensor(k), cx.tensor(v)
    rank = cx.rank(q)
    head = cx.shape(q)[-1]
    if scale is None:
        if not isinstance(head, int):
            raise NotMapped("attention with a symbolic head size and no scale")
        scale = 1.0 / math.sqrt(head)
    perm = [*range(rank - 2), rank - 1, rank - 2]
    scores = cx.emit("Mul", cx.emit("MatMul", q, cx.emit("Transpose", k, perm=perm)), cx.tensor(scale))
    if is_causal:
        lq, lk = cx.shape(q)[-2], cx.shape(k)[-2]
        if not (isinstance(lq, int) and isinstance(lk, int)):
            raise NotMapped("causal attention over symbolic lengths")
        keep = np.tril(np.ones((lq, lk), bool))
        scores = cx.emit("Where", cx.const(keep), scores, cx.tensor(-np.inf))
    if attn_mask is not None:
        if cx.dtype(attn_mask) == DataType.BOOL:
            scores = cx.emit("Where", attn_mask, scores, cx.tensor(-np.inf))
        else:
            scores = cx.emit("Add", scores, cx.tensor(attn_mask))
    return cx.emit_typed("MatMul", cx.emit("Softmax", scores, axis=-1), v)


# -- more core ATen ---------------------------------------------------------------------------------


def _sym_compare(fn, onnx_op):
    def convert(cx, a, b):
        if not isinstance(a, Value) and not isinstance(b, Value):
            return fn(a, b)
        a = a if isinstance(a, Value) else cx.const(np.asarray(a, np.int64))
        b = b if isinstance(b, Value) else cx.const(np.asarray(b, np.int64))
        return cx.emit(onnx_op, cx.cast(a, DataType.INT64), cx.cast(b, DataType.INT64))

    return convert


for _name, _fn, _op in (("ge", operator.ge, "GreaterOrEqual"), ("gt", operator.gt, "Greater"),
                        ("le", operator.le, "LessOrEqual"), ("lt", operator.lt, "Less"), ("eq", operator.eq, "Equal")):
    aten(f"operator.{_name}")(_sym_compare(_fn, _op))


@aten("linalg_vector_norm.default")
def _vector_norm(cx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    x = cx.tensor(x)
    axes = _axes(cx, x, dim)
    if cx.rank(x) == 0:
        axes = None
    extra = [] if axes is None else [cx.const(np.asarray(axes, np.int64))]
    keep = int(bool(keepdim))
    a = cx.emit("Abs", x)
    if ord == 2:
        y = cx.emit("Sqrt", cx.emit("ReduceSumSquare", x, *extra, keepdims=keep))
    elif ord == 1:
        y = cx.emit("ReduceSum", a, *extra, keepdims=keep)
    elif ord == math.inf:
        y = cx.emit("ReduceMax", a, *extra, keepdims=keep)
    elif ord == -math.inf:
        y = cx.emit("ReduceMin", a, *extra, keepdims=keep)
    elif ord == 0:
        y = cx.emit("ReduceSum", cx.cast(cx.emit("Not", cx.emit("Equal", x, cx.tensor(0))), cx.out_dtype),
                    *extra, keepdims=keep)  # fmt: skip
    else:
        p = cx.tensor(float(ord))
        y = cx.emit("Pow", cx.emit("ReduceSum", cx.emit("Pow", a, p), *extra, keepdims=keep), cx.tensor(1.0 / ord))
    if cx.rank(x) == 0 and not keepdim:
        y = cx.emit("Reshape", y, cx.const(np.asarray([], np.int64)))
    return cx.emit_typed("Identity", y)


@aten("var_mean.correction", "var_mean.dim")
def _var_mean(cx, x, dims=None, *, correction=None, keepdim=False, unbiased=None):
    if unbiased is not None and correction is None:
        correction = 1 if unbiased else 0
    var = _variance(cx, x, dims, correction, keepdim, out=False)
    x = cx.tensor(x)
    axes = _axes(cx, x, dims)
    mean = cx.emit("ReduceMean", x, *([] if axes is None else [cx.const(np.asarray(axes, np.int64))]),
                   keepdims=int(bool(keepdim)))  # fmt: skip
    t_var, t_mean = (cx.meta_type(v) for v in cx.val)
    var.type, mean.type = t_var, t_mean
    return var, mean


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


@aten("logcumsumexp.default")
def _logcumsumexp(cx, x, dim):
    x = cx.tensor(x)
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    axis = _axis(dim, cx.rank(x))
    top = cx.emit("ReduceMax", x, cx.const(np.asarray([axis], np.int64)), keepdims=1)
    top = cx.emit("Where", cx.emit("IsInf", top), cx.tensor(0), top)  # all -inf (or +inf): no shift
    s = cx.emit("CumSum", cx.emit("Exp", cx.emit("Sub", x, top)), cx.const(np.asarray(axis, np.int64)))
    return cx.emit_typed("Add", cx.emit("Log", s), top)


@aten("addbmm.default")
def _addbmm(cx, bias, a, b, *, beta=1, alpha=1):
    prod = cx.emit("ReduceSum", cx.emit("MatMul", cx.tensor(a), cx.tensor(b)), cx.const(np.asarray([0], np.int64)),
                   keepdims=0)  # fmt: skip
    return _scaled_sum(cx, prod, bias, alpha, beta)


def _diagonal_positions(cx, x, offset: int, dim1: int, dim2: int) -> tuple[list[int], np.ndarray]:
    """The axis order that puts ``dim1`` and ``dim2`` first, and the (row, column) positions of
    the diagonal at ``offset`` in those two axes."""
    shape = cx.shape(x)
    rank = len(shape)
    d1, d2 = _axis(dim1, rank), _axis(dim2, rank)
    n1, n2 = shape[d1], shape[d2]
    if not (isinstance(n1, int) and isinstance(n2, int)):
        raise NotMapped("a diagonal of symbolic size")
    rows = np.arange(max(0, -offset), max(max(0, -offset), min(n1, n2 - offset)))
    positions = np.stack([rows, rows + offset], -1).astype(np.int64)
    return [d1, d2, *(d for d in range(rank) if d not in (d1, d2))], positions


@aten("diagonal.default", "diagonal_copy.default")
def _diagonal(cx, x, offset=0, dim1=0, dim2=1):
    perm, idx = _diagonal_positions(cx, x, offset, dim1, dim2)
    y = cx.emit("GatherND", cx.emit("Transpose", x, perm=perm), cx.const(idx))  # [n, rest...]
    return cx.emit_typed("Transpose", y, perm=[*range(1, len(perm) - 1), 0])


@aten("diagonal_scatter.default")
def _diagonal_scatter(cx, x, src, offset=0, dim1=0, dim2=1):
    perm, idx = _diagonal_positions(cx, x, offset, dim1, dim2)
    rest = len(perm) - 2
    updates = cx.emit("Transpose", cx.tensor(src, cx.dtype(x)), perm=[rest, *range(rest)])  # [n, rest...]
    y = cx.emit("ScatterND", cx.emit("Transpose", x, perm=perm), cx.const(idx), updates)
    return cx.emit_typed("Transpose", y, perm=[int(i) for i in np.argsort(perm)])


@aten("nonzero.default")
def _nonzero(cx, x):
    """The indices of the nonzero elements, one row each: the size depends on the data."""
    x = cx.tensor(x)
    if cx.rank(x) == 0:  # one row of no indices if x is nonzero (onnxruntime reads a 0-d tensor as 1-d)
        rows = cx.emit("Transpose", cx.emit("NonZero", _flat(cx, x)), perm=[1, 0])  # [count, 1]
        none = cx.const(np.asarray([0], np.int64))
        return cx.emit_typed("Slice", rows, none, none, cx.const(np.asarray([1], np.int64)))
    return cx.emit_typed("Transpose", cx.emit("NonZero", x), perm=[1, 0])


def _runs(cx, x, values: Value, order: Value | None, wanted: set[int]):
    """torch's unique outputs from ``values`` (the flat input, sorted by ``order`` if given): one
    value per run of equal neighbours (NaN equals nothing, -0 equals 0), each input element's run
    (in the input's shape) and the run lengths.  Sizes depend on the data."""
    i64, one = DataType.INT64, cx.const(np.asarray([1], np.int64))
    n = cx.emit("Shape", values)
    first = cx.const(np.asarray([0], np.int64))
    previous = cx.emit("Slice", values, first, cx.const(np.asarray([-1], np.int64)))
    differs = cx.emit("Not", cx.emit("Equal", cx.emit("Slice", values, one, n), previous))
    starts = cx.emit("Slice", cx.emit("Concat", cx.const(np.asarray([True])), differs, axis=0), first, n)
    run = cx.emit("Sub", cx.emit("CumSum", cx.cast(starts, i64), cx.const(np.asarray(0))), one)
    outs = [cx.emit("Compress", values, starts, axis=0), None, None]
    if 1 in wanted:
        inverse = run if order is None else cx.emit("ScatterElements", run, order, run, axis=0)
        outs[1] = cx.emit("Reshape", inverse, cx.emit("Shape", x))
    if 2 in wanted:
        zeros = cx.emit("ConstantOfShape", cx.emit("ReduceSum", cx.cast(starts, i64), keepdims=1),
                        value=np.zeros(1, np.int64))  # fmt: skip
        ones = cx.emit("Expand", cx.const(np.asarray(1, np.int64)), n)
        outs[2] = cx.emit("ScatterND", zeros, cx.emit("Unsqueeze", run, one), ones, reduction="add")
    for out, val in zip(outs, cx.val, strict=True):
        if out is not None:
            out.type = cx.meta_type(val)
    return tuple(outs)


@aten("_unique2.default")
def _unique2(cx, x, sorted=True, return_inverse=False, return_counts=False):
    """torch.unique of all elements: ATen's CPU kernel sorts whether or not ``sorted`` is asked."""
    wanted = cx.used_outputs()
    if (1 in wanted and not return_inverse) or (2 in wanted and not return_counts):
        raise NotMapped("an output unique was not asked for")
    if not is_floating(cx.dtype(x)) and cx.dtype(x) not in (DataType.INT32, DataType.INT64):
        raise NotMapped(f"unique of {cx.dtype(x).name}")
    flat = _flat(cx, x)
    ordered = cx.node("TopK", [flat, cx.emit("Shape", flat)], {"axis": 0, "largest": 0, "sorted": 1}, outputs=2)
    return _runs(cx, x, ordered.outputs[0], ordered.outputs[1], wanted)


@aten("unique_consecutive.default")
def _unique_consecutive(cx, x, return_inverse=False, return_counts=False, dim=None):
    wanted = cx.used_outputs()
    if dim is not None or (1 in wanted and not return_inverse) or (2 in wanted and not return_counts):
        raise NotMapped("unique_consecutive along a dim, or an output it was not asked for")
    return _runs(cx, x, _flat(cx, x), None, wanted)


_SEGMENT_IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}


@aten("segment_reduce.default")
def _segment_reduce(cx, data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False,
                    initial=None):  # fmt: skip
    """Reductions over consecutive segments of axis 0 given by ``lengths`` or ``offsets`` (data):
    a segment-by-element mask, the reduction over it, and torch's rules: ``initial`` (else the
    reduction's identity) takes part in every segment, a mean divides by the segment's length,
    an empty mean is ``initial`` (else NaN), and a NaN in a max/min segment wins."""
    data = cx.tensor(data, cx.dtype(data))
    dt, shape = cx.dtype(data), cx.shape(data)
    if axis != 0 or indices is not None or reduce not in _SEGMENT_IDENTITY or not isinstance(shape[0], int):
        raise NotMapped(f"segment_reduce {reduce!r} along axis {axis} (axis 0 of a static length is mapped)")
    if lengths is None:
        if offsets is None or cx.rank(offsets) != 1:
            raise NotMapped("segment_reduce without 1-D lengths or offsets")
        offsets = cx.cast(offsets, DataType.INT64)
        lengths = cx.emit("Sub", _slice0(cx, offsets, 1, None), _slice0(cx, offsets, 0, -1))
    elif cx.rank(lengths) != 1:
        raise NotMapped("segment_reduce with lengths per leading index")
    lengths = cx.cast(lengths, DataType.INT64)
    np_dt, rank, n = to_numpy(dt), len(shape), shape[0]
    ends = cx.emit("CumSum", lengths, cx.const(np.asarray(0, np.int64)))
    starts = cx.emit("Sub", ends, lengths)
    column = cx.const(np.asarray([1, *range(2, rank + 1)], np.int64))
    position = cx.const(np.arange(n, dtype=np.int64).reshape([1, n] + [1] * (rank - 1)))
    inside = cx.emit("And", cx.emit("GreaterOrEqual", position, cx.emit("Unsqueeze", starts, column)),
                     cx.emit("Less", position, cx.emit("Unsqueeze", ends, column)))  # [segments, n, 1...]
    rows = cx.emit("Unsqueeze", data, cx.const(np.asarray([0], np.int64)))  # [1, n, ...]
    start = _SEGMENT_IDENTITY[reduce] if initial is None else float(initial)
    one_axis = cx.const(np.asarray([1], np.int64))
    if reduce in ("max", "min"):
        nan = cx.emit("IsNaN", rows)
        fill = cx.const(np.asarray(_SEGMENT_IDENTITY[reduce], np_dt))
        picked = cx.emit("Where", cx.emit("And", inside, cx.emit("Not", nan)), rows, fill)
        out = cx.emit("ReduceMax" if reduce == "max" else "ReduceMin", picked, one_axis, keepdims=0)
        out = cx.emit("Max" if reduce == "max" else "Min", out, cx.const(np.asarray(start, np_dt)))
        any_nan = cx.emit("ReduceMax", cx.emit("Cast", cx.emit("And", inside, nan), to=int(DataType.INT32)), one_axis,
                          keepdims=0)  # fmt: skip
        return cx.emit_typed("Where", cx.cast(any_nan, DataType.BOOL), cx.const(np.asarray(np.nan, np_dt)), out)
    if reduce == "prod":
        picked = cx.emit("Where", inside, rows, cx.const(np.asarray(1, np_dt)))
        product = cx.emit("ReduceProd", picked, one_axis, keepdims=0)
        return cx.emit_typed("Mul", product, cx.const(np.asarray(start, np_dt)))
    total = cx.emit("ReduceSum", cx.emit("Where", inside, rows, cx.const(np.asarray(0, np_dt))), one_axis, keepdims=0)
    total = cx.emit("Add", total, cx.const(np.asarray(start, np_dt)))
    if reduce == "sum":
        return cx.emit_typed("Identity", total)
    count = cx.emit("Reshape", cx.cast(lengths, dt), cx.const(np.asarray([-1] + [1] * (rank - 1), np.int64)))
    mean = cx.emit("Div", total, count)
    if initial is None:
        return cx.emit_typed("Identity", mean)
    empty = cx.emit("Equal", count, cx.const(np.asarray(0, np_dt)))
    return cx.emit_typed("Where", empty, cx.const(np.asarray(start, np_dt)), mean)


def _slice0(cx, v: Value, start: int, end: int | None) -> Value:
    stop = np.iinfo(np.int64).max if end is None else end
    return cx.emit("Slice", v, cx.const(np.asarray([start], np.int64)), cx.const(np.asarray([stop], np.int64)),
                   cx.const(np.asarray([0], np.int64)))  # fmt: skip


@aten("nonzero_static.default")
def _nonzero_static(cx, x, *, size, fill_value=-1):
    """The first ``size`` rows of ``nonzero``, padded with ``fill_value`` rows: a static shape."""
    x = cx.tensor(x, cx.dtype(x))
    rank = cx.rank(x)
    if rank == 0:  # rows of no indices: nothing to compute
        return cx.emit_typed("Identity", cx.const(np.zeros((size, 0), np.int64)))
    rows = cx.emit("Transpose", cx.emit("NonZero", x), perm=[1, 0])
    padded = cx.emit("Concat", rows, cx.const(np.full((size, rank), fill_value, np.int64)), axis=0)
    zero, end = cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([size], np.int64))
    return cx.emit_typed("Slice", padded, zero, end, zero)


@aten("masked_select.default")
def _masked_select(cx, x, mask):
    """The elements where ``mask`` (broadcast with ``x``) holds, in order: the size depends on the data."""
    x, mask = cx.tensor(x), cx.cast(mask, DataType.BOOL)
    x = cx.emit("Expand", x, cx.emit("Shape", mask))  # Expand broadcasts both ways
    shape = cx.emit("Shape", x)
    flat_x = _flat(cx, x)
    flat_mask = _flat(cx, cx.emit("Expand", mask, shape))
    return cx.emit_typed("Compress", flat_x, flat_mask, axis=0)


_STRIDED_LIMIT = 1 << 22
"""Most elements an ``as_strided`` view may have: its element positions are a constant."""


def _strided_positions(cx, x, size, stride, storage_offset) -> np.ndarray:
    """The positions in ``x``'s (contiguous) elements that a strided view reads, shaped as the view."""
    size, stride = list(size), list(stride)
    offset = 0 if storage_offset is None else storage_offset
    numel = math.prod(cx.shape(x)) if all(isinstance(d, int) for d in cx.shape(x)) else None
    if numel is None or not all(isinstance(v, int) for v in (*size, *stride, offset)):
        raise NotMapped("as_strided with symbolic sizes")
    if math.prod(size) > _STRIDED_LIMIT:
        raise NotMapped("as_strided of more than 4M elements")
    positions = np.full(size, offset, np.int64)
    for axis, (n, step) in enumerate(zip(size, stride, strict=True)):
        shape = [1] * len(size)
        shape[axis] = n
        positions = positions + (np.arange(n, dtype=np.int64) * step).reshape(shape)
    if positions.size and (positions.min() < 0 or positions.max() >= numel):
        raise NotMapped("as_strided reaching outside its input's elements")
    return positions


def _flat(cx, x) -> Value:
    return cx.emit("Reshape", x, cx.const(np.asarray([-1], np.int64)))


@aten("as_strided.default", "as_strided_copy.default")
def _as_strided(cx, x, size, stride, storage_offset=None):
    """A view of the input's elements as laid out contiguously (as torch.export hands them over)."""
    positions = _strided_positions(cx, x, size, stride, storage_offset)
    return cx.emit_typed("Gather", _flat(cx, x), cx.const(positions), axis=0)


@aten("as_strided_scatter.default")
def _as_strided_scatter(cx, x, src, size, stride, storage_offset=None):
    positions = _strided_positions(cx, x, size, stride, storage_offset)
    flat = cx.emit("ScatterElements", _flat(cx, x), cx.const(positions.reshape(-1)), _flat(cx, cx.tensor(src)), axis=0)
    return cx.emit_typed("Reshape", flat, cx.emit("Shape", x))


@aten("masked_scatter.default")
def _masked_scatter(cx, x, mask, source):
    """The elements of ``x`` where ``mask`` holds, replaced in order by ``source``'s first ones."""
    x = cx.tensor(x)
    full = cx.emit("Expand", cx.cast(mask, DataType.BOOL), cx.emit("Shape", x))
    flat_mask = _flat(cx, full)
    taken = cx.emit("CumSum", cx.emit("Cast", flat_mask, to=int(DataType.INT64)), cx.const(np.asarray(0, np.int64)))
    which = cx.emit("Max", cx.emit("Sub", taken, cx.const(np.asarray(1, np.int64))), cx.const(np.asarray(0, np.int64)))
    picked = cx.emit("Gather", _flat(cx, cx.tensor(source)), which, axis=0)
    merged = cx.emit("Where", flat_mask, picked, _flat(cx, x))
    return cx.emit_typed("Reshape", merged, cx.emit("Shape", x))


@aten("put.default")
def _put(cx, x, index, source, accumulate=False):
    """Elements of ``x`` by flat index (negative from the end), set or (``accumulate``) added to."""
    x = cx.tensor(x)
    flat = cx.emit("ScatterElements", _flat(cx, x), _flat(cx, cx.cast(index, DataType.INT64)),
                   _flat(cx, cx.tensor(source)), axis=0, reduction="add" if accumulate else "none")  # fmt: skip
    return cx.emit_typed("Reshape", flat, cx.emit("Shape", x))


def _distances(cx, a: Value, b: Value, p: float) -> Value:
    """p-norm distances between the rows of ``a`` [..., n, d] and of ``b`` [..., m, d]: [..., n, m]."""
    diff = cx.emit("Abs", cx.emit("Sub", cx.emit("Unsqueeze", a, cx.const(np.asarray([-2], np.int64))),
                                  cx.emit("Unsqueeze", b, cx.const(np.asarray([-3], np.int64)))))  # fmt: skip
    last = cx.const(np.asarray([-1], np.int64))
    dt = cx.dtype(a)
    if p == 0:
        nonzero = cx.emit("Cast", cx.emit("Not", cx.emit("Equal", diff, cx.tensor(0.0, dt))), to=int(dt))
        return cx.emit("ReduceSum", nonzero, last, keepdims=0)
    if math.isinf(p):
        return cx.emit("ReduceMax", diff, last, keepdims=0)
    if p == 1:
        return cx.emit("ReduceSum", diff, last, keepdims=0)
    if p == 2:
        return cx.emit("Sqrt", cx.emit("ReduceSum", cx.emit("Mul", diff, diff), last, keepdims=0))
    powered = cx.emit("ReduceSum", cx.emit("Pow", diff, cx.tensor(float(p), dt)), last, keepdims=0)
    return cx.emit("Pow", powered, cx.tensor(1.0 / p, dt))


@aten("_cdist_forward.default")
def _cdist(cx, x1, x2, p, compute_mode=None):
    return cx.emit_typed("Identity", _distances(cx, cx.tensor(x1), cx.tensor(x2), p))


@aten("_pdist_forward.default")
def _pdist(cx, x, p=2.0):
    """The distances between rows i < j of ``x`` [n, d], in row-major order of the pairs."""
    n = cx.shape(x)[0]
    if not isinstance(n, int):
        raise NotMapped("pdist of a symbolic number of rows")
    rows, cols = np.triu_indices(n, k=1)
    square = _flat(cx, _distances(cx, cx.tensor(x), cx.tensor(x), p))
    return cx.emit_typed("Gather", square, cx.const((rows * n + cols).astype(np.int64)), axis=0)


@aten("narrow_copy.default")
def _narrow_copy(cx, x, dim, start, length):
    axis = _axis(dim, cx.rank(x))
    return cx.emit_typed("Slice", x, cx.int64s([start]), cx.emit("Add", cx.int64s([start]), cx.int64s([length])),
                         cx.const(np.asarray([axis], np.int64)))  # fmt: skip


@aten("empty_permuted.default")
def _empty_permuted(cx, size, physical_layout, **kw):
    dtype = to_numpy(cx.out_dtype)
    if not all(isinstance(s, int) for s in size):
        return cx.emit_typed("Expand", cx.const(np.zeros((), dtype)), cx.int64s(list(size)))
    return cx.emit_typed("Identity", cx.const(np.zeros(list(size), dtype)))


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


@aten("cumprod.default")
def _cumprod(cx, x, dim, *, dtype=None):
    from ..common import associative_scan

    x = cx.tensor(x)
    if cx.rank(x) == 0:
        return cx.emit_typed("Identity", x)
    return cx.emit_typed("Identity", associative_scan(cx, x, _axis(dim, cx.rank(x)), "Mul", 1))


def _median_along(cx, x: Value, axis: int, skip_nan: bool) -> tuple[Value, Value]:
    """The lower median along ``axis`` and its index, both with the axis kept (size 1).  Elements
    are ranked ascending with NaNs last (equal values by position); ``skip_nan`` takes the median
    of the non-NaN ones (NaN where there are none), otherwise any NaN makes the median NaN, at the
    index of the first NaN."""
    shape = cx.shape(x)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("median over a symbolic shape")
    n = shape[axis]
    kept = [1 if d == axis else s for d, s in enumerate(shape)]
    floating = is_floating(cx.dtype(x))
    size = cx.const(np.asarray([n], np.int64))
    key = x
    if floating:
        nan = cx.emit("IsNaN", x)
        key = cx.emit("Where", nan, cx.const(np.asarray(np.inf, to_numpy(cx.dtype(x)))), x)
    order = cx.node("TopK", [key, size], {"axis": axis, "largest": 0, "sorted": 1}, outputs=2).outputs[1]
    if floating:  # NaNs after the +infs; the rest keeps its order (TopK ranks equal keys by position)
        nan_ranked = cx.emit("GatherElements", cx.emit("Cast", nan, to=int(DataType.FLOAT)), order, axis=axis)
        moved = cx.node("TopK", [nan_ranked, size], {"axis": axis, "largest": 0, "sorted": 1}, outputs=2).outputs[1]
        order = cx.emit("GatherElements", order, moved, axis=axis)
    axes = cx.const(np.asarray([axis], np.int64))
    if floating and skip_nan:
        count = cx.emit("ReduceSum", cx.emit("Cast", cx.emit("Not", nan), to=int(DataType.INT64)), axes, keepdims=1)
        one = cx.const(np.asarray(1, np.int64))
        k = cx.emit("Div", cx.emit("Sub", cx.emit("Max", count, one), one), cx.const(np.asarray(2, np.int64)))
    else:
        k = cx.const(np.full(kept, (n - 1) // 2, np.int64))
    index = cx.emit("GatherElements", order, k, axis=axis)
    values = cx.emit("GatherElements", x, index, axis=axis)
    if floating:
        missing = cx.const(np.asarray(np.nan, to_numpy(cx.dtype(x))))
        if skip_nan:
            values = cx.emit("Where", cx.emit("Equal", count, cx.const(np.asarray(0, np.int64))), missing, values)
        else:
            flags = cx.emit("Cast", nan, to=int(DataType.INT32))
            most = cx.emit("ReduceMax", flags, axes, keepdims=1)
            any_nan = cx.emit("Greater", most, cx.const(np.asarray(0, np.int32)))
            values = cx.emit("Where", any_nan, missing, values)
            first_nan = cx.emit("ArgMax", flags, axis=axis, keepdims=1)
            index = cx.emit("Where", any_nan, first_nan, index)
    return values, index


@aten("median.default", "nanmedian.default")
def _median(cx, x):
    skip_nan = "nanmedian" in str(cx.fx.target)
    flat = cx.emit("Reshape", x, cx.const(np.asarray([-1], np.int64)))
    numel = math.prod(cx.shape(x)) if all(isinstance(d, int) for d in cx.shape(x)) else None
    if numel is None:
        raise NotMapped("median over a symbolic shape")
    flat.type = TensorType(cx.dtype(x), (numel,))
    values, _ = _median_along(cx, flat, 0, skip_nan)
    return cx.emit_typed("Reshape", values, cx.const(np.asarray([], np.int64)))


@aten("median.dim", "nanmedian.dim")
def _median_dim(cx, x, dim, keepdim=False):
    if cx.rank(x) == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, cx.rank(x))
    outs = _median_along(cx, x, axis, "nanmedian" in str(cx.fx.target))
    if not keepdim:
        outs = tuple(cx.emit("Squeeze", o, cx.const(np.asarray([axis], np.int64))) for o in outs)
    return _outputs(cx, *outs)


def _square(cx, a: Value, transposed: bool = False) -> Value:
    """``a`` (a square matrix, or a batch of them), its last two axes swapped if ``transposed``;
    typed, as the unrolled algorithms need to see its size."""
    return linalg.transposed_square(cx, a) if transposed else a


def _broadcast_batch(cx, b: Value, a: Value) -> Value:
    """``b`` [..., n, m] expanded to the batch axes it shares with ``a`` [..., n, n], typed."""
    sa, sb = cx.shape(a), cx.shape(b)
    if sa[:-2] == sb[:-2]:
        return b
    if not all(isinstance(d, int) for d in (*sa, *sb)):
        raise NotMapped("a triangular solve broadcasting symbolic batch sizes")
    target = (*np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2])), *sb[-2:])
    out = cx.emit("Expand", b, cx.const(np.asarray(target, np.int64)))
    out.type = TensorType(cx.dtype(b), tuple(target))
    return out


def _solve(cx, a: Value, b: Value, *, lower: bool, transposed: bool = False, unit: bool = False) -> Value:
    """x with op(a) x = b, op(a) = aᵀ if ``transposed``; ``lower`` names the triangle of op(a)."""
    b = _broadcast_batch(cx, b, a)
    if cx.shape(a)[-1] == 0:
        return b
    x = linalg.solve_triangular(cx, _square(cx, a, transposed), b, lower=lower, unit_diagonal=unit)
    x.type = b.type
    return x


def _factor(cx, a: Value, upper: bool) -> tuple[Value, Value]:
    """torch's Cholesky factor (upper: U with a = UᵀU, read from a's upper triangle) and info."""
    if cx.shape(a)[-1] == 0:
        return a, cx.const(np.zeros(tuple(cx.shape(a)[:-2]), np.int32))
    factor, info = linalg.cholesky(cx, _square(cx, a, upper))
    return (linalg.transpose(cx, factor, cx.rank(a)) if upper else factor), info


@aten("linalg_cholesky_ex.default")
def _cholesky_ex(cx, a, *, upper=False, check_errors=False):
    return _outputs(cx, *_factor(cx, cx.tensor(a), upper))


@aten("cholesky.default")
def _cholesky(cx, a, upper=False):
    return cx.emit_typed("Identity", _factor(cx, cx.tensor(a), upper)[0])


@aten("linalg_solve_triangular.default")
def _linalg_solve_triangular(cx, a, b, *, upper, left=True, unitriangular=False):
    a, b = cx.tensor(a), cx.tensor(b)
    if left:
        return cx.emit_typed("Identity", _solve(cx, a, b, lower=not upper, unit=unitriangular))
    rank = max(cx.rank(a), cx.rank(b))  # x a = b: aᵀ xᵀ = bᵀ, and aᵀ has the other triangle
    bt = linalg.transpose(cx, b, cx.rank(b))
    bt.type = TensorType(cx.dtype(b), (*cx.shape(b)[:-2], cx.shape(b)[-1], cx.shape(b)[-2]))
    x = _solve(cx, a, bt, lower=upper, transposed=True, unit=unitriangular)
    return cx.emit_typed("Identity", linalg.transpose(cx, x, rank))


@aten("triangular_solve.default")
def _triangular_solve(cx, b, a, upper=True, transpose=False, unitriangular=False):
    a, b = cx.tensor(a), cx.tensor(b)
    lower = upper if transpose else not upper
    return _outputs(cx, _solve(cx, a, b, lower=lower, transposed=transpose, unit=unitriangular), a)


@aten("cholesky_solve.default")
def _cholesky_solve(cx, b, factor, upper=False):
    """x with a x = b for a = L Lᵀ (``upper``: Uᵀ U): two triangular solves."""
    b, factor = cx.tensor(b), cx.tensor(factor)
    y = _solve(cx, factor, b, lower=True, transposed=upper)
    return cx.emit_typed("Identity", _solve(cx, factor, y, lower=False, transposed=not upper))


@aten("cholesky_inverse.default")
def _cholesky_inverse(cx, factor, upper=False):
    factor = cx.tensor(factor)
    n = cx.shape(factor)[-1]
    if not isinstance(n, int):
        raise NotMapped("cholesky_inverse of a symbolic size")
    eye = cx.const(np.eye(n, dtype=to_numpy(cx.dtype(factor))))
    eye.type = TensorType(cx.dtype(factor), (n, n))
    y = _solve(cx, factor, eye, lower=True, transposed=upper)
    return cx.emit_typed("Identity", _solve(cx, factor, y, lower=False, transposed=not upper))


def _typed(v: Value, dtype: DataType, shape) -> Value:
    v.type = TensorType(dtype, tuple(shape))
    return v


def _lu_parts(cx, packed: Value, shape) -> tuple[Value, Value]:
    """The unit lower factor L [..., m, k] and the upper U [..., k, n] of a packed LU."""
    *batch, m, n = shape
    k = min(m, n)
    np_dt = to_numpy(cx.dtype(packed))
    left = cx.emit("Slice", packed, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([k], np.int64)),
                   cx.const(np.asarray([-1], np.int64)))  # fmt: skip
    lower = cx.emit("Add", cx.emit("Mul", left, cx.const(np.tril(np.ones((m, k), np_dt), -1))),
                    cx.const(np.eye(m, k, dtype=np_dt)))  # fmt: skip
    top = cx.emit("Slice", packed, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([k], np.int64)),
                  cx.const(np.asarray([-2], np.int64)))  # fmt: skip
    upper = cx.emit("Mul", top, cx.const(np.triu(np.ones((k, n), np_dt))))
    return _typed(lower, cx.dtype(packed), (*batch, m, k)), _typed(upper, cx.dtype(packed), (*batch, k, n))


def _permutation_matrix(cx, perm: Value, m: int, dtype: DataType) -> Value:
    """P with a = P L U for a[perm] = L U: P[r, i] = 1 where perm[i] = r."""
    hits = cx.emit("Equal", cx.emit("Unsqueeze", perm, cx.const(np.asarray([-2], np.int64))),
                   cx.const(np.arange(m, dtype=np.int64).reshape(m, 1)))  # fmt: skip
    return cx.emit("Cast", hits, to=int(dtype))


def _diagonal_of(cx, upper: Value, k: int) -> Value:
    square = cx.emit("Slice", upper, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([k], np.int64)),
                     cx.const(np.asarray([-1], np.int64)))  # fmt: skip
    eye = cx.const(np.eye(k, dtype=to_numpy(cx.dtype(upper))))
    diagonal = cx.emit("ReduceSum", cx.emit("Mul", square, eye), cx.const(np.asarray([-1], np.int64)), keepdims=0)
    return _typed(diagonal, cx.dtype(upper), (*cx.shape(upper)[:-2], k))


def _lu_info(cx, diagonal: Value) -> Value:
    """LAPACK's info: the order (1-based) of the first zero on U's diagonal, 0 when none."""
    zero = cx.emit("Cast", cx.emit("Equal", diagonal, cx.tensor(0.0, diagonal.type.dtype)), to=int(DataType.INT32))
    first = cx.emit("Add", cx.emit("ArgMax", zero, axis=-1, keepdims=0), cx.const(np.asarray(1, np.int64)))
    found = cx.emit("Greater", cx.emit("ReduceMax", zero, cx.const(np.asarray([-1], np.int64)), keepdims=0),
                    cx.const(np.asarray(0, np.int32)))  # fmt: skip
    return cx.emit("Cast", cx.emit("Where", found, first, cx.const(np.asarray(0, np.int64))), to=int(DataType.INT32))


def _factorized(cx, a: Value):
    """(packed LU, 0-based pivots, row permutation, L, U, U's diagonal) of a static-size ``a``."""
    shape = cx.shape(a)
    packed, pivots, perm = linalg.lu(cx, a)
    packed = _typed(packed, cx.dtype(a), shape)
    lower, upper = _lu_parts(cx, packed, shape)
    return packed, pivots, perm, lower, upper, _diagonal_of(cx, upper, min(shape[-2:]))


def _outputs(cx, *values):
    """A multi-output op's results, typed from the FX node."""
    types = [cx.meta_type(v) for v in cx.val]
    outs = tuple(cx.emit("Identity", v) for v in values)
    for o, t in zip(outs, types, strict=True):
        o.type = t
    return outs


def _pivots_out(cx, pivots: Value) -> Value:
    return cx.emit("Cast", cx.emit("Add", pivots, cx.const(np.asarray(1, np.int64))), to=int(DataType.INT32))


def _lu_solve_left(cx, lower: Value, upper: Value, perm: Value, b: Value) -> Value:
    """x with a x = b for a[perm] = L U: b's rows permuted, then two triangular solves."""
    dtype = cx.dtype(b)
    rows = cx.emit("Unsqueeze", perm, cx.const(np.asarray([-1], np.int64)))
    shape = tuple(np.broadcast_shapes(tuple(cx.shape(lower)[:-2]), tuple(cx.shape(b)[:-2]))) + tuple(cx.shape(b)[-2:])
    b = cx.emit("Expand", b, cx.const(np.asarray(shape, np.int64)))
    index = cx.emit("Expand", rows, cx.const(np.asarray(shape, np.int64)))
    permuted = _typed(cx.emit("GatherElements", b, index, axis=-2), dtype, shape)
    y = _typed(linalg.solve_triangular(cx, lower, permuted, lower=True, unit_diagonal=True), dtype, shape)
    return _typed(linalg.solve_triangular(cx, upper, y, lower=False), dtype, shape)


def _need_static_square(cx, a: Value) -> int:
    shape = cx.shape(a)
    if not all(isinstance(d, int) for d in shape) or shape[-1] != shape[-2]:
        raise NotMapped("a solve or inverse of a matrix that is not square of a static size")
    if shape[-1] == 0:
        raise NotMapped("a solve or inverse of an empty matrix")
    return shape[-1]


@aten("linalg_lu_factor_ex.default")
def _lu_factor_ex(cx, a, *, pivot=True, check_errors=False):
    if not pivot:
        raise NotMapped("an LU factorization without pivoting")
    packed, pivots, _, _, _, diagonal = _factorized(cx, cx.tensor(a))
    return _outputs(cx, packed, _pivots_out(cx, pivots), _lu_info(cx, diagonal))


@aten("linalg_lu.default")
def _linalg_lu(cx, a, *, pivot=True):
    if not pivot:
        raise NotMapped("an LU factorization without pivoting")
    a = cx.tensor(a)
    _, _, perm, lower, upper, _ = _factorized(cx, a)
    return _outputs(cx, _permutation_matrix(cx, perm, cx.shape(a)[-2], cx.dtype(a)), lower, upper)


def _replayed(cx, pivots: Value, shape) -> Value:
    """The row permutation (int64 [..., m]) that LAPACK's 1-based ``pivots`` make, the row swaps
    replayed in order."""
    m, k = shape[-2], min(shape[-2:])
    rows = cx.const(np.arange(m, dtype=np.int64))
    chosen = cx.emit("Sub", cx.cast(pivots, DataType.INT64), cx.const(np.asarray(1, np.int64)))  # [..., k]
    perm = cx.emit("Expand", rows, cx.const(np.asarray((*shape[:-2], m), np.int64)))
    for j in range(k):
        p = cx.emit("Gather", chosen, cx.const(np.asarray([j], np.int64)), axis=-1)  # [..., 1]
        here = cx.const(np.asarray(j, np.int64))
        other = cx.emit("Where", cx.emit("Equal", rows, p), here, rows)
        perm = cx.emit("GatherElements", perm, cx.emit("Where", cx.emit("Equal", rows, here), p, other), axis=-1)
    return perm


@aten("lu_unpack.default")
def _lu_unpack(cx, packed, pivots, unpack_data=True, unpack_pivots=True):
    packed = cx.tensor(packed)
    shape = cx.shape(packed)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("lu_unpack of a symbolic size")
    lower, upper = _lu_parts(cx, packed, shape)
    perm = _replayed(cx, pivots, shape)
    return _outputs(cx, _permutation_matrix(cx, perm, shape[-2], cx.dtype(packed)), lower, upper)


@aten("linalg_inv_ex.default")
def _inv_ex(cx, a, *, check_errors=False):
    a = cx.tensor(a)
    n = _need_static_square(cx, a)
    _, _, perm, lower, upper, diagonal = _factorized(cx, a)
    eye = _typed(cx.const(np.eye(n, dtype=to_numpy(cx.dtype(a)))), cx.dtype(a), (n, n))
    return _outputs(cx, _lu_solve_left(cx, lower, upper, perm, eye), _lu_info(cx, diagonal))


@aten("_linalg_solve_ex.default")
def _solve_ex(cx, a, b, *, left=True, check_errors=False):
    a, b = cx.tensor(a), cx.tensor(b)
    _need_static_square(cx, a)
    if not left:
        raise NotMapped("linalg.solve with the matrix on the right")
    vector = cx.rank(b) == 1 or (cx.rank(b) == cx.rank(a) - 1 and tuple(cx.shape(b)) == tuple(cx.shape(a)[:-1]))
    if vector:  # torch reads b [..., n] as one column
        b = _typed(cx.emit("Unsqueeze", b, cx.const(np.asarray([-1], np.int64))), cx.dtype(b), (*cx.shape(b), 1))
    packed, pivots, perm, lower, upper, diagonal = _factorized(cx, a)
    x = _lu_solve_left(cx, lower, upper, perm, b)
    if vector:
        x = cx.emit("Squeeze", x, cx.const(np.asarray([-1], np.int64)))
    return _outputs(cx, x, packed, _pivots_out(cx, pivots), _lu_info(cx, diagonal))


def _swap_parity(cx, pivots: Value, k: int) -> Value:
    """(-1) to the number of row swaps (pivots that are not their own step), in int64."""
    moved = cx.emit("Not", cx.emit("Equal", pivots, cx.const(np.arange(k, dtype=np.int64))))
    swaps = cx.emit("ReduceSum", cx.emit("Cast", moved, to=int(DataType.INT64)), cx.const(np.asarray([-1], np.int64)),
                    keepdims=0)  # fmt: skip
    two = cx.const(np.asarray(2, np.int64))
    return cx.emit("Sub", cx.const(np.asarray(1, np.int64)), cx.emit("Mul", cx.emit("Mod", swaps, two), two))


def _empty_determinant(cx, a: Value, *values: float):
    """det/slogdet of 0-by-0 matrices: ``values`` per matrix (det 1; sign 1, log 0), no pivots."""
    batch = tuple(cx.shape(a)[:-2])
    np_dt = to_numpy(cx.dtype(a))
    pivots = cx.const(np.zeros((*batch, 0), np.int32))
    return _outputs(cx, *(cx.const(np.full(batch, v, np_dt)) for v in values), a, pivots)


@aten("_linalg_det.default")
def _det(cx, a):
    a = cx.tensor(a)
    if cx.shape(a)[-2:] == (0, 0):
        return _empty_determinant(cx, a, 1.0)
    n = _need_static_square(cx, a)
    packed, pivots, _, _, _, diagonal = _factorized(cx, a)
    parity = cx.emit("Cast", _swap_parity(cx, pivots, n), to=int(cx.dtype(a)))
    det = cx.emit("Mul", cx.emit("ReduceProd", diagonal, cx.const(np.asarray([-1], np.int64)), keepdims=0), parity)
    return _outputs(cx, det, packed, _pivots_out(cx, pivots))


@aten("_linalg_slogdet.default")
def _slogdet(cx, a):
    a = cx.tensor(a)
    if cx.shape(a)[-2:] == (0, 0):
        return _empty_determinant(cx, a, 1.0, 0.0)
    n = _need_static_square(cx, a)
    packed, pivots, _, _, _, diagonal = _factorized(cx, a)
    last = cx.const(np.asarray([-1], np.int64))
    parity = cx.emit("Cast", _swap_parity(cx, pivots, n), to=int(cx.dtype(a)))
    sign = cx.emit("Mul", cx.emit("ReduceProd", cx.emit("Sign", diagonal), last, keepdims=0), parity)
    logabs = cx.emit("ReduceSum", cx.emit("Log", cx.emit("Abs", diagonal)), last, keepdims=0)
    return _outputs(cx, sign, logabs, packed, _pivots_out(cx, pivots))


def _lu_solve_adjoint(cx, lower: Value, upper: Value, perm: Value, b: Value) -> Value:
    """x with aᵀ x = b for a[perm] = L U: aᵀ = Uᵀ Lᵀ Pᵀ, so Uᵀ z = b, Lᵀ w = z, x = P w."""
    dtype, shape = cx.dtype(b), tuple(cx.shape(b))
    ut, lt = _square(cx, upper, True), _square(cx, lower, True)
    z = _typed(linalg.solve_triangular(cx, ut, _broadcast_batch(cx, b, upper), lower=True), dtype, shape)
    w = _typed(linalg.solve_triangular(cx, lt, z, lower=False, unit_diagonal=True), dtype, z.type.shape)
    inverse = cx.emit("ArgMax", _permutation_matrix(cx, perm, cx.shape(lower)[-1], DataType.INT32), axis=-1,
                      keepdims=0)  # row r of P holds its 1 at column inverse[r]  # fmt: skip
    index = cx.emit("Expand", cx.emit("Unsqueeze", inverse, cx.const(np.asarray([-1], np.int64))),
                    cx.const(np.asarray(w.type.shape, np.int64)))  # fmt: skip
    return _typed(cx.emit("GatherElements", w, index, axis=-2), dtype, w.type.shape)


@aten("linalg_lu_solve.default")
def _lu_solve(cx, packed, pivots, b, *, left=True, adjoint=False):
    """x with a x = b (``adjoint``: aᵀ x = b; not ``left``: the matrix on the right, solved as
    the transposed system) from a's packed LU and pivots."""
    packed, b = cx.tensor(packed), cx.tensor(b)
    _need_static_square(cx, packed)
    shape = cx.shape(packed)
    lower, upper = _lu_parts(cx, packed, shape)
    perm = _replayed(cx, pivots, shape)
    if not left:  # x a = b ⇔ aᵀ xᵀ = bᵀ (x aᵀ = b ⇔ a xᵀ = bᵀ)
        bt = _typed(linalg.transpose(cx, b, cx.rank(b)), cx.dtype(b), (*cx.shape(b)[:-2], cx.shape(b)[-1],
                                                                        cx.shape(b)[-2]))  # fmt: skip
        solve = _lu_solve_left if adjoint else _lu_solve_adjoint
        x = solve(cx, lower, upper, perm, bt)
        return cx.emit_typed("Identity", linalg.transpose(cx, x, cx.rank(x)))
    solve = _lu_solve_adjoint if adjoint else _lu_solve_left
    return cx.emit_typed("Identity", solve(cx, lower, upper, perm, b))


@aten("linalg_qr.default")
def _linalg_qr(cx, a, mode="reduced"):
    """Householder QR with LAPACK's reflectors (so R's signs are LAPACK's): Q m-by-k ("reduced"),
    m-by-m ("complete") or empty ("r")."""
    a = cx.tensor(a)
    shape = linalg.static_matrix(a, "a QR factorization")
    m, n = shape[-2:]
    k = min(m, n)
    packed, taus = linalg.householder_qr(cx, a)
    packed = _typed(packed, cx.dtype(a), shape)
    r_rows = m if mode == "complete" else k
    top = cx.emit("Slice", packed, cx.const(np.asarray([0], np.int64)), cx.const(np.asarray([r_rows], np.int64)),
                  cx.const(np.asarray([-2], np.int64)))  # fmt: skip
    r = cx.emit("Mul", top, cx.const(np.triu(np.ones((r_rows, n), to_numpy(cx.dtype(a))))))
    if mode == "r":
        q = cx.const(np.zeros((0,), to_numpy(cx.dtype(a))))
    else:
        q = linalg.householder_product(cx, packed, taus, k, m if mode == "complete" else k, shape)
    return _outputs(cx, q, r)


@aten("geqrf.default")
def _geqrf(cx, a):
    a = cx.tensor(a)
    packed, taus = linalg.householder_qr(cx, a)
    return _outputs(cx, packed, taus)


@aten("linalg_householder_product.default")
def _householder_product(cx, a, tau):
    return cx.emit_typed("Identity", linalg.orgqr(cx, cx.tensor(a), cx.tensor(tau)))


@aten("_linalg_svd.default")
def _svd(cx, a, full_matrices=False, compute_uv=True, driver=None):
    """One-sided Jacobi (:mod:`irforge.frontends.lib.jacobi`): valid singular vectors, whose signs may
    differ from LAPACK's (torch leaves them to the platform)."""
    vectors = compute_uv and bool(cx.used_outputs() & {0, 2})
    u, values, vt = jacobi.svd(cx, cx.tensor(a), vectors=vectors, full_matrices=full_matrices)
    return tuple(None if v is None else _typed_as(cx, v, i) for i, v in enumerate((u, values, vt)))


def _typed_as(cx, v: Value, index: int) -> Value:
    """``v`` as output ``index`` of the FX node, with its type."""
    out = cx.emit("Identity", v)
    out.type = cx.meta_type(cx.val[index])
    return out


@aten("resize.default", "resize_.default")
def _resize(cx, x, size, memory_format=None):
    """The functional ``resize_``: the first ``prod(size)`` elements of ``x`` in the new shape.  Growing
    is refused: torch leaves the new elements uninitialized."""
    shape = cx.shape(x)
    if not all(isinstance(d, int) for d in (*shape, *size)):
        raise NotMapped("resize to or from a symbolic size")
    have, want = math.prod(shape), math.prod(size)
    if want > have:
        raise NotMapped("resize that grows a tensor (torch leaves the new elements uninitialized)")
    flat = cx.emit("Reshape", x, cx.int64s([-1])) if want < have else x
    if want < have:
        flat = cx.emit("Slice", flat, cx.int64s([0]), cx.int64s([want]), cx.int64s([0]))
    return cx.emit_typed("Reshape", flat, cx.int64s(list(size)))


@aten("hash_tensor.default")
def _hash_tensor(cx, x, dim=(), keepdim=False, mode=0):
    """``mode=0``: every element widened to 64 bits (floats to float64), its bits read as uint64, and
    the whole reduced by XOR, halving the reduced axis each step (ONNX has no XOR reduction)."""
    if mode != 0:
        raise NotMapped(f"hash_tensor mode {mode}")
    rank, dtype = cx.rank(x), cx.dtype(x)
    cx.importer.require_opset(special.BITCAST_OPSET)
    if is_floating(dtype):
        bits = cx.emit("BitCast", cx.cast(x, DataType.DOUBLE), to=int(DataType.UINT64))
    elif dtype in (DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64):
        bits = cx.emit("BitCast", cx.cast(x, DataType.INT64), to=int(DataType.UINT64))
    else:
        bits = cx.cast(x, DataType.UINT64)
    axes = sorted({_axis(d, rank) for d in dim}) if dim else list(range(rank))
    shape = cx.shape(x)
    if not all(isinstance(shape[a], int) for a in axes):
        raise NotMapped("hash_tensor over a symbolic size")
    kept = [a for a in range(rank) if a not in axes]
    length = math.prod(shape[a] for a in axes)
    moved = cx.emit("Transpose", bits, perm=kept + axes) if rank else bits
    flat = cx.emit("Reshape", moved, cx.int64s([*(_dim_size(cx, x, a) for a in kept), length]))
    zero = np.zeros((), np.uint64)
    while length > 1:
        if length % 2:
            flat = cx.emit("Pad", flat, cx.int64s([0] * len(kept) + [0] + [0] * len(kept) + [1]), cx.const(zero))
            length += 1
        half = length // 2
        last = cx.const(np.asarray([-1], np.int64))
        flat = cx.emit("BitwiseXor", cx.emit("Slice", flat, cx.int64s([0]), cx.int64s([half]), last),
                       cx.emit("Slice", flat, cx.int64s([half]), cx.int64s([length]), last))  # fmt: skip
        length = half
    out = cx.emit("Squeeze", flat, cx.const(np.asarray([-1], np.int64)))
    if keepdim:
        out = cx.emit("Unsqueeze", out, cx.const(np.asarray(axes, np.int64)))
    return cx.emit_typed("Identity", out)


@aten("linalg_ldl_factor_ex.default")
def _ldl_factor(cx, a, hermitian=False, check_errors=False):
    """LAPACK's sytf2 with Bunch-Kaufman pivoting (for real matrices ``hermitian`` changes nothing)."""
    packed, pivots, info = ldl.ldl_factor(cx, cx.tensor(a))
    return tuple(_typed_as(cx, v, i) for i, v in enumerate((packed, pivots, info)))


@aten("linalg_ldl_solve.default")
def _ldl_solve(cx, ld, pivots, b, hermitian=False):
    return cx.emit_typed("Identity", ldl.ldl_solve(cx, cx.tensor(ld), pivots, cx.tensor(b)))


@aten("linalg_pinv.atol_rtol_tensor", "linalg_pinv.atol_rtol_float", "linalg_pinv.default")
def _pinv(cx, a, atol=None, rtol=None, hermitian=False, rcond=None):
    if rcond is not None:  # the old spelling: rcond is rtol
        rtol = rcond
    tol = [None if t is None else t if isinstance(t, Value) else cx.const(np.asarray(t, np.float64))
           for t in (atol, rtol)]  # fmt: skip
    return cx.emit_typed("Identity", jacobi.pseudo_inverse(cx, cx.tensor(a), *tol, hermitian=hermitian))


@aten("_linalg_eigh.default")
def _eigh(cx, a, uplo="L", compute_v=True):
    """Two-sided Jacobi: the eigenvalues ascending and valid eigenvectors (signs may differ from LAPACK's)."""
    vectors = compute_v and 1 in cx.used_outputs()
    values, vecs = jacobi.symmetric_eigen(cx, cx.tensor(a), lower=uplo == "L", vectors=vectors)
    return _typed_as(cx, values, 0), None if vecs is None else _typed_as(cx, vecs, 1)


@aten("linalg_matrix_exp.default")
def _matrix_exp(cx, a):
    return cx.emit_typed("Identity", linalg.matrix_exp(cx, cx.tensor(a)))


@aten("ormqr.default")
def _ormqr(cx, a, tau, other, left=True, transpose=False):
    """Q (the product of ``geqrf``'s reflectors, square) or Qᵀ times ``other``, from the left or
    the right: Q formed as ``orgqr`` forms it, then one product."""
    a, tau, other = cx.tensor(a), cx.tensor(tau), cx.tensor(other)
    shape = linalg.static_matrix(a, "ormqr")
    count = cx.shape(tau)[-1]
    if not isinstance(count, int):
        raise NotMapped("ormqr with a symbolic number of reflectors")
    q = linalg.householder_product(cx, a, tau, count, shape[-2], shape)
    if transpose:
        q = linalg.transpose(cx, q, len(shape))
    return cx.emit_typed("MatMul", q, other) if left else cx.emit_typed("MatMul", other, q)


_PAIRWISE_LIMIT = 1 << 26
"""Most elements of the pairwise comparisons ``mode`` and ``cummax``/``cummin`` build."""


@aten("mode.default")
def _mode(cx, x, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and the
    last position holding it, as torch's CPU kernel gives them; counted by pairwise comparison."""
    x = cx.tensor(x, cx.dtype(x))
    shape, dt = cx.shape(x), cx.dtype(x)
    if not shape:
        return _outputs(cx, x, cx.const(np.asarray(0, np.int64)))
    axis = _axis(dim, len(shape))
    n = shape[axis]
    if not all(isinstance(d, int) for d in shape) or n * math.prod(shape) > _PAIRWISE_LIMIT:
        raise NotMapped("mode over a symbolic or very long axis")
    np_dt = to_numpy(dt)
    at_i = cx.emit("Unsqueeze", x, cx.const(np.asarray([axis + 1], np.int64)))
    at_j = cx.emit("Unsqueeze", x, cx.const(np.asarray([axis], np.int64)))
    same = cx.emit("Cast", cx.emit("Equal", at_i, at_j), to=int(DataType.INT64))
    counts = cx.emit("ReduceSum", same, cx.const(np.asarray([axis + 1], np.int64)), keepdims=0)
    axes = cx.const(np.asarray([axis], np.int64))
    most = cx.emit("Equal", counts, cx.emit("ReduceMax", counts, axes, keepdims=1))
    top = np.inf if is_floating(dt) else (True if dt == DataType.BOOL else np.iinfo(np_dt).max)
    value = cx.emit("ReduceMin", cx.emit("Where", most, x, cx.const(np.asarray(top, np_dt))), axes, keepdims=1)
    position = cx.const(np.arange(n, dtype=np.int64).reshape([n] + [1] * (len(shape) - axis - 1)))
    held = cx.emit("Where", cx.emit("Equal", x, value), position, cx.const(np.asarray(-1, np.int64)))
    index = cx.emit("ReduceMax", held, axes, keepdims=1)
    if not keepdim:
        value, index = cx.emit("Squeeze", value, axes), cx.emit("Squeeze", index, axes)
    return _outputs(cx, value, index)


@aten("cummax.default", "cummin.default")
def _cummax(cx, x, dim):
    """Running max (min) and the index torch gives it: the last position that holds the running
    value, and from the first NaN on, NaN at the last NaN so far (torch's update rule)."""
    from ..common import associative_scan

    largest = "cummax" in str(cx.fx.target)
    shape, dt = cx.shape(x), cx.dtype(x)
    rank = len(shape)
    if rank == 0:
        return cx.emit("Identity", x), cx.const(np.asarray(0))
    axis = _axis(dim, rank)
    n = shape[axis]
    if not all(isinstance(d, int) for d in shape) or n * math.prod(shape) > _PAIRWISE_LIMIT:
        raise NotMapped("cummax/cummin over a symbolic or very long axis")
    if dt == DataType.BOOL:
        raise NotMapped("cummax/cummin of bool")
    floating = is_floating(dt)
    np_dt = to_numpy(dt)
    bound = np.inf if floating else (np.iinfo(np_dt).max if not largest else np.iinfo(np_dt).min)
    identity = -bound if floating and largest else bound
    if floating:
        nan = cx.emit("IsNaN", x)
        clean = cx.emit("Where", nan, cx.const(np.asarray(identity, np_dt)), x)
        clean.type = x.type
        flag = cx.emit("Cast", nan, to=int(DataType.FLOAT))
        flag.type = TensorType(DataType.FLOAT, shape)
        seen = cx.emit("Greater", associative_scan(cx, flag, axis, "Max", 0.0), cx.const(np.asarray(0.0, np.float32)))
        running = associative_scan(cx, clean, axis, "Max" if largest else "Min", identity)
        values = cx.emit("Where", seen, cx.const(np.asarray(np.nan, np_dt)), running)
    else:
        values = associative_scan(cx, x, axis, "Max" if largest else "Min", identity)
    # pairs (i along axis, j along a new axis after it): the last j <= i that holds the value at i
    at_i = cx.emit("Unsqueeze", values, cx.const(np.asarray([axis + 1], np.int64)))
    at_j = cx.emit("Unsqueeze", x, cx.const(np.asarray([axis], np.int64)))
    match = cx.emit("Equal", at_j, at_i)
    if floating:
        nan_j = cx.emit("Unsqueeze", nan, cx.const(np.asarray([axis], np.int64)))
        seen_i = cx.emit("Unsqueeze", seen, cx.const(np.asarray([axis + 1], np.int64)))
        match = cx.emit("Or", match, cx.emit("And", nan_j, seen_i))
    around = [1] * axis, [1] * (rank - axis - 1)
    causal = np.tril(np.ones((n, n), bool)).reshape([*around[0], n, n, *around[1]])
    position = np.arange(n, dtype=np.int64).reshape([*around[0], 1, n, *around[1]])
    picked = cx.emit("Where", cx.emit("And", match, cx.const(causal)), cx.const(position),
                     cx.const(np.asarray(-1, np.int64)))  # fmt: skip
    index = cx.emit("ReduceMax", picked, cx.const(np.asarray([axis + 1], np.int64)), keepdims=0)
    return _outputs(cx, values, index)


@aten("ldexp.Tensor")
def _ldexp(cx, x, other):
    return cx.emit_typed("Mul", cx.tensor(x), cx.emit("Pow", cx.tensor(2.0), cx.tensor(other)))


@aten("dist.default")
def _dist(cx, a, b, p=2):
    from ...core_ir.types import TensorType
    from ..common import broadcast_shapes

    a, b = cx.tensor(a), cx.tensor(b)
    diff = cx.emit("Sub", a, b)
    diff.type = TensorType(cx.out_dtype, broadcast_shapes(cx.shape(a), cx.shape(b)))
    return _vector_norm(cx, diff, p)


@aten("angle.default")
def _angle(cx, x):
    x = cx.tensor(x)
    if not is_floating(cx.dtype(x)):
        return cx.emit_typed("Mul", cx.cast(cx.emit("Less", x, cx.tensor(0, cx.dtype(x))), cx.out_dtype),
                             cx.tensor(math.pi))  # fmt: skip
    phase = cx.emit("Where", cx.emit("Less", x, cx.tensor(0)), cx.tensor(math.pi), cx.tensor(0))
    return cx.emit_typed("Where", cx.emit("IsNaN", x), x, phase)


@aten("slice_scatter.default")
def _slice_scatter(cx, x, src, dim=0, start=None, end=None, step=1):
    """``src`` written over ``x[start:end:step]`` along ``dim``: ScatterND over that axis moved first."""
    shape = cx.shape(x)
    axis = _axis(dim, len(shape))
    n = shape[axis]
    if not isinstance(n, int) or not all(isinstance(v, int) or v is None for v in (start, end, step)):
        raise NotMapped("slice_scatter over symbolic bounds")
    rows = np.arange(n)[slice(start, end, step)]
    perm = [axis, *[d for d in range(len(shape)) if d != axis]]
    xt = cx.emit("Transpose", cx.tensor(x), perm=perm)
    st = cx.emit("Transpose", cx.tensor(src), perm=perm)
    y = cx.emit("ScatterND", xt, cx.const(rows.reshape(-1, 1).astype(np.int64)), st)
    inverse = [perm.index(i) for i in range(len(shape))]
    return cx.emit_typed("Transpose", y, perm=inverse)


@aten("select_scatter.default")
def _select_scatter(cx, x, src, dim, index):
    shape = cx.shape(x)
    axis = _axis(dim, len(shape))
    n = shape[axis]
    if not isinstance(n, int) or not isinstance(index, int):
        raise NotMapped("select_scatter at a symbolic position")
    index = index + n if index < 0 else index
    row = cx.emit("Unsqueeze", cx.tensor(src), cx.const(np.asarray([axis], np.int64)))
    return _slice_scatter(cx, x, row, axis, index, index + 1)


@aten("col2im.default")
def _col2im(cx, x, output_size, kernel_size, dilation, padding, stride):
    """``fold``: every column's block summed into the image, which is a transposed convolution with
    one one-hot filter per block position, grouped by channel."""
    batched = cx.rank(x) == 3
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = kernel_size, dilation, padding, stride
    height, width = output_size
    rows, cols = [(size + 2 * p - d * (k - 1) - 1) // s + 1 for size, p, d, k, s in
                  ((height, ph, dh, kh, sh), (width, pw, dw, kw, sw))]  # fmt: skip
    per_block = cx.shape(x)[-2]
    if not isinstance(per_block, int) or per_block % (kh * kw):
        raise NotMapped("col2im over a symbolic number of channels")
    channels = per_block // (kh * kw)
    weight = np.zeros((per_block, 1, kh, kw), to_numpy(cx.out_dtype))
    for c in range(channels):
        for a in range(kh):
            for b in range(kw):
                weight[c * kh * kw + a * kw + b, 0, a, b] = 1
    blocks = cx.emit("Reshape", cx.tensor(x), cx.int64s([0 if batched else 1, per_block, rows, cols]))
    natural = [(rows - 1) * sh - 2 * ph + dh * (kh - 1) + 1, (cols - 1) * sw - 2 * pw + dw * (kw - 1) + 1]
    y = cx.emit("ConvTranspose", blocks, cx.const(weight), group=channels, strides=[sh, sw], dilations=[dh, dw],
                pads=[ph, pw, ph, pw], output_padding=[height - natural[0], width - natural[1]])  # fmt: skip
    if not batched:
        y = cx.emit("Squeeze", y, cx.const(np.asarray([0], np.int64)))
    return cx.emit_typed("Identity", y)


@aten("unfold.default")
def _unfold(cx, x, dim, size, step):
    """Windows of ``size`` every ``step`` along ``dim``, as a new last axis: a Gather of an index grid."""
    shape = cx.shape(x)
    if not shape:
        return cx.emit_typed("Reshape", x, cx.const(np.asarray([1], np.int64)))
    axis = _axis(dim, len(shape))
    n = shape[axis]
    if not isinstance(n, int):
        raise NotMapped("unfold over a symbolic size")
    starts = np.arange(0, n - size + 1, step)
    grid = (starts[:, None] + np.arange(size)[None, :]).astype(np.int64)  # [windows, size]
    y = cx.emit("Gather", x, cx.const(grid), axis=axis)  # [..., windows, size, ...]
    rank = len(shape) + 1
    perm = [d for d in range(rank) if d != axis + 1] + [axis + 1]
    return cx.emit_typed("Transpose", y, perm=perm)


@aten("adaptive_max_pool2d.default", "adaptive_max_pool3d.default", "adaptive_max_pool1d.default")
def _adaptive_max_pool(cx, x, output_size):
    nd = len(output_size)
    shape = cx.shape(x)
    spatial = shape[-nd:]
    if not all(isinstance(s, int) for s in spatial):
        raise NotMapped("adaptive pooling over symbolic sizes")
    out = cx.emit("Identity", _adaptive_windows(cx, cx.tensor(x), output_size, "ReduceMax"))
    out.type = cx.meta_type(cx.val[0])
    if 1 not in cx.used_outputs():
        return out, None
    indices = cx.emit("Identity", _adaptive_argmax(cx, cx.tensor(x), tuple(spatial), tuple(output_size)))
    indices.type = cx.meta_type(cx.val[1])
    return out, indices


def _adaptive_argmax(cx, x: Value, spatial: tuple[int, ...], output_size: tuple[int, ...]) -> Value:
    """Where each adaptive window's maximum is, as torch gives it: the flat position in the input's
    spatial plane of the window's first largest element.  Every window's positions are a row of a
    constant (shorter windows repeat their first position, which leaves the first maximum alone)."""
    windows = []
    for cell in np.ndindex(*output_size):
        sizes = zip(cell, spatial, output_size, strict=True)
        ranges = [range((i * n) // o, -((-(i + 1) * n) // o)) for i, n, o in sizes]
        windows.append([int(np.ravel_multi_index(p, spatial)) for p in itertools.product(*ranges)])
    width = max(len(w) for w in windows)
    positions = np.asarray([w + [w[0]] * (width - len(w)) for w in windows], np.int64)  # [cells, width]
    lead = cx.rank(x) - len(spatial)
    flat = cx.emit("Reshape", x, cx.const(np.asarray([0] * lead + [-1], np.int64)))
    values = cx.emit("Gather", flat, cx.const(positions), axis=lead)  # [..., cells, width]
    best = cx.emit("ArgMax", values, axis=-1, keepdims=0, select_last_index=0)  # [..., cells]
    offsets = cx.const(np.arange(len(windows), dtype=np.int64) * width)
    picked = cx.emit("Gather", cx.const(positions.reshape(-1)), cx.emit("Add", best, offsets), axis=0)
    return cx.emit("Reshape", picked, cx.const(np.asarray([0] * lead + list(output_size), np.int64)))


@aten("fractional_max_pool2d.default", "fractional_max_pool3d.default")
def _fractional_max_pool(cx, x, kernel_size, output_size, random_samples):
    """Max pooling over pseudo-random windows, as ATen places them from ``random_samples`` (one
    number in [0, 1) per plane and spatial dim): window ``i`` of a dim starts at
    ``int((i + u) * alpha) - int(u * alpha)`` with ``alpha = (in - k) / (out - 1)`` in the input's
    type, the last at ``in - k``.  The value and flat index are the window's first maximum, or its
    last NaN (ATen keeps a NaN and replaces it with every later one)."""
    nd = len(output_size)
    x = cx.tensor(x)
    shape = cx.shape(x)
    spatial, kernel = tuple(shape[-nd:]), tuple(kernel_size)
    if not all(isinstance(d, int) for d in shape):
        raise NotMapped("fractional max pooling over symbolic sizes")
    batch, planes = (shape[0] if len(shape) == nd + 2 else 1), shape[-nd - 1]
    dtype = cx.dtype(x)
    np_dtype = np.dtype(to_numpy(dtype))
    samples = cx.emit("Reshape", cx.cast(cx.tensor(random_samples), dtype),
                      cx.const(np.asarray([batch, planes, nd], np.int64)))  # fmt: skip
    # the 2-D kernel reads its samples as (w, h), the 3-D one as (t, h, w)
    sample_of = [1, 0] if nd == 2 else list(range(nd))
    strides = [int(np.prod(spatial[d + 1:])) for d in range(nd)]
    positions = None
    for d, (size, k, out) in enumerate(zip(spatial, kernel, output_size, strict=True)):
        u = cx.emit("Gather", samples, cx.const(np.asarray(sample_of[d], np.int64)), axis=2)  # [batch, planes]
        starts = _fractional_starts(cx, u, size, k, out, np_dtype)  # [batch, planes, out]
        view = [batch, planes] + [out if e == d else 1 for e in range(nd)] + [1] * nd
        term = cx.emit("Reshape", cx.emit("Mul", starts, cx.const(np.asarray(strides[d], np.int64))),
                       cx.const(np.asarray(view, np.int64)))  # fmt: skip
        positions = term if positions is None else cx.emit("Add", positions, term)
    offsets = sum(np.arange(k, dtype=np.int64).reshape([k if e == d else 1 for e in range(nd)]) * strides[d]
                  for d, k in enumerate(kernel))  # fmt: skip
    cells, width = int(np.prod(output_size)), int(np.prod(kernel))
    offsets = np.asarray(offsets, np.int64).reshape([1, 1] + [1] * nd + list(kernel))
    positions = cx.emit("Add", positions, cx.const(offsets))
    positions = cx.emit("Reshape", positions, cx.const(np.asarray([batch, planes, cells, width], np.int64)))
    flat = cx.emit("Reshape", x, cx.const(np.asarray([batch, planes, -1], np.int64)))
    gathered = cx.emit("Reshape", positions, cx.const(np.asarray([batch, planes, cells * width], np.int64)))
    values = cx.emit("Reshape", cx.emit("GatherElements", flat, gathered, axis=2),
                     cx.const(np.asarray([batch, planes, cells, width], np.int64)))  # fmt: skip
    nan = cx.emit("Cast", cx.emit("IsNaN", values), to=int(DataType.INT32))
    last_nan = cx.emit("ArgMax", nan, axis=-1, keepdims=1, select_last_index=1)
    first_max = cx.emit("ArgMax", values, axis=-1, keepdims=1, select_last_index=0)
    has_nan = cx.emit("Cast", cx.emit("ReduceMax", nan, cx.const(np.asarray([-1], np.int64)), keepdims=1),
                      to=int(DataType.BOOL))  # fmt: skip
    best = cx.emit("Where", has_nan, last_nan, first_max)  # [batch, planes, cells, 1]
    out_shape = cx.const(np.asarray(list(shape[:-nd]) + list(output_size), np.int64))
    out = cx.emit("Reshape", cx.emit("GatherElements", values, best, axis=3), out_shape)
    out.type = cx.meta_type(cx.val[0])
    indices = cx.emit("Reshape", cx.emit("GatherElements", positions, best, axis=3), out_shape)
    indices.type = cx.meta_type(cx.val[1])
    return out, indices


def _fractional_starts(cx, u: Value, size: int, k: int, out: int, np_dtype) -> Value:
    """Where ATen's fractional pooling windows start along one dim: ``[batch, planes, out]``."""
    last = cx.const(np.full((1, 1, 1), size - k, np.int64))
    if out == 1:
        size_of = cx.emit("Concat", cx.emit("Shape", u), cx.const(np.asarray([1], np.int64)), axis=0)
        return cx.emit("Expand", last, size_of)
    alpha = np_dtype.type(size - k) / np_dtype.type(out - 1)  # ATen divides in the input's type
    u = cx.emit("Unsqueeze", u, cx.const(np.asarray([-1], np.int64)))
    steps = cx.const(np.arange(out - 1).astype(np_dtype))
    scaled = cx.emit("Floor", cx.emit("Mul", cx.emit("Add", steps, u), cx.const(np.asarray(alpha, np_dtype))))
    base = cx.emit("Floor", cx.emit("Mul", u, cx.const(np.asarray(alpha, np_dtype))))
    starts = cx.emit("Cast", cx.emit("Sub", scaled, base), to=int(DataType.INT64))
    tail = cx.emit("Expand", last, cx.emit("Shape", base))
    return cx.emit("Concat", starts, tail, axis=-1)


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


torch_backward.register(aten)
