"""A rewrite pattern as a pass of its own, so pipelines can name any registered pattern."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..core_ir.graph import Graph
from ..core_ir.pattern import Pattern
from ..core_ir.rewriter import apply_patterns
from .base import Pass, PassContext, PassResult


@dataclass(frozen=True)
class PatternPass(Pass):
    """Applies one pattern to a fixed point; subclasses made by :func:`pattern_pass` set it."""

    pattern: ClassVar[Pattern]

    max_rewrites: int = 0
    """0: ten per node plus 100."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        result = apply_patterns(graph, [self.pattern], max_rewrites=self.max_rewrites or None)
        return PassResult(result.changed, result.counts())


def pattern_pass(pattern: Pattern) -> type[Pass]:
    """The pass that applies ``pattern``, named like it."""
    cls = type(
        f"Pattern_{pattern.name.replace('-', '_')}",
        (PatternPass,),
        {"name": pattern.name, "summary": f"the rewrite pattern {pattern.name} ({pattern.defined_at})",
         "pattern": pattern, "__module__": __name__},
    )  # fmt: skip
    return dataclass(frozen=True)(cls)
