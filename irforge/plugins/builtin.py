"""The built-in passes, registered through the same hooks as any third-party plugin."""

from __future__ import annotations

from ..passes.canonicalize import PATTERNS, Canonicalize
from ..passes.cse import CommonSubexpressionElimination
from ..passes.dce import DeadCodeElimination
from ..passes.topological_sort import TopologicalSort
from .hookspecs import hookimpl


@hookimpl
def irforge_register_passes() -> list[type]:
    return [Canonicalize, CommonSubexpressionElimination, DeadCodeElimination, TopologicalSort]


@hookimpl
def irforge_register_patterns() -> list:
    return list(PATTERNS)
