"""Dense linear algebra ONNX has no op for, unrolled over a static matrix size.

A Cholesky factorization or a triangular solve of an n-by-n matrix becomes n steps of matrix products
over the leading (batch) axes, the order in which LAPACK's unblocked routines compute: Cholesky
column by column (``potf2``), substitution row by row (``trsv``).  Unrolling keeps every backend's
graph static; it is refused above :data:`MAX_UNROLLED` rows, where the graph would grow too large.
Eigendecompositions and SVDs are in :mod:`irforge.frontends.lib.jacobi`.
"""

from __future__ import annotations

import numpy as np

from ...core_ir.dtypes import DataType, to_numpy
from ...core_ir.value import Value
from ..common import Emitter, NotMapped

MAX_UNROLLED = 64
"""Largest matrix side that is unrolled."""


def _i64(values) -> np.ndarray:
    return np.asarray(list(values), np.int64)


def square_side(x: Value) -> int:
    """n of ``x`` [..., n, n]: static, at most :data:`MAX_UNROLLED`, float; else :class:`NotMapped`."""
    shape = x.type.shape if x.type is not None else None
    if shape is None or len(shape) < 2 or not isinstance(shape[-1], int) or shape[-1] != shape[-2]:
        raise NotMapped("linear algebra on matrices that are not square of a static size")
    if shape[-1] > MAX_UNROLLED:
        raise NotMapped(f"linear algebra on matrices larger than {MAX_UNROLLED} by {MAX_UNROLLED} (unrolled)")
    if x.type.dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"linear algebra in {x.type.dtype.name}")
    return shape[-1]


def _block(e: Emitter, x: Value, rows: tuple[int, int], cols: tuple[int, int]) -> Value:
    return e.emit("Slice", x, e.const(_i64([rows[0], cols[0]])), e.const(_i64([rows[1], cols[1]])),
                  e.const(_i64([-2, -1])))  # fmt: skip


def transpose(e: Emitter, x: Value, rank: int) -> Value:
    """``x`` (of ``rank`` axes) with its last two axes swapped."""
    return e.emit("Transpose", x, perm=[*range(rank - 2), rank - 1, rank - 2])


def transposed_square(e: Emitter, a: Value) -> Value:
    """A (batch of) square matrices transposed, typed as ``a`` (the unrolled steps read its size)."""
    t = transpose(e, a, len(a.type.shape))
    t.type = a.type
    return t


def cholesky(e: Emitter, a: Value) -> tuple[Value, Value]:
    """The lower factor L of ``a`` = L Lᵀ (only ``a``'s lower triangle is read) and, per matrix,
    the order (1-based, int32) of the first leading minor that is not positive definite, 0 when
    none is (LAPACK's ``info``; L's columns from there on are then NaN or meaningless)."""
    n = square_side(a)
    rank = len(a.type.shape)
    dtype = to_numpy(a.type.dtype)
    columns: list[Value] = []
    info = None
    for j in range(n):
        s = _block(e, a, (0, n), (j, j + 1))  # [..., n, 1]
        if columns:
            done = e.emit("Concat", *columns, axis=-1)  # [..., n, j]
            row = _block(e, done, (j, j + 1), (0, j))  # [..., 1, j]
            s = e.emit("Sub", s, e.emit("MatMul", done, transpose(e, row, rank)))
        pivot = _block(e, s, (j, j + 1), (0, 1))  # [..., 1, 1]
        bad = e.emit("Not", e.emit("Greater", pivot, e.const(np.asarray(0, dtype))))  # NaN fails too
        order = e.emit("Mul", e.emit("Cast", bad, to=int(DataType.INT32)), e.const(np.asarray(j + 1, np.int32)))
        if info is None:
            info = order
        else:  # the first failing order stays
            info = e.emit("Where", e.emit("Equal", info, e.const(np.asarray(0, np.int32))), order, info)
        below = e.const((np.arange(n) >= j).astype(dtype).reshape(n, 1))  # zeros above the diagonal
        columns.append(e.emit("Mul", e.emit("Div", s, e.emit("Sqrt", pivot)), below))
    factor = e.emit("Concat", *columns, axis=-1)
    return factor, e.emit("Squeeze", info, e.const(_i64([-2, -1])))


