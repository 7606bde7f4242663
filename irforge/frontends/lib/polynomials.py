"""The classical orthogonal polynomials of a tensor degree, as ATen's kernels evaluate them.

Chebyshev T/U/V/W (plain and shifted to [0, 1]), Hermite H and He, Laguerre L and Legendre P:
``f(x, n)`` with ``n`` a tensor, so the number of recurrence steps is data.  Each becomes one
``Loop`` that runs the three-term recurrence while any element still needs a step, masking the
elements that are done, so it stops where ATen's per-element loops stop (degree reached, the value
NaN).  The closed forms ATen takes before recurring are kept with their exact conditions: the
values at the interval's ends, the trigonometric form for high degrees inside the interval, and
Hermite's NaN above degree 128 (float32) or 512 (float64).  A NaN ``x`` gives NaN (ATen's
kernels other than Chebyshev T and Hermite return an uninitialized variable there).  ATen's
compiled recurrence may fuse a multiply and add, so a value within a rounding of float32's largest
can be finite there and inf here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...core_ir.dtypes import DataType
from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import Emitter, NotMapped, any_true, while_loop
from .special import _Math

_HERMITE_LIMIT = {DataType.FLOAT: 128, DataType.DOUBLE: 512}
_INT64_EDGE = 9.2e18
"""Degrees at least this large (and NaN) convert to int64's minimum in ATen, a negative degree."""


@dataclass(frozen=True)
class _Degree:
    n: Value  # int64
    real: Value  # the degree in the computing dtype (ATen's int64 -> T)
    even: Value


@dataclass(frozen=True)
class _Family:
    first: Callable[[_Math, Value], Value]  # f(x, 1)
    step: Callable[[_Math, Value, Value, Value, Value], Value]  # f(x, j + 1) from x, j, f(x, j - 1), f(x, j)
    closed: Callable[[_Math, Value, _Degree], tuple[Value, Value]]  # (where ATen skips the recurrence, its value)


def _chebyshev_step(m: _Math, y: Value, j: Value, p: Value, q: Value) -> Value:
    return m.Sub(m.Mul(m.Add(y, y), q), p)


def _signed(m: _Math, positive: Value, even: Value, value) -> Value:
    return m.where(m.Or(positive, even), value, m.Neg(value) if isinstance(value, Value) else -value)


def _chebyshev(kind: str, high: int, shifted: bool) -> _Family:
    """Chebyshev polynomials of ``kind`` on ``y`` (``2x - 1`` when shifted); ``high`` is the degree
    above which ATen uses the trigonometric form inside (-1, 1)."""

    def closed(m: _Math, y: Value, d: _Degree) -> tuple[Value, Value]:
        one = m.Equal(m.Abs(y), 1.0)
        positive = m.Greater(y, 0.0)
        two_n1 = m.Add(m.Add(d.real, d.real), 1.0)
        inside = m.And(m.Greater(d.n, m.e.const(np.asarray(high, np.int64))), m.Less(m.Abs(y), 1.0))
        a = m.Acos(y)
        if kind == "t":
            at_one = _signed(m, positive, d.even, 1.0)
            trig = m.Cos(m.Mul(d.real, a))
        elif kind == "u":
            n1 = m.Add(d.real, 1.0)
            at_one = _signed(m, positive, d.even, n1)
            sin_a = m.Sin(a)
            trig = m.where(m.Not(m.Equal(sin_a, 0.0)), m.Div(m.Sin(m.Mul(n1, a)), sin_a),
                           m.Div(m.Mul(n1, m.Cos(m.Mul(n1, a))), y))  # fmt: skip
        elif kind == "v":
            at_one = m.where(positive, m.c(1.0), _signed(m, m.Less(y, y), d.even, two_n1))
            half = m.Div(a, 2.0)
            trig = m.where(m.Not(m.Equal(m.Sin(half), 1.0)), m.Div(m.Cos(m.Mul(m.Add(d.real, 0.5), a)), m.Cos(half)),
                           _signed(m, m.Less(y, y), d.even, two_n1))  # fmt: skip
        else:
            at_one = m.where(positive, two_n1, _signed(m, m.Less(y, y), d.even, 1.0))
            half = m.Div(a, 2.0)
            degenerate = _signed(m, m.Less(y, y), d.even, 1.0) if shifted else at_one
            trig = m.where(m.Not(m.Equal(m.Cos(half), 1.0)), m.Div(m.Sin(m.Mul(m.Add(d.real, 0.5), a)), m.Sin(half)),
                           degenerate)  # fmt: skip
        return m.Or(one, inside), m.where(one, at_one, trig)

    first = {"t": lambda m, y: y, "u": lambda m, y: m.Add(y, y), "v": lambda m, y: m.Sub(m.Add(y, y), 1.0),
             "w": lambda m, y: m.Add(m.Add(y, y), 1.0)}[kind]  # fmt: skip
    return _Family(first, _chebyshev_step, closed)


def _never(m: _Math, x: Value, d: _Degree) -> tuple[Value, Value]:
    return m.Less(x, x), x


def _legendre_closed(m: _Math, x: Value, d: _Degree) -> tuple[Value, Value]:
    return m.Equal(m.Abs(x), 1.0), _signed(m, m.Greater(x, 0.0), d.even, 1.0)


