"""Runs a pipeline over a model: every graph it holds, fixed-point groups, oscillation checks."""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Mapping

from ..core_ir.graph import Graph
from ..core_ir.model import Model
from ..core_ir.printer import print_graph
from .base import Pass, PassContext, PassResult
from .pipeline import Element, Fixpoint, Pipeline


class OscillationWarning(UserWarning):
    """A fixed-point group brought the graph back to an earlier state instead of settling."""


def fingerprint(graph: Graph) -> str:
    """A structural hash of ``graph``: equal for graphs that print alike (names included)."""
    return hashlib.blake2b(print_graph(graph).encode(), digest_size=16).hexdigest()


class PassManager:
    """A pipeline and the means to run it.  ``PassManager.parse(text, registry)`` and
    ``PassManager(Pipeline(...))`` give equal managers; ``str(pm)`` is the pipeline text."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline

    @classmethod
    def parse(cls, text: str, registry: Mapping[str, type[Pass]]) -> PassManager:
        return cls(Pipeline.parse(text, registry))

    def __str__(self) -> str:
        return str(self.pipeline)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PassManager) and other.pipeline == self.pipeline

    def run(self, model: Model, ctx: PassContext | None = None) -> bool:
        """Run every pass in order on ``model``; True when any changed it."""
        ctx = ctx or PassContext()
        changed = False
        for element in self.pipeline.passes:
            changed |= self._element(element, model, ctx)
        return changed

    def _element(self, element: Element, model: Model, ctx: PassContext) -> bool:
        if isinstance(element, Fixpoint):
            return self._fixpoint(element, model, ctx)
        return self._pass(element, model, ctx).changed

    def _fixpoint(self, group: Fixpoint, model: Model, ctx: PassContext) -> bool:
        seen = {fingerprint(model.graph): 0}
        changed = False
        for iteration in range(1, group.max_iterations + 1):
            round_changed = False
            for element in group.passes:
                round_changed |= self._element(element, model, ctx)
            if not round_changed:
                return changed
            changed = True
            state = fingerprint(model.graph)
            if state in seen:
                warnings.warn(
                    f"{group}: iteration {iteration} brought the graph back to its state after iteration "
                    f"{seen[state]}; the passes {', '.join(p.name for p in group.passes)} undo each other",
                    OscillationWarning,
                    stacklevel=2,
                )
                return changed
            seen[state] = iteration
        warnings.warn(f"{group}: still changing after {group.max_iterations} iterations", stacklevel=2)
        return changed

    def _pass(self, p: Pass, model: Model, ctx: PassContext) -> PassResult:
        graphs = list(model.graph.all_graphs()) if p.recurse else [model.graph]
        if p.recurse:
            graphs += [g for fn in model.functions.values() for g in fn.graph.all_graphs()]
        changed, statistics = False, {}
        for g in graphs:
            result = p.run(g, ctx)
            changed |= result.changed
            for k, v in result.statistics.items():
                statistics[k] = statistics.get(k, 0) + v
        ctx.invalidate(p.preserves)
        return PassResult(changed, statistics)
