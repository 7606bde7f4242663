"""Symmetric eigendecomposition and singular value decomposition by Jacobi rotations, in float64.

ONNX has no eigen or SVD op, and LAPACK's algorithms (Householder tridiagonalization, then QR
or divide and conquer) unroll into graphs far too large.  Jacobi's method is made of plane
rotations only, converges quadratically, and computes small singular values to high relative
accuracy.  The rotations follow the round-robin ("parallel") ordering of Brent and Luk: each step
rotates n/2 disjoint index pairs at once, as one n x n rotation matrix assembled from the pairs'
cosines and sines, so a sweep over all n(n-1)/2 pairs is n-1 steps of a few whole-matrix ops.
Sweeps repeat in an ONNX ``Loop`` until every pair is settled to float64's epsilon.

- :func:`symmetric_eigen`: two-sided Jacobi, ``A <- Jᵀ A J`` until A is diagonal; the eigenvectors
  are the accumulated ``J``.
- :func:`svd`: one-sided Jacobi (Hestenes), ``W <- W J`` until W's columns are orthogonal; the
  singular values are their norms, ``V`` the accumulated ``J``, and ``U`` the Householder QR of
  ``W`` (whose Q also completes an orthonormal basis where a singular value is 0).

Eigen- and singular vectors are unique only up to sign (and within repeated values, up to
rotation): these are valid ones, not LAPACK's choice of signs.  Results that do not depend on
the choice (values, pseudo-inverse, projections, reconstructions) agree with LAPACK's to rounding.
"""

from __future__ import annotations

import functools

import numpy as np

from ...core_ir.dtypes import DataType, to_numpy
from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import Emitter, NotMapped, any_true, while_loop
from .linalg import _i64, householder_product, householder_qr, transpose

MAX_JACOBI = 128
"""Largest matrix side (the smaller side, for an SVD) decomposed: a sweep is n-1 unrolled steps."""
JACOBI_SWEEPS = 40
"""Most sweeps: Jacobi converges quadratically, a handful of sweeps in practice."""
_EPS = float(np.finfo(np.float64).eps)


@functools.cache
def _schedule(n: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The round-robin pairing of ``0..n-1``: n-1 steps (n odd: n, one index resting each step),
    each a set of disjoint pairs (p, q), p < q, covering every pair once per sweep."""
    players = list(range(n + n % 2))
    steps = []
    for _ in range(len(players) - 1):
        half = len(players) // 2
        pairs = [(players[i], players[-1 - i]) for i in range(half)]
        pairs = [(min(a, b), max(a, b)) for a, b in pairs if max(a, b) < n]
        steps.append((_i64(p for p, _ in pairs), _i64(q for _, q in pairs)))
        players = [players[0], players[-1], *players[1:-1]]
    return tuple(steps)


@functools.cache
def _rotation_basis(n: int, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Constants that assemble step ``step``'s rotation ``J = c @ P + s @ Q + R`` (flattened n x n):
    ``P[k]`` puts 1 at (p, p) and (q, q) of pair k, ``Q[k]`` +1 at (p, q) and -1 at (q, p), and ``R``
    is 1 on the diagonal of the indices resting this step."""
    p, q = _schedule(n)[step]
    k = len(p)
    cos_at, sin_at = np.zeros((k, n, n)), np.zeros((k, n, n))
    rest = np.eye(n)
    for i, (a, b) in enumerate(zip(p, q, strict=True)):
        cos_at[i, a, a] = cos_at[i, b, b] = 1.0
        sin_at[i, a, b], sin_at[i, b, a] = 1.0, -1.0
        rest[a, a] = rest[b, b] = 0.0
    return cos_at.reshape(k, n * n), sin_at.reshape(k, n * n), rest.reshape(n * n)


def _rotation(b: Emitter, pp: Value, qq: Value, pq: Value, turn: Value) -> tuple[Value, Value]:
    """The Jacobi rotation (cos, sin) that zeroes the off-diagonal ``pq`` of the symmetric 2x2
    [[pp, pq], [pq, qq]] (the smaller of the two angles), the identity where ``turn`` is false."""

    def f64(v: float) -> Value:
        return b.const(np.asarray(v, np.float64))

    theta = b.emit("Div", b.emit("Sub", qq, pp), b.emit("Mul", pq, f64(2.0)))
    sign = b.emit("Where", b.emit("GreaterOrEqual", theta, f64(0.0)), f64(1.0), f64(-1.0))
    root = b.emit("Sqrt", b.emit("Add", b.emit("Mul", theta, theta), f64(1.0)))
    t = b.emit("Where", turn, b.emit("Div", sign, b.emit("Add", b.emit("Abs", theta), root)), f64(0.0))
    c = b.emit("Reciprocal", b.emit("Sqrt", b.emit("Add", b.emit("Mul", t, t), f64(1.0))))
    return c, b.emit("Mul", c, t)


def _assemble(b: Emitter, c: Value, s: Value, n: int, step: int) -> Value:
    """Step ``step``'s rotation matrices [..., n, n] from the pairs' cosines and sines [..., k]."""
    cos_at, sin_at, rest = _rotation_basis(n, step)
    flat = b.emit("Add", b.emit("Add", b.emit("MatMul", c, b.const(cos_at)), b.emit("MatMul", s, b.const(sin_at))),
                  b.const(rest))  # fmt: skip
    shape = b.emit("Concat", b.emit("Shape", c, end=-1), b.const(_i64([n, n])), axis=0)
    return b.emit("Reshape", flat, shape)


def _identities(e: Emitter, like: Value, n: int) -> Value:
    """Identity matrices [..., n, n] for every matrix of ``like`` [..., r, c]."""
    shape = e.emit("Concat", e.emit("Shape", like, end=-2), e.const(_i64([n, n])), axis=0)
    return e.emit("Expand", e.const(np.eye(n)), shape)


def _check(a: Value, what: str) -> tuple[tuple, int, int]:
    shape = a.type.shape if a.type is not None else None
    if shape is None or len(shape) < 2 or not all(isinstance(d, int) for d in shape[-2:]):
        raise NotMapped(f"{what} of a matrix of symbolic size")
    if a.type.dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"{what} in {a.type.dtype.name}")
    if min(shape[-2:]) > MAX_JACOBI:
        raise NotMapped(f"{what} of matrices larger than {MAX_JACOBI} on their smaller side")
    return tuple(shape), shape[-2], shape[-1]


