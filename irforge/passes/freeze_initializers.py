"""freeze-initializers: take initializers out of the graph inputs, so passes may treat them as constants.

Up to IR version 3, ONNX required every initializer to be listed as a graph input as well, so
listing one there says nothing about whether callers may feed it; onnxruntime never lets them
(``Graph::CanOverrideInitializer`` is ``ir_version >= 4``).  From IR 4 on, an initializer that is
also an input is a default a caller may override, and only the caller can say it won't:
``legacy-only=false`` says so for every model.  Either way the model keeps its answers for every
input a caller can still feed; on export the IR version rises to 4, where initializers need not
be inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core_ir.graph import Graph
from .base import Pass, PassContext, PassResult

OVERRIDABLE_SINCE = 4
"""The first IR version in which a graph input may override an initializer of the same name."""


@dataclass(frozen=True)
class FreezeInitializers(Pass):
    name = "freeze-initializers"
    summary = "drop initializers from the graph inputs (by default only in IR<4 models, where they cannot be fed)"
    preserves = frozenset({"shapes"})
    recurse = False

    legacy_only: bool = True
    """Only in models older than IR 4; false also freezes the overridable defaults of newer ones."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        model = ctx.model
        if model is None or graph is not model.graph:
            return PassResult(False)
        if self.legacy_only and model.ir_version >= OVERRIDABLE_SINCE:
            return PassResult(False)
        frozen = [v for v in graph.inputs if v.is_initializer()]
        for v in frozen:
            graph.remove_input(v)
        return PassResult(bool(frozen), {"initializers-frozen": len(frozen)})
