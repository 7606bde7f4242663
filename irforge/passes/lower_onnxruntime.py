"""The onnxruntime lowering of irforge's fused ops: its ``com.microsoft`` contrib kernels.

``FusedConv`` (float32; Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid, HardSwish),
``FusedGemm`` (float32; Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid), ``Gelu``/``FastGelu``
(``BiasGelu`` with the bias Add before it; a linear layer with GELU becomes ``MatMul`` +
``BiasGelu``), ``SkipLayerNormalization`` (float32, 3-D, a linear layer's bias Add before it
absorbed), ``SkipSimplifiedLayerNormalization`` (an RMS norm of a residual sum, 3-D),
``RotaryEmbedding`` (4-D, constant cos/sin tables of the positions 0 .. seq - 1) and
``MultiHeadAttention`` (float32, the head split and merge reshapes around the attention
absorbed; ``Attention`` when Q, K and V are one packed projection, as combine-parallel-matmul
leaves them) replace the fused op where the kernel computes the
same thing; anything else stays a call of its function, which onnxruntime inlines.  Every
contrib op written here gets a reference kernel (the fused op's own decomposition), so the
verifier knows it and the interpreter runs it.
"""

from __future__ import annotations

import functools

import numpy as np

from ..core_ir.attributes import infer_attr
from ..core_ir.builder import Builder
from ..core_ir.clone import instantiate
from ..core_ir.interpreter import interpret
from ..core_ir.node import Node
from ..core_ir.pattern import constant_value
from ..core_ir.value import Value
from .fuse_activation import overload
from .fused_ops import fused_function
from .lower_onnxruntime_attention import (
    ATTENTION_KERNELS,
    ORT_DOMAIN,
    bias_add,
    float32,
    lower_attention,
    rotary_cache,
    rotate,
)

