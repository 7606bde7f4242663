"""The onnxruntime lowering of ``irforge::Attention``: ``MultiHeadAttention``, ``Attention`` (Q, K
and V from one packed projection) and ``GroupQueryAttention`` (causal attention, K and V with
fewer heads repeated as ``transformers``' ``repeat_kv`` does, rotary embeddings of Q and K taken
in), each absorbing the head split before and the merge after the fused op.  Every kernel written
here has a reference kernel, so the verifier knows it and the interpreter runs it.
"""

from __future__ import annotations

import numpy as np

from ..core_ir.builder import Builder
from ..core_ir.dtypes import DataType
from ..core_ir.node import Node
from ..core_ir.pattern import constant_value
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from .fused_ops import DOMAIN

ORT_DOMAIN = "com.microsoft"
_ABSORBING = 1e30
"""A causal mask's masked-out scores: at or below ``-1e30`` (or ``-inf``) they weigh 0 after the
Softmax, as in the kernel's own causal masking."""


def rotary_cache(table: np.ndarray | None, seq, dim: int) -> np.ndarray | None:
    """The ``[seq, dim / 2]`` cache onnxruntime's RotaryEmbedding takes, from a constant cos or
    sin table broadcast over batch and heads (``[1, 1, seq, dim]``) whose halves are equal."""
    if table is None or table.ndim < 2 or table.shape[-2:] != (seq, dim) or any(d != 1 for d in table.shape[:-2]):
        return None
    table = table.reshape(seq, dim)
    half = table[:, : dim // 2]
    return half if np.array_equal(half, table[:, dim // 2 :]) else None


def float32(node: Node) -> bool:
    """The kernels are float32 only: every typed value is float32, and one at least is typed."""
    dtypes = {getattr(v.type, "dtype", None) for v in (*node.inputs, *node.outputs) if v is not None} - {None}
    return dtypes == {DataType.FLOAT}


def bias_add(v: Value, size: int) -> tuple[Value, Value] | None:
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
        found = bias_add(packed, 3 * hidden)
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


def _three_d(b: Builder, x: Value, shape: tuple) -> Value:
    """``x`` as the ``[batch, seq, hidden]`` a kernel takes (a linear layer's 2-D output restored)."""
    if len(x.type.shape) == 3:
        return x
    return b.op.Reshape(x, b.constant(np.array(shape, np.int64)))


def _multi_head(node: Node) -> bool:
    """onnxruntime's MultiHeadAttention over the un-split Q, K, V: the head split before and the
    merge after the fused op are absorbed; a mask becomes its ``attention_bias``, broadcast to
    ``[batch, 1, seq, kv seq]`` (the kernel broadcasts the first two dims only)."""
    if not float32(node):
        return False
    split = [_heads(v) for v in node.inputs[:3]]
    if any(s is None for s in split) or len({s[1] for s in split}) != 1:
        return False
    (_, heads, (_, seq, hidden)), (_, _, (_, kv_seq, _)) = split[0], split[1]
    merge = _merged(node.outputs[0], hidden)
    if merge is None or split[1][2] != split[2][2] or split[1][2][2] != hidden:
        return False
    b = Builder(node.graph, before=merge)

    packed = _packed_projection([x for x, _, _ in split], hidden)
    inputs = list(packed) if packed else [_three_d(b, x, shape) for x, _, shape in split]
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
    mha.outputs[0].type = TensorType(node.outputs[0].type.dtype, split[0][2])
    _replace_merge(node, merge, mha, b)
    return True


def _replace_merge(node: Node, merge: Node, kernel: Node, b: Builder) -> None:
    """The kernel's ``[batch, seq, hidden]`` output takes the place of the merged heads of
    ``node``; the fused op and the merge go (the head splits before may have other readers:
    dce's job).  A guarded op's NaN rows become 0 on the kernel's output: the same result
    wherever V is finite (a NaN in V reaches the output through the primitives, and is set to 0
    here)."""
    kernel.metadata = node.metadata
    attended = kernel.outputs[0]
    if node.overload.endswith("-guarded"):  # a fully masked row is NaN in the kernel: 0, as the op says
        attended = b.op.Where(b.op.IsNaN(attended), b.constant(np.zeros((), np.float32)), attended)
        attended.type = kernel.outputs[0].type
    out = merge.outputs[0]
    result = attended if len(out.type.shape) == 3 else b.op.Reshape(attended, merge.inputs[1])
    result.type = out.type
    keep = out.name
    out.replace_all_uses_with(result)
    out.name, result.name = f"{keep}__merged", keep
    transpose = node.outputs[0].users()[0]
    for dead in (merge, transpose, node):
        node.graph.remove(dead)


def _repeated(v: Value) -> tuple[Value, int] | None:
    """``(kv, repeat)`` where ``v`` repeats each head of ``kv`` ``repeat`` times, as
    ``transformers``' ``repeat_kv`` writes it: ``Reshape(Expand(Unsqueeze(kv, [2]), [b, heads,
    repeat, s, d]), [b, heads * repeat, s, d])``, every shape static."""
    r = v.producer()
    e = r.inputs[0].producer() if r is not None and r.op_type == "Reshape" and not r.domain else None
    u = e.inputs[0].producer() if e is not None and e.op_type == "Expand" and not e.domain else None
    if u is None or u.op_type != "Unsqueeze" or u.domain:
        return None
    axes = constant_value(u.inputs[1]) if len(u.inputs) > 1 else np.asarray(u.attr("axes", ()))
    if axes is None or [int(a) for a in np.reshape(axes, -1)] != [2]:
        return None
    kv = u.inputs[0]
    dims, expanded, out = (tuple(getattr(x.type, "shape", None) or ()) for x in (kv, e.outputs[0], v))
    if len(dims) != 4 or len(expanded) != 5 or not all(isinstance(d, int) for d in (*dims, *expanded, *out)):
        return None
    repeat = expanded[2]
    if expanded != (dims[0], dims[1], repeat, dims[2], dims[3]) or out != (dims[0], dims[1] * repeat, *dims[2:]):
        return None
    return kv, repeat


def _rotated(v: Value) -> tuple[Value, Node | None]:
    """``(x, rotary)`` where ``v`` is ``irforge::RotaryEmbedding(x, cos, sin)`` read only here."""
    p = v.producer()
    if p is not None and p.domain == DOMAIN and p.op_type == "RotaryEmbedding" and v.num_uses() == 1:
        return p.inputs[0], p
    return v, None


def _causal(mask: Value, seq: int) -> bool:
    """The mask is a constant causal one: 0 on and below the diagonal, ``-inf`` (or at most
    ``-1e30``) above it, the same for every batch and head."""
    m = constant_value(mask)
    if m is None or m.ndim < 2 or m.shape[-2:] != (seq, seq) or any(d != 1 for d in m.shape[:-2]):
        return False
    m = m.reshape(seq, seq)
    below = np.tril(np.ones((seq, seq), bool))
    return bool(np.all(m[below] == 0) and np.all(m[~below] <= -_ABSORBING))


def _same_tables(a: Node, b: Node) -> bool:
    tables = [[constant_value(t) for t in n.inputs[1:3]] for n in (a, b)]
    return all(x is not None and y is not None and np.array_equal(x, y) for x, y in zip(*tables, strict=True))


def _grouped_query(node: Node) -> bool:
    """onnxruntime's GroupQueryAttention for causal attention (the mask a constant causal one):
    K and V with the heads ``repeat_kv`` repeated taken before the repeat, the rotary embeddings
    of Q and K inside the kernel (``do_rotary``, for a head dim that is a multiple of 16) or as
    its ``RotaryEmbedding`` on the un-split Q and K (any head dim)."""
    if not float32(node) or len(node.inputs) != 4:
        return False
    q, k, v, mask = node.inputs
    k_rep, v_rep = _repeated(k), _repeated(v)
    if (k_rep is None) != (v_rep is None) or (k_rep and k_rep[1] != v_rep[1]):
        return False
    if k_rep:
        k, v = k_rep[0], v_rep[0]
    (q, q_rope), (k, k_rope) = _rotated(q), _rotated(k)
    if (q_rope is None) != (k_rope is None) or (q_rope and not _same_tables(q_rope, k_rope)):
        return False
    split = [_heads(x) for x in (q, k, v)]
    if any(s is None for s in split):
        return False
    (xq, heads, (batch, seq, hidden)), (xk, kv_heads, kv_shape), (xv, v_heads, v_shape) = split
    if kv_shape != v_shape or v_heads != kv_heads or heads % kv_heads or kv_shape[1] != seq:
        return False
    if not isinstance(batch, int) or not isinstance(seq, int) or not _causal(mask, seq):
        return False
    merge = _merged(node.outputs[0], hidden)
    dim = hidden // heads
    caches = [rotary_cache(constant_value(t), seq, dim) for t in q_rope.inputs[1:3]] if q_rope else []
    if merge is None or any(c is None for c in caches):
        return False
    graph = node.graph
    b = Builder(graph, before=merge)
    xq, xk, xv = (_three_d(b, x, shape) for x, shape in ((xq, (batch, seq, hidden)), (xk, kv_shape), (xv, v_shape)))
    inside = bool(caches) and dim % 16 == 0  # the kernel's own rotary needs a head dim of a multiple of 16
    cache_values = [b.constant(c.astype(np.float32)) for c in caches]
    if caches and not inside:
        positions = b.constant(np.tile(np.arange(seq, dtype=np.int64), (batch, 1)))
        rotated = []
        for x, n in ((xq, heads), (xk, kv_heads)):
            rope = b.add_node("RotaryEmbedding", [x, positions, *cache_values], {"interleaved": 0, "num_heads": n},
                              domain=ORT_DOMAIN, num_outputs=1)  # fmt: skip
            rope.outputs[0].type = x.type
            rotated.append(rope.outputs[0])
        xq, xk = rotated
    inputs = [xq, xk, xv, None, None, b.constant(np.full(batch, seq - 1, np.int32)),
              b.constant(np.asarray(seq, np.int32)), *(cache_values if inside else [])]  # fmt: skip
    attrs = {"num_heads": heads, "kv_num_heads": kv_heads, "scale": float(node.attr("scale", 1.0)),
             "do_rotary": int(inside)}  # fmt: skip
    gqa = b.add_node("GroupQueryAttention", inputs, attrs, domain=ORT_DOMAIN, num_outputs=3, name=node.name)
    gqa.outputs[0].type = TensorType(node.outputs[0].type.dtype, (batch, seq, hidden))
    heads_in = list(node.inputs[:3])
    _replace_merge(node, merge, gqa, b)
    for v in heads_in:  # the repeats and rotations the kernel took in (dce keeps contrib ops it cannot see into)
        _drop_dead(v)
    return True


def _drop_dead(v: Value) -> None:
    """Remove the producer of ``v`` and, in turn, of its operands, while nothing reads them."""
    node = v.producer()
    if node is None or any(o is not None and (o.num_uses() or o.is_graph_output()) for o in node.outputs):
        return
    operands = [x for x in node.inputs if x is not None]
    node.graph.remove(node)
    for x in operands:
        _drop_dead(x)


def lower_attention(node: Node) -> bool:
    """``irforge::Attention`` as the onnxruntime kernel that computes it, where one does."""
    return _multi_head(node) or _grouped_query(node)


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


def rotate(x, cos, sin):
    """Rotary embedding of ``x`` (``[..., dim]``) by half-dim ``cos``/``sin`` that broadcast onto it."""
    first, second = np.split(x, 2, axis=-1)
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def _group_query_attention_kernel(query, key, value, past_key=None, past_value=None, seqlens_k=None,
                                  total_sequence_length=None, cos_cache=None, sin_cache=None, *rest, num_heads: int,
                                  kv_num_heads: int, scale: float = 0.0, do_rotary: int = 0,
                                  rotary_interleaved: int = 0, local_window_size: int = -1, softcap: float = 0.0,
                                  **_):  # fmt: skip
    batch, seq, hidden = query.shape
    if past_key is not None or past_value is not None or any(r is not None for r in rest) or rotary_interleaved \
            or local_window_size != -1 or softcap:  # fmt: skip
        raise NotImplementedError("GroupQueryAttention's reference kernel takes a prompt without past or padding")
    if int(np.asarray(total_sequence_length)) != seq or np.any(np.asarray(seqlens_k) != seq - 1):
        raise NotImplementedError("GroupQueryAttention's reference kernel takes a prompt without past or padding")
    dim = hidden // num_heads

    def split(x, heads):
        return x.reshape(batch, seq, heads, dim).transpose(0, 2, 1, 3).astype(np.float64)

    q, k, v = split(query, num_heads), split(key, kv_num_heads), split(value, kv_num_heads)
    if do_rotary:
        cos, sin = (np.asarray(c, np.float64)[:seq] for c in (cos_cache, sin_cache))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    present = k.astype(query.dtype), v.astype(query.dtype)
    k, v = (np.repeat(x, num_heads // kv_num_heads, axis=1) for x in (k, v))
    scores = q @ k.transpose(0, 1, 3, 2) * (scale or 1 / np.sqrt(dim))
    scores = scores + np.triu(np.full((seq, seq), -np.inf), 1)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    out = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden).astype(query.dtype)
    return (out, *present)


ATTENTION_KERNELS = [(ORT_DOMAIN, "MultiHeadAttention", _multi_head_attention_kernel),
                     (ORT_DOMAIN, "Attention", _attention_kernel),
                     (ORT_DOMAIN, "GroupQueryAttention", _group_query_attention_kernel)]  # fmt: skip
"""Reference kernels of the attention kernels this module writes."""
