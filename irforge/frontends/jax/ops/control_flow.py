"""Call wrappers and control flow (jax's ``lax.control_flow``): pjit, custom_jvp/vjp, cond, while, scan."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import DataType, to_numpy
from ....core_ir.graph import Graph
from ....core_ir.types import TensorType
from ....core_ir.value import Value
from ...common import NotMapped
from .common import _i64, prim
from .shapes import _shape_vector


@prim("pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call", "custom_vjp_call",
      "custom_vjp_call_jaxpr", "custom_lin", "remat2")  # fmt: skip
def _call(cx, *args, **params):
    closed = params.get("jaxpr") or params.get("call_jaxpr") or params.get("fun_jaxpr")
    if closed is None:
        raise NotMapped(f"{cx.eqn.primitive.name} without a jaxpr")
    jaxpr = getattr(closed, "jaxpr", closed)
    n = len(jaxpr.invars)
    outs = cx.inline(closed, list(args)[-n:] if len(args) > n else list(args))
    return outs if len(cx.eqn.outvars) != 1 else outs[0]


@prim("custom_linear_solve")
def _custom_linear_solve(cx, *args, const_lengths, jaxprs, **_):
    """The forward solve: the ``solve`` jaxpr on its constants and the right-hand side (the other
    jaxprs serve differentiation)."""
    lengths = list(const_lengths)
    start = sum(lengths[:2])  # matvec's and vecmat's constants come first
    consts = list(args[start : start + lengths[2]])
    b = list(args[sum(lengths) :])
    outs = cx.inline(jaxprs.solve, consts + b)
    return outs if len(cx.eqn.outvars) != 1 else outs[0]


def _owned(cx, g: Graph, v, aval=None) -> Value:
    """``v`` as a value produced inside ``g`` (ONNX subgraph outputs must be)."""
    from ....core_ir.builder import Builder
    from .. import aval_type

    b = Builder(g, names=cx.importer.names)
    if not isinstance(v, Value):
        v = b.constant(np.asarray(v))
    if v.producer() is not None and v.producer().graph is g and not v.is_graph_output():
        return v
    out = b.add_node("Identity", [v]).outputs[0]
    out.type = v.type if v.type is not None else (aval_type(aval) if aval is not None else None)
    return out


@prim("cond")
def _cond(cx, index, *operands, branches, **_):
    """``lax.cond`` → If; ``lax.switch`` (n branches) → Ifs nested in the else branches."""
    from ....core_ir.builder import Builder
    from ...common import Emitter
    from .. import aval_type

    index = cx.value(index)
    n_out = len(cx.eqn.outvars)
    types = [aval_type(a) for a in cx.out_avals]

    def branch(k):
        g = Graph(name=cx.importer.names.fresh(f"branch{k}"))
        outs = cx.inline(branches[k], list(operands), g, prefix=f"b{k}.")
        g.set_outputs([_owned(cx, g, v, a) for v, a in zip(outs, cx.out_avals, strict=True)])
        return g

    def scalar(e, v):
        return e.emit("Reshape", v, e.const(np.asarray([], np.int64)))

    if cx.dtype(index) == DataType.BOOL:  # a True predicate takes branches[1]
        n = cx.node("If", [scalar(cx, index)], {"then_branch": branch(1), "else_branch": branch(0)},
                    outputs=n_out, types=types)  # fmt: skip
        return list(n.outputs) if n_out != 1 else n.outputs[0]

    def from_branch(k):  # a graph choosing among branches k.. by the index
        if k == len(branches) - 1:
            return branch(k)
        g = Graph(name=cx.importer.names.fresh(f"switch{k}"))
        e = Emitter(g, Builder(g, names=cx.importer.names))
        e.metadata = dict(cx.metadata)
        pred = scalar(e, e.emit("Equal", index, e.const(np.asarray(k, to_numpy(cx.dtype(index))))))
        inner = e.node("If", [pred], {"then_branch": branch(k), "else_branch": from_branch(k + 1)},
                       outputs=n_out, types=types)  # fmt: skip
        g.set_outputs(list(inner.outputs))
        return g

    pred = scalar(cx, cx.emit("Equal", index, cx.value(0, cx.dtype(index))))
    n = cx.node("If", [pred], {"then_branch": branch(0), "else_branch": from_branch(1)}, outputs=n_out, types=types)
    return list(n.outputs) if n_out != 1 else n.outputs[0]


@prim("while")
def _while(cx, *operands, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, **_):
    """A Loop.  A batched predicate (a vmapped ``while_loop``: one flag per batch element) runs
    the loop while any flag is set and keeps the state of the elements whose flag is clear, as
    JAX's lowering does: their leading dims take the old values."""
    from ...common import Emitter, any_true
    from .. import aval_type

    cconsts = list(operands[:cond_nconsts])
    bconsts = list(operands[cond_nconsts:cond_nconsts + body_nconsts])
    init = [cx.value(v) for v in operands[cond_nconsts + body_nconsts:]]
    batched = bool(cond_jaxpr.out_avals[0].shape)
    first = cx.inline(cond_jaxpr, cconsts + init)[0]
    if batched:
        first = any_true(cx, cx.value(first))
    names = cx.importer.names
    it = Value(names.fresh("while_iter"), TensorType(DataType.INT64, ()))
    cond_in = Value(names.fresh("while_cond"), TensorType(DataType.BOOL, ()))
    state = [Value(names.fresh("while_state"), aval_type(a)) for a in cx.out_avals]
    body = Graph(inputs=[it, cond_in, *state], name=names.fresh("while_body"))
    new = list(cx.inline(body_jaxpr, bconsts + state, body, prefix="body."))
    again = cx.inline(cond_jaxpr, cconsts + new, body, prefix="cond.")[0]
    if batched:
        from ....core_ir.builder import Builder

        e = Emitter(body, Builder(body, names=names))
        e.metadata = dict(cx.metadata)
        live = cx.inline(cond_jaxpr, cconsts + state, body, prefix="live.")[0]  # the flags before this step
        rank = len(cond_jaxpr.out_avals[0].shape)
        for i, (old, v) in enumerate(zip(state, new, strict=True)):
            extra = len(old.type.shape) - rank
            flags = e.emit("Unsqueeze", live, e.const(np.arange(rank, rank + extra, dtype=np.int64))) if extra else live
            new[i] = e.emit("Where", flags, v if isinstance(v, Value) else e.const(np.asarray(v)), old)
            new[i].type = old.type
        again = any_true(e, again)
    body.set_outputs([_owned(cx, body, again), *(_owned(cx, body, v, a) for v, a in zip(new, cx.out_avals,
                                                                                      strict=True))])  # fmt: skip
    n = cx.node_typed("Loop", [None, cx.value(first), *init], {"body": body}, outputs=len(init))
    return list(n.outputs) if len(init) != 1 else n.outputs[0]


