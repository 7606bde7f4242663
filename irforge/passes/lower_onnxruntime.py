"""The onnxruntime lowering of irforge's fused ops: its ``com.microsoft`` contrib kernels.

``FusedConv`` (float32; Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid, HardSwish),
``FusedGemm`` (float32; Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid), ``Gelu``/``FastGelu``
(``BiasGelu`` with the bias Add before it; a linear layer with GELU becomes ``MatMul`` +
``BiasGelu``), ``SkipLayerNormalization`` (float32, 3-D, a linear layer's bias Add before it
absorbed), ``SkipSimplifiedLayerNormalization`` (an RMS norm of a residual sum, 3-D) and
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
from ..core_ir.dtypes import DataType
from ..core_ir.interpreter import interpret
from ..core_ir.node import Node
from ..core_ir.pattern import constant_value
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from .fuse_activation import overload
from .fused_ops import fused_function

ORT_DOMAIN = "com.microsoft"
_ORT_ACTIVATIONS = {
    "FusedConv": {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid", "HardSwish"},
    "FusedGemm": {"Relu", "Tanh", "Sigmoid", "LeakyRelu", "HardSigmoid"},
}


def _float32(node: Node) -> bool:
    """The kernels are float32 only: every typed value is float32, and one at least is typed."""
    dtypes = {getattr(v.type, "dtype", None) for v in (*node.inputs, *node.outputs) if v is not None} - {None}
    return dtypes == {DataType.FLOAT}


def _bias_add(v: Value, size: int) -> tuple[Value, Value] | None:
    """``(x, bias)`` where ``v = x + bias``, ``bias`` a constant vector of ``size`` elements (a
    linear layer's bias), read by nothing but its one user."""
    add = v.producer()
    if add is None or add.op_type != "Add" or add.domain or v.num_uses() != 1 or v.is_graph_output():
        return None
    for x, c in (add.inputs, add.inputs[::-1]):
        bias = constant_value(c)
        if bias is not None and bias.shape == (size,) and bias.dtype == np.float32:
            return x, c
    return None


def _skip_layer_norm(node: Node) -> bool:
    """onnxruntime's SkipLayerNormalization: the same inputs, the sum as its fourth output; a
    linear layer's bias added to the skip (or the input) joins as its fifth input."""
    shape = getattr(node.inputs[0].type, "shape", None)
    if not _float32(node) or shape is None or len(shape) != 3:
        return False
    y, total = node.outputs
    inputs = list(node.inputs)
    for i in (1, 0):
        found = _bias_add(inputs[i], shape[2])
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
    if not _float32(node) or shape is None or len(shape) != 3 or add is None or add.op_type != "Add" or add.domain:
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


def _heads(v: Value) -> tuple[Value, int, tuple] | None:
    """``(x, heads, (batch, seq, hidden))`` where ``v`` is ``x`` split into heads:
    ``Transpose(Reshape(x, [batch, seq, heads, dim]), [0, 2, 1, 3])``, ``x`` 3-D or (a linear
    layer's flattened output) 2-D with the 4-D shape static."""
    t = v.producer()
    if t is None or t.op_type != "Transpose" or t.domain or list(t.attr("perm", ())) != [0, 2, 1, 3]:
        return None
    r = t.inputs[0].producer()
    if r is None or r.op_type != "Reshape" or r.domain or len(r.inputs) != 2:
        return None
    x, split = r.inputs[0], getattr(r.outputs[0].type, "shape", None)
    dims = getattr(x.type, "shape", None)
    if split is None or len(split) != 4 or dims is None or len(dims) not in (2, 3) or not isinstance(dims[-1], int):
        return None
    heads, dim = split[2], split[3]
    if not isinstance(heads, int) or not isinstance(dim, int) or heads * dim != dims[-1]:
        return None
    if len(dims) == 2 and not all(isinstance(d, int) for d in split):
        return None
    return x, heads, (split[0], split[1], dims[-1])


def _packed_projection(qkv: list[Value], hidden: int) -> tuple[Value, Value, Value] | None:
    """``(x, weights, bias)`` when Q, K and V are the three equal parts of one packed projection
    ``Split(x @ weights + bias)`` (combine-parallel-matmul's output, 3-D): onnxruntime's
    ``Attention`` takes it whole."""
    qkv = [_flattened(v) or v for v in qkv]  # parts restored to 3-D from a 2-D linear layer
    split = qkv[0].producer()
    if split is None or split.op_type != "Split" or split.domain or list(split.outputs) != qkv:
        return None
    if split.attr("axis", 0) not in (-1, 2) or any(v.num_uses() != 1 or v.is_graph_output() for v in qkv):
        return None
    sizes = constant_value(split.inputs[1]) if len(split.inputs) > 1 else None
    if sizes is None or list(sizes) != [hidden] * 3:
        return None
    packed = split.inputs[0]
    product = packed.producer()
    if product is not None and product.op_type == "Gemm" and not product.domain and len(product.inputs) == 3:
        if any(product.attr(k, d) != d for k, d in (("alpha", 1.0), ("beta", 1.0), ("transA", 0), ("transB", 0))):
            return None
        x, weights, bias = product.inputs
        x = _unflattened(x)  # a linear layer over [batch * seq, hidden]: Attention wants [batch, seq, hidden]
    else:
        found = _bias_add(packed, 3 * hidden)
        product = found[0].producer() if found else None
        if product is None or product.op_type != "MatMul" or product.domain or found[0].num_uses() != 1:
            return None
        (x, weights), bias = product.inputs, found[1]
    if x is None or len(getattr(x.type, "shape", None) or ()) != 3 or packed.num_uses() != 1:
        return None
    b = constant_value(bias)
    if constant_value(weights) is None or b is None or b.shape != (3 * hidden,):
        return None
    return x, weights, bias


def _flattened(v: Value) -> Value | None:
    """``x`` where ``v = Reshape(x, [batch, seq, hidden])`` restores a 2-D ``x``."""
    r = v.producer()
    if r is None or r.op_type != "Reshape" or r.domain or v.num_uses() != 1:
        return None
    x = r.inputs[0]
    dims, flat = getattr(v.type, "shape", None), getattr(x.type, "shape", None)
    if dims is None or flat is None or len(dims) != 3 or len(flat) != 2 or dims[-1] != flat[-1]:
        return None
    return x


def _unflattened(v: Value) -> Value | None:
    """``x`` where ``v = Reshape(x, [-1, hidden])`` flattens a 3-D ``x``."""
    r = v.producer()
    if r is None or r.op_type != "Reshape" or r.domain:
        return None
    x = r.inputs[0]
    dims, flat = getattr(x.type, "shape", None), getattr(v.type, "shape", None)
    if dims is None or flat is None or len(dims) != 3 or len(flat) != 2 or dims[-1] != flat[-1]:
        return None
    return x


def _merged(out: Value, hidden: int) -> Node | None:
    """The Reshape that merges the heads of ``out`` back: ``Reshape(Transpose(out, [0, 2, 1, 3]),
    [batch, seq, hidden])`` (or 2-D, flattened for a linear layer), each step read by nothing else."""
    users = out.users()
    if len(users) != 1 or out.is_graph_output():
        return None
    t = users[0]
    if t.op_type != "Transpose" or t.domain or list(t.attr("perm", ())) != [0, 2, 1, 3]:
        return None
    readers = t.outputs[0].users()
    if len(readers) != 1 or t.outputs[0].is_graph_output() or readers[0].op_type != "Reshape":
        return None
    r = readers[0]
    dims = getattr(r.outputs[0].type, "shape", None)
    if len(r.inputs) != 2 or dims is None or len(dims) not in (2, 3) or dims[-1] != hidden:
        return None
    return r


def _attention(node: Node) -> bool:
    """onnxruntime's MultiHeadAttention over the un-split Q, K, V: the head split before and the
    merge after the fused op are absorbed; a mask becomes its ``attention_bias``, broadcast to
    ``[batch, 1, seq, kv seq]`` (the kernel broadcasts the first two dims only).  A guarded
    op's NaN rows become 0 on the kernel's output: the same result wherever V is finite (a NaN
    in V reaches the output through the primitives, and is set to 0 here)."""
    if not _float32(node):
        return False
    split = [_heads(v) for v in node.inputs[:3]]
    if any(s is None for s in split) or len({s[1] for s in split}) != 1:
        return False
    (_, heads, (_, seq, hidden)), (_, _, (_, kv_seq, _)) = split[0], split[1]
    merge = _merged(node.outputs[0], hidden)
    if merge is None or split[1][2] != split[2][2] or split[1][2][2] != hidden:
        return False
    graph = node.graph
    b = Builder(graph, before=merge)

    def three_d(x: Value, shape: tuple) -> Value:
        if len(x.type.shape) == 3:
            return x
        return b.op.Reshape(x, b.constant(np.array(shape, np.int64)))

    packed = _packed_projection([x for x, _, _ in split], hidden)
    inputs = list(packed) if packed else [three_d(x, shape) for x, _, shape in split]
    if len(node.inputs) > 3:
        mask = node.inputs[3]
        rank = len(getattr(mask.type, "shape", None) or ())
        if not 0 < rank <= 4 or not isinstance(seq, int) or not isinstance(kv_seq, int):
            return False
        bias = b.op.Expand(mask, b.constant(np.array([1, 1, seq, kv_seq], np.int64)))
        inputs += [None, None, bias]
    attrs = {"num_heads": heads, "scale": float(node.attr("scale", 1.0))}
    op = "Attention" if packed else "MultiHeadAttention"
    mha = b.add_node(op, inputs, attrs, domain=ORT_DOMAIN, num_outputs=1, name=node.name)
    mha.metadata = node.metadata
    attended = mha.outputs[0]
    attended.type = TensorType(node.outputs[0].type.dtype, split[0][2])
    if node.overload.endswith("-guarded"):  # a fully masked row is NaN in the kernel: 0, as the op says
        attended = b.op.Where(b.op.IsNaN(attended), b.constant(np.zeros((), np.float32)), attended)
        attended.type = mha.outputs[0].type
    out = merge.outputs[0]
    result = attended if len(out.type.shape) == 3 else b.op.Reshape(attended, merge.inputs[1])
    result.type = out.type
    keep = out.name
    out.replace_all_uses_with(result)
    out.name, result.name = f"{keep}__merged", keep
    transpose = node.outputs[0].users()[0]
    for dead in (merge, transpose, node):  # the head splits before may have other readers: dce's job
        graph.remove(dead)
    return True


def _linear_gelu(node: Node) -> bool:
    """A linear layer with GELU: ``MatMul`` then onnxruntime's ``BiasGelu`` (``FastGelu`` for the
    tanh form), which adds the bias itself; onnxruntime's ``FusedGemm`` has no GELU."""
    if not _float32(node):
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
    gelu.metadata = node.metadata
    out = node.outputs[0]
    gelu.outputs[0].type = out.type
    keep = out.name
    out.replace_all_uses_with(gelu.outputs[0])
    out.name, gelu.outputs[0].name = f"{keep}__fused", keep
    node.graph.remove(node)
    return True


def to_onnxruntime(node: Node) -> bool:
    """Make ``node`` onnxruntime's contrib op, where it has one that fits."""
    if node.op_type == "Attention":
        return _attention(node)
    if node.op_type == "SkipLayerNormalization":
        return _skip_layer_norm(node)
    if node.op_type == "RMSNormalization":
        return _skip_rms_norm(node)
    if node.op_type == "Gelu":
        if not _float32(node):
            return False
        tanh = node.overload == "tanh"
        node.remove_attribute("approximate")
        node.domain, node.overload = ORT_DOMAIN, ""
        size = (getattr(node.inputs[0].type, "shape", None) or [None])[-1]
        found = _bias_add(node.inputs[0], size) if isinstance(size, int) else None
        node.op_type = "FastGelu" if tanh else "BiasGelu" if found else "Gelu"
        if found:  # a linear layer's bias: BiasGelu / FastGelu add it themselves
            node.set_inputs(list(found))
        return True
    activation = node.attr("activation")
    if node.op_type in ("FusedGemm", "FusedMatMul") and activation == "Gelu":
        return _linear_gelu(node)
    if node.attr("channels_last"):
        return False  # onnxruntime's FusedConv is channels-first
    if node.op_type not in _ORT_ACTIVATIONS or activation not in _ORT_ACTIVATIONS[node.op_type] or not _float32(node):
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


def _multi_head_attention_kernel(query, key, value, bias=None, key_padding_mask=None, attention_bias=None, *rest,
                                 num_heads: int, scale: float = 0.0, **_):  # fmt: skip
    if bias is not None or key_padding_mask is not None or any(r is not None for r in rest):
        raise NotImplementedError("MultiHeadAttention's reference kernel takes Q, K, V and attention_bias only")
    batch, seq, hidden = query.shape
    dim = hidden // num_heads

    def split(x):
        return x.reshape(x.shape[0], x.shape[1], num_heads, dim).transpose(0, 2, 1, 3).astype(np.float64)

    scores = split(query) @ split(key).transpose(0, 1, 3, 2) * (scale or 1 / np.sqrt(dim))
    if attention_bias is not None:
        scores = scores + attention_bias
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    return (probs @ split(value)).transpose(0, 2, 1, 3).reshape(batch, seq, hidden).astype(query.dtype)


def _attention_kernel(x, weights, bias=None, mask_index=None, past=None, attention_bias=None, *rest,
                      num_heads: int, scale: float = 0.0, **_):  # fmt: skip
    if mask_index is not None or past is not None or any(r is not None for r in rest):
        raise NotImplementedError("Attention's reference kernel takes input, weights, bias and attention_bias only")
    packed = x @ weights + (0 if bias is None else bias)
    q, k, v = np.split(packed, 3, axis=-1)
    return _multi_head_attention_kernel(q, k, v, None, None, attention_bias, num_heads=num_heads, scale=scale)


KERNELS = [(ORT_DOMAIN, "SkipLayerNormalization", _skip_layer_norm_kernel),
           (ORT_DOMAIN, "SkipSimplifiedLayerNormalization", _skip_rms_norm_kernel),
           (ORT_DOMAIN, "MultiHeadAttention", _multi_head_attention_kernel),
           (ORT_DOMAIN, "Attention", _attention_kernel)] + [
    (ORT_DOMAIN, op, _contrib_kernel(op)) for op in _ORT_ACTIVATIONS] + [
    (ORT_DOMAIN, "Gelu", _gelu_kernel(False)), (ORT_DOMAIN, "BiasGelu", _gelu_kernel(False)),
    (ORT_DOMAIN, "FastGelu", _gelu_kernel(True))]
"""Reference kernels of the contrib ops this pass writes, registered with the built-in passes."""