def _typed(v: Value, batch: tuple, *dims: int) -> Value:
    v.type = TensorType(DataType.DOUBLE, (*batch, *dims))
    return v


# -- symmetric eigendecomposition ----------------------------------------------------------------


def symmetric_eigen(e: Emitter, a: Value, *, lower: bool, vectors: bool) -> tuple[Value, Value | None]:
    """The eigenvalues (ascending, [..., n]) and, with ``vectors``, the eigenvectors (columns,
    [..., n, n]) of the symmetric matrix whose ``lower`` (else upper) triangle ``a`` holds."""
    shape, n, m = _check(a, "an eigendecomposition")
    if n != m:
        raise NotMapped("an eigendecomposition of a matrix that is not square")
    batch, rank = shape[:-2], len(shape)
    x = e.cast(a, DataType.DOUBLE)
    keep = np.tril(np.ones((n, n))) if lower else np.triu(np.ones((n, n)))
    half = e.emit("Mul", x, e.const(keep))  # the stored triangle, mirrored
    x = _typed(e.emit("Sub", e.emit("Add", half, transpose(e, half, rank)), e.emit("Mul", x, e.const(np.eye(n)))),
               batch, n, n)  # fmt: skip
    if n == 0:  # nothing to order (onnxruntime's GatherElements refuses empty indices)
        values = e.cast(e.emit("ReduceSum", x, e.const(_i64([-1])), keepdims=0), a.type.dtype)
        return values, e.cast(x, a.type.dtype) if vectors else None
    v = _typed(_identities(e, x, n), batch, n, n)
    if n > 1:

        def sweep(b: Emitter, it: Value, state: list[Value]) -> tuple[Value, list[Value]]:
            mat, vec = state
            for step, (p, q) in enumerate(_schedule(n)):
                flat = b.emit("Reshape", mat, b.const(_i64([0] * len(batch) + [n * n])))
                pp, qq, pq = (b.emit("Gather", flat, b.const(i * n + j), axis=-1) for i, j in ((p, p), (q, q), (p, q)))
                c, s = _rotation(b, pp, qq, pq, b.emit("Not", b.emit("Equal", pq, b.const(np.asarray(0.0)))))
                rot = _assemble(b, c, s, n, step)
                mat = b.emit("MatMul", b.emit("MatMul", transpose(b, rot, rank), mat), rot)
                if vectors:
                    vec = b.emit("MatMul", vec, rot)
            off = b.emit("Abs", b.emit("Mul", mat, b.const(1.0 - np.eye(n))))
            scale = b.emit("ReduceMax", b.emit("Abs", mat), b.const(_i64([-2, -1])), keepdims=1)
            unsettled = any_true(b, b.emit("Greater", off, b.emit("Mul", scale, b.const(np.asarray(_EPS)))))
            more = b.emit("Less", it, b.const(np.asarray(JACOBI_SWEEPS - 1, np.int64)))
            return b.emit("And", unsettled, more), [mat, vec]

        x, v = while_loop(e, [x, v], e.const(np.asarray(True)), sweep, "jacobi_eigen")
    diagonal = e.emit("ReduceSum", e.emit("Mul", x, e.const(np.eye(n))), e.const(_i64([-1])), keepdims=0)
    order = e.node("TopK", [diagonal, e.const(_i64([n]))], {"axis": -1, "largest": 0, "sorted": 1}, outputs=2)
    values = e.cast(order.outputs[0], a.type.dtype)
    if not vectors:
        return values, None
    return values, e.cast(_columns_in_order(e, v, order.outputs[1]), a.type.dtype)


