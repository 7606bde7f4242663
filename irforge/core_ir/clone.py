"""Deep copies of graphs and models.  Constant payloads are immutable and therefore shared."""

from __future__ import annotations

import copy
from collections.abc import Mapping

from .attributes import Attr, AttrKind
from .graph import Graph
from .model import Function, Model
from .node import Node
from .value import Value


def _copy_value(v: Value) -> Value:
    c = Value(v.name, v.type, v.const_value)
    c.doc_string = v.doc_string
    c.metadata = dict(v.metadata) if v.metadata else None
    return c


def clone_graph(graph: Graph, value_map: dict[Value, Value] | None = None) -> Graph:
    """A structurally equal, fully independent copy of ``graph``.

    ``value_map`` maps outer-scope values to their replacements (for cloning a subgraph into a
    new context); values not in it that are read from outside the graph are shared as they are.
    """
    vmap: dict[Value, Value] = dict(value_map or {})
    g = Graph(name=graph.name, opset_imports=graph.opset_imports)
    g.doc_string, g.metadata = graph.doc_string, dict(graph.metadata)
    for v in graph.inputs:
        vmap[v] = g.append_input(_copy_value(v))
    for v in graph._initializers.values():
        c = vmap.get(v) or _copy_value(v)
        vmap[v] = c
        g.add_initializer(c)
    for n in graph:
        g.append(clone_node(n, vmap))
    g.set_outputs([vmap.get(v, v) for v in graph.outputs])
    return g


def clone_node(n: Node, vmap: dict[Value, Value]) -> Node:
    """A detached copy of ``n`` reading ``vmap[v]`` for each input ``v`` it maps; its outputs are
    added to ``vmap`` so the next cloned node reads them."""
    attrs = []
    for a in n.attributes.values():
        value = a.value
        if a.kind == AttrKind.GRAPH and value is not None:
            value = clone_graph(value, vmap)
        elif a.kind == AttrKind.GRAPHS:
            value = tuple(clone_graph(sub, vmap) for sub in value)
        attrs.append(Attr(a.name, a.kind, value, a.ref, a.doc_string))
    outs = [None if o is None else _copy_value(o) for o in n.outputs]
    c = Node(n.op_type, [None if v is None else vmap.get(v, v) for v in n.inputs],
             domain=n.domain, attributes=attrs, outputs=outs, name=n.name, overload=n.overload)  # fmt: skip
    c.doc_string = n.doc_string
    c.metadata = dict(n.metadata) if n.metadata else None
    for o, co in zip(n.outputs, outs, strict=True):
        if o is not None:
            vmap[o] = co  # type: ignore[assignment]
    return c


def clone_model(model: Model) -> Model:
    """A fully independent copy of ``model`` (graphs, functions, metadata); payloads are shared,
    being immutable."""
    m = copy.copy(model)
    m.graph = clone_graph(model.graph)
    m.opset_imports = dict(model.opset_imports)
    m.metadata = dict(model.metadata)
    m.functions = {}
    for key, fn in model.functions.items():
        m.functions[key] = Function(
            fn.domain, fn.name, clone_graph(fn.graph), list(fn.attributes),
            dict(fn.attribute_defaults), fn.overload, fn.doc_string, dict(fn.metadata),
        )  # fmt: skip
    return m


def bind_attributes(node: Node, given: dict[str, Attr]) -> None:
    """Resolve ``node``'s references to function attributes (and its subgraphs') to the values
    in ``given``; a reference to an attribute not given is dropped, as ONNX says."""
    for a in list(node.attributes.values()):
        if a.ref is not None:
            actual = given.get(a.ref)
            node.remove_attribute(a.name)
            if actual is not None:
                node.set_attribute(a.name, actual.value, actual.kind)
        elif a.kind in (AttrKind.GRAPH, AttrKind.GRAPHS):
            subs = (a.value,) if a.kind == AttrKind.GRAPH else a.value
            for sub in subs:
                for inner in sub.all_nodes():
                    bind_attributes(inner, given)


def instantiate(fn: Function, attributes: Mapping[str, Attr]) -> Graph:
    """A copy of ``fn``'s body for one call: its attribute references bound to the call's
    ``attributes`` (or the function's defaults)."""
    body = clone_graph(fn.graph)
    given = {**fn.attribute_defaults, **attributes}
    for n in body.all_nodes():
        bind_attributes(n, given)
    return body
