"""inline-functions: replace every call of a model-local function by the function's body.

Most rewrites only see through ops they know; after inlining, a function's body is ordinary
nodes that folding, canonicalization and fusion can reach.  Attribute references in the body
take the call's attribute (or the function's default; an unset one is left out, as ONNX says),
body values get fresh names, and functions nothing calls any more are dropped from the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core_ir.builder import Builder, NameGenerator
from ..core_ir.clone import bind_attributes, clone_node
from ..core_ir.graph import Graph
from ..core_ir.model import Function, Model
from ..core_ir.node import Node
from ..core_ir.value import Value
from .base import Pass, PassContext, PassError, PassResult


@dataclass(frozen=True)
class InlineFunctions(Pass):
    name = "inline-functions"
    summary = "replace calls of model-local functions by their bodies; drop functions no longer called"

    max_depth: int = 64
    """Deepest chain of nested calls expanded; deeper means a function calls itself."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        model = ctx.model
        if model is None or not model.functions:
            return PassResult(False)
        names = NameGenerator(graph)
        inlined = 0
        work = [(n, 0) for n in graph]
        while work:
            call, depth = work.pop()
            fn = model.functions.get((call.domain, call.op_type, call.overload))
            if fn is None:
                continue
            if depth >= self.max_depth:
                raise PassError(
                    f"inline-functions: calls of {fn.domain}::{fn.name} nest deeper than {self.max_depth} at "
                    f"{call.describe()}; the function calls itself (raise max-depth if it really is that deep)"
                )
            work += [(n, depth + 1) for n in _inline(graph, call, fn, names)]
            inlined += 1
        dropped = drop_uncalled(model) if graph is model.graph else 0
        return PassResult(inlined > 0 or dropped > 0, {"calls-inlined": inlined, "functions-dropped": dropped})


def _inline(graph: Graph, call: Node, fn: Function, names: NameGenerator) -> list[Node]:
    body = fn.graph
    vmap: dict[Value, Value | None] = {}
    for i, formal in enumerate(body.inputs):
        vmap[formal] = call.inputs[i] if i < len(call.inputs) else None
    b = Builder(graph, before=call, names=names)
    for v in body.initializers.values():
        vmap[v] = b.constant(v.const_value, name=names.fresh(f"{fn.name}_{v.name}"))
    given = {**fn.attribute_defaults, **call.attributes}
    created = []
    for n in body:
        c = clone_node(n, vmap)  # type: ignore[arg-type]
        bind_attributes(c, given)
        for o in c.outputs:
            if o is not None:
                o.name = names.fresh(f"{fn.name}_{o.name or 'v'}")
        c.metadata = {**(call.metadata or {}), **(c.metadata or {})} or None
        graph.insert_before(call, c)
        created.append(c)
    produced = {o for c in created for o in c.outputs if o is not None}
    taken: set[Value] = set()
    for out, formal in zip(call.outputs, body.outputs, strict=False):
        if out is None:
            continue
        result = vmap.get(formal, formal)
        if result not in produced or result in taken:  # a pass-through or repeated output: keep a node
            result = b.op.Identity(result)
            created.append(result.producer())
        taken.add(result)
        result.type = result.type or out.type
        if not out.is_graph_output():  # a graph output passes its name on by itself
            result.name, out.name = out.name, f"{out.name}__inlined"
        out.replace_all_uses_with(result)
    graph.remove(call)
    return created


def drop_uncalled(model: Model) -> int:
    called = {(n.domain, n.op_type, n.overload) for n in model.graph.all_nodes()}
    uncalled = [key for key in model.functions if key not in called]
    for key in uncalled:
        del model.functions[key]
    return len(uncalled)
