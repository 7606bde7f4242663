"""Higher-order ops: cond and while_loop become ONNX If and Loop; effect tokens are dropped."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import DataType
from ....core_ir.value import Value
from ...common import NotMapped
from .common import aten
from .elementwise import _as_bool


@aten("higher_order.cond", "torch.cond")
def _cond(cx, pred, true_gm, false_gm, operands):
    operands = list(operands)
    then_g, then_outs = cx.subgraph(true_gm, operands, f"{cx.fx.name}.then")
    else_g, else_outs = cx.subgraph(false_gm, operands, f"{cx.fx.name}.else")
    for g, outs in ((then_g, then_outs), (else_g, else_outs)):
        g.set_outputs([_owned_output(cx, g, v) for v in outs])
    p = pred if isinstance(pred, Value) else cx.const(np.asarray(bool(pred)))
    p = cx.emit("Reshape", _as_bool(cx, p), cx.const(np.asarray([], np.int64)))
    n = cx.node_typed("If", [p], {"then_branch": then_g, "else_branch": else_g}, outputs=len(then_outs))
    return tuple(n.outputs)


def _owned_output(cx, g, v):
    """A subgraph output defined in the subgraph itself (ONNX requires one per output)."""
    from ....core_ir.builder import Builder

    e_b = Builder(g, names=cx.importer.names)
    if not isinstance(v, Value):
        v = e_b.constant(np.asarray(v))
    if v.producer() is not None and v.producer().graph is g and not v.is_graph_output():
        return v
    n = e_b.add_node("Identity", [v])
    n.outputs[0].type = v.type
    return n.outputs[0]


_DROPPED_EFFECTS = frozenset({"aten._linalg_check_errors.default"})


"""Side-effecting ops a model may carry that the imported graph leaves out: checks that raise on a
failed factorization (the factorization's ``info`` output still reports it)."""


@aten("higher_order.with_effects", "torch.with_effects")
def _with_effects(cx, token, op, *args, **kwargs):
    from .. import op_name

    if op_name(op) not in _DROPPED_EFFECTS:
        raise NotMapped(f"the side effect {op_name(op)}")
    return token, None


@aten("higher_order.while_loop", "torch.while_loop")
def _while_loop(cx, cond_gm, body_gm, carried, additional):
    from ....core_ir.graph import Graph
    from ....core_ir.types import TensorType

    carried, additional = list(carried), list(additional)
    first, _ = _inline(cx, cond_gm, carried + additional)
    cond0 = cx.emit("Reshape", _as_bool(cx, first[0]), cx.const(np.asarray([], np.int64)))
    names = cx.importer.names
    it = Value(names.fresh(f"{cx.fx.name}.iter"), TensorType(DataType.INT64, ()))
    cond_in = Value(names.fresh(f"{cx.fx.name}.cond"), TensorType(DataType.BOOL, ()))
    state = [Value(names.fresh(f"{cx.fx.name}.state"), v.type if isinstance(v, Value) else None) for v in carried]
    body = Graph(inputs=[it, cond_in, *state], name=f"{cx.fx.name}.body")
    new_state = cx.importer.subgraph_into(body_gm, body, state + additional, f"{cx.fx.name}.body.")
    cond_out = cx.importer.subgraph_into(cond_gm, body, list(new_state) + additional, f"{cx.fx.name}.cond.")
    cond_v = _owned_output(cx, body, _reshape_scalar_bool(cx, body, cond_out[0]))
    body.set_outputs([cond_v, *(_owned_output(cx, body, v) for v in new_state)])
    init = [c if isinstance(c, Value) else cx.const(np.asarray(c)) for c in carried]
    n = cx.node_typed("Loop", [None, cond0, *init], {"body": body}, outputs=len(carried))
    return tuple(n.outputs)


def _reshape_scalar_bool(cx, g, v):
    from ....core_ir.builder import Builder

    b = Builder(g, names=cx.importer.names)
    if v.type is not None and v.type.dtype != DataType.BOOL:
        v = b.add_node("Cast", [v], {"to": int(DataType.BOOL)}).outputs[0]
    return b.add_node("Reshape", [v, b.constant(np.asarray([], np.int64))]).outputs[0]


def _inline(cx, gm, bindings):
    outs = cx.importer.subgraph_into(gm, cx.graph, bindings, f"{cx.fx.name}.init.")
    return outs, None
