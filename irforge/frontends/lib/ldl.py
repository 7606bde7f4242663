"""LDLᵀ factorization of symmetric indefinite matrices with Bunch-Kaufman pivoting, and its solve:
LAPACK's unblocked ``sytf2`` (lower) and ``sytrs``, which ``torch.linalg.ldl_factor`` and
``ldl_solve`` call for the sizes this unrolls.

Each step takes a 1x1 pivot, a 1x1 pivot after a symmetric interchange, or a 2x2 pivot, chosen by
LAPACK's tests on the column's and the candidate row's largest entries; a 2x2 pivot consumes two
steps.  The choice is data-dependent, so each unrolled step computes every case on the whole
matrix and keeps, per matrix of the batch, the one LAPACK takes (a step consumed by the previous
2x2 pivot changes nothing).  The output is LAPACK's: D's blocks and L's multipliers packed in the
lower triangle (interchanges applied to the trailing matrix only), pivots 1-based and negative for
2x2 blocks.
"""

from __future__ import annotations

import math

import numpy as np

from ...core_ir.dtypes import DataType, to_numpy
from ...core_ir.value import Value
from ..common import Emitter, NotMapped
from .linalg import _i64, square_side, transpose

ALPHA = (1 + math.sqrt(17)) / 8
"""Bunch-Kaufman's threshold, which bounds element growth."""


class _Steps:
    """Constants and small operations shared by the unrolled steps on [..., n, n] matrices."""

    def __init__(self, e: Emitter, n: int, rank: int, dtype):
        self.e, self.n, self.rank, self.dtype = e, n, rank, dtype
        self.rows = np.arange(n).reshape(n, 1)
        self.cols = np.arange(n).reshape(1, n)

    def c(self, x, dtype=None) -> Value:
        return self.e.const(np.asarray(x, dtype or self.dtype))

    def where(self, mask, a, b) -> Value:
        return self.e.emit("Where", self.e.const(mask) if isinstance(mask, np.ndarray) else mask, a, b)

    def entry(self, m: Value, i: int, j: int) -> Value:
        """``m[..., i, j]`` as [..., 1, 1]."""
        return self.e.emit("Slice", m, self.e.const(_i64([i, j])), self.e.const(_i64([i + 1, j + 1])),
                           self.e.const(_i64([-2, -1])))  # fmt: skip

    def column(self, m: Value, j: int, below: int) -> Value:
        """Column ``j`` of ``m`` at rows >= ``below`` (0 above), [..., n, 1]."""
        col = self.e.emit("Slice", m, self.e.const(_i64([j])), self.e.const(_i64([j + 1])), self.e.const(_i64([-1])))
        return self.where(self.rows >= below, col, self.c(0))

    def lower_mirrored(self, m: Value) -> Value:
        return self.where(self.rows >= self.cols, m, transpose(self.e, m, self.rank))

    def swap_index(self, a: Value, b: Value) -> Value:
        """0..n-1 with ``a`` and ``b`` exchanged (int64 [..., 1, 1] each), [..., 1, n]."""
        e, ar = self.e, self.e.const(_i64(range(self.n)).reshape(1, self.n))
        return e.emit("Where", e.emit("Equal", ar, a), b, e.emit("Where", e.emit("Equal", ar, b), a, ar))

    def permute_rows(self, m: Value, index: Value) -> Value:
        """Rows of ``m`` [..., n, c] taken in ``index`` [..., 1, n]."""
        e = self.e
        rows = e.emit("Transpose", index, perm=[*range(self.rank - 2), self.rank - 1, self.rank - 2])
        return e.emit("GatherElements", m, e.emit("Expand", rows, e.emit("Shape", m)), axis=-2)