@prim("scan")
def _scan(cx, *operands, jaxpr, length, reverse, num_consts, num_carry, **_):
    """A Loop of ``length`` trips; the stacked outputs are carried buffers updated in place at the
    trip's row, so their shapes are static (XLA takes that; a Loop's scan outputs it does not)."""
    from .. import aval_type

    consts = list(operands[:num_consts])
    carry = [cx.value(v) for v in operands[num_consts:num_consts + num_carry]]
    xs = [cx.value(v) for v in operands[num_consts + num_carry:]]
    ys_avals = cx.out_avals[num_carry:]
    names = cx.importer.names
    buffers = []
    for a in ys_avals:
        t = aval_type(a)
        zero = cx.const(np.zeros((), to_numpy(t.dtype)))
        buf = cx.emit("Expand", zero, _shape_vector(cx, list(a.shape)))
        buf.type = t
        buffers.append(buf)
    it = Value(names.fresh("scan_iter"), TensorType(DataType.INT64, ()))
    cond_in = Value(names.fresh("scan_cond"), TensorType(DataType.BOOL, ()))
    state = [Value(names.fresh("scan_carry"), v.type) for v in carry]
    bufs_in = [Value(names.fresh("scan_ys"), b.type) for b in buffers]
    body = Graph(inputs=[it, cond_in, *state, *bufs_in], name=names.fresh("scan_body"))
    from ....core_ir.builder import Builder
    from ...common import Emitter

    e = Emitter(body, Builder(body, names=names))
    e.metadata = dict(cx.metadata)
    row = it
    if reverse:
        if not isinstance(length, (int, np.integer)):
            raise NotMapped("a reversed scan of symbolic length")
        row = e.emit("Sub", e.const(np.asarray(int(length) - 1, np.int64)), it)
    slices = [e.emit("Gather", x, row, axis=0) for x in xs]
    for s, x in zip(slices, xs, strict=True):
        s.type = TensorType(x.type.dtype, tuple(x.type.shape[1:]))
    outs = cx.inline(jaxpr, consts + state + slices, body, prefix="scan.")
    new_carry, ys = outs[:num_carry], outs[num_carry:]
    where = e.emit("Reshape", row, e.const(_i64([1, 1])))
    new_bufs = []
    for buf, y in zip(bufs_in, ys, strict=True):
        y = y if isinstance(y, Value) else e.const(np.asarray(y))
        nb = e.emit("ScatterND", buf, where, e.emit("Unsqueeze", y, e.const(_i64([0]))))
        nb.type = buf.type
        new_bufs.append(nb)
    keep = e.emit("Identity", cond_in)
    keep.type = cond_in.type
    body.set_outputs([keep, *(_owned(cx, body, v) for v in new_carry), *(_owned(cx, body, v) for v in new_bufs)])
    trips = cx.const(np.asarray(length, np.int64)) if isinstance(length, (int, np.integer)) else cx.emit(
        "Squeeze", cx.dim_value(length))
    n = cx.node_typed("Loop", [trips, cx.const(np.asarray(True)), *carry, *buffers], {"body": body},
                      outputs=len(carry) + len(buffers))  # fmt: skip
    return list(n.outputs)
