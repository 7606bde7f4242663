"""The pass contract: a frozen dataclass whose fields are its options, run on one graph at a time."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core_ir.errors import IrforgeError
from ..core_ir.graph import Graph
from ..core_ir.model import Model
from ..core_ir.pattern import Pattern
from ..core_ir.rewriter import RewriteRecord, RewriteResult, apply_patterns


class PassError(IrforgeError):
    """A pass, a pipeline or a pass option is wrong; the message names which."""


@dataclass(frozen=True)
class PassResult:
    """What a pass reports.  ``changed=False`` is a promise the manager can check."""

    changed: bool
    statistics: dict[str, int] = field(default_factory=dict)
    rewrites: list[RewriteRecord] = field(default_factory=list)
    """For pattern passes, every rewrite applied (pattern, source line, nodes, time): what irviz's
    timeline shows."""


@dataclass
class PassContext:
    """The one object a pass gets besides the graph: cached analyses and run-wide settings.

    Analyses are cached by name; after a pass runs, every analysis it does not list in
    ``preserves`` is dropped, so a stale analysis is never read.
    """

    analyses: dict[str, Any] = field(default_factory=dict)
    model: Model | None = None
    """The model being optimized, set by the manager: opset imports and functions live there."""
    rewrite_log: list[tuple[str, RewriteResult]] | None = None
    """When a list (``irforge optimize --debug-rewrites``), pattern passes trace why patterns did
    not match and append ``(pass name, result)`` for every graph they ran on."""

    def opset_imports(self, graph: Graph) -> dict[str, int]:
        """The opsets ``graph`` is written against (its model's, when it is a subgraph)."""
        import onnx.defs

        if self.model is not None:
            return dict(self.model.opset_imports)
        return dict(graph.opset_imports or {"": onnx.defs.onnx_opset_version()})

    def analysis(self, name: str, compute) -> Any:
        if name not in self.analyses:
            self.analyses[name] = compute()
        return self.analyses[name]

    def invalidate(self, preserved: frozenset[str]) -> None:
        for name in [n for n in self.analyses if n not in preserved]:
            del self.analyses[name]


@dataclass(frozen=True)
class Pass:
    """Base of every pass.  Subclasses are frozen dataclasses that set ``name`` (kebab-case, the
    spelling in pipeline text) and ``summary`` (one line for ``irforge passes``); their fields
    are their options, spelled ``name{field-name=value}`` in pipelines.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    preserves: ClassVar[frozenset[str]] = frozenset()
    recurse: ClassVar[bool] = True
    """Run on subgraphs and model-local functions too (the manager does the walking)."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        raise NotImplementedError(f"pass {self.name!r} does not implement run()")

    @classmethod
    def options(cls) -> list[dataclasses.Field]:
        return list(dataclasses.fields(cls))

    def changed_options(self) -> dict[str, Any]:
        """Options that differ from their defaults: what the pipeline text must spell."""
        out = {}
        for f in dataclasses.fields(self):
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            value = getattr(self, f.name)
            if value != default:
                out[f.name] = value
        return out


def run_patterns(
    pass_: Pass, graph: Graph, ctx: PassContext, patterns: list[Pattern], *, max_rewrites: int | None = None
) -> PassResult:
    """The body of a pattern pass: rewrite ``graph`` to a fixed point; the statistics count the
    rewrites per pattern, and ``ctx.rewrite_log`` (when set) gets the full record."""
    result = apply_patterns(graph, patterns, max_rewrites=max_rewrites, debug=ctx.rewrite_log is not None)
    if ctx.rewrite_log is not None:
        ctx.rewrite_log.append((pass_.name, result))
    return PassResult(result.changed, result.counts(), result.records)
