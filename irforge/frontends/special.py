"""Special functions ONNX has no op for, written in ONNX ops the way XLA expands them.

``lgamma`` and ``digamma`` use the Lanczos approximation (g = 7, nine terms) with the reflection
formula below 1/2, as XLA's ``chlo.lgamma``/``chlo.digamma`` expansions do; ``erfinv`` uses Giles'
single-precision polynomials ("Approximating the erfinv function", 2010), as XLA's ``ErfInv32``
does.  So a framework's graph imported through these runs the same arithmetic on every backend.
Half-precision inputs are computed in float32 and rounded back; ``erfinv`` refuses float64,
whose polynomial it does not carry.
"""

from __future__ import annotations

import math

import numpy as np

from ..core_ir.dtypes import DataType, to_numpy
from ..core_ir.value import Value
from .common import Emitter, NotMapped

LANCZOS_G = 7.0
LANCZOS_BASE = 0.99999999999980993227684700473478
LANCZOS_COEFFICIENTS = (
    676.520368121885098567009190444019, -1259.13921672240287047156078755283, 771.3234287776530788486528258894,
    -176.61502916214059906584551354, 12.507343278686904814458936853, -0.13857109526572011689554707,
    9.984369578019570859563e-6, 1.50563273514931155834e-7,
)  # fmt: skip
ERFINV_BELOW_5 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)  # fmt: skip
ERFINV_ABOVE_5 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                  -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)  # fmt: skip
_WIDENED = (DataType.FLOAT16, DataType.BFLOAT16)


class _Math:
    """Element-wise arithmetic in one float dtype, constants made to match."""

    def __init__(self, e: Emitter, dtype: DataType):
        self.e, self.dtype = e, dtype

    def c(self, x: float) -> Value:
        return self.e.const(np.asarray(x, to_numpy(self.dtype)))

    def __getattr__(self, op: str):
        return lambda *xs, **attrs: self.e.emit(op, *(self.c(x) if isinstance(x, (int, float)) else x for x in xs),
                                                **attrs)  # fmt: skip

    def where(self, cond: Value, a, b) -> Value:
        return self.Where(cond, a, b)


def _widened(e: Emitter, x: Value, compute):
    """``compute`` in float32 for half-precision ``x``, in ``x``'s own dtype otherwise."""
    dtype = x.type.dtype
    if dtype in _WIDENED:
        return e.cast(compute(_Math(e, DataType.FLOAT), e.cast(x, DataType.FLOAT)), dtype)
    if dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"a special function of {dtype.name}")
    return compute(_Math(e, dtype), x)


def _lanczos_sums(m: _Math, z: Value) -> tuple[Value, Value]:
    """Σ cᵢ/(z+i+1) (plus the base term) and -Σ cᵢ/(z+i+1)², for z = x - 1."""
    a, d = m.c(LANCZOS_BASE), None
    for i, coeff in enumerate(LANCZOS_COEFFICIENTS):
        q = m.Add(z, float(i + 1))
        a = m.Add(a, m.Div(coeff, q))
        term = m.Div(coeff, m.Mul(q, q))
        d = m.Neg(term) if d is None else m.Sub(d, term)
    return a, d


def _log_t(m: _Math, z: Value) -> tuple[Value, Value]:
    """t = z + g + 1/2 and log t, written as log(g + 1/2) + log1p(z / (g + 1/2)) for accuracy."""
    t = m.Add(z, LANCZOS_G + 0.5)
    ratio = m.Div(z, LANCZOS_G + 0.5)
    log1p = m.Log(m.Add(ratio, 1.0))
    return t, m.Add(log1p, math.log(LANCZOS_G + 0.5))


def lgamma(e: Emitter, x: Value) -> Value:
    """log |Γ(x)|: +inf at the poles (0, -1, -2, ...) and at ±inf, NaN for NaN."""

    def compute(m: _Math, x: Value) -> Value:
        reflect = m.Less(x, 0.5)
        y = m.where(reflect, m.Sub(1.0, x), x)  # Γ(x) from Γ(1-x) below 1/2
        z = m.Sub(y, 1.0)
        a, _ = _lanczos_sums(m, z)
        t, log_t = _log_t(m, z)
        # (z + 1/2) log t - t, with log t split so large z loses nothing
        body = m.Add(m.Sub(m.Mul(m.Add(z, 0.5), log_t), t), m.Add(m.Log(a), 0.5 * math.log(2 * math.pi)))
        # log |sin(πx)| from the distance of |x| to the nearest integer, so it stays exact for large x
        ax = m.Abs(x)
        frac = m.Sub(ax, m.Floor(ax))
        frac = m.where(m.Greater(frac, 0.5), m.Sub(1.0, frac), frac)
        log_sin = m.Log(m.Sin(m.Mul(frac, math.pi)))
        reflected = m.Sub(m.Sub(math.log(math.pi), log_sin), body)
        out = m.where(reflect, reflected, body)
        inf = m.c(math.inf)
        out = m.where(m.IsInf(x), inf, out)
        pole = m.And(m.LessOrEqual(x, 0.0), m.Equal(x, m.Floor(x)))
        return m.where(pole, inf, out)

    return _widened(e, x, compute)


def digamma(e: Emitter, x: Value) -> Value:
    """ψ(x) = d/dx log Γ(x): NaN at the poles (0, -1, ...) and at -inf, +inf at +inf."""

    def compute(m: _Math, x: Value) -> Value:
        reflect = m.Less(x, 0.5)
        y = m.where(reflect, m.Sub(1.0, x), x)
        z = m.Sub(y, 1.0)
        a, d = _lanczos_sums(m, z)
        t, log_t = _log_t(m, z)
        body = m.Sub(m.Add(log_t, m.Div(d, a)), m.Div(LANCZOS_G, t))
        # ψ(x) = ψ(1-x) - π / tan(πx), with πx reduced to (-π/2, π/2] first
        reduced = m.Sub(x, m.Floor(m.Add(x, 0.5)))
        angle = m.Mul(reduced, math.pi)
        reflected = m.Sub(body, m.Div(m.Mul(m.Cos(angle), math.pi), m.Sin(angle)))
        out = m.where(reflect, reflected, body)
        out = m.where(m.IsInf(x, detect_negative=0), m.c(math.inf), out)
        bad = m.Or(m.IsInf(x, detect_positive=0), m.And(m.LessOrEqual(x, 0.0), m.Equal(x, m.Floor(x))))
        return m.where(bad, m.c(math.nan), out)

    return _widened(e, x, compute)


def erfinv(e: Emitter, x: Value) -> Value:
    """The inverse of erf on [-1, 1]: ±inf at ±1, NaN outside."""
    if x.type.dtype == DataType.DOUBLE:
        raise NotMapped("erfinv of float64 (only the single-precision polynomial is carried)")

    def compute(m: _Math, x: Value) -> Value:
        w = m.Neg(m.Log(m.Mul(m.Sub(1.0, x), m.Add(x, 1.0))))
        small = m.Less(w, 5.0)
        w = m.where(small, m.Sub(w, 2.5), m.Sub(m.Sqrt(w), 3.0))
        p = m.where(small, m.c(ERFINV_BELOW_5[0]), m.c(ERFINV_ABOVE_5[0]))
        for lo, hi in zip(ERFINV_BELOW_5[1:], ERFINV_ABOVE_5[1:], strict=True):
            p = m.Add(m.where(small, m.c(lo), m.c(hi)), m.Mul(p, w))
        out = m.Mul(p, x)
        edge = m.Equal(m.Abs(x), 1.0)
        return m.where(edge, m.Mul(x, math.inf), out)

    return _widened(e, x, compute)
