"""lower-fused: irforge's fused ops replaced by the kernels of the backend that will run them.

A fused op (``irforge::FusedConv`` and the rest) runs everywhere as a call of its model-local
function; this pass swaps it for a target's own fused kernel where one exists and computes the
same thing.  For ``onnxruntime`` that is the ``com.microsoft`` contrib op of the same name
(``FusedConv`` in float32 with Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid or HardSwish;
``FusedGemm`` in float32 with Relu, Tanh, Sigmoid, LeakyRelu or HardSigmoid; ``Gelu`` in float32
as ``Gelu`` or, the tanh approximation, ``FastGelu``; ``SkipLayerNormalization`` in float32 over
3-D inputs); the other fused ops stay calls, which onnxruntime inlines.  The ``xla`` and
``stablehlo`` backends lower every call as a ``stablehlo.composite`` named after the op and
``tvm`` inlines the body, so for them the graph is already in its final form and the pass
changes nothing.  Functions no call uses any more are
dropped.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..core_ir.attributes import infer_attr
from ..core_ir.clone import instantiate
from ..core_ir.dtypes import DataType
from ..core_ir.graph import Graph
from ..core_ir.interpreter import interpret
from ..core_ir.node import Node
from ..core_ir.value import Value
from .base import Pass, PassContext, PassError, PassResult
from .fuse_activation import overload
from .fused_ops import DOMAIN, fused_function, import_domain
from .inline_functions import drop_uncalled

TARGETS = ("onnxruntime", "xla", "stablehlo", "tvm", "reference")
ORT_DOMAIN = "com.microsoft"
_ORT_ACTIVATIONS = {
    "FusedConv": {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish"},
    "FusedGemm": {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "HardSigmoid"},
}


def _float32(node: Node) -> bool:
    """The kernels are float32 only: every typed value is float32, and one at least is typed."""
    dtypes = {getattr(v.type, "dtype", None) for v in (*node.inputs, *node.outputs) if v is not None} - {None}
    return dtypes == {DataType.FLOAT}


def _skip_layer_norm(node: Node) -> bool:
    """onnxruntime's SkipLayerNormalization: the same inputs, the sum as its fourth output."""
    shape = getattr(node.inputs[0].type, "shape", None)
    if not _float32(node) or shape is None or len(shape) != 3:
        return False
    y, total = node.outputs
    new = Node("SkipLayerNormalization", list(node.inputs), domain=ORT_DOMAIN, attributes=dict(node.attributes),
               outputs=[Value(f"{y.name}__ort", y.type), None, None, Value(f"{total.name}__ort", total.type)],
               name=node.name)  # fmt: skip
    new.metadata = node.metadata
    graph = node.graph
    graph.insert_before(node, new)
    for old, value in ((y, new.outputs[0]), (total, new.outputs[3])):
        keep = old.name
        old.replace_all_uses_with(value)
        old.name, value.name = f"{keep}__fused", keep  # the graph keeps its value names
    graph.remove(node)
    return True


def _to_onnxruntime(node: Node) -> bool:
    """Make ``node`` onnxruntime's contrib op, where it has one that fits."""
    if node.op_type == "SkipLayerNormalization":
        return _skip_layer_norm(node)
    if node.op_type == "Gelu":
        if not _float32(node):
            return False
        node.op_type = "FastGelu" if node.overload == "tanh" else "Gelu"
        node.remove_attribute("approximate")
        node.domain, node.overload = ORT_DOMAIN, ""
        return True
    activation = node.attr("activation")
    if node.op_type not in _ORT_ACTIVATIONS or activation not in _ORT_ACTIVATIONS[node.op_type] or not _float32(node):
        return False
    if node.op_type == "FusedGemm":
        params = list(node.attr("activation_params", ()))
        node.remove_attribute("activation_params")
        for key, p in zip(("activation_alpha", "activation_beta"), params, strict=False):
            node.set_attribute(key, float(p))
    node.domain, node.overload = ORT_DOMAIN, ""
    return True