def solve_triangular(e: Emitter, a: Value, b: Value, *, lower: bool, unit_diagonal: bool = False) -> Value:
    """x with ``a`` x = ``b`` for a triangular ``a`` [..., n, n] (only its ``lower`` or upper
    triangle read; its diagonal taken as ones with ``unit_diagonal``) and ``b`` [..., n, m]:
    substitution row by row, from the top for a lower ``a``, from the bottom for an upper one."""
    n = square_side(a)
    rows: dict[int, Value] = {}
    order = range(n) if lower else range(n - 1, -1, -1)
    for i in order:
        r = _block(e, b, (i, i + 1), (0, 2**62))  # [..., 1, m]
        known = sorted(rows)
        if known:
            lo, hi = known[0], known[-1] + 1
            coeffs = _block(e, a, (i, i + 1), (lo, hi))  # [..., 1, k]
            solved = e.emit("Concat", *(rows[k] for k in range(lo, hi)), axis=-2)  # [..., k, m]
            r = e.emit("Sub", r, e.emit("MatMul", coeffs, solved))
        if not unit_diagonal:
            r = e.emit("Div", r, _block(e, a, (i, i + 1), (i, i + 1)))
        rows[i] = r
    return e.emit("Concat", *(rows[i] for i in range(n)), axis=-2)


def lu(e: Emitter, a: Value) -> tuple[Value, Value, Value]:
    """Gaussian elimination with partial pivoting (LAPACK's ``getrf``) of ``a`` [..., m, n]: the
    packed factors (L's multipliers below the diagonal, its unit diagonal implied, U on and above
    it), the pivot row chosen at each of the min(m, n) steps (int64, 0-based: the first row of
    largest magnitude, as ``idamax`` picks) and the resulting row permutation (int64 [..., m]),
    so that ``a[perm] = L U``.  A zero pivot leaves its column undivided, as ``getf2`` does."""
    shape = a.type.shape if a.type is not None else None
    if shape is None or len(shape) < 2 or not all(isinstance(d, int) for d in shape):
        raise NotMapped("an LU factorization of a matrix of symbolic size")
    m, n = shape[-2], shape[-1]
    if min(m, n) > MAX_UNROLLED:
        raise NotMapped(f"an LU factorization with more than {MAX_UNROLLED} steps (unrolled)")
    if a.type.dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"linear algebra in {a.type.dtype.name}")
    dtype = to_numpy(a.type.dtype)
    batch = tuple(shape[:-2])
    rows = e.const(np.arange(m, dtype=np.int64).reshape(m, 1))
    perm = e.emit("Expand", rows, e.const(_i64((*batch, m, 1))))
    full = e.const(_i64(shape))
    pivots = []
    zero = e.const(np.asarray(0, dtype))
    for j in range(min(m, n)):
        column = e.emit("Abs", _block(e, a, (j, m), (j, j + 1)))  # [..., m - j, 1]
        pivot_row = e.emit("Add", e.emit("ArgMax", column, axis=-2, keepdims=1), e.const(np.asarray(j, np.int64)))
        pivots.append(pivot_row)
        here = e.const(np.asarray(j, np.int64))
        swap = e.emit("Where", e.emit("Equal", rows, here), pivot_row,
                      e.emit("Where", e.emit("Equal", rows, pivot_row), here, rows))  # [..., m, 1]  # fmt: skip
        a = e.emit("GatherElements", a, e.emit("Expand", swap, full), axis=-2)
        perm = e.emit("GatherElements", perm, swap, axis=-2)
        if j == m - 1:
            break
        pivot = _block(e, a, (j, j + 1), (j, j + 1))  # [..., 1, 1]
        below = _block(e, a, (j + 1, m), (0, n))  # [..., m - j - 1, n]
        divisor = e.emit("Where", e.emit("Equal", pivot, zero), e.const(np.asarray(1, dtype)), pivot)
        factors = e.emit("Div", _block(e, below, (0, m - j - 1), (j, j + 1)), divisor)
        right = e.emit("Mul", _block(e, a, (j, j + 1), (0, n)), e.const((np.arange(n) > j).astype(dtype)))
        below = e.emit("Sub", below, e.emit("Mul", factors, right))
        below = e.emit("Where", e.const(np.arange(n) == j), factors, below)
        a = e.emit("Concat", _block(e, a, (0, j + 1), (0, n)), below, axis=-2)
    pivots_v = e.emit("Concat", *pivots, axis=-1) if len(pivots) > 1 else pivots[0]  # [..., 1, k]
    return a, e.emit("Squeeze", pivots_v, e.const(_i64([-2]))), e.emit("Squeeze", perm, e.const(_i64([-1])))