def _columns_in_order(e: Emitter, x: Value, order: Value) -> Value:
    """The columns of ``x`` [..., r, n] taken in ``order`` [..., n]."""
    index = e.emit("Expand", e.emit("Unsqueeze", order, e.const(_i64([-2]))), e.emit("Shape", x))
    return e.emit("GatherElements", x, index, axis=-1)


# -- singular value decomposition ----------------------------------------------------------------


def _one_sided(e: Emitter, x: Value, batch: tuple, m: int, n: int, *, vectors: bool) -> tuple[Value, Value | None]:
    """One-sided Jacobi on float64 ``x`` [..., m, n], m >= n: ``W = x V`` with orthogonal columns
    and, with ``vectors``, ``V`` [..., n, n]."""
    x = _typed(x, batch, m, n)
    v = _typed(_identities(e, x, n), batch, n, n) if vectors else None
    if n < 2:
        return x, v

    def sweep(b: Emitter, it: Value, state: list[Value]) -> tuple[Value, list[Value]]:
        mat, vec = state[0], state[1] if vectors else None
        worst = None
        for step, (p, q) in enumerate(_schedule(n)):
            ap, aq = b.emit("Gather", mat, b.const(p), axis=-1), b.emit("Gather", mat, b.const(q), axis=-1)
            rows = b.const(_i64([-2]))
            alpha = b.emit("ReduceSum", b.emit("Mul", ap, ap), rows, keepdims=0)
            beta = b.emit("ReduceSum", b.emit("Mul", aq, aq), rows, keepdims=0)
            gamma = b.emit("ReduceSum", b.emit("Mul", ap, aq), rows, keepdims=0)
            cosine = b.emit("Div", b.emit("Abs", gamma), b.emit("Sqrt", b.emit("Mul", alpha, beta)))
            cosine = b.emit("Where", b.emit("IsNaN", cosine), b.const(np.asarray(0.0)), cosine)
            largest = b.emit("ReduceMax", cosine, b.const(_i64([-1])), keepdims=0)
            worst = largest if worst is None else b.emit("Max", worst, largest)
            turn = b.emit("Greater", cosine, b.const(np.asarray(_EPS)))  # settled pairs stay
            c, s = _rotation(b, alpha, beta, gamma, turn)
            rot = _assemble(b, c, s, n, step)
            mat = b.emit("MatMul", mat, rot)
            if vectors:
                vec = b.emit("MatMul", vec, rot)
        unsettled = any_true(b, b.emit("Greater", worst, b.const(np.asarray(_EPS))))
        more = b.emit("Less", it, b.const(np.asarray(JACOBI_SWEEPS - 1, np.int64)))
        return b.emit("And", unsettled, more), [mat, vec] if vectors else [mat]

    out = while_loop(e, [x, v] if vectors else [x], e.const(np.asarray(True)), sweep, "jacobi")
    return out[0], out[1] if vectors else None


def _column_norms(e: Emitter, w: Value) -> Value:
    return e.emit("Sqrt", e.emit("ReduceSum", e.emit("Mul", w, w), e.const(_i64([-2])), keepdims=0))


