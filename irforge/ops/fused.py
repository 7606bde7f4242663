"""The ``irforge`` domain of fused ops, and the model-local functions that define them.

A fusion pass replaces a subgraph by one node of domain ``irforge``; the node calls a
model-local function holding the subgraph it replaced (one overload per variant whose body
differs, such as the activation of ``FusedConv`` or the approximation of ``Gelu``).  So a fused
model is a valid ONNX model that the reference interpreter, onnxruntime and every tool that
inlines functions run unchanged, and a backend that knows an op lowers it to its own kernel
(``lower-fused``).

The domain is filled explicitly, through the ``irforge_register_fused_ops`` hook (the built-in
fusions register theirs there like a plugin would): :func:`register_body` is what the registry
calls, and a lookup of an op not registered yet builds the installed registry first.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core_ir.builder import Builder
from ..core_ir.model import Function, Model
from ..core_ir.value import Value

DOMAIN = "irforge"
"""The domain of every fused op irforge makes."""

BodyBuilder = Callable[[str, int], Function]
"""``(overload, opset) -> Function``: the decomposition of one fused op at one overload."""

_BODIES: dict[str, BodyBuilder] = {}


def _bodies() -> dict[str, BodyBuilder]:
    if not _BODIES:  # nothing registered yet: the installed registry registers the built-ins
        from ..core_ir.installed import installed_registry

        installed_registry()
    return _BODIES


def registered() -> list[str]:
    """The fused ops of the domain, by name."""
    return sorted(_bodies())


def register_body(op_type: str, builder: BodyBuilder) -> None:
    """Make ``irforge::op_type`` known: ``builder`` writes its function for an overload."""
    _BODIES[op_type] = builder


def fused_function(op_type: str, overload: str, opset: int) -> Function:
    """The decomposition of ``irforge::op_type`` at ``overload``, written against ``opset``."""
    return _bodies()[op_type](overload, opset)


def is_fused(node) -> bool:
    return node.domain == DOMAIN and node.op_type in _bodies()


def function_for(node, model: Model) -> Function | None:
    """The function a fused call needs, before the pass that made the call adds it to the model."""
    if not is_fused(node):
        return None
    return fused_function(node.op_type, node.overload, model.opset_imports.get("", 13))


def add_fused_functions(model: Model) -> int:
    """Give ``model`` the function of every fused op its graphs call; the number added."""
    opset = model.opset_imports.get("", 13)
    added = 0
    for g in model.graph.all_graphs():
        for n in g:
            key = (n.domain, n.op_type, n.overload)
            if is_fused(n) and key not in model.functions:
                model.add_function(fused_function(n.op_type, n.overload, opset))
                added += 1
    if added:
        import_domain(model, DOMAIN)
    return added


def import_domain(model: Model, domain: str, version: int = 1) -> None:
    """Import ``domain`` in the model (and in its graph, where the graph lists its own opsets)."""
    model.opset_imports.setdefault(domain, version)
    if model.graph.opset_imports:
        model.graph.opset_imports.setdefault(domain, version)


def scalar_like(b: Builder, value: float, like: Value) -> Value:
    """A float constant in ``like``'s element type, inside a function body (which has no
    initializers, and whose type is only known at the call)."""
    return b.op.CastLike(b.op.Constant(value_float=float(value)), like)


def gelu_body(b: Builder, t: Value, tanh: bool) -> Value:
    """GELU spelled in primitives: ONNX's reference evaluator cannot expand ``Gelu`` (a function
    op whose body depends on its input type) inside a function body, and opsets before 20 have
    no ``Gelu``."""
    if tanh:  # x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
        cube = b.op.Mul(b.op.Mul(t, t), t)
        widened = b.op.Add(t, b.op.Mul(scalar_like(b, 0.044715, t), cube))
        inner = b.op.Mul(scalar_like(b, np.sqrt(2 / np.pi), t), widened)
        gate = b.op.Tanh(inner)
    else:  # x/2 * (1 + erf(x / sqrt(2)))
        gate = b.op.Erf(b.op.Mul(t, scalar_like(b, 1 / np.sqrt(2), t)))
    return b.op.Mul(b.op.Mul(t, scalar_like(b, 0.5, t)), b.op.Add(scalar_like(b, 1.0, t), gate))
