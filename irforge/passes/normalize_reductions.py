"""normalize-reductions: the reductions frontends spell in pieces, written as the ONNX ops the
fusions look for.

JAX has no mean, no keepdims and no softmax primitive: ``jnp.mean(x, -1, keepdims=True)`` reaches
the graph as ``ReduceSum`` (dims dropped), ``Unsqueeze`` and ``Div`` by the count, and
``jax.nn.softmax`` as ``exp(x - max) / sum(exp(x - max))``.  Three rewrites give them the form
torch's exporters write, so the layer-norm, RMS-norm and attention fusions match JAX models too:

- ``Unsqueeze(Reduce*(x, axes, keepdims=0), axes)`` → ``Reduce*(x, axes, keepdims=1)``;
- ``Div(ReduceSum(x, axes), n)`` with ``n`` the number of elements summed → ``ReduceMean``;
- ``Div(e, ReduceSum(e, [a], keepdims=1))`` with ``e = Exp(x - c)`` and ``c`` constant along
  ``a`` → ``Softmax(x, axis=a)`` (the shift does not change a softmax; the op is stable anyway).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..core_ir.builder import Builder
from ..core_ir.graph import Graph
from ..core_ir.node import Node
from ..core_ir.pattern import constant_value
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult

REDUCTIONS = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"})  # fmt: skip
_AXES_AS_INPUT = {"ReduceSum": 13}
"""From which opset a reduction takes its axes as an input (the rest: 18)."""


def _shape(v: Value | None) -> tuple | None:
    return getattr(getattr(v, "type", None), "shape", None)


def _onnx(node: Node | None, *ops: str) -> bool:
    return node is not None and node.domain in ("", "ai.onnx") and node.op_type in ops


def _axes(node: Node) -> list[int] | None:
    """A reduction's (or Unsqueeze's) axes, normalized to its input rank (Unsqueeze: its output's)."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        axes = constant_value(node.inputs[1])
        if axes is None:
            return None
        axes = [int(a) for a in np.asarray(axes).reshape(-1)]
    elif "axes" in node.attributes and node.attributes["axes"].ref is None:
        axes = list(node.attr("axes"))
    else:
        return None  # every axis, or not known
    rank = len(_shape(node.outputs[0] if node.op_type == "Unsqueeze" else node.inputs[0]) or ()) or None
    if rank is None or not axes:
        return None
    return sorted(a % rank for a in axes)


def _reduce(b: Builder, op: str, x: Value, axes: list[int], keepdims: int, like: Value, opset: int) -> Value:
    if opset >= _AXES_AS_INPUT.get(op, 18):
        out = getattr(b.op, op)(x, b.constant(np.array(axes, np.int64)), keepdims=keepdims)
    else:
        out = getattr(b.op, op)(x, axes=axes, keepdims=keepdims)
    out.type = like.type
    return out


def _only_reader(v: Value, node: Node) -> bool:
    return v.users() == [node] and not v.is_graph_output()


def _keepdims(node: Node, opset: int) -> Value | None:
    """Unsqueeze(Reduce(x, axes, keepdims=0), axes) → Reduce(x, axes, keepdims=1)."""
    reduce = node.inputs[0].producer()
    if not _onnx(reduce, *REDUCTIONS) or reduce.attr("keepdims", 1) != 0 or not _only_reader(node.inputs[0], node):
        return None
    axes = _axes(reduce)
    if axes is None or _axes(node) != axes or reduce.attr("noop_with_empty_axes", 0):
        return None
    return _reduce(Builder(node.graph, before=node), reduce.op_type, reduce.inputs[0], axes, 1, node.outputs[0],
                   opset)  # fmt: skip


def _mean(node: Node, opset: int) -> Value | None:
    """Div(ReduceSum(x, axes), count) → ReduceMean(x, axes)."""
    total, n = node.inputs
    reduce = total.producer()
    if not _onnx(reduce, "ReduceSum") or not _only_reader(total, node):
        return None
    axes, shape, count = _axes(reduce), _shape(reduce.inputs[0]), constant_value(n)
    if axes is None or shape is None or count is None or count.size != 1 or reduce.attr("noop_with_empty_axes", 0):
        return None
    dims = [shape[a] for a in axes]
    if not all(isinstance(d, int) for d in dims) or float(count.reshape(-1)[0]) != math.prod(dims):
        return None
    if getattr(n.type, "dtype", None) != getattr(total.type, "dtype", None):
        return None
    b = Builder(node.graph, before=node)
    return _reduce(b, "ReduceMean", reduce.inputs[0], axes, reduce.attr("keepdims", 1), node.outputs[0], opset)


def _softmax(node: Node) -> Value | None:
    """Div(Exp(x - c), ReduceSum(Exp(x - c), [a], keepdims=1)) → Softmax(x, axis=a)."""
    e, total = node.inputs
    exp, reduce = e.producer(), total.producer()
    if not _onnx(exp, "Exp") or not _onnx(reduce, "ReduceSum") or reduce.inputs[0] is not e:
        return None
    if reduce.attr("keepdims", 1) != 1 or set(e.users()) != {node, reduce}:
        return None
    axes = _axes(reduce)
    sub = exp.inputs[0].producer()
    if axes is None or len(axes) != 1 or not _onnx(sub, "Sub") or not _only_reader(exp.inputs[0], exp):
        return None
    x, shift = sub.inputs
    xs, cs = _shape(x), _shape(shift)
    if xs is None or cs is None or len(cs) > len(xs) or e.is_graph_output() or total.is_graph_output():
        return None
    cs = (1,) * (len(xs) - len(cs)) + tuple(cs)
    if cs[axes[0]] != 1 or _shape(node.outputs[0]) != tuple(xs):
        return None
    out = Builder(node.graph, before=node).op.Softmax(x, axis=axes[0])
    out.type = node.outputs[0].type
    return out


@dataclass(frozen=True)
class NormalizeReductions(Pass):
    name = "normalize-reductions"
    summary = "sum-then-unsqueeze, sum-over-count and exp-over-sum-of-exp -> keepdims, ReduceMean, Softmax"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        opset = ctx.opset_imports(graph).get("", 13)
        counts = {"keepdims": 0, "mean": 0, "softmax": 0}
        for node in list(graph):
            if node.graph is not graph or node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type == "Unsqueeze":
                rewrites = [("keepdims", lambda n=node: _keepdims(n, opset))]
            elif node.op_type == "Div":
                rewrites = [("mean", lambda n=node: _mean(n, opset)), ("softmax", lambda n=node: _softmax(n))]
            else:
                continue
            for kind, rewrite in rewrites:
                new = rewrite()
                if new is not None:
                    old = node.outputs[0]
                    name = old.name
                    old.replace_all_uses_with(new)
                    if new.name != name:
                        old.name, new.name = f"{name}__normalized", name
                    inputs = [v for v in node.inputs if v is not None]
                    graph.remove(node)
                    for v in inputs:  # the reduction it replaced, so the next match sees true readers
                        p = v.producer()
                        if p is not None and p.op_type in REDUCTIONS and not v.has_uses():
                            graph.remove(p)
                    counts[kind] += 1
                    break
        return PassResult(sum(counts.values()) > 0, counts)  # the rest left unread goes with dce
