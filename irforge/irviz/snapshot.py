"""One model state as the page draws it: a record per node, keyed by a stable node identity.

A node keeps its identity for as long as the pass manager keeps the same node object, so a step's
diff needs no mapping from the user: a node absent before is added, one absent after is removed,
and one whose record changed (op, inputs, attributes, types) is rewritten.  A node that a pass
rebuilt as a new object with the same name and op takes over the old identity.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..core_ir.attributes import GRAPH_KINDS, AttrKind
from ..core_ir.graph import Graph
from ..core_ir.model import Model
from ..core_ir.node import Node
from ..core_ir.printer import Printer
from ..core_ir.rewriter import PROVENANCE
from ..core_ir.value import Value
from ..ops.traits import category as op_category

ATTRIBUTE_CHARS = 160  # longer attribute texts are cut: the page is a viewer, not a dump
FUNCTION_DEPTH = 2  # calls inside a function body are drawn as calls below this depth

def category(node_op: str, domain: str) -> str:
    """The colour family of an op (:func:`irforge.ops.traits.category`)."""
    return op_category(node_op, domain)


def scope_of(node: Node) -> list[str]:
    """The name scope a node belongs to: the module path a frontend recorded
    (``encoder.layer.3.attention``), else the slash path of its name
    (``/encoder/layer.3/attention/MatMul``) without the last part.  A fused node named after the
    nodes it replaced (``a+b``) sits in the scope of the first."""
    module = (node.metadata or {}).get("module")
    if module:
        return _module_path(module.split(" ")[-1])
    name = node.name.split("+")[0] if node.name else ""
    if "/" not in name:
        return []
    return [part for part in name.split("/")[:-1] if part]


def _module_path(path: str) -> list[str]:
    out: list[str] = []
    for part in path.split("."):
        if part.isdigit() and out:
            out[-1] = f"{out[-1]}.{part}"  # "layers.3" is one scope, not "layers" then "3"
        elif part:
            out.append(part)
    return out


class NodeIds:
    """Stable identities for node objects (held, so a dead node's ``id()`` is never reused)."""

    def __init__(self) -> None:
        self._by_object: dict[int, tuple[Node, str]] = {}
        self._count = 0

    def get(self, node: Node) -> str | None:
        entry = self._by_object.get(id(node))
        return entry[1] if entry is not None else None

    def assign(self, node: Node, sid: str | None = None) -> str:
        entry = self._by_object.get(id(node))
        if entry is not None:
            return entry[1]
        if sid is None:
            self._count += 1
            sid = f"n{self._count}"
        self._by_object[id(node)] = (node, sid)
        return sid


class Snapshot:
    """Records of one model state: ``records`` in drawing order, by identity; ``describe`` maps
    each node's :meth:`Node.describe` text (how rewrite records name nodes) to its identity."""

    def __init__(self, model: Model, ids: NodeIds, previous: Snapshot | None = None):
        self.records: dict[str, dict[str, Any]] = {}
        self.describe: dict[str, str] = {}
        self._ids = ids
        self._printer = Printer(elide_above=8)
        live = {ids.get(n) for n in model.graph.all_nodes()}
        self._adopt = {key: sid for key, sid in _adoptable(previous).items() if sid not in live}
        self._graph(model.graph, [], model, {}, 0)
        for v in model.graph.outputs:
            self.records[f"out:{v.name}"] = {"id": f"out:{v.name}", "op": "Output", "cat": "io", "name": v.name,
                                            "scope": [], "in": [self._input(v, {})], "out": []}  # fmt: skip

    # -- walking ----------------------------------------------------------------------------
    def _graph(self, g: Graph, scope: list[str], model: Model, formals: dict[int, str], depth: int,
               prefix: str = "") -> None:  # fmt: skip
        if not scope and not prefix:
            for v in g.inputs:
                if v.name not in g.initializers:
                    sid = f"in:{v.name}"
                    self.records[sid] = {"id": sid, "op": "Input", "cat": "io", "name": v.name, "scope": [],
                                         "in": [], "out": [[v.name, _type(v)]]}  # fmt: skip
        for node in g:
            sid = prefix + self._identity(node, prefix)
            record = self._record(node, sid, scope if prefix or scope else scope_of(node), formals, prefix)
            self.records[sid] = record
            if not prefix:
                self.describe[node.describe()] = sid
            for attr_name, sub in _subgraphs(node):
                self._graph(sub, [*record["scope"], f"#{sid}", attr_name], model, formals, depth, prefix)
            fn = model.functions.get((node.domain, node.op_type, node.overload))
            if fn is not None and depth < FUNCTION_DEPTH:
                pairs = zip(fn.graph.inputs, node.inputs, strict=False)  # trailing optional inputs may be left out
                actual = {id(formal): self._source(arg, formals, prefix) for formal, arg in pairs}
                self._graph(fn.graph, [*record["scope"], f"#{sid}"], model, actual, depth + 1, f"{sid}/")

    def _identity(self, node: Node, prefix: str) -> str:
        if prefix:  # function body instances: the body node's identity under the call's
            return self._ids.assign(node)
        sid = self._ids.get(node)
        if sid is None:
            sid = self._ids.assign(node, self._adopt.pop((node.name, node.op_type, node.domain), None))
        return sid

    def _record(self, node: Node, sid: str, scope: list[str], formals: dict[int, str], prefix: str) -> dict:
        record: dict[str, Any] = {"id": sid, "op": node.op_type, "cat": category(node.op_type, node.domain),
                                  "name": node.name, "scope": scope,
                                  "in": [self._input(v, formals, prefix) for v in node.inputs],
                                  "out": [[o.name, _type(o)] if o else None for o in node.outputs]}  # fmt: skip
        if node.domain:
            record["dom"] = node.domain
        if node.overload:
            record["ov"] = node.overload
        if node.attributes:
            record["attrs"] = [[key, self._attribute(a)] for key, a in node.attributes.items()]
        if node.metadata:
            record["meta"] = dict(node.metadata)
        return record

    def _attribute(self, a) -> str:
        if a.ref is not None:
            return f"@{a.ref}"
        if a.kind in GRAPH_KINDS:
            return ", ".join(f"graph {g.name or ''} ({len(g)} nodes)" for g in a.graphs)
        text = self._printer.attr_value(AttrKind(a.kind), a.value, "")
        return text if len(text) <= ATTRIBUTE_CHARS else text[: ATTRIBUTE_CHARS - 1] + "…"

    def _source(self, v: Value | None, formals: dict[int, str], prefix: str = "") -> str | None:
        if v is None:
            return None
        if id(v) in formals:
            return formals[id(v)]
        producer = v.producer()
        if producer is not None:
            sid = self._ids.get(producer)
            return None if sid is None else (prefix + sid if prefix else sid)
        if v.is_graph_input() and not v.is_initializer():
            return f"in:{v.name}"
        return None

    def _input(self, v: Value | None, formals: dict[int, str], prefix: str = "") -> list | None:
        if v is None:
            return None
        kind = "const" if v.is_initializer() else ""
        return [v.name, _type(v), self._source(v, formals, prefix), kind]


def _subgraphs(node: Node) -> Iterator[tuple[str, Graph]]:
    for key, a in node.attributes.items():
        if a.kind in GRAPH_KINDS:
            graphs = a.graphs
            for i, g in enumerate(graphs):
                yield (key if len(graphs) == 1 else f"{key}[{i}]"), g


def _adoptable(previous: Snapshot | None) -> dict[tuple[str, str, str], str]:
    """Identities a rebuilt node may take over: named nodes of the previous state, by name and op."""
    if previous is None:
        return {}
    out = {}
    for sid, r in previous.records.items():
        if r.get("name") and sid.startswith("n") and "/" not in sid:
            out[(r["name"], r["op"], r.get("dom", ""))] = sid
    return out


def _type(v: Value) -> str:
    return "" if v.type is None else str(v.type)


def provenance(record: dict) -> list[str]:
    """The names of the nodes a rewrite replaced with this one, as the rewriter recorded them."""
    text = (record.get("meta") or {}).get(PROVENANCE, "")
    return [part for part in re.split(r",(?=\S)", text) if part] if text else []