_ORT_ACTIVATIONS = {
    "FusedConv": {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish"},
    "FusedGemm": {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "HardSigmoid"},
}


def _skip_layer_norm(node: Node) -> bool:
    """onnxruntime's SkipLayerNormalization: the same inputs, the sum as its fourth output; a
    linear layer's bias added to the skip (or the input) joins as its fifth input."""
    shape = getattr(node.inputs[0].type, "shape", None)
    if not float32(node) or shape is None or len(shape) != 3:
        return False
    y, total = node.outputs
    inputs = list(node.inputs)
    for i in (1, 0):
        found = bias_add(inputs[i], shape[2])
        if found is not None:
            inputs[i] = found[0]
            beta = inputs[3] if len(inputs) > 3 else Builder(node.graph, before=node).constant(
                np.zeros(shape[2], np.float32))  # fmt: skip
            inputs = [*inputs[:3], beta, found[1]]
            break
    new = Node("SkipLayerNormalization", inputs, domain=ORT_DOMAIN, attributes=dict(node.attributes),
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


def _skip_rms_norm(node: Node) -> bool:
    """onnxruntime's SkipSimplifiedLayerNormalization: an RMS norm of a residual sum ``a + b``
    (both ``[batch, seq, hidden]``) takes both terms and gives the sum as its fourth output."""
    x, scale = node.inputs[:2]
    shape = getattr(x.type, "shape", None)
    add = x.producer()
    if not float32(node) or shape is None or len(shape) != 3 or add is None or add.op_type != "Add" or add.domain:
        return False
    gamma = constant_value(scale)
    if gamma is None or gamma.shape != (shape[2],) or x.is_graph_output():
        return False
    if any(tuple(getattr(t.type, "shape", None) or ()) != tuple(shape) for t in add.inputs):
        return False
    (y,) = node.outputs
    new = Node("SkipSimplifiedLayerNormalization", [*add.inputs, scale], domain=ORT_DOMAIN,
               attributes={"epsilon": node.attributes["epsilon"]} if "epsilon" in node.attributes else {},
               outputs=[Value(f"{y.name}__ort", y.type), None, None, Value(f"{x.name}__ort", x.type)],
               name=node.name)  # fmt: skip
    new.metadata = node.metadata
    graph = node.graph
    graph.insert_before(node, new)
    keep = y.name
    y.replace_all_uses_with(new.outputs[0])
    y.name, new.outputs[0].name = f"{keep}__fused", keep
    graph.remove(node)
    if x.num_uses():  # the residual stream goes on from the kernel's sum
        x.replace_all_uses_with(new.outputs[3])
    else:
        new.outputs[3].name = f"{x.name}__unused"
    return True


def _rotary(node: Node) -> bool:
    """onnxruntime's RotaryEmbedding on ``[batch, heads, seq, head dim]``: constant cos and sin
    tables for the positions ``0 .. seq - 1`` become its caches (half the head dim each)."""
    x, cos, sin = node.inputs
    shape = getattr(x.type, "shape", None)
    if not float32(node) or shape is None or len(shape) != 4 or not all(isinstance(d, int) for d in shape):
        return False
    batch, _, seq, dim = shape
    caches = [rotary_cache(constant_value(t), seq, dim) for t in (cos, sin)]
    if any(c is None for c in caches):
        return False
    b = Builder(node.graph, before=node)
    positions = b.constant(np.tile(np.arange(seq, dtype=np.int64), (batch, 1)))
    rope = b.add_node("RotaryEmbedding", [x, positions, *(b.constant(c.astype(np.float32)) for c in caches)],
                      {"interleaved": 0}, domain=ORT_DOMAIN, num_outputs=1, name=node.name)  # fmt: skip
    return _replaces(node, rope)


def _replaces(node: Node, kernel: Node) -> bool:
    """``kernel`` takes the place of the one-output fused ``node``: its readers, its output's name
    and type, its source metadata."""
    kernel.metadata = node.metadata
    out = node.outputs[0]
    kernel.outputs[0].type = out.type
    keep = out.name
    out.replace_all_uses_with(kernel.outputs[0])
    out.name, kernel.outputs[0].name = f"{keep}__fused", keep
    node.graph.remove(node)
    return True


def _linear_gelu(node: Node) -> bool:
    """A linear layer with GELU: ``MatMul`` then onnxruntime's ``BiasGelu`` (``FastGelu`` for the
    tanh form), which adds the bias itself; onnxruntime's ``FusedGemm`` has no GELU."""
    if not float32(node):
        return False
    if node.op_type == "FusedGemm" and any(node.attr(k, d) != d for k, d in (("alpha", 1.0), ("beta", 1.0),
                                                                             ("transA", 0), ("transB", 0))):
        return False  # fmt: skip
    x, w, *rest = node.inputs
    bias = rest[0] if rest and rest[0] is not None else None
    size = (getattr(w.type, "shape", None) or [None])[-1]
    if bias is not None:
        b = constant_value(bias)
        if b is None or not isinstance(size, int) or b.shape != (size,):
            return False
    tanh = bool(list(node.attr("activation_params", ())))
    b = Builder(node.graph, before=node)
    product = b.op.MatMul(x, w)
    product.type = node.outputs[0].type
    op = "FastGelu" if tanh else "BiasGelu" if bias is not None else "Gelu"
    gelu = b.add_node(op, [product] + ([bias] if bias is not None else []), {}, domain=ORT_DOMAIN, num_outputs=1,
                      name=node.name)  # fmt: skip
    return _replaces(node, gelu)


def to_onnxruntime(node: Node) -> bool:
    """Make ``node`` onnxruntime's contrib op, where it has one that fits."""
    if node.op_type == "Attention":
        return lower_attention(node)
    if node.op_type == "SkipLayerNormalization":
        return _skip_layer_norm(node)
    if node.op_type == "RMSNormalization":
        return _skip_rms_norm(node)
    if node.op_type == "RotaryEmbedding":
        return _rotary(node)
    if node.op_type == "Gelu":
        if not float32(node):
            return False
        tanh = node.overload == "tanh"
        node.remove_attribute("approximate")
        node.domain, node.overload = ORT_DOMAIN, ""
        size = (getattr(node.inputs[0].type, "shape", None) or [None])[-1]
        found = bias_add(node.inputs[0], size) if isinstance(size, int) else None
        node.op_type = "FastGelu" if tanh else "BiasGelu" if found else "Gelu"
        if found:  # a linear layer's bias: BiasGelu / FastGelu add it themselves
            node.set_inputs(list(found))
        return True
    activation = node.attr("activation")
    if node.op_type in ("FusedGemm", "FusedMatMul") and activation == "Gelu":
        return _linear_gelu(node)
    if node.attr("channels_last"):
        return False  # onnxruntime's FusedConv is channels-first
    if node.op_type not in _ORT_ACTIVATIONS or activation not in _ORT_ACTIVATIONS[node.op_type] or not float32(node):
        return False
    if node.op_type == "FusedGemm":
        params = list(node.attr("activation_params", ()))
        node.remove_attribute("activation_params")
        for key, p in zip(("activation_alpha", "activation_beta"), params, strict=False):
            node.set_attribute(key, float(p))
    node.domain, node.overload = ORT_DOMAIN, ""
    return True


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
        """Gelu, BiasGelu (``x + bias`` first) and FastGelu (the tanh form, optional bias)."""
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


def _skip_rms_norm_kernel(x, skip, gamma, bias=None, epsilon: float = 1e-6, **_):
    total = x + skip + (0 if bias is None else bias)
    graph = instantiate(_body("RMSNormalization", ""), {"epsilon": infer_attr("epsilon", epsilon)})
    (y,) = interpret(graph, [total, gamma], {"": _KERNEL_OPSET})
    inv_std = 1 / np.sqrt((total.astype(np.float64) ** 2).mean(axis=-1, keepdims=True) + epsilon)
    return y, np.zeros_like(inv_std, total.dtype), inv_std.astype(total.dtype), total


def _rotary_kernel(x, position_ids, cos_cache, sin_cache, *, interleaved: int = 0, num_heads: int = 0, **_):
    """RotaryEmbedding on ``[batch, heads, seq, head dim]``, or on ``[batch, seq, hidden]`` split
    into ``num_heads`` (halves not interleaved)."""
    if interleaved or x.ndim not in (3, 4) or (x.ndim == 3 and not num_heads):
        raise NotImplementedError("RotaryEmbedding's reference kernel takes halves not interleaved")
    cos, sin = (np.asarray(c)[position_ids] for c in (cos_cache, sin_cache))  # [batch, seq, dim / 2]
    if x.ndim == 4:
        return rotate(x, cos[:, None], sin[:, None]).astype(x.dtype)
    batch, seq, hidden = x.shape
    heads = x.reshape(batch, seq, num_heads, hidden // num_heads)
    return rotate(heads, cos[:, :, None], sin[:, :, None]).reshape(x.shape).astype(x.dtype)


KERNELS = [(ORT_DOMAIN, "SkipLayerNormalization", _skip_layer_norm_kernel),
           (ORT_DOMAIN, "SkipSimplifiedLayerNormalization", _skip_rms_norm_kernel),
           (ORT_DOMAIN, "RotaryEmbedding", _rotary_kernel),
           *ATTENTION_KERNELS] + [
    (ORT_DOMAIN, op, _contrib_kernel(op)) for op in _ORT_ACTIVATIONS] + [
    (ORT_DOMAIN, "Gelu", _gelu_kernel(False)), (ORT_DOMAIN, "BiasGelu", _gelu_kernel(False)),
    (ORT_DOMAIN, "FastGelu", _gelu_kernel(True))]
"""Reference kernels of the contrib ops this pass writes, registered with the built-in passes."""
