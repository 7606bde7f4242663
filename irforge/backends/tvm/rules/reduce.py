"""Reductions, softmax and normalizations."""

from __future__ import annotations

import numpy as np

from ...table import Refused, Rule, static
from .common import RULES, _axis, _ints, _moments, _op, _s, empty_reduction, rule

# --- reductions and normalization ---------------------------------------------------------------


def _reduction_axes(ctx, node, args, x) -> list[int] | None:
    """The axes a Reduce* node reduces (an input from opset 18, an attribute before); None for
    ``noop_with_empty_axes`` with no axes."""
    rank = len(ctx.shape(x))
    axes = _ints(args[1], "the reduction's axes") if len(args) > 1 and args[1] is not None else node.attr("axes")
    if not axes:
        return None if node.attr("noop_with_empty_axes", 0) else list(range(rank))
    return [_axis(a, rank) for a in axes]


def _reduce(kind: str) -> Rule:
    def fn(ctx, node, args):
        op, x = _op(), ctx.expr(args[0])
        axes = _reduction_axes(ctx, node, args, x)
        if axes is None:
            return [x]
        if ctx.dtype(x) == "bool":
            raise Refused("a reduction of booleans")
        if any(ctx.shape(x)[a] == 0 for a in axes):
            return [empty_reduction(ctx, node, x, axes, kind)]
        keep = bool(node.attr("keepdims", 1))
        return [{"Sum": op.sum, "Mean": op.mean, "Max": op.max, "Min": op.min, "Prod": op.prod}[kind](x, axes, keep)]

    return fn


for _kind in ("Sum", "Mean", "Max", "Min", "Prod"):
    RULES.add(f"Reduce{_kind}", _reduce(_kind))


@rule("Softmax", "LogSoftmax")
def _softmax(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(node.attr("axis", -1), len(ctx.shape(x)))
    if node.op_type == "LogSoftmax":
        return [op.nn.log_softmax(x, axis=axis)]
    half = ctx.dtype(x) == "float16"

    def rounded(e):  # float16 as numpy computes it: each step in float32, rounded to float16 after
        return op.astype(op.astype(e, "float16"), "float32") if half else e

    if half:
        x = op.astype(x, "float32")
    # as ONNX's reference computes it: a row that is all -inf (fully masked attention) gives 0s
    top = op.max(x, [axis], True)
    safe = op.where(op.isinf(top), op.zeros_like(top), top)
    e = rounded(op.exp(rounded(op.subtract(x, safe))))
    total = rounded(op.sum(e, [axis], True))
    total = op.where(op.equal(total, _s(ctx, 0, x)), op.ones_like(total), total)
    y = op.divide(e, total)
    return [op.astype(y, "float16") if half else y]


@rule("LayerNormalization")
def _layer_norm(ctx, node, args):
    if len([o for o in node.outputs if o is not None]) > 1:
        return _layer_norm_with_statistics(ctx, node, args)
    x = ctx.expr(args[0])
    rank = len(ctx.shape(x))
    axes = list(range(_axis(node.attr("axis", -1), rank), rank))
    beta = args[2] if len(args) > 2 and args[2] is not None else np.zeros(1, np.float32)
    gamma, beta = ctx.expr(args[1]), ctx.expr(beta)
    if len(ctx.shape(gamma)) != len(axes) or len(ctx.shape(beta)) != len(axes):
        raise Refused("LayerNormalization whose scale or bias broadcasts")
    return [_op().nn.layer_norm(x, gamma, beta, axes, epsilon=node.attr("epsilon", 1e-5))]


def _layer_norm_with_statistics(ctx, node, args):
    """LayerNormalization with its Mean and InvStdDev outputs, in the stash type (float32)."""
    op, x = _op(), ctx.expr(args[0])
    if node.attr("stash_type", 1) != 1:
        raise Refused("LayerNormalization with a stash type other than float32")
    rank = len(ctx.shape(x))
    axes = list(range(_axis(node.attr("axis", -1), rank), rank))
    xs = op.astype(x, "float32")
    mean, var = _moments(op, xs, axes)
    inv = op.divide(ctx.expr(np.array(1, np.float32)),
                    op.sqrt(op.add(var, ctx.expr(np.array(node.attr("epsilon", 1e-5), np.float32)))))  # fmt: skip
    y = op.multiply(op.astype(op.multiply(op.subtract(xs, mean), inv), ctx.dtype(x)), ctx.expr(args[1]))
    if len(args) > 2 and args[2] is not None:
        y = op.add(y, ctx.expr(args[2]))
    return [y, mean, inv][: len(node.outputs)]


@rule("BatchNormalization")
def _batch_norm(ctx, node, args):
    if node.attr("training_mode", 0) or len([o for o in node.outputs if o is not None]) > 1:
        raise Refused("BatchNormalization in training mode")
    x = ctx.expr(args[0])
    consts = [static(a, "BatchNormalization's statistics") for a in args[1:]]
    scale, bias, mean, var = (c.astype(np.float64) for c in consts)
    inv = scale / np.sqrt(var + node.attr("epsilon", 1e-5))
    shape = [-1] + [1] * (len(ctx.shape(x)) - 2)
    dtype = consts[0].dtype
    mul = ctx.expr(inv.astype(dtype).reshape(shape))
    add = ctx.expr((bias - mean * inv).astype(dtype).reshape(shape))
    return [_op().add(_op().multiply(x, mul), add)]
