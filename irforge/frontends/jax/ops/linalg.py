"""Linear algebra (jax's ``lax.linalg``): dot_general and the factorizations, the latter computed by
:mod:`irforge.frontends.lib` in core ONNX ops."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import DataType, to_numpy
from ...common import NotMapped
from ...lib import jacobi, linalg
from .common import _i64, prim


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
    from .. import aval_type

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
    from .. import aval_type

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
    from .. import aval_type, to_dtype

    out = cx.emit("Cast", v, to=int(to_dtype(cx.out_avals[i].dtype)))
    out.type = aval_type(cx.out_avals[i])
    return out


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
