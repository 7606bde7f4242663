"""topological-sort: order nodes so each comes after the producers of what it reads."""

from __future__ import annotations

from dataclasses import dataclass

from ..core_ir.graph import Graph
from .base import Pass, PassContext, PassResult


@dataclass(frozen=True)
class TopologicalSort(Pass):
    name = "topological-sort"
    summary = "reorder nodes topologically, keeping the current order wherever it is already valid"
    preserves = frozenset({"shapes", "use-counts"})

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        before = graph.nodes
        graph.sort()
        moved = sum(a is not b for a, b in zip(before, graph, strict=True))
        return PassResult(moved > 0, {"nodes-moved": moved})
