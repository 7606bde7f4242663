"""The regularized incomplete gamma functions P(a, x) (``igamma``) and Q(a, x) = 1 - P
(``igammac``) and the regularized incomplete beta function I_x(a, b), as data-dependent ``Loop``s.

The algorithms are the ones JAX lowers ``lax.igamma``/``lax.igammac`` to (after Cephes): the power
series of P below ``x = max(1, a)`` and the continued fraction of Q above it (at most 2000 steps,
its convergents rescaled against overflow), each run until every element has converged to the
dtype's epsilon, converged elements held.  JAX's programs compute in their own dtype (float32 for
half precision); PyTorch's are computed in float64, and take PyTorch's values at the domain's edges
(``a = 0``, infinite ``a``), which differ from JAX's.  I_x(a, b) is JAX's continued fraction
(DLMF 8.17.22, by the Lentz-Thompson-Barnett method, 200 steps in float32 and 600 in float64) on
whichever side of (a + 1)/(a + b + 2) it converges fast.
"""

from __future__ import annotations

import math

import numpy as np

from ...core_ir.dtypes import DataType, to_numpy
from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import Emitter, NotMapped, any_true, while_loop
from .special import _WIDENED, _Math, lgamma, log1p_of

CONTINUED_FRACTION_STEPS = 2000


def _series(e: Emitter, m: _Math, ax: Value, x: Value, a: Value, enabled: Value, eps: float) -> Value:
    """P(a, x) = ax/a · Σ xⁿ / ((a+1)…(a+n)) where ``enabled``, summed to a relative ``eps``."""

    def step(b: Emitter, it: Value, state: list[Value]) -> tuple[Value, list[Value]]:
        on, r, c, ans = state
        bm = _Math(b, m.dtype)
        r2 = bm.Add(r, 1.0)
        c2 = bm.Mul(c, bm.Div(x, r2))
        ans2 = bm.Add(ans, c2)
        going = b.emit("And", on, bm.Greater(bm.Div(c2, ans2), eps))
        return any_true(b, going), [going, bm.where(on, r2, r), bm.where(on, c2, c), bm.where(on, ans2, ans)]

    one = _full(m, a, 1.0)
    state = [enabled, a, one, one]
    _type(state, a)
    ans = while_loop(e, state, any_true(e, enabled), step, "igamma_series")[3]
    return m.Div(m.Mul(ans, ax), a)


def _continued_fraction(e: Emitter, m: _Math, ax: Value, x: Value, a: Value, enabled: Value, eps: float) -> Value:
    """Q(a, x) by Cephes' continued fraction where ``enabled`` (Legendre's, through its convergents
    p/q), to a relative change below ``eps`` or 2000 steps."""
    big = 1.0 / eps

    def step(b: Emitter, it: Value, state: list[Value]) -> tuple[Value, list[Value]]:
        on, ans, y, z, c, pkm1, qkm1, pkm2, qkm2 = state
        bm = _Math(b, m.dtype)
        c2, y2, z2 = bm.Add(c, 1.0), bm.Add(y, 1.0), bm.Add(z, 2.0)
        yc = bm.Mul(y2, c2)
        pk = bm.Sub(bm.Mul(pkm1, z2), bm.Mul(pkm2, yc))
        qk = bm.Sub(bm.Mul(qkm1, z2), bm.Mul(qkm2, yc))
        nonzero = b.emit("Not", bm.Equal(qk, 0.0))
        r = bm.Div(pk, qk)
        t = bm.where(nonzero, bm.Abs(bm.Div(bm.Sub(ans, r), r)), 1.0)
        ans2 = bm.where(nonzero, r, ans)
        rescale = bm.Greater(bm.Abs(pk), big)
        new_p2, new_p1, new_q2, new_q1 = (bm.where(rescale, bm.Mul(v, eps), v) for v in (pkm1, pk, qkm1, qk))
        going = b.emit("And", on, bm.Greater(t, eps))
        more = b.emit("And", bm.Less(c2, float(CONTINUED_FRACTION_STEPS)), any_true(b, going))
        held = [bm.where(on, new, old) for new, old in ((ans2, ans), (y2, y), (z2, z))]
        pq = [bm.where(on, new, old) for new, old in ((new_p1, pkm1), (new_q1, qkm1), (new_p2, pkm2), (new_q2, qkm2))]
        return more, [going, *held, c2, *pq]

    y = m.Sub(1.0, a)
    z = m.Add(m.Add(x, y), 1.0)
    pkm1, qkm1 = m.Add(x, 1.0), m.Mul(z, x)
    state = [enabled, m.Div(pkm1, qkm1), y, z, m.c(0.0), pkm1, qkm1, _full(m, x, 1.0), x]
    _type(state, a)
    state[4].type = TensorType(m.dtype, ())
    ans = while_loop(e, state, any_true(e, enabled), step, "igammac_fraction")[1]
    return m.Mul(ans, ax)