def static_matrix(a: Value, what: str) -> tuple[int, ...]:
    shape = a.type.shape if a.type is not None else None
    if shape is None or len(shape) < 2 or not all(isinstance(d, int) for d in shape):
        raise NotMapped(f"{what} of a matrix of symbolic size")
    if min(shape[-2:]) > MAX_UNROLLED:
        raise NotMapped(f"{what} with more than {MAX_UNROLLED} steps (unrolled)")
    if a.type.dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"linear algebra in {a.type.dtype.name}")
    return tuple(shape)


def householder_qr(e: Emitter, a: Value) -> tuple[Value, Value]:
    """LAPACK's ``geqrf`` of ``a`` [..., m, n]: R on and above the diagonal, each reflector's
    vector below it (its leading 1 implied), and the reflectors' scales tau [..., min(m, n)].
    Each reflector is ``dlarfg``'s: beta = -sign(alpha) * |(alpha, x)|, none where x is zero, so
    R's diagonal carries LAPACK's signs."""
    *batch, m, n = static_matrix(a, "a QR factorization")
    rank = len(batch) + 2
    dtype = to_numpy(a.type.dtype)
    rows = np.arange(m).reshape(m, 1)
    cols = np.arange(n)
    zero, one = e.const(np.asarray(0, dtype)), e.const(np.asarray(1, dtype))
    taus = []
    for k in range(min(m, n)):
        column = _block(e, a, (0, m), (k, k + 1))  # [..., m, 1]
        alpha = _block(e, column, (k, k + 1), (0, 1))  # [..., 1, 1]
        x = e.emit("Mul", column, e.const((rows > k).astype(dtype)))
        norm = e.emit("Sqrt", e.emit("ReduceSum", e.emit("Mul", x, x), e.const(_i64([-2])), keepdims=1))
        reflects = e.emit("Not", e.emit("Equal", norm, zero))
        sign = e.emit("Where", e.emit("Less", alpha, zero), e.const(np.asarray(-1, dtype)), one)
        beta = e.emit("Mul", e.emit("Neg", sign), e.emit("Sqrt", e.emit("Add", e.emit("Mul", alpha, alpha),
                                                                       e.emit("Mul", norm, norm))))  # fmt: skip
        safe_beta = e.emit("Where", reflects, beta, one)
        tau = e.emit("Where", reflects, e.emit("Div", e.emit("Sub", beta, alpha), safe_beta), zero)
        gap = e.emit("Where", reflects, e.emit("Sub", alpha, beta), one)
        v = e.emit("Add", e.emit("Div", x, gap), e.const((rows == k).astype(dtype)))  # [..., m, 1], v[k] = 1
        # the trailing columns: (I - tau v vᵀ) a
        w = e.emit("MatMul", transpose(e, v, rank), a)  # [..., 1, n]
        updated = e.emit("Sub", a, e.emit("Mul", e.emit("Mul", tau, v), w))
        stored = e.emit("Where", e.const(rows == k), e.emit("Where", reflects, beta, alpha),
                        e.emit("Where", e.const(rows > k), v, column))  # fmt: skip
        a = e.emit("Where", e.const(cols == k), stored, e.emit("Where", e.const(cols > k), updated, a))
        taus.append(e.emit("Squeeze", tau, e.const(_i64([-1]))))  # [..., 1]
    tau_v = e.emit("Concat", *taus, axis=-1) if len(taus) > 1 else taus[0]
    return a, tau_v