@dataclass(frozen=True)
class LowerFused(Pass):
    name = "lower-fused"
    summary = "irforge fused ops -> the target's fused kernels (onnxruntime contrib ops); the rest stay calls"

    target: str = "onnxruntime"
    """The backend that will run the model: onnxruntime, xla, stablehlo, tvm or reference."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        if self.target not in TARGETS:
            raise PassError(f"lower-fused: no lowering for target {self.target!r}; "
                            f"the targets are {', '.join(TARGETS)}")  # fmt: skip
        if self.target != "onnxruntime":
            return PassResult(False)
        lowered = sum(_to_onnxruntime(n) for n in list(graph.all_nodes()) if n.domain == DOMAIN)
        model = ctx.model
        dropped = 0
        if lowered and model is not None:
            import_domain(model, ORT_DOMAIN)
            if graph is model.graph:
                dropped = drop_uncalled(model)
        return PassResult(lowered > 0, {"lowered": lowered, "functions-dropped": dropped})


_KERNEL_OPSET = 21


@functools.lru_cache(maxsize=64)
def _body(op_type: str, ov: str):
    return fused_function(op_type, ov, _KERNEL_OPSET)


def _contrib_kernel(op_type: str):
    """A reference kernel for onnxruntime's ``op_type``: the irforge fused op's decomposition, so
    the verifier knows the lowered ops and the interpreter (and tests) can run them."""

    def kernel(*inputs, activation: str, activation_params=(), activation_alpha=None, activation_beta=None,
               **attributes):  # fmt: skip
        params = list(activation_params) + [p for p in (activation_alpha, activation_beta) if p is not None]
        fn = _body(op_type, overload(activation, params))
        if op_type == "FusedGemm":
            attributes = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0, **attributes}
        graph = instantiate(fn, {k: infer_attr(k, v) for k, v in attributes.items()})
        given = list(inputs)
        if len(given) == 2:  # no bias: zeros, one per output channel of a Conv, a scalar for Gemm
            channels = (np.shape(given[1])[0],) if op_type == "FusedConv" else ()
            given.append(np.zeros(channels, dtype=np.asarray(given[0]).dtype))
        return interpret(graph, given, {"": _KERNEL_OPSET})[0]

    return kernel


def _gelu_kernel(tanh: bool):
    def kernel(x, bias=None, **_schema_defaults):  # ONNX's Gelu schema adds approximate="none"
        if bias is not None:  # FastGelu adds an optional bias first
            x = x + bias
        return interpret(_body("Gelu", "tanh" if tanh else "none").graph, [x], {"": _KERNEL_OPSET})[0]

    return kernel


def _skip_layer_norm_kernel(x, skip, gamma, beta=None, bias=None, epsilon: float = 1e-12, **_):
    total = x + skip + (0 if bias is None else bias)
    fn = _body("SkipLayerNormalization", "bias")
    graph = instantiate(fn, {"epsilon": infer_attr("epsilon", epsilon)})
    beta = np.zeros_like(gamma) if beta is None else beta
    y, _ = interpret(graph, [total, np.zeros_like(total), gamma, beta], {"": _KERNEL_OPSET})
    mean = total.mean(axis=-1, keepdims=True)
    inv_std = 1 / np.sqrt(((total - mean) ** 2).mean(axis=-1, keepdims=True) + epsilon)
    return y, mean.astype(total.dtype), inv_std.astype(total.dtype), total


KERNELS = [(ORT_DOMAIN, "SkipLayerNormalization", _skip_layer_norm_kernel)] + [
    (ORT_DOMAIN, op, _contrib_kernel(op)) for op in _ORT_ACTIVATIONS] + [
    (ORT_DOMAIN, "Gelu", _gelu_kernel(False)), (ORT_DOMAIN, "FastGelu", _gelu_kernel(True))]
"""Reference kernels of the contrib ops this pass writes, registered with the built-in passes."""