def _full(m: _Math, like: Value, value: float) -> Value:
    return m.e.emit("Expand", m.c(value), m.e.emit("Shape", like))


def _type(state: list[Value], like: Value) -> None:
    shape = like.type.shape if isinstance(like.type, TensorType) else None
    for v in state:
        v.type = TensorType(v.type.dtype if isinstance(v.type, TensorType) and v.type.dtype == DataType.BOOL
                            else like.type.dtype, shape)  # fmt: skip


def regularized_gamma(e: Emitter, a: Value, x: Value, *, upper: bool, framework: str) -> Value:
    """P(a, x), or Q(a, x) with ``upper``, with ``framework``'s (``"jax"`` or ``"torch"``)
    precision and values at the domain's edges; ``a`` and ``x`` of one float dtype."""
    dtype = a.type.dtype
    if dtype not in (DataType.FLOAT, DataType.DOUBLE, *_WIDENED):
        raise NotMapped(f"the incomplete gamma function of {dtype.name}")
    compute = DataType.DOUBLE if framework == "torch" else (DataType.FLOAT if dtype in _WIDENED else dtype)
    m = _Math(e, compute)
    a, x = e.cast(a, compute), e.cast(x, compute)
    a, x = _broadcast(m, a, x)  # the loops carry the broadcast shape
    eps, largest = float(np.finfo(to_numpy(compute)).eps), float(np.finfo(to_numpy(compute)).max)
    nan = m.Or(m.IsNaN(a), m.IsNaN(x))
    x_zero, a_zero, x_inf = m.Equal(x, 0.0), m.Equal(a, 0.0), m.Equal(x, math.inf)
    domain = m.Or(m.Or(m.Less(x, 0.0), m.Less(a, 0.0)), m.Or(m.And(a_zero, x_zero), nan))
    ax = m.Sub(m.Sub(m.Mul(a, m.Log(x)), x), lgamma(e, a))
    underflow = m.Less(ax, -math.log(largest))
    ax = m.Exp(ax)
    skip = m.Or(m.Or(domain, underflow), x_inf)
    if upper:
        by_series = m.Or(m.Less(x, 1.0), m.Less(x, a))
        skip = m.Or(skip, a_zero)
    else:
        by_series = m.Not(m.And(m.GreaterOrEqual(x, 1.0), m.Greater(x, a)))
        skip = m.Or(skip, x_zero)
    enabled = m.Not(skip)
    series = _series(e, m, ax, x, a, m.And(enabled, by_series), eps)
    fraction = _continued_fraction(e, m, ax, x, a, m.And(enabled, m.Not(by_series)), eps)
    if upper:
        out = m.where(by_series, m.Sub(1.0, series), fraction)
        out = m.where(m.Or(x_inf, a_zero), 0.0, out)
    else:
        out = m.where(by_series, series, m.Sub(1.0, fraction))
        out = m.where(x_zero, 0.0, out)
        out = m.where(x_inf, 1.0, out)
    if framework == "torch":  # ATen: P(0, x > 0) = 1, Q = 0; an infinite a gives P = 0, Q = 1 (NaN at x = inf)
        lower_at_zero, at_inf = (0.0, 1.0) if upper else (1.0, 0.0)
        out = m.where(m.And(a_zero, m.Greater(x, 0.0)), lower_at_zero, out)
        out = m.where(m.And(m.Equal(a, math.inf), m.Not(x_inf)), at_inf, out)
        out = m.where(m.And(m.Equal(a, math.inf), x_inf), math.nan, out)
        if upper:
            out = m.where(m.And(x_zero, m.Greater(a, 0.0)), 1.0, out)
    out = m.where(domain, math.nan, out)
    return e.cast(out, dtype)


def _broadcast(m: _Math, *values: Value) -> list[Value]:
    """``values`` expanded to their common shape, typed."""
    from ..common import broadcast_shapes

    shapes = [v.type.shape if isinstance(v.type, TensorType) else None for v in values]
    shape = None if None in shapes else broadcast_shapes(*shapes)
    total = values[0]
    for v in values[1:]:
        total = m.Add(total, v)
    target = m.e.emit("Shape", total)
    out = [m.e.emit("Expand", v, target) for v in values]
    for v in out:
        v.type = TensorType(m.dtype, shape)
    return out


