"""expand-functions: replace an ONNX op by the function body its schema defines.

Many ONNX ops (Attention, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, RotaryEmbedding,
CenterCropPad, the window functions, …) are specified as a composition of simpler ops: the
schema carries that composition as a function body, fixed or built for the node's attributes
and input types.  A backend without a lowering for such an op can still run it once it is
expanded, exactly as ONNX defines it.  The expansion is refused when the body was written
against an opset in which one of its ops means something else than at the model's opset, and for
bodies with control flow (``Range``'s loop), which no backend here needs expanded.  Ops whose
schema has no body but which irforge decomposes (:mod:`irforge.ops.decompose`: Hardmax, OneHot,
EyeLike, LpPool) are expanded into that decomposition.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
import onnx.defs

from ..core_ir.builder import NameGenerator
from ..core_ir.graph import Graph
from ..core_ir.node import Node
from ..core_ir.serde import Deserializer, Serializer, type_to_proto
from ..core_ir.types import TensorType
from ..ops.decompose import decompose
from ..ops.traits import same_meaning
from .base import Pass, PassContext, PassResult
from .inline_functions import _inline
from .shape_inference import ShapeInference


@dataclass(frozen=True)
class ExpandFunctions(Pass):
    name = "expand-functions"
    summary = "replace ONNX ops that have a schema function body (Attention, the losses, ...) by that body"

    ops: str = ""
    """Op types to expand, joined by ``+`` (``ops=Attention+Gelu``); empty: every op with a body,
    except those in ``keep``."""
    keep: str = ""
    """Op types never expanded (a backend's native ops), joined by ``+``, when ``ops`` is empty."""
    max_rounds: int = 8
    """Bodies may use ops that have bodies of their own: expand this many levels deep."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        wanted, keep = _op_set(self.ops), _op_set(self.keep)
        opset = ctx.opset_imports(graph).get("", onnx.defs.onnx_opset_version())
        names = NameGenerator(graph)
        expanded = refused = 0
        typed = retyped = False
        for _ in range(self.max_rounds):
            changed, refused = False, 0
            for node in list(graph):
                if node.domain not in ("", "ai.onnx") or node.subgraphs():
                    continue
                if (wanted and node.op_type not in wanted) or (not wanted and node.op_type in keep):
                    continue
                body = function_body(node, opset)
                if body is None:
                    continue
                if body is False:
                    refused += 1
                    continue
                _inline(graph, node, body, names)
                expanded += 1
                changed = True
            if not changed and (typed or not refused):
                break
            # bodies built for their inputs' types need those types: infer them and go again
            retyped |= ShapeInference().run(graph, ctx).changed
            typed = True
        return PassResult(expanded > 0 or retyped, {"expanded": expanded, "refused": refused})


def _op_set(text: str) -> set[str]:
    return {o.strip() for o in text.replace(",", "+").split("+") if o.strip()}


def function_body(node: Node, opset: int):
    """The node's schema function as an irforge Function; None when the op has none, False when
    it has one that cannot be used here (input types unknown, or a body op whose meaning
    changed between the body's opset and the model's)."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    if not schema.has_function and not schema.has_context_dependent_function:
        return decompose(node, opset)  # irforge's own, for ops ONNX gives no body (irforge.ops.decompose)
    fp = None
    if schema.has_context_dependent_function:
        types = []
        for v in node.inputs:
            tp = onnx.TypeProto()
            if v is not None:
                if not isinstance(v.type, TensorType):
                    return False
                type_to_proto(v.type, tp)
            types.append(tp.SerializeToString())
        proto = onnx.NodeProto()
        Serializer().node(node, proto)
        try:
            data = schema.get_context_dependent_function_with_opset_version(opset, proto.SerializeToString(), types)
        except Exception:
            return False
        if data:
            fp = onnx.FunctionProto.FromString(data)
    elif schema.has_function:
        try:
            fp = schema.get_function_with_opset_version(opset)
        except Exception:
            fp = schema.function_body
        if isinstance(fp, bytes):
            fp = onnx.FunctionProto.FromString(fp)
    if fp is None or not fp.node:
        return None
    if any(n.op_type == "Loop" for n in fp.node):
        return False  # Range's body: inlined, the interpreter gives its 0-d scan output as [n, 1], not [n]
    body_opset = next((o.version for o in fp.opset_import if o.domain in ("", "ai.onnx")), opset)
    if body_opset != opset and not _same_meaning(fp, body_opset, opset):
        return False
    fp.domain, fp.name = "irforge.expand", node.op_type
    reader = Deserializer(None, f"the function body of {node.op_type}")
    fn = reader.function(fp)
    for name, attr in schema.attributes.items():  # the schema's defaults bind unset references
        default = attr.default_value
        if name not in fn.attribute_defaults and default is not None and default.type:
            default.name = name
            fn.attribute_defaults[name] = reader.attribute(default, {}, f"the schema of {node.op_type}")
    return fn


def _same_meaning(fp: onnx.FunctionProto, body_opset: int, opset: int) -> bool:
    for n in fp.node:
        if n.domain not in ("", "ai.onnx"):
            return False
        try:
            a = onnx.defs.get_schema(n.op_type, body_opset, "")
            b = onnx.defs.get_schema(n.op_type, opset, "")
        except onnx.defs.SchemaError:
            return False
        if not same_meaning(n.op_type, a.since_version, b.since_version):
            return False
    return True
