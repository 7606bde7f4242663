"""Indexing: scatters, top-k and cumulative products."""

from __future__ import annotations

import numpy as np

from ...table import Refused, static
from .common import _axis, _op, _s, rule

# --- scatters, top-k, cumulative products -------------------------------------------------------

_REDUCTION = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def _reduction(node) -> str:
    reduction = node.attr("reduction", "none")
    if reduction not in _REDUCTION:
        raise Refused(f"{node.op_type} with reduction {reduction!r}")
    return _REDUCTION[reduction]


def _non_negative(ctx, idx, sizes):
    """Indices counted from the end (negative) made absolute; ``sizes`` broadcasts against them."""
    op = _op()
    return op.where(op.less(idx, _s(ctx, 0, idx)), op.add(idx, ctx.expr(np.asarray(sizes, ctx.dtype(idx)))), idx)


@rule("ScatterElements", "Scatter")
def _scatter_elements(ctx, node, args):
    x, idx, upd = (ctx.expr(a) for a in args[:3])
    axis = _axis(node.attr("axis", 0), len(ctx.shape(x)))
    idx = _non_negative(ctx, idx, ctx.shape(x)[axis])
    return [_op().scatter_elements(x, idx, upd, axis, _reduction(node))]


@rule("ScatterND")
def _scatter_nd(ctx, node, args):
    x, idx, upd = (ctx.expr(a) for a in args[:3])
    depth = ctx.shape(idx)[-1]
    idx = _non_negative(ctx, idx, ctx.shape(x)[:depth])
    return [_op().scatter_nd(x, idx, upd, _reduction(node))]


@rule("TopK")
def _topk(ctx, node, args):
    """The ``k`` largest (or smallest) along ``axis``, ties broken by the lower index as ONNX asks:
    a stable sort of the values, descending for the largest, then the first ``k``."""
    op, x = _op(), ctx.expr(args[0])
    k = int(static(args[1], "TopK's k").reshape(-1)[0])
    axis = _axis(node.attr("axis", -1), len(ctx.shape(x)))
    largest = bool(node.attr("largest", 1))
    signed = ctx.dtype(x).startswith(("float", "int"))
    if largest and signed:  # an ascending stable sort of -x keeps equal values in index order
        order = op.argsort(op.negative(x), axis, dtype="int64")
    else:
        order = op.argsort(x, axis, descending=largest, dtype="int64")
    first = op.strided_slice(order, [axis], [0], [k])
    return [op.gather_elements(x, first, axis), first]


@rule("CumProd")
def _cumprod(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(int(static(args[1], "CumProd's axis").reshape(-1)[0]), len(ctx.shape(x)))
    reverse = bool(node.attr("reverse", 0))
    if reverse:
        x = op.flip(x, axis)
    y = op.cumprod(x, axis, ctx.dtype(x), bool(node.attr("exclusive", 0)))
    return [op.flip(y, axis) if reverse else y]
