"""Ops Relax has no single op for, spelled with the ones it has."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ....ops.geometry import resize_axes, resize_weights
from ...table import Refused, Rule, static
from .common import RULES, _axis, _float_only, _ints, _moments, _op, _s, empty_reduction, rule
from .elementwise import _cast, trunc_divide
from .reduce import _reduction_axes

# --- compositions: ops Relax has no single op for, spelled with the ones it has ------------------


def _composed(fn: Callable) -> Rule:
    """A rule whose one input is an element-wise float tensor."""

    def rule_(ctx, node, args):
        x = ctx.expr(args[0])
        if not ctx.dtype(x).startswith("float"):
            raise Refused(f"{node.op_type} of {ctx.dtype(x)}")
        return [fn(_op(), ctx, node, x)]

    return rule_


def _softplus(op, ctx, x):
    """log(1 + exp(x)) without losing the small values: max(x, 0) + log1p(exp(-|x|)), with
    log1p(e) taken as e - e²/2 where ``1 + e`` would round."""
    e = op.exp(op.negative(op.abs(x)))
    small = op.subtract(e, op.multiply(op.multiply(e, e), _s(ctx, 0.5, x)))
    log1p = op.where(op.less(e, _s(ctx, 1e-4, x)), small, op.log(op.add(e, _s(ctx, 1, x))))
    return op.add(op.maximum(x, op.zeros_like(x)), log1p)


for _name, _fn in {
    "Softsign": _composed(lambda op, c, n, x: op.divide(x, op.add(_s(c, 1, x), op.abs(x)))),
    "Softplus": _composed(lambda op, c, n, x: _softplus(op, c, x)),
    "HardSigmoid": _composed(lambda op, c, n, x: op.clip(op.add(op.multiply(x, _s(c, n.attr("alpha", 0.2), x)),
                                                                _s(c, n.attr("beta", 0.5), x)), 0, 1)),
    "HardSwish": _composed(lambda op, c, n, x: op.multiply(x, op.clip(op.add(op.divide(x, _s(c, 6, x)),
                                                                             _s(c, 0.5, x)), 0, 1))),
    "Elu": _composed(lambda op, c, n, x: op.where(op.greater(x, _s(c, 0, x)), x, op.multiply(
        _s(c, n.attr("alpha", 1.0), x), op.subtract(op.exp(x), _s(c, 1, x))))),
    "Selu": _composed(lambda op, c, n, x: op.multiply(_s(c, n.attr("gamma", 1.05070102214813232421875), x), op.where(
        op.greater(x, _s(c, 0, x)), x, op.multiply(_s(c, n.attr("alpha", 1.67326319217681884765625), x),
                                                   op.subtract(op.exp(x), _s(c, 1, x)))))),
    "Celu": _composed(lambda op, c, n, x: op.add(op.maximum(x, _s(c, 0, x)), op.minimum(_s(c, 0, x), op.multiply(
        _s(c, n.attr("alpha", 1.0), x), op.subtract(op.exp(op.divide(x, _s(c, n.attr("alpha", 1.0), x))),
                                                    _s(c, 1, x)))))),
    "ThresholdedRelu": _composed(lambda op, c, n, x: op.where(op.greater(x, _s(c, n.attr("alpha", 1.0), x)), x,
                                                              op.zeros_like(x))),
    "Mish": _composed(lambda op, c, n, x: op.multiply(x, op.tanh(_softplus(op, c, x)))),
    "Gelu": _composed(lambda op, c, n, x: op.nn.gelu_tanh(x) if n.attr("approximate", "none") == "tanh"
                      else op.nn.gelu(x)),
    "Shrink": _composed(lambda op, c, n, x: op.where(
        op.less(x, _s(c, -n.attr("lambd", 0.5), x)), op.add(x, _s(c, n.attr("bias", 0.0), x)),
        op.where(op.greater(x, _s(c, n.attr("lambd", 0.5), x)), op.subtract(x, _s(c, n.attr("bias", 0.0), x)),
                 op.zeros_like(x)))),
}.items():  # fmt: skip
    RULES.add(_name, _fn, check=lambda node: _float_only(node))


@rule("IsInf")
def _isinf(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    out = op.isinf(x)
    if not node.attr("detect_positive", 1):
        out = op.logical_and(out, op.less(x, _s(ctx, 0, x)))
    if not node.attr("detect_negative", 1):
        out = op.logical_and(out, op.greater(x, _s(ctx, 0, x)))
    return [out]


@rule("PRelu")
def _prelu(ctx, node, args):
    op = _op()
    x, slope = ctx.expr(args[0]), ctx.expr(args[1])
    return [op.where(op.less(x, _s(ctx, 0, x)), op.multiply(x, slope), x)]


@rule("Mod")
def _mod(ctx, node, args):
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    floating = ctx.dtype(a).startswith("float")
    if node.attr("fmod", 0):
        if floating:
            return [op.mod(a, b)]  # C's fmod
        return [op.subtract(a, op.multiply(trunc_divide(ctx, a, b), b))]
    if floating:  # numpy's mod: fmod moved into the divisor's sign, a zero carrying that sign
        r = op.mod(a, b)
        negative_b = op.less(b, _s(ctx, 0, b))
        moved = op.logical_and(op.not_equal(r, _s(ctx, 0, r)), op.logical_xor(op.less(r, _s(ctx, 0, r)), negative_b))
        zero = op.where(negative_b, _s(ctx, -0.0, r), _s(ctx, 0.0, r))
        return [op.where(op.equal(r, _s(ctx, 0, r)), zero, op.where(moved, op.add(r, b), r))]
    return [op.floor_mod(a, b)]


@rule("BitShift")
def _bitshift(ctx, node, args):
    """Shifts by the width or more (or by a negative amount) give what ONNX's reference does: 0,
    or -1 for a right shift of a negative signed number; C leaves them undefined."""
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    bits = np.dtype(ctx.dtype(a)).itemsize * 8
    out_of_range = op.logical_or(op.greater_equal(b, _s(ctx, bits, b)), op.less(b, _s(ctx, 0, b)))
    safe = op.where(out_of_range, op.zeros_like(b), b)
    if node.attr("direction") == "LEFT":
        return [op.where(out_of_range, op.zeros_like(a), op.left_shift(a, safe))]
    fill = op.zeros_like(a)
    if np.issubdtype(np.dtype(ctx.dtype(a)), np.signedinteger):
        fill = op.where(op.less(a, _s(ctx, 0, a)), op.subtract(op.zeros_like(a), op.ones_like(a)), fill)
    return [op.where(out_of_range, fill, op.right_shift(a, safe))]


@rule("CastLike")
def _cast_like(ctx, node, args):
    target = ctx.dtype(ctx.expr(args[1]))
    from ....core_ir.dtypes import from_numpy

    fake = type("N", (), {"attr": lambda self, k, d=None: int(from_numpy(np.dtype(target))) if k == "to" else d})()
    return _cast(ctx, fake, args[:1])


@rule("GatherElements")
def _gather_elements(ctx, node, args):
    op = _op()
    x, idx = ctx.expr(args[0]), ctx.expr(args[1])
    axis = _axis(node.attr("axis", 0), len(ctx.shape(x)))
    dim = _s(ctx, ctx.shape(x)[axis], idx)
    idx = op.where(op.less(idx, _s(ctx, 0, idx)), op.add(idx, dim), idx)
    return [op.gather_elements(x, idx, axis)]


@rule("GatherND")
def _gather_nd(ctx, node, args):
    op = _op()
    x, idx = ctx.expr(args[0]), ctx.expr(args[1])
    batch = node.attr("batch_dims", 0)
    depth = ctx.shape(idx)[-1]
    dims = np.array(ctx.shape(x)[batch : batch + depth], np.int64)
    if isinstance(args[1], np.ndarray):  # negative indices count from the end
        idx = ctx.expr(np.where(args[1] < 0, args[1] + dims.astype(args[1].dtype), args[1]))
    else:
        sizes = ctx.expr(dims.astype(ctx.dtype(idx)))
        idx = op.where(op.less(idx, _s(ctx, 0, idx)), op.add(idx, sizes), idx)
    return [op.gather_nd(x, idx, batch)]


@rule("Tile")
def _tile(ctx, node, args):
    return [_op().tile(ctx.expr(args[0]), _ints(args[1], "Tile's repeats"))]


@rule("Trilu")
def _trilu(ctx, node, args):
    op = _op()
    k = int(static(args[1], "Trilu's k").reshape(-1)[0]) if len(args) > 1 and args[1] is not None else 0
    x = ctx.expr(args[0])
    return [op.triu(x, k) if node.attr("upper", 1) else op.tril(x, k)]


@rule("ArgMax", "ArgMin")
def _arg(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(node.attr("axis", 0), len(ctx.shape(x)))
    f = op.argmax if node.op_type == "ArgMax" else op.argmin
    keep = bool(node.attr("keepdims", 1))
    if node.attr("select_last_index", 0):  # the first from the end is the last
        i = op.astype(f(op.flip(x, axis), axis, keep), "int64")
        return [op.subtract(ctx.expr(np.array(ctx.shape(x)[axis] - 1, np.int64)), i)]
    return [op.astype(f(x, axis, keep), "int64")]


@rule("CumSum")
def _cumsum(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(int(static(args[1], "CumSum's axis").reshape(-1)[0]), len(ctx.shape(x)))
    if node.attr("reverse", 0):
        x = op.flip(x, axis)
    y = op.cumsum(x, axis, ctx.dtype(x), bool(node.attr("exclusive", 0)))
    return [op.flip(y, axis) if node.attr("reverse", 0) else y]


def _reduce_composed(kind: str) -> Rule:
    def fn(ctx, node, args):
        op, x = _op(), ctx.expr(args[0])
        axes = _reduction_axes(ctx, node, args, x)
        if axes is None:
            return [x]
        if not ctx.dtype(x).startswith("float"):
            raise Refused(f"Reduce{kind} of {ctx.dtype(x)}")
        if any(ctx.shape(x)[a] == 0 for a in axes):
            return [empty_reduction(ctx, node, x, axes, kind)]
        keep = bool(node.attr("keepdims", 1))
        if kind == "L1":
            return [op.sum(op.abs(x), axes, keep)]
        if kind == "L2":
            return [op.sqrt(op.sum(op.multiply(x, x), axes, keep))]
        if kind == "SumSquare":
            return [op.sum(op.multiply(x, x), axes, keep)]
        if kind == "LogSum":
            return [op.log(op.sum(x, axes, keep))]
        top = op.max(x, axes, True)
        safe = op.where(op.isinf(top), op.zeros_like(top), top)
        lse = op.add(op.log(op.sum(op.exp(op.subtract(x, safe)), axes, True)), safe)
        return [lse if keep else op.squeeze(lse, axes)]

    return fn


for _kind in ("L1", "L2", "SumSquare", "LogSum", "LogSumExp"):
    RULES.add(f"Reduce{_kind}", _reduce_composed(_kind))


@rule("Einsum")
def _einsum(ctx, node, args):
    return [_op().einsum([ctx.expr(a) for a in args], node.attr("equation").replace(" ", ""))]


@rule("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    b = node.attr("blocksize")
    n, c, h, w = ctx.shape(x)
    if node.op_type == "DepthToSpace":
        if node.attr("mode", "DCR") == "DCR":
            y = op.permute_dims(op.reshape(x, [n, b, b, c // (b * b), h, w]), [0, 3, 4, 1, 5, 2])
        else:
            y = op.permute_dims(op.reshape(x, [n, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
        return [op.reshape(y, [n, c // (b * b), h * b, w * b])]
    y = op.reshape(x, [n, c, h // b, b, w // b, b])
    perm = [0, 1, 3, 5, 2, 4] if node.attr("mode", "DCR") == "CRD" else [0, 3, 5, 1, 2, 4]
    return [op.reshape(op.permute_dims(y, perm), [n, c * b * b, h // b, w // b])]


@rule("InstanceNormalization")
def _instance_norm(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    rank = len(ctx.shape(x))
    mean, var = _moments(op, x, list(range(2, rank)))
    y = op.divide(op.subtract(x, mean), op.sqrt(op.add(var, _s(ctx, node.attr("epsilon", 1e-5), x))))
    shape = [1, -1] + [1] * (rank - 2)
    return [op.add(op.multiply(y, op.reshape(ctx.expr(args[1]), shape)), op.reshape(ctx.expr(args[2]), shape))]


@rule("RMSNormalization")
def _rms_norm(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    if node.attr("stash_type", 1) != 1 or ctx.dtype(x) != "float32":
        raise Refused("RMSNormalization other than float32")
    rank = len(ctx.shape(x))
    axes = list(range(_axis(node.attr("axis", -1), rank), rank))
    ms = op.mean(op.multiply(x, x), axes, True)
    y = op.divide(x, op.sqrt(op.add(ms, _s(ctx, node.attr("epsilon", 1e-5), x))))
    return [op.multiply(y, ctx.expr(args[1]))]


@rule("LpNormalization")
def _lp_norm(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(node.attr("axis", -1), len(ctx.shape(x)))
    p = node.attr("p", 2)
    norm = op.sum(op.abs(x), [axis], True) if p == 1 else op.sqrt(op.sum(op.multiply(x, x), [axis], True))
    zero = op.equal(norm, _s(ctx, 0, x))
    return [op.where(zero, op.zeros_like(x), op.divide(x, op.where(zero, op.ones_like(norm), norm)))]


@rule("Resize")
def _resize(ctx, node, args):
    """As on every backend: per axis ``x @ W + b`` (:func:`irforge.ops.geometry.resize_weights`)."""
    op, x = _op(), ctx.expr(args[0])
    roi = static(args[1], "Resize's roi") if len(args) > 1 and args[1] is not None and args[1].size else None
    scales = static(args[2], "Resize's scales") if len(args) > 2 and args[2] is not None and args[2].size else None
    sizes = static(args[3], "Resize's sizes") if len(args) > 3 and args[3] is not None and args[3].size else None
    dims = ctx.shape(x)
    rank = len(dims)
    out = x
    for a, n, _m, given_, box in resize_axes(node, dims, roi, scales, sizes):
        weights, bias = resize_weights(node, n, given_, box, roi.dtype if roi is not None else np.float32)
        perm = [d for d in range(rank) if d != a] + [a]
        inverse = list(np.argsort(perm))
        moved = op.permute_dims(out, perm)
        moved = op.add(op.matmul(moved, ctx.expr(weights.astype(ctx.dtype(x)))), ctx.expr(bias.astype(ctx.dtype(x))))
        out = op.permute_dims(moved, inverse)
    return [out]
