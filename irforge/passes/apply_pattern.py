"""A rewrite pattern as a pass of its own, so pipelines can name any registered pattern."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..core_ir.graph import Graph
from ..core_ir.pattern import Pattern
from .base import Pass, PassContext, PassResult, run_patterns


class _Summary:
    """The summary names where the pattern is defined; looking that up reads source files, so it
    waits until someone lists the passes."""

    def __get__(self, obj, cls) -> str:
        return f"the rewrite pattern {cls.pattern.name} ({cls.pattern.defined_at})"


@dataclass(frozen=True)
class PatternPass(Pass):
    """Applies one pattern to a fixed point; subclasses made by :func:`pattern_pass` set it."""

    pattern: ClassVar[Pattern]
    summary: ClassVar = _Summary()  # type: ignore[assignment]

    max_rewrites: int = 0
    """0: ten per node plus 100."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_patterns(self, graph, ctx, [self.pattern], max_rewrites=self.max_rewrites or None)


def pattern_pass(pattern: Pattern) -> type[Pass]:
    """The pass that applies ``pattern``, named like it (a plain subclass: it adds no options)."""
    name = f"Pattern_{pattern.name.replace('-', '_')}"
    return type(name, (PatternPass,), {"name": pattern.name, "pattern": pattern, "__module__": __name__})
