"""An irforge plugin in a package of its own: irforge finds it through its entry point."""

from __future__ import annotations

from dataclasses import dataclass

from irforge.passes.base import Pass, PassContext, PassResult
from irforge.plugins import hookimpl


@dataclass(frozen=True)
class DropIdentity(Pass):
    name = "example-drop-identity"
    summary = "let readers of an Identity read its input instead (graph outputs keep their Identity)"

    def run(self, graph, ctx: PassContext) -> PassResult:
        dropped = 0
        for node in graph:
            if node.op_type != "Identity" or node.domain or node.outputs[0].is_graph_output():
                continue
            node.outputs[0].replace_all_uses_with(node.inputs[0])
            graph.remove(node)
            dropped += 1
        return PassResult(dropped > 0, {"identities-dropped": dropped})


@hookimpl
def irforge_register_passes() -> list[type]:
    return [DropIdentity]