def _laguerre_closed(m: _Math, x: Value, d: _Degree) -> tuple[Value, Value]:
    return m.Equal(x, 0.0), m.c(1.0)


def _real(m: _Math, j: Value) -> Value:
    return m.e.cast(j, m.dtype)


def _int(m: _Math, value: int) -> Value:
    return m.e.const(np.asarray(value, np.int64))


FAMILIES: dict[str, _Family] = {
    **{f"chebyshev_polynomial_{k}": _chebyshev(k, 6 if k == "t" else 8, False) for k in "tuvw"},
    **{f"shifted_chebyshev_polynomial_{k}": _chebyshev(k, 4 if k == "w" else 6, True) for k in "tuvw"},
    "hermite_polynomial_h": _Family(
        lambda m, x: m.Add(x, x),
        lambda m, x, j, p, q: m.Sub(m.Mul(m.Add(x, x), q), m.Mul(_real(m, m.e.emit("Add", j, j)), p)), _never),
    "hermite_polynomial_he": _Family(
        lambda m, x: x, lambda m, x, j, p, q: m.Sub(m.Mul(x, q), m.Mul(_real(m, j), p)), _never),
    "laguerre_polynomial_l": _Family(
        lambda m, x: m.Sub(1.0, x),
        lambda m, x, j, p, q: m.Div(m.Sub(m.Mul(m.Add(_real(m, m.e.emit("Add", j, j)), m.Sub(1.0, x)), q),
                                          m.Mul(_real(m, j), p)), _real(m, m.e.emit("Add", j, _int(m, 1)))),
        _laguerre_closed),
    "legendre_polynomial_p": _Family(
        lambda m, x: x,
        lambda m, x, j, p, q: m.Div(
            m.Sub(m.Mul(m.Mul(_real(m, m.e.emit("Add", m.e.emit("Add", j, j), _int(m, 1))), x), q),
                  m.Mul(_real(m, j), p)), _real(m, m.e.emit("Add", j, _int(m, 1)))),
        _legendre_closed),
}  # fmt: skip


def orthogonal_polynomial(e: Emitter, name: str, x: Value, n: Value) -> Value:
    """``name`` (an ATen ``special_*`` polynomial without the prefix) of ``x`` at degree ``n``, both
    already in the result's float dtype."""
    dtype = x.type.dtype
    if dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"{name} of {dtype.name}")
    family = FAMILIES[name]
    m = _Math(e, dtype)
    y = m.Sub(m.Add(x, x), 1.0) if name.startswith("shifted") else x
    # ATen truncates the degree to int64; NaN and out-of-range degrees become its minimum there
    valid = m.Less(m.Abs(n), _INT64_EDGE)
    degree = e.emit("Where", valid, e.cast(m.where(valid, n, 0.0), DataType.INT64), _int(m, -1))
    d = _Degree(degree, e.cast(degree, dtype), e.emit("Equal", e.emit("Mod", degree, _int(m, 2)), _int(m, 0)))
    skip, closed = family.closed(m, y, d)
    if name.startswith("hermite"):
        skip = e.emit("Greater", degree, _int(m, _HERMITE_LIMIT[dtype]))
        closed = m.c(math.nan)
    first = m.Add(family.first(m, y), m.Mul(d.real, 0.0))  # broadcast with the degree
    recurring = e.emit("And", e.emit("Not", skip), e.emit("Greater", degree, _int(m, 1)))
    last = _recur(e, m, family, y, degree, recurring, first)
    value = m.where(e.emit("Equal", degree, _int(m, 0)), 1.0, last)
    value = m.where(skip, closed, value)
    return m.where(e.emit("Less", degree, _int(m, 0)), 0.0, value)


def _recur(e: Emitter, m: _Math, family: _Family, y: Value, degree: Value, recurring: Value, first: Value) -> Value:
    """f(y, n) for the ``recurring`` elements by a Loop of the recurrence; ``first`` elsewhere."""

    def active(em: Emitter, j: Value, value: Value) -> Value:
        going = em.emit("And", recurring, em.emit("Less", j, degree))
        return em.emit("And", going, em.emit("Not", em.emit("IsNaN", value)))

    def step(be: Emitter, it: Value, state: list[Value]) -> tuple[Value, list[Value]]:
        p, q = state
        bm = _Math(be, m.dtype)
        j = be.emit("Add", it, be.const(np.asarray(1, np.int64)))
        now = active(be, j, q)
        new_p, new_q = bm.where(now, q, p), bm.where(now, family.step(bm, y, j, p, q), q)
        return any_true(be, active(be, be.emit("Add", j, be.const(np.asarray(1, np.int64))), new_q)), [new_p, new_q]

    t = TensorType(m.dtype, first.type.shape if isinstance(first.type, TensorType) else None)
    ones = e.emit("Expand", m.c(1.0), e.emit("Shape", first))  # p starts at 1 everywhere
    ones.type = first.type = t
    start = any_true(e, active(e, e.const(np.asarray(1, np.int64)), first))
    return while_loop(e, [ones, first], start, step, "poly")[1]
