"""Reductions, arg-reductions and TopK."""

from __future__ import annotations

import numpy as np

from ...table import Lowering, Rule, static
from .common import RULES, _axis, _jnp, rule
from .shape import _ints

# --- reductions -------------------------------------------------------------------------------


def _reduce_axes(node, args, x):
    axes = args[1] if len(args) > 1 and args[1] is not None else None
    if axes is not None:
        axes = _ints(axes, "the reduction's axes")
    elif node.attr("axes") is not None:
        axes = list(node.attr("axes"))
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return None
        return tuple(range(x.ndim))
    return tuple(sorted(_axis(a, x.ndim) for a in axes))


def _reduction(kind: str) -> Rule:
    def fn(ctx, node, args):
        jnp, x = _jnp(), args[0]
        axes = _reduce_axes(node, args, x)
        if axes is None:
            return [x]
        keep = bool(node.attr("keepdims", 1))
        if kind == "Sum":
            y = jnp.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
        elif kind == "Mean":
            y = jnp.mean(x, axis=axes, keepdims=keep).astype(x.dtype)
        elif kind == "Max":
            y = _extreme(jnp.max, x, axes, keep, -np.inf)
        elif kind == "Min":
            y = _extreme(jnp.min, x, axes, keep, np.inf)
        elif kind == "Prod":
            y = jnp.prod(x, axis=axes, keepdims=keep, dtype=x.dtype)
        elif kind == "L1":
            y = jnp.sum(jnp.abs(x), axis=axes, keepdims=keep, dtype=x.dtype)
        elif kind == "L2":
            y = jnp.sqrt(jnp.sum(x * x, axis=axes, keepdims=keep)).astype(x.dtype)
        elif kind == "LogSum":
            y = jnp.log(jnp.sum(x, axis=axes, keepdims=keep))
        elif kind == "LogSumExp":
            import jax

            y = jax.nn.logsumexp(x.astype(np.float64) if x.dtype == np.float64 else x, axis=axes, keepdims=keep)
            y = y.astype(x.dtype)
        else:  # SumSquare
            y = jnp.sum(x * x, axis=axes, keepdims=keep, dtype=x.dtype)
        return [y]

    return fn


def _extreme(fn, x, axes, keep, empty):
    jnp = _jnp()
    if any(x.shape[a] == 0 for a in axes):
        shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if keep else [
            d for a, d in enumerate(x.shape) if a not in axes]  # fmt: skip
        if x.dtype == bool:
            fill = empty > 0
        elif jnp.issubdtype(x.dtype, jnp.floating):
            fill = empty
        else:
            fill = jnp.iinfo(x.dtype).min if empty < 0 else jnp.iinfo(x.dtype).max
        return jnp.full(shape, fill, dtype=x.dtype)
    return fn(x, axis=axes, keepdims=keep)


for _kind in ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "LogSum", "LogSumExp", "SumSquare"):
    RULES[f"Reduce{_kind}"] = Lowering(_reduction(_kind))


def _arg(kind: str) -> Rule:
    def fn(ctx, node, args):
        jnp, x = _jnp(), args[0]
        axis = _axis(node.attr("axis", 0), x.ndim)
        keep = bool(node.attr("keepdims", 1))
        if node.attr("select_last_index", 0):
            flipped = jnp.flip(x, axis)
            i = (jnp.argmax if kind == "Max" else jnp.argmin)(flipped, axis=axis, keepdims=keep)
            y = x.shape[axis] - 1 - i
        else:
            y = (jnp.argmax if kind == "Max" else jnp.argmin)(x, axis=axis, keepdims=keep)
        return [y.astype(np.int64)]

    return fn


RULES["ArgMax"] = Lowering(_arg("Max"))
RULES["ArgMin"] = Lowering(_arg("Min"))


@rule("TopK")
def _topk(ctx, node, args):
    jnp = _jnp()
    x = args[0]
    k = int(static(args[1], "TopK's k").reshape(-1)[0])
    axis = _axis(node.attr("axis", -1), x.ndim)
    largest = node.attr("largest", 1)
    xt = jnp.moveaxis(x, axis, -1)
    n = xt.shape[-1]
    idx = jnp.broadcast_to(jnp.arange(n), xt.shape)
    # a stable sort on (value, index): ties keep the lower index first, as ONNX asks
    key = -xt if largest else xt
    if jnp.issubdtype(x.dtype, jnp.unsignedinteger) and largest:
        key = jnp.invert(xt)  # max - x, without a Python int that overflows int64
    from jax import lax

    _, order = lax.sort((key, idx), dimension=xt.ndim - 1, num_keys=2)
    order = order[..., :k]
    values = jnp.take_along_axis(xt, order, axis=-1)
    return [jnp.moveaxis(values, -1, axis), jnp.moveaxis(order, -1, axis).astype(np.int64)]