def regularized_beta(e: Emitter, a: Value, b: Value, x: Value) -> Value:
    """I_x(a, b) as ``lax.regularized_incomplete_beta`` computes it (in float32 for half precision)."""
    dtype = a.type.dtype
    if dtype not in (DataType.FLOAT, DataType.DOUBLE, *_WIDENED):
        raise NotMapped(f"the incomplete beta function of {dtype.name}")
    compute = DataType.FLOAT if dtype in _WIDENED else dtype
    m = _Math(e, compute)
    a, b, x = _broadcast(m, *(e.cast(v, compute) for v in (a, b, x)))
    info = np.finfo(to_numpy(compute))
    eps, tiny = float(info.eps) / 2, float(info.tiny) * 2
    steps = 200 if compute == DataType.FLOAT else 600
    inf = math.inf
    a_zero, b_zero = m.Or(m.Equal(a, 0.0), m.Equal(b, inf)), m.Or(m.Equal(b, 0.0), m.Equal(a, inf))
    x_zero, x_one = m.Equal(x, 0.0), m.Equal(x, 1.0)
    nan = m.Or(m.Or(m.IsNaN(a), m.IsNaN(b)), m.IsNaN(x))
    is_zero = m.Or(m.And(b_zero, m.Not(x_one)), m.And(a_zero, x_zero))
    is_one = m.Or(m.And(a_zero, m.Not(x_zero)), m.And(b_zero, x_one))
    is_nan = m.Or(m.Or(m.Less(a, 0.0), m.Less(b, 0.0)), m.Or(m.Less(x, 0.0), m.Greater(x, 1.0)))
    is_nan = m.Or(is_nan, m.Or(m.And(a_zero, b_zero), nan))
    fast = m.Less(x, m.Div(m.Add(a, 1.0), m.Add(m.Add(a, b), 2.0)))
    a, b, x = m.where(fast, a, b), m.where(fast, b, a), m.where(fast, x, m.Sub(1.0, x))
    fraction = _lentz(e, m, a, b, x, steps, eps)
    small_lbeta = m.Sub(lgamma(e, b), lgamma(e, m.Add(a, b)))
    lbeta = m.Add(lgamma(e, a), small_lbeta)
    log_rest = m.Mul(log1p_of(m, m.Neg(x)), b)
    factor = m.where(m.Less(a, tiny), m.Exp(m.Sub(log_rest, small_lbeta)),
                     m.Div(m.Exp(m.Sub(m.Add(m.Mul(m.Log(x), a), log_rest), lbeta)), a))  # fmt: skip
    out = m.Mul(fraction, factor)
    out = m.where(fast, out, m.Sub(1.0, out))
    out = m.where(is_zero, 0.0, out)
    out = m.where(is_one, 1.0, out)
    out = m.where(is_nan, math.nan, out)
    return e.cast(out, dtype)


def _lentz(e: Emitter, m: _Math, a: Value, b: Value, x: Value, steps: int, eps: float) -> Value:
    """The continued fraction of I_x(a, b) (partial denominators 0, 1, 1, ...; numerators 1, then
    DLMF's d_m), every element stepped until all have converged to ``eps`` or ``steps`` are done."""

    def numerator(bm: _Math, it: Value) -> Value:
        k = bm.e.cast(it, bm.dtype)
        mm = bm.Floor(bm.Div(bm.Sub(k, 1.0), 2.0))
        two_m = bm.Mul(mm, 2.0)
        first = bm.Div(bm.Mul(bm.Neg(bm.Add(a, b)), x), bm.Add(a, 1.0))
        even = bm.Div(bm.Mul(bm.Mul(bm.Neg(bm.Add(a, mm)), bm.Add(bm.Add(a, b), mm)), x),
                      bm.Mul(bm.Add(a, two_m), bm.Add(bm.Add(a, two_m), 1.0)))  # fmt: skip
        even = bm.where(bm.Equal(mm, 0.0), first, even)
        odd = bm.Div(bm.Mul(bm.Mul(mm, bm.Sub(b, mm)), x), bm.Mul(bm.Sub(bm.Add(a, two_m), 1.0), bm.Add(a, two_m)))
        value = bm.where(bm.Equal(bm.Mod(k, 2.0, fmod=1), 0.0), even, odd)
        return bm.where(bm.Equal(k, 1.0), 1.0, value)

    def step(b_: Emitter, it: Value, state: list[Value]) -> tuple[Value, list[Value]]:
        c, d, h = state
        bm = _Math(b_, m.dtype)
        k = b_.emit("Add", it, b_.const(np.asarray(1, np.int64)))  # the iteration, from 1
        num = numerator(bm, k)
        c2 = bm.Add(bm.Div(num, c), 1.0)
        c2 = bm.where(bm.Less(bm.Abs(c2), eps), eps, c2)
        d2 = bm.Add(bm.Mul(num, d), 1.0)
        d2 = bm.Reciprocal(bm.where(bm.Less(bm.Abs(d2), eps), eps, d2))
        delta = bm.Mul(c2, d2)
        unconverged = any_true(b_, bm.GreaterOrEqual(bm.Abs(bm.Sub(delta, 1.0)), eps))
        more = b_.emit("And", unconverged, b_.emit("Less", k, b_.const(np.asarray(steps - 1, np.int64))))
        return more, [c2, d2, bm.Mul(h, delta)]

    h = _full(m, m.Add(m.Add(a, b), x), eps)  # the first partial denominator is 0, below ``small``
    zero = _full(m, h, 0.0)
    state = [h, zero, h]
    _type(state, a)
    return while_loop(e, state, e.const(np.asarray(steps > 1)), step, "betainc_fraction")[2]