def ldl_factor(e: Emitter, a: Value) -> tuple[Value, Value, Value]:
    """``sytf2('L')`` of ``a`` [..., n, n] (its lower triangle): the packed factors (upper triangle
    zero, as torch returns them), the pivots (int32 [..., n]) and LAPACK's ``info`` (int32 [...]:
    the first zero pivot column, 1-based, or 0)."""
    n, rank = square_side(a), len(a.type.shape)
    dtype = to_numpy(a.type.dtype)
    s = _Steps(e, n, rank, dtype)
    rows, cols = s.rows, s.cols
    m = s.lower_mirrored(a)  # the trailing matrix is kept symmetric: its rows read as LAPACK's columns
    shape_1n = e.emit("Concat", e.emit("Shape", a, end=-2), e.const(_i64([1, n])), axis=0)
    piv = e.emit("Expand", e.const(np.zeros((1, n), np.int64)), shape_1n)
    info = e.emit("ReduceMax", e.emit("Cast", piv, to=int(DataType.INT64)), e.const(_i64([-1])), keepdims=1)
    skip = e.emit("Equal", info, e.const(np.asarray(1, np.int64)))  # all False, [..., 1, 1]
    zero_i = e.const(np.asarray(0, np.int64))
    for k in range(n):
        active = e.emit("Not", skip)
        absakk = e.emit("Abs", s.entry(m, k, k))
        here = e.const(np.asarray(k, np.int64))
        if k < n - 1:
            below = e.emit("Abs", e.emit("Slice", s.column(m, k, k + 1), e.const(_i64([k + 1])), e.const(_i64([n])),
                                         e.const(_i64([-2]))))  # fmt: skip
            colmax = e.emit("ReduceMax", below, e.const(_i64([-2])), keepdims=1)
            imax = e.emit("Add", e.emit("ArgMax", below, axis=-2, keepdims=1), e.const(np.asarray(k + 1, np.int64)))
        else:
            colmax, imax = s.c(0), here
        zero_col = e.emit("Or", e.emit("Equal", e.emit("Max", absakk, colmax), s.c(0)), e.emit("IsNaN", absakk))
        on_imax = e.emit("Equal", e.const(_i64(range(n)).reshape(1, n)), imax)  # [..., 1, n]
        row = e.emit("ReduceSum", e.emit("Where", e.emit("Equal", e.const(rows), imax), m, s.c(0)),
                     e.const(_i64([-2])), keepdims=1)  # row imax of the trailing matrix  # fmt: skip
        others = e.emit("And", e.const(cols >= k), e.emit("Not", on_imax))
        rowmax = e.emit("ReduceMax", e.emit("Where", others, e.emit("Abs", row), s.c(0)), e.const(_i64([-1])),
                        keepdims=1)  # fmt: skip
        a_imax = e.emit("Abs", e.emit("ReduceSum", e.emit("Where", on_imax, row, s.c(0)), e.const(_i64([-1])),
                                      keepdims=1))  # fmt: skip
        scaled = e.emit("Mul", s.c(ALPHA), colmax)
        safe_rowmax = e.emit("Where", e.emit("Equal", rowmax, s.c(0)), s.c(1), rowmax)
        keep_k = e.emit("Or", e.emit("Or", zero_col, e.emit("GreaterOrEqual", absakk, scaled)),
                        e.emit("GreaterOrEqual", absakk, e.emit("Mul", scaled, e.emit("Div", colmax, safe_rowmax))))
        one_imax = e.emit("GreaterOrEqual", a_imax, e.emit("Mul", s.c(ALPHA), rowmax))
        two = e.emit("And", e.emit("Not", keep_k), e.emit("Not", one_imax))
        kp = e.emit("Where", keep_k, here, imax)
        kk = e.emit("Where", two, e.const(np.asarray(k + 1, np.int64)), here)
        # the interchange of kk and kp, in the trailing matrix only
        index = s.swap_index(kk, kp)
        swapped = s.permute_rows(m, index)
        swapped = transpose(e, s.permute_rows(transpose(e, swapped, rank), index), rank)
        m_new = s.where((rows >= k) & (cols >= k), swapped, m)
        # a 1x1 pivot: dsyr with -1/d, then the column scaled by 1/d
        r1 = e.emit("Reciprocal", s.entry(m_new, k, k))
        x = s.column(m_new, k, k + 1)
        temp = e.emit("Mul", e.emit("Neg", r1), transpose(e, x, rank))
        one = s.lower_mirrored(e.emit("Add", m_new, e.emit("Mul", x, temp)))
        one = s.where((rows > k) & (cols > k), one, m_new)
        one = s.where((rows > k) & (cols == k), e.emit("Mul", r1, x), one)
        # a 2x2 pivot on (k, k+1)
        if k < n - 1:
            d21 = s.entry(m_new, k + 1, k)
            d11 = e.emit("Div", s.entry(m_new, k + 1, k + 1), d21)
            d22 = e.emit("Div", s.entry(m_new, k, k), d21)
            t = e.emit("Reciprocal", e.emit("Sub", e.emit("Mul", d11, d22), s.c(1)))
            d21 = e.emit("Div", t, d21)
            ck, ck1 = s.column(m_new, k, k + 2), s.column(m_new, k + 1, k + 2)
            wk = e.emit("Mul", d21, e.emit("Sub", e.emit("Mul", d11, ck), ck1))
            wkp1 = e.emit("Mul", d21, e.emit("Sub", e.emit("Mul", d22, ck1), ck))
            update = e.emit("Add", e.emit("Mul", ck, transpose(e, wk, rank)),
                            e.emit("Mul", ck1, transpose(e, wkp1, rank)))  # fmt: skip
            pair = s.lower_mirrored(e.emit("Sub", m_new, update))
            pair = s.where((rows >= k + 2) & (cols >= k + 2), pair, m_new)
            pair = s.where((rows >= k + 2) & (cols == k), wk, pair)
            pair = s.where((rows >= k + 2) & (cols == k + 1), wkp1, pair)
            stepped = e.emit("Where", two, pair, one)
        else:
            stepped = one
        stepped = e.emit("Where", zero_col, m, stepped)  # a zero column: nothing eliminated
        m = e.emit("Where", active, stepped, m)
        # pivots: kp + 1, or -(kp + 1) on both columns of a 2x2 block
        value = e.emit("Add", kp, e.const(np.asarray(1, np.int64)))
        signed = e.emit("Where", two, e.emit("Neg", value), value)
        spots = e.emit("Or", e.const(cols == k), e.emit("And", two, e.const(cols == k + 1)))
        piv = e.emit("Where", e.emit("And", active, spots), signed, piv)
        first_zero = e.emit("And", e.emit("And", active, zero_col), e.emit("Equal", info, zero_i))
        info = e.emit("Where", first_zero, e.const(np.asarray(k + 1, np.int64)), info)
        skip = e.emit("And", active, two)
    packed = s.where(rows >= cols, m, s.c(0))
    squeeze = e.const(_i64([-2]))
    pivots = e.emit("Cast", e.emit("Squeeze", piv, squeeze), to=int(DataType.INT32))
    info = e.emit("Cast", e.emit("Squeeze", info, e.const(_i64([-2, -1]))), to=int(DataType.INT32))
    return packed, pivots, info