def svd(e: Emitter, a: Value, *, vectors: bool = True, full_matrices: bool = False
        ) -> tuple[Value | None, Value, Value | None]:  # fmt: skip
    """``U, S, Vᵀ`` of ``a`` [..., m, n]: S descending [..., k] (k = min(m, n)); U [..., m, k] and
    Vᵀ [..., k, n], or [..., m, m] and [..., n, n] with ``full_matrices``; ``None`` for the vectors
    unless ``vectors``."""
    shape, m, n = _check(a, "a singular value decomposition")
    batch, rank = shape[:-2], len(shape)
    x = e.cast(a, DataType.DOUBLE)
    flipped = n > m  # decompose aᵀ = U' S V'ᵀ: then U = V', V = U'
    if flipped:
        x, (m, n) = transpose(e, x, rank), (n, m)
    dtype = a.type.dtype
    if n == 0:
        values = e.cast(e.emit("ReduceSum", x, e.const(_i64([-2])), keepdims=0), dtype)  # [..., 0]
        if not vectors:
            return None, values, None
        left = _typed(_identities(e, x, m), batch, m, m) if full_matrices else x  # [..., m, 0]
        right = _typed(_identities(e, x, 0), batch, 0, 0)
        u, vt = (right, transpose(e, left, rank)) if flipped else (left, right)
        return e.cast(u, dtype), values, e.cast(vt, dtype)
    w, v = _one_sided(e, x, batch, m, n, vectors=vectors)
    norms = _column_norms(e, w)
    order = e.node("TopK", [norms, e.const(_i64([n]))], {"axis": -1, "largest": 1, "sorted": 1}, outputs=2)
    values = e.cast(order.outputs[0], dtype)
    if not vectors:
        return None, values, None
    w = _typed(_columns_in_order(e, w, order.outputs[1]), batch, m, n)
    v = _columns_in_order(e, v, order.outputs[1])
    packed, taus = householder_qr(e, w)  # Q of W: its columns are ±W's, normalized, then a completion
    packed.type = w.type
    columns = m if full_matrices else n
    q = householder_product(e, packed, taus, n, columns, (*batch, m, n))
    diagonal = e.emit("ReduceSum", e.emit("Mul", packed, e.const(np.eye(m, n))), e.const(_i64([-2])), keepdims=0)
    signs = e.emit("Where", e.emit("Less", diagonal, e.const(np.asarray(0.0))), e.const(np.asarray(-1.0)),
                   e.const(np.asarray(1.0)))  # fmt: skip
    if columns > n:
        signs = e.emit("Pad", signs, e.const(_i64([0] * (len(batch) + 1) + [0] * len(batch) + [columns - n])),
                       e.const(np.asarray(1.0)))  # fmt: skip
    u = e.emit("Mul", q, e.emit("Unsqueeze", signs, e.const(_i64([-2]))))
    if flipped:
        u, v = v, u
    return e.cast(u, dtype), values, e.cast(transpose(e, v, rank), dtype)


def pseudo_inverse(e: Emitter, a: Value, atol: Value | None, rtol: Value | None, *, hermitian: bool) -> Value:
    """The Moore-Penrose inverse of ``a`` [..., m, n], as ``torch.linalg.pinv`` defines it: singular
    values at or below ``max(atol, rtol * largest)`` count as zero; ``rtol`` defaults to
    ``eps * max(m, n)`` of ``a``'s dtype, or to 0 where a positive ``atol`` is given; ``hermitian``
    reads only the lower triangle.  Unlike the singular vectors it rests on, the result is unique:
    with ``W = A V`` (columns ``sigma_i u_i``), it is ``V diag(1 / sigma_i^2) Wᵀ`` over the kept values."""
    shape, m, n = _check(a, "a pseudo-inverse")
    batch, rank = shape[:-2], len(shape)
    x = e.cast(a, DataType.DOUBLE)
    if hermitian:
        if m != n:
            raise NotMapped("hermitian pseudo-inverse of a non-square matrix")
        half = e.emit("Mul", x, e.const(np.tril(np.ones((n, n)))))
        x = e.emit("Sub", e.emit("Add", half, transpose(e, half, rank)), e.emit("Mul", x, e.const(np.eye(n))))
    eps = float(np.finfo(to_numpy(a.type.dtype)).eps) * max(m, n)
    zero = e.const(np.asarray(0.0))
    atol = zero if atol is None else e.cast(atol, DataType.DOUBLE)
    if rtol is None:
        rtol = e.const(np.asarray(eps)) if atol is zero else e.emit(
            "Where", e.emit("Greater", atol, zero), zero, e.const(np.asarray(eps)))  # fmt: skip
    rtol = e.cast(rtol, DataType.DOUBLE)
    flipped = n > m
    if flipped:
        x, (m, n) = transpose(e, x, rank), (n, m)
    if n == 0:
        return e.cast(transpose(e, x, rank) if not flipped else x, a.type.dtype)
    w, v = _one_sided(e, x, batch, m, n, vectors=True)
    sigma = _column_norms(e, w)
    last = e.const(_i64([-1]))
    largest = e.emit("ReduceMax", sigma, last, keepdims=1)
    tol = e.emit("Max", e.emit("Unsqueeze", atol, last), e.emit("Mul", e.emit("Unsqueeze", rtol, last), largest))
    scale = e.emit("Where", e.emit("Greater", sigma, tol), e.emit("Reciprocal", e.emit("Mul", sigma, sigma)), zero)
    pinv = e.emit("MatMul", e.emit("Mul", v, e.emit("Unsqueeze", scale, e.const(_i64([-2])))), transpose(e, w, rank))
    return e.cast(transpose(e, pinv, rank) if flipped else pinv, a.type.dtype)
