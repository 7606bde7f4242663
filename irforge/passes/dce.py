"""dce: remove nodes whose results nobody reads."""

from __future__ import annotations

from dataclasses import dataclass

from ..core_ir.graph import Graph
from .base import Pass, PassContext, PassResult

PURE_DOMAINS = frozenset({"", "ai.onnx.ml", "irforge"})
"""Domains whose ops only compute their outputs.  An op of any other domain may have effects
beyond its outputs (a custom op that logs or writes), so it is kept even when unread."""


@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    name = "dce"
    summary = "remove nodes none of whose outputs is read or is a graph output, and unread initializers"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        removed = 0
        # Walking backwards, removing a node frees its producers before they are visited.
        for node in graph.reversed():
            if node.domain not in PURE_DOMAINS:
                continue
            if any(o is not None and (o.has_uses() or o.is_graph_output()) for o in node.outputs):
                continue
            graph.remove(node)
            removed += 1
        unread = [v for v in graph.initializers.values() if not v.has_uses() and not v.is_graph_input()]
        for v in unread:
            graph.remove_initializer(v)
        return PassResult(removed > 0 or bool(unread), {"nodes-removed": removed, "initializers-removed": len(unread)})
