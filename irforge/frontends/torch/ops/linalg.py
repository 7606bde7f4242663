"""Linear algebra: matrix products, triangular solves and the factorizations (Cholesky, LU, QR, SVD, eigh,
LDL), the latter computed by :mod:`irforge.frontends.lib` in core ONNX ops."""

from __future__ import annotations

import math

import numpy as np

from ....core_ir.dtypes import DataType, to_numpy
from ....core_ir.types import TensorType
from ....core_ir.value import Value
from ...common import NotMapped
from ...lib import jacobi, ldl, linalg
from .common import aten
from .nn import _scaled_sum
from .shapes import _flat


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


@aten("addbmm.default")
def _addbmm(cx, bias, a, b, *, beta=1, alpha=1):
    prod = cx.emit("ReduceSum", cx.emit("MatMul", cx.tensor(a), cx.tensor(b)), cx.const(np.asarray([0], np.int64)),
                   keepdims=0)  # fmt: skip
    return _scaled_sum(cx, prod, bias, alpha, beta)


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