def householder_product(e: Emitter, packed: Value, taus: Value, count: int, columns: int,
                         shape: tuple[int, ...]) -> Value:  # fmt: skip
    """LAPACK's ``orgqr``: the first ``columns`` columns of H_0 H_1 ... H_{count-1}, reflector j
    stored below the diagonal of column j of ``packed`` [..., m, n], its scale at ``taus`` [..., j]."""
    *batch, m, _ = shape
    rank = len(batch) + 2
    dtype = to_numpy(packed.type.dtype)
    rows = np.arange(m).reshape(m, 1)
    q = e.emit("Expand", e.const(np.eye(m, columns, dtype=dtype)), e.const(_i64((*batch, m, columns))))
    for j in range(count - 1, -1, -1):
        column = _block(e, packed, (0, m), (j, j + 1))
        v = e.emit("Add", e.emit("Mul", column, e.const((rows > j).astype(dtype))), e.const((rows == j).astype(dtype)))
        tau = e.emit("Unsqueeze", e.emit("Gather", taus, e.const(_i64([j])), axis=-1), e.const(_i64([-1])))
        w = e.emit("MatMul", transpose(e, v, rank), q)  # [..., 1, columns]
        q = e.emit("Sub", q, e.emit("Mul", e.emit("Mul", tau, v), w))
    return q


def orgqr(e: Emitter, a: Value, taus: Value) -> Value:
    """``householder_product`` as torch and JAX expose it: the first n columns of the product of the
    reflectors stored below the diagonal of ``a`` [..., m, n], scaled by ``taus``."""
    shape = static_matrix(a, "householder_product")
    count = taus.type.shape[-1] if taus.type is not None and taus.type.shape else None
    if not isinstance(count, int):
        raise NotMapped("householder_product with a symbolic number of reflectors")
    return householder_product(e, a, taus, count, shape[-1], shape)


def tridiagonal_solve(e: Emitter, dl: Value, d: Value, du: Value, b: Value) -> Value:
    """X with A X = B for the tridiagonal A of diagonals ``dl`` (A[i, i-1]), ``d``, ``du``
    (A[i, i+1]), each [..., m], and B [..., m, k]: LAPACK's ``gtsv``, Gaussian elimination with
    partial pivoting between neighbouring rows (a swap fills the second superdiagonal) and back
    substitution.  A singular system gives NaN for its whole solution, as ``lax`` does."""
    shape = d.type.shape if d.type is not None else None
    if shape is None or not shape or not isinstance(shape[-1], int) or shape[-1] > MAX_UNROLLED:
        raise NotMapped(f"a tridiagonal solve of a symbolic size or more than {MAX_UNROLLED} rows")
    if d.type.dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"linear algebra in {d.type.dtype.name}")
    n, np_dt = shape[-1], to_numpy(d.type.dtype)

    def entry(v: Value, i: int) -> Value:  # [..., 1, 1], to broadcast against rows of B
        one = e.emit("Slice", v, e.const(_i64([i])), e.const(_i64([i + 1])), e.const(_i64([-1])))
        return e.emit("Unsqueeze", one, e.const(_i64([-1])))

    def row(i: int) -> Value:
        return e.emit("Slice", b, e.const(_i64([i])), e.const(_i64([i + 1])), e.const(_i64([-2])))

    zero = e.const(np.asarray(0, np_dt))
    diag, rows = [entry(d, i) for i in range(n)], [row(i) for i in range(n)]
    lower = [entry(dl, i + 1) for i in range(n - 1)]  # LAPACK's DL(i), later the fill-in
    upper = [entry(du, i) for i in range(n - 1)]
    singular = None
    for i in range(n - 1):
        swap = e.emit("Less", e.emit("Abs", diag[i]), e.emit("Abs", lower[i]))
        stuck = e.emit("And", e.emit("Not", swap), e.emit("Equal", diag[i], zero))
        singular = stuck if singular is None else e.emit("Or", singular, stuck)
        keep_fact = e.emit("Div", lower[i], diag[i])
        swap_fact = e.emit("Div", diag[i], lower[i])
        next_diag = e.emit("Where", swap, e.emit("Sub", upper[i], e.emit("Mul", swap_fact, diag[i + 1])),
                           e.emit("Sub", diag[i + 1], e.emit("Mul", keep_fact, upper[i])))  # fmt: skip
        next_row = e.emit("Where", swap, e.emit("Sub", rows[i], e.emit("Mul", swap_fact, rows[i + 1])),
                          e.emit("Sub", rows[i + 1], e.emit("Mul", keep_fact, rows[i])))  # fmt: skip
        rows[i] = e.emit("Where", swap, rows[i + 1], rows[i])
        new_upper = e.emit("Where", swap, diag[i + 1], upper[i])
        diag[i] = e.emit("Where", swap, lower[i], diag[i])
        if i < n - 2:  # the fill-in of the second superdiagonal, and the next row's upper entry
            lower[i] = e.emit("Where", swap, upper[i + 1], zero)
            upper[i + 1] = e.emit("Where", swap, e.emit("Mul", e.emit("Neg", swap_fact), upper[i + 1]), upper[i + 1])
        diag[i + 1], rows[i + 1], upper[i] = next_diag, next_row, new_upper
    last = e.emit("Equal", diag[n - 1], zero)
    singular = last if singular is None else e.emit("Or", singular, last)
    x = [None] * n
    x[n - 1] = e.emit("Div", rows[n - 1], diag[n - 1])
    for i in range(n - 2, -1, -1):
        acc = e.emit("Sub", rows[i], e.emit("Mul", upper[i], x[i + 1]))
        if i < n - 2:
            acc = e.emit("Sub", acc, e.emit("Mul", lower[i], x[i + 2]))
        x[i] = e.emit("Div", acc, diag[i])
    out = x[0] if n == 1 else e.emit("Concat", *x, axis=-2)
    return e.emit("Where", singular, e.const(np.asarray(np.nan, np_dt)), out)


