"""What the fusion passes share: running patterns and giving the model the functions of the
fused ops they made (:mod:`irforge.ops.fused` holds the domain itself)."""

from __future__ import annotations

from ..ops.fused import (  # noqa: F401  (the fusion passes import the domain's names from here)
    DOMAIN,
    add_fused_functions,
    function_for,
    fused_function,
    gelu_body,
    import_domain,
    is_fused,
    scalar_like,
)
from .base import PassResult, run_patterns


def only_read_inside(m) -> bool:
    """Every result a match would remove (all but the root's) is read only by matched nodes."""
    inside = set(m.nodes)
    for n in m.nodes[1:]:
        for v in n.outputs:
            if v is not None and (v.is_graph_output() or any(u not in inside for u in v.users())):
                return False
    return True


def run_fusion(pass_, graph, ctx, patterns) -> PassResult:
    """The body of a fusion pass: rewrite ``graph`` with ``patterns``, then give the model the
    functions of the fused ops made.  Without a model (a bare graph) nothing is fused: a fused op
    needs a model to hold its function."""
    if ctx.model is None:
        return PassResult(False)
    result = run_patterns(pass_, graph, ctx, patterns)
    if result.changed:
        add_fused_functions(ctx.model)
    return result


def onnx_opset(ctx, graph) -> int:
    """The ONNX opset ``graph`` is written against."""
    return ctx.opset_imports(graph).get("", 13)






