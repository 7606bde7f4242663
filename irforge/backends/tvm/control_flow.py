"""Control flow, resolved while the Relax function is built: Relax here has static shapes and no
loops, so an ``If`` must have a condition known at compile time (its taken branch is inlined)
and a ``Scan`` is unrolled over its scanned axis, whose length a static shape fixes."""

from __future__ import annotations

import numpy as np

from ...core_ir.node import Node
from ..table import NotStatic

CONTROL_FLOW = frozenset({"If", "Scan"})


def lower_control_flow(driver, node: Node, args: list, env: dict) -> list:
    if node.op_type == "If":
        cond = args[0]
        if not isinstance(cond, np.ndarray):
            raise NotStatic("If whose condition is computed at run time (Relax here inlines a branch known "
                            "at compile time)")
        branch = node.attr("then_branch") if bool(cond.reshape(-1)[0]) else node.attr("else_branch")
        return driver.run(branch, dict(env))
    return _scan(driver, node, args, env)


def _scan(driver, node: Node, args: list, env: dict) -> list:
    """Scan (opset 9 on), one copy of the body a step: each scan input read at the step's index
    (from the end where its direction is 1), each scan output stacked on its axis (in reverse
    where its direction is 1)."""
    from tvm import relax

    op, ctx = relax.op, driver.ctx
    body = node.attr("body")
    m = node.attr("num_scan_inputs")
    n = len(body.inputs) - m
    states, xs = list(args[:n]), [ctx.expr(a) for a in args[n:]]
    in_axes = [a % len(ctx.shape(x)) for a, x in zip(node.attr("scan_input_axes") or [0] * m, xs, strict=True)]
    in_dirs = list(node.attr("scan_input_directions") or [0] * m)
    k = len(body.outputs) - n
    out_axes = list(node.attr("scan_output_axes") or [0] * k)
    out_dirs = list(node.attr("scan_output_directions") or [0] * k)
    steps = ctx.shape(xs[0])[in_axes[0]] if xs else 0
    if steps == 0:
        raise NotStatic("Scan over an empty axis")
    collected: list[list] = [[] for _ in range(k)]
    for t in range(steps):
        slices = []
        for x, axis, direction in zip(xs, in_axes, in_dirs, strict=True):
            i = steps - 1 - t if direction else t
            slices.append(ctx.emit(op.take(x, relax.const(i, "int64"), axis)))
        inner = dict(env)
        inner.update(zip(body.inputs, [*states, *slices], strict=True))
        outs = driver.run(body, inner)
        states = outs[:n]
        for j, y in enumerate(outs[n:]):
            collected[j].append(ctx.expr(y))
    results = []
    for ys, axis, direction in zip(collected, out_axes, out_dirs, strict=True):
        ys = ys[::-1] if direction else ys
        rank = len(ctx.shape(ys[0])) + 1
        results.append(ctx.emit(op.stack(ys, axis % rank)))
    return [*states, *results]