def ldl_solve(e: Emitter, ld: Value, pivots: Value, b: Value) -> Value:
    """``sytrs('L')``: X with A X = B from ``ldl_factor``'s packed factors and pivots."""
    n, rank = square_side(ld), len(ld.type.shape)
    if b.type is None or b.type.shape is None or len(b.type.shape) != rank:
        raise NotMapped("an LDL solve whose right-hand side has other batch axes than the factors")
    dtype = to_numpy(ld.type.dtype)
    s = _Steps(e, n, rank, dtype)
    rows = s.rows
    piv = e.emit("Unsqueeze", e.emit("Cast", pivots, to=int(DataType.INT64)), e.const(_i64([-2])))  # [..., 1, n]
    b = e.cast(b, ld.type.dtype)
    never = e.emit("Less", e.emit("ReduceMax", e.emit("Abs", piv), e.const(_i64([-1])), keepdims=1),
                   e.const(np.asarray(0, np.int64)))  # all False, [..., 1, 1]  # fmt: skip
    one_i = e.const(np.asarray(1, np.int64))

    def pivot(k: int) -> tuple[Value, Value]:
        p = e.emit("ReduceSum", e.emit("Slice", piv, e.const(_i64([k])), e.const(_i64([k + 1])), e.const(_i64([-1]))),
                   e.const(_i64([-1])), keepdims=1)  # fmt: skip
        return e.emit("Less", p, e.const(np.asarray(0, np.int64))), e.emit("Sub", e.emit("Abs", p), one_i)

    def row(x: Value, i: int) -> Value:
        return e.emit("Slice", x, e.const(_i64([i])), e.const(_i64([i + 1])), e.const(_i64([-2])))

    def swap(x: Value, i: int, kp: Value) -> Value:
        return s.permute_rows(x, s.swap_index(e.const(np.asarray(i, np.int64)), kp))

    skip = never
    for k in range(n):  # L D Y = B, forward
        active = e.emit("Not", skip)
        two, kp = pivot(k)
        one = swap(b, k, kp)
        one = e.emit("Sub", one, e.emit("Mul", s.column(ld, k, k + 1), row(one, k)))
        one = s.where(rows == k, e.emit("Mul", row(one, k), e.emit("Reciprocal", s.entry(ld, k, k))), one)
        if k < n - 1:
            pair = swap(b, k + 1, kp)
            pair = e.emit("Sub", pair, e.emit("Mul", s.column(ld, k, k + 2), row(pair, k)))
            pair = e.emit("Sub", pair, e.emit("Mul", s.column(ld, k + 1, k + 2), row(pair, k + 1)))
            akm1k = s.entry(ld, k + 1, k)
            akm1 = e.emit("Div", s.entry(ld, k, k), akm1k)
            ak = e.emit("Div", s.entry(ld, k + 1, k + 1), akm1k)
            denom = e.emit("Sub", e.emit("Mul", akm1, ak), s.c(1))
            bkm1, bk = e.emit("Div", row(pair, k), akm1k), e.emit("Div", row(pair, k + 1), akm1k)
            first = e.emit("Div", e.emit("Sub", e.emit("Mul", ak, bkm1), bk), denom)
            second = e.emit("Div", e.emit("Sub", e.emit("Mul", akm1, bk), bkm1), denom)
            pair = s.where(rows == k, first, s.where(rows == k + 1, second, pair))
            one = e.emit("Where", two, pair, one)
        b = e.emit("Where", active, one, b)
        skip = e.emit("And", active, two)
    skip = never
    for k in range(n - 1, -1, -1):  # Lᵀ X = Y, backward
        active = e.emit("Not", skip)
        two, kp = pivot(k)
        tail = s.where(rows > k, b, s.c(0))
        dot = e.emit("ReduceSum", e.emit("Mul", s.column(ld, k, k + 1), tail), e.const(_i64([-2])), keepdims=1)
        one = s.where(rows == k, e.emit("Sub", row(b, k), dot), b)
        if k > 0:
            dot2 = e.emit("ReduceSum", e.emit("Mul", s.column(ld, k - 1, k + 1), tail), e.const(_i64([-2])),
                          keepdims=1)  # fmt: skip
            pair = s.where(rows == k - 1, e.emit("Sub", row(b, k - 1), dot2), one)
            one = e.emit("Where", two, pair, one)
        b = e.emit("Where", active, swap(one, k, kp), b)
        skip = e.emit("And", active, two)
    return b