_EXP_THETA = {DataType.FLOAT: 3.010066362817634, DataType.DOUBLE: 1.090863719290036}
"""The 1-norm up to which ATen's matrix exponential uses its degree-18 Taylor polynomial."""
EXP_DEGREE = 18


def matrix_exp(e: Emitter, a: Value) -> Value:
    """exp(A) by scaling and squaring, as ATen: A / 2^s with s the fewest halvings that bring the
    1-norm under θ₁₈, the degree-18 Taylor polynomial (by Horner's rule), then s squarings (a Loop
    of the largest s in the batch, each matrix squared only its own number of times)."""
    from ..common import while_loop

    n = square_side(a)
    np_dt = to_numpy(a.type.dtype)
    columns = e.emit("ReduceSum", e.emit("Abs", a), e.const(_i64([-2])), keepdims=1)
    norm = e.emit("ReduceMax", columns, e.const(_i64([-1])), keepdims=1)  # [..., 1, 1]
    ratio = e.emit("Div", norm, e.const(np.asarray(_EXP_THETA[a.type.dtype], np_dt)))
    halvings = e.emit("Ceil", e.emit("Div", e.emit("Log", ratio), e.const(np.asarray(np.log(2.0), np_dt))))
    finite = e.emit("And", e.emit("Not", e.emit("IsNaN", halvings)), e.emit("Not", e.emit("IsInf", halvings)))
    halvings = e.emit("Max", e.emit("Where", finite, halvings, e.const(np.asarray(0, np_dt))),
                      e.const(np.asarray(0, np_dt)))  # fmt: skip
    scaled = e.emit("Div", a, e.emit("Pow", e.const(np.asarray(2, np_dt)), halvings))
    eye = e.const(np.eye(n, dtype=np_dt))
    poly = eye
    for k in range(EXP_DEGREE, 0, -1):
        poly = e.emit("Add", eye, e.emit("MatMul", e.emit("Div", scaled, e.const(np.asarray(k, np_dt))), poly))
    poly.type = a.type
    times = e.cast(halvings, DataType.INT64)
    most = e.emit("ReduceMax", times, keepdims=0)

    def square(b: Emitter, it: Value, state: list[Value]) -> tuple[Value, list[Value]]:
        (x,) = state
        squared = b.emit("Where", b.emit("Less", it, times), b.emit("MatMul", x, x), x)
        nxt = b.emit("Add", it, b.const(np.asarray(1, np.int64)))
        return b.emit("Less", nxt, most), [squared]

    going = e.emit("Greater", most, e.const(np.asarray(0, np.int64)))
    return while_loop(e, [poly], going, square, "matrix_exp")[0]
