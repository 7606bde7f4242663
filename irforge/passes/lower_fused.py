"""lower-fused: irforge's fused ops replaced by the kernels of the backend that will run them.

A fused op (``irforge::FusedConv`` and the rest) runs everywhere as a call of its model-local
function; this pass swaps it for a target's own fused kernel where one exists and computes the
same thing.  For ``onnxruntime`` those are its ``com.microsoft`` contrib ops
(:mod:`irforge.passes.lower_onnxruntime` says which, and when), after linear layers flattened
for Gemm go back to 3-D (:mod:`irforge.passes.unflatten_linear`), where those kernels take their
inputs and biases; the other fused ops stay calls,
which onnxruntime inlines.  The ``xla`` and ``stablehlo`` backends lower every call as a
``stablehlo.composite`` named after the op and ``tvm`` inlines the body, so for them the graph is
already in its final form and the pass changes nothing.  Functions no call uses any more are
dropped; what the lowering leaves unread goes with the next ``dce``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core_ir.graph import Graph
from .base import Pass, PassContext, PassError, PassResult
from .fused_ops import DOMAIN, import_domain
from .inline_functions import drop_uncalled
from .lower_onnxruntime import KERNELS, ORT_DOMAIN, to_onnxruntime
from .unflatten_linear import unflatten_linear_layers

TARGETS = ("onnxruntime", "xla", "stablehlo", "tvm", "reference")
"""The built-in backends and their targets; :func:`targets` adds every registered backend's."""


def targets() -> list[str]:
    """What ``target`` may name: the built-ins, and every backend of the installed registry with
    its emit targets (a plugin backend's ``lowering`` may name itself here)."""
    from ..core_ir.errors import IrforgeError
    from ..core_ir.installed import installed_registry

    try:
        backends = installed_registry().backends
    except IrforgeError:
        backends = {}
    return sorted({*TARGETS, *backends, *(t for b in backends.values() for t in b.targets)})


@dataclass(frozen=True)
class LowerFused(Pass):
    name = "lower-fused"
    summary = "irforge fused ops -> the target's fused kernels (onnxruntime contrib ops); the rest stay calls"

    target: str = "onnxruntime"
    """The backend that will run the model (any registered one; only onnxruntime has kernels to
    lower to, the others run the calls as they are)."""

    def __post_init__(self):  # a wrong target is an error when the pipeline is read, not after -O2
        known = targets()
        if self.target not in known:
            raise PassError(f"lower-fused: no lowering for target {self.target!r}; "
                            f"the targets are {', '.join(known)}")  # fmt: skip

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        if self.target != "onnxruntime":
            return PassResult(False)
        # the contrib kernels take 3-D inputs and the linear layers' biases: attention first, whose
        # merged heads then open the output projection's region
        unflattened = unflatten_linear_layers(graph)
        lowered = sum(to_onnxruntime(n) for n in _fused(graph) if n.op_type == "Attention")
        unflattened += unflatten_linear_layers(graph)
        lowered += sum(to_onnxruntime(n) for n in _fused(graph))
        model = ctx.model
        dropped = 0
        if lowered and model is not None:
            import_domain(model, ORT_DOMAIN)
            if graph is model.graph:
                dropped = drop_uncalled(model)
                _drop_unused_domain(model, DOMAIN)
        return PassResult(lowered + unflattened > 0,
                          {"lowered": lowered, "functions-dropped": dropped, "unflattened": unflattened})



def _fused(graph: Graph) -> list:
    return [n for n in graph.all_nodes() if n.domain == DOMAIN]


def _drop_unused_domain(model, domain: str) -> None:
    """Forget the import of ``domain`` once no node and no function uses it."""
    if any(f.domain == domain for f in model.functions.values()):
        return
    if any(n.domain == domain for n in model.graph.all_nodes()):
        return
    model.opset_imports.pop(domain, None)
    model.graph.opset_imports.pop(domain, None)


__all__ = ["KERNELS", "TARGETS", "LowerFused", "targets"]
