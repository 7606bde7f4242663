"""fuse-conv-bn: per-channel affine steps after a Conv folded into its weights and bias (and an
inference BatchNormalization after a Gemm, a 2-D MatMul or a ConvTranspose into theirs, or before
a Conv that does not pad).

In inference a BatchNormalization is ``x * s + t`` per channel, with ``s = scale / sqrt(var + eps)``
and ``t = bias - mean * s``; a Conv with constant weights absorbs it exactly (``W * s`` per output
channel, bias ``(B - mean) * s + bias``), so every Conv+BN block of a CNN loses a node.  Caffe-era
models follow the BatchNormalization with a separate scale layer (``Mul`` and ``Add`` by per-channel
constants); those fold into the BatchNormalization, or into a Conv directly.  The new weights are
computed in float64 and stored in the Conv's dtype.  A weight that is a filled tensor
(``ConstantOfShape`` of a constant shape: weights over the folding limit, or placeholder weights)
stays one: it absorbs a scale that is the same for every channel into its fill value, and is left
alone otherwise, since fusing would materialise it.

``expand-batchnorm`` turns a BatchNormalization that follows none of these (DenseNet's
pre-activation ones, after a concatenation) into the ``Mul`` and ``Add`` it computes: element-wise
ops, which a fusion group (``fuse-elementwise``, a compiler's own) can join.  No level runs it: it
adds a node per BatchNormalization, and onnxruntime runs one as a single kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.dtypes import DataType
from ..core_ir.graph import Graph
from ..core_ir.pattern import Filled, Match, Pattern, filled_value
from ..core_ir.tensors import NumpyTensor
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult, run_patterns

_FLOATS = frozenset({DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16, DataType.BFLOAT16})


def per_channel(c: np.ndarray | None, rank: int | None, channels: int) -> np.ndarray | None:
    """``c`` as one number per channel (axis 1) when it broadcasts that way onto a rank-``rank``
    tensor without growing it; otherwise None."""
    if c is None or rank is None or rank < 2 or c.ndim > rank:
        return None
    dims = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(dims) if i != 1) or dims[1] not in (1, channels):
        return None
    flat = c.reshape(-1).astype(np.float64)
    return flat if flat.size == channels else np.full(channels, flat[0])


def _one_float_type(m: Match, *names: str) -> bool:
    dtypes = {m.dtype(n) for n in names}
    return len(dtypes) == 1 and dtypes.pop() in _FLOATS


def _inference_bn(m: Match, node_index: int) -> bool:
    """The BatchNormalization computes its one output from constant statistics."""
    bn = m.nodes[node_index]
    if bn.op_type != "BatchNormalization":
        return m.fail("internal: the matched node is not the BatchNormalization")
    mode = bn.attributes.get("training_mode")
    if mode is not None and (mode.ref is not None or mode.value != 0):
        return m.fail("the BatchNormalization is in training mode")
    eps = bn.attributes.get("epsilon")
    if eps is not None and eps.ref is not None:
        return m.fail("epsilon refers to a function attribute")
    if any(o is not None and o.has_uses() for o in bn.outputs[1:]):
        return m.fail("the running statistics outputs are read")
    stats = [m.constant(n) for n in ("scale", "bias", "mean", "var")]
    if any(s is None or s.ndim != 1 or s.size != stats[0].size for s in stats):
        return m.fail("the statistics are not constant vectors of one length")
    return True


def _inner_single_use(m: Match) -> bool:
    """The fused-away result (the inner node's, matched last) has no other reader."""
    v = m.nodes[-1].outputs[0]
    return v.num_uses() == 1 and not v.is_graph_output()


def _epsilon(m: Match, node_index: int) -> float:
    eps = m.nodes[node_index].attributes.get("epsilon")
    return 1e-5 if eps is None else float(eps.value)


@dataclass(frozen=True)
class _Weight:
    """A Conv's weight as fusion sees it: a materialised constant (``array``) or a filled tensor."""

    shape: tuple[int, ...]
    dtype: np.dtype
    array: np.ndarray | None = None
    filled: Filled | None = None

    @property
    def channels(self) -> int:
        return self.shape[0]

    def scaled(self, b, scale: np.ndarray) -> Value:
        """``W * scale`` per output channel; a filled weight stays filled (``scale`` is uniform)."""
        if self.array is not None:
            factor = scale.reshape(-1, *([1] * (len(self.shape) - 1)))
            if self.array.size and not any(self.array.strides[1:]):
                # one number per output channel, broadcast (a folded fill, or one fused before):
                # scale those numbers and broadcast again, rather than every element
                column = self.array[(slice(None),) + (0,) * (len(self.shape) - 1)].reshape(factor.shape)
                per_channel = (column.astype(np.float64) * factor).astype(self.dtype)
                return b.constant(np.broadcast_to(per_channel, self.shape))
            return b.constant((self.array.astype(np.float64) * factor).astype(self.dtype))
        fill = (self.filled.fill.astype(np.float64) * scale[0]).astype(self.dtype)
        return b.op.ConstantOfShape(self.filled.shape_value, value=NumpyTensor(fill, self.filled.dtype))


def _weight(m: Match) -> _Weight | None:
    w = m.constant("w")
    if w is not None:
        return _Weight(w.shape, w.dtype, array=w)
    filled = filled_value(m["w"])
    return None if filled is None else _Weight(filled.dims, filled.fill.dtype, filled=filled)


def _conv_weights(m: Match, scale: np.ndarray | None = None) -> bool:
    """The Conv's weight, bias and types allow folding ``scale`` (per output channel) in."""
    w = _weight(m)
    if w is None or len(w.shape) < 3:
        return m.fail("the weight is neither a constant nor a filled tensor (ConstantOfShape)")
    if "b" in m.values and (m.constant("b") is None or m.constant("b").shape != (w.channels,)):
        return m.fail("the bias is not a constant vector")
    names = ("x", "w", "b") if "b" in m.values else ("x", "w")
    if not _one_float_type(m, *names):
        return m.fail("the dtypes are not one float type")
    if not _inner_single_use(m):
        return m.fail("the Conv's result is read elsewhere")
    if w.array is None and scale is not None and not np.all(scale == scale[0]):
        return m.fail("the weight is a filled tensor and the scale varies by channel: fusing would materialise it")
    return True


def _conv(b, m: Match, scale: np.ndarray | None, shift: np.ndarray):
    """Conv with weights ``W * scale`` and bias ``B * scale + shift``, per output channel; no
    ``scale`` keeps the weight as it is (an Add moves only the bias)."""
    w = _weight(m)
    old_bias = m.constant("b").astype(np.float64) if "b" in m.values else np.zeros(w.channels)
    new_b = (old_bias if scale is None else old_bias * scale) + shift
    new_b = new_b.astype(w.dtype)
    if scale is None:
        new_w = m["w"]
    else:
        new_w = w.scaled(b, scale)
        new_w.type = m["w"].type
    conv = m.nodes[-1]
    out = b.op.Conv(m["x"], new_w, b.constant(new_b), **conv.attributes)
    out.type = m.outputs[0].type
    return out


def _bn_scale_shift(m: Match) -> tuple[np.ndarray, np.ndarray]:
    c = {n: m.constant(n).astype(np.float64) for n in ("scale", "bias", "mean", "var")}
    s = c["scale"] / np.sqrt(c["var"] + _epsilon(m, 0))
    return s, c["bias"] - c["mean"] * s


def _conv_bn_check(m: Match) -> bool:
    if not _inference_bn(m, 0) or not _conv_weights(m, _bn_scale_shift(m)[0]):
        return False
    if m.constant("scale").size != _weight(m).channels:
        return m.fail("the BatchNormalization's channels are not the Conv's")
    return _one_float_type(m, "x", "scale", "bias", "mean", "var")


def _conv_bn(b, m: Match):
    return _conv(b, m, *_bn_scale_shift(m))


def _k_per_output_channel(m: Match) -> np.ndarray | None:
    w = _weight(m)
    return None if w is None else per_channel(m.constant("k"), len(w.shape), w.channels)


def _conv_affine_check(m: Match) -> bool:
    k = _k_per_output_channel(m)
    if k is None:
        return m.fail("the operand is not one constant per output channel (or the weight is not constant)")
    scale = k if m.nodes[0].op_type == "Mul" else None  # an Add leaves the weight as it is
    return _conv_weights(m, scale) and _one_float_type(m, "x", "k")


def _conv_mul(b, m: Match):
    k = _k_per_output_channel(m)
    return _conv(b, m, k, np.zeros(k.size))


def _conv_add(b, m: Match):
    k = _k_per_output_channel(m)
    return _conv(b, m, None, k)


def _bn_affine_check(m: Match) -> bool:
    if not _inference_bn(m, -1) or not _one_float_type(m, "x", "scale", "bias", "k"):
        return False
    if not _inner_single_use(m):
        return m.fail("the BatchNormalization's result is read elsewhere")
    if per_channel(m.constant("k"), m.rank("x"), m.constant("scale").size) is None:
        return m.fail("the operand is not one constant per channel (or the input's rank is unknown)")
    return True


def _bn(b, m: Match, scale_by: np.ndarray, shift: np.ndarray):
    """BatchNormalization with ``scale * scale_by`` and ``bias * scale_by + shift``."""
    dtype = m.constant("scale").dtype
    scale = (m.constant("scale").astype(np.float64) * scale_by).astype(dtype)
    bias = (m.constant("bias").astype(np.float64) * scale_by + shift).astype(dtype)
    bn = m.nodes[-1]
    attrs = {k: a for k, a in bn.attributes.items() if k != "training_mode"}
    out = b.op.BatchNormalization(m["x"], b.constant(scale), b.constant(bias), m["mean"], m["var"], **attrs)
    out.type = m.outputs[0].type
    return out


def _k(m: Match) -> np.ndarray:
    return per_channel(m.constant("k"), m.rank("x"), m.constant("scale").size)


def _bn_mul(b, m: Match):
    return _bn(b, m, _k(m), np.zeros(m.constant("scale").size))


def _bn_add(b, m: Match):
    return _bn(b, m, np.ones(m.constant("scale").size), _k(m))


def _bn_conv_check(m: Match) -> bool:
    """BatchNormalization then Conv: legal when the Conv does not pad (its zeros would meet the
    normalized values, not ``x * s + t``) and its weights are a constant array."""
    if not _inference_bn(m, 1) or not _one_float_type(m, "x", "w", "scale", "bias", "mean", "var"):
        return False
    conv, w = m.nodes[0], m.constant("w")
    if w is None or w.ndim < 3:
        return m.fail("the Conv's weight is not a constant array")
    if "b" in m.values and (m.constant("b") is None or m.constant("b").shape != (w.shape[0],)):
        return m.fail("the bias is not a constant vector")
    if any(a.ref is not None for a in conv.attributes.values()) or any(conv.attr("pads", ())):
        return m.fail("the Conv pads its input")
    if conv.attr("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return m.fail("the Conv pads its input (auto_pad)")
    if w.shape[0] % conv.attr("group", 1) or m.constant("scale").size != w.shape[1] * conv.attr("group", 1):
        return m.fail("the BatchNormalization's channels are not the Conv's input channels")
    bn_out = m.nodes[1].outputs[0]
    if bn_out.num_uses() != 1 or bn_out.is_graph_output():
        return m.fail("the BatchNormalization's result is read elsewhere")
    return True


def _bn_conv(b, m: Match):
    """``Conv(x * s + t)``: the weights scaled per input channel, ``t`` through them into the bias."""
    conv, w = m.nodes[0], m.constant("w").astype(np.float64)
    c = {n: m.constant(n).astype(np.float64) for n in ("scale", "bias", "mean", "var")}
    s = c["scale"] / np.sqrt(c["var"] + _epsilon(m, 1))
    t = c["bias"] - c["mean"] * s
    groups, (out_channels, per_group) = conv.attr("group", 1), w.shape[:2]
    group_of = np.arange(out_channels) // (out_channels // groups)
    channel = group_of[:, None] * per_group + np.arange(per_group)[None, :]  # [O, C/g]: input channel read
    spatial = (1,) * (w.ndim - 2)
    new_w = w * s[channel].reshape(out_channels, per_group, *spatial)
    old_b = m.constant("b").astype(np.float64) if "b" in m.values else np.zeros(out_channels)
    new_b = old_b + (w * t[channel].reshape(out_channels, per_group, *spatial)).reshape(out_channels, -1).sum(1)
    dtype = m.constant("w").dtype
    out = b.op.Conv(m["x"], b.constant(new_w.astype(dtype)), b.constant(new_b.astype(dtype)), **conv.attributes)
    out.type = m.outputs[0].type
    return out


def _standalone_bn_check(m: Match) -> bool:
    if not _inference_bn(m, 0) or not _one_float_type(m, "x", "scale", "bias", "mean", "var"):
        return False
    if m.rank("x") is None or m.rank("x") < 2:
        return m.fail("the input's rank is unknown")
    return True


def _standalone_bn(b, m: Match):
    """``x * s + t`` with one ``s`` and ``t`` per channel, shaped to broadcast on axis 1."""
    scale, shift = _bn_scale_shift(m)
    dtype = m.constant("scale").dtype
    shape = (-1,) + (1,) * (m.rank("x") - 2)
    scaled = b.op.Mul(m["x"], b.constant(scale.reshape(shape).astype(dtype)))
    scaled.type = m.outputs[0].type
    out = b.op.Add(scaled, b.constant(shift.reshape(shape).astype(dtype)))
    out.type = m.outputs[0].type
    return out


def _linear_bn_check(m: Match) -> bool:
    """Gemm or ConvTranspose + inference BatchNormalization: constant weights (and bias), one float
    type, a result read only by the BatchNormalization, channels that agree."""
    if not _inference_bn(m, 0):
        return False
    if m.constant("w") is None or ("b" in m.values and m.constant("b") is None):
        return m.fail("the weight or bias is not constant")
    names = ("x", "w", "b") if "b" in m.values else ("x", "w")
    if not _one_float_type(m, *names, "scale", "bias", "mean", "var"):
        return m.fail("the dtypes are not one float type")
    if not _inner_single_use(m):
        return m.fail("the result is read elsewhere")
    inner = m.nodes[-1]
    channels = m.constant("scale").size
    if inner.op_type in ("Gemm", "MatMul"):
        if m.rank("x") != 2 or inner.attr("alpha", 1.0) == 0 or ("b" in m.values and inner.attr("beta", 1.0) == 0):
            return m.fail("the Gemm's input is not 2-D, or alpha or beta is 0")
        w = m.constant("w")
        features = w.shape[0] if inner.attr("transB", 0) else w.shape[-1]
        if w.ndim != 2 or features != channels:
            return m.fail("the Gemm's features are not the BatchNormalization's channels")
        if "b" in m.values and m.constant("b").ndim > 2:
            return m.fail("the Gemm's bias has more than two axes")
        return True
    group = int(inner.attr("group", 1))
    w = m.constant("w")
    if w.ndim < 3 or w.shape[1] * group != channels:
        return m.fail("the ConvTranspose's output channels are not the BatchNormalization's")
    if "b" in m.values and m.constant("b").shape != (channels,):
        return m.fail("the bias is not a vector per output channel")
    return True


def _gemm_bn(b, m: Match):
    """alpha·A·op(B)·s + beta·C·s + t: op(B)'s columns times s, C as C·s + t/beta (a MatMul
    becomes a Gemm whose C is t)."""
    scale, shift = _bn_scale_shift(m)
    gemm = m.nodes[-1]
    w = m.constant("w")
    factor = scale.reshape(-1, 1) if gemm.attr("transB", 0) else scale.reshape(1, -1)
    new_w = b.constant((w.astype(np.float64) * factor).astype(w.dtype))
    beta = float(gemm.attr("beta", 1.0)) if "b" in m.values else 1.0
    old_c = m.constant("b").astype(np.float64) if "b" in m.values else np.zeros(1)
    new_c = (old_c * scale + shift / beta).astype(w.dtype)
    attrs = {k: a for k, a in gemm.attributes.items() if k != "beta"}  # a MatMul has none
    out = b.op.Gemm(m["x"], new_w, b.constant(new_c), beta=beta, **attrs)
    out.type = m.outputs[0].type
    return out


def _conv_transpose_bn(b, m: Match):
    """Each output channel's filters (axis 1 within its group) times its scale, its bias shifted."""
    scale, shift = _bn_scale_shift(m)
    conv = m.nodes[-1]
    w = m.constant("w")
    group = int(conv.attr("group", 1))
    per_group = w.shape[1]
    rows = np.arange(w.shape[0]) // (w.shape[0] // group)  # each input channel's group
    factor = scale.reshape(group, per_group)[rows].reshape(w.shape[0], per_group, *([1] * (w.ndim - 2)))
    new_w = b.constant((w.astype(np.float64) * factor).astype(w.dtype))
    old_b = m.constant("b").astype(np.float64) if "b" in m.values else np.zeros(scale.size)
    new_b = b.constant((old_b * scale + shift).astype(w.dtype))
    out = b.op.ConvTranspose(m["x"], new_w, new_b, **conv.attributes)
    out.type = m.outputs[0].type
    return out


def _conv_source(p, with_bias: bool):
    inputs = (p.var("x"), p.var("w"), p.const("b")) if with_bias else (p.var("x"), p.var("w"))
    return p.op.Conv(*inputs)


def _patterns() -> list[Pattern]:
    patterns = []
    for with_bias in (False, True):
        suffix = "-bias" if with_bias else ""

        def conv(p, with_bias=with_bias):
            return _conv_source(p, with_bias)

        def bn(p, conv=conv):
            stats = [p.const(n) for n in ("scale", "bias", "mean", "var")]
            return p.op.BatchNormalization(conv(p), *stats)

        def mul(p, conv=conv):
            return p.op.Mul(conv(p), p.const("k"))

        def add(p, conv=conv):
            return p.op.Add(conv(p), p.const("k"))

        patterns += [
            Pattern(f"conv{suffix}-batchnorm", bn, _conv_bn, check=_conv_bn_check),
            Pattern(f"conv{suffix}-mul", mul, _conv_mul, check=_conv_affine_check),
            Pattern(f"conv{suffix}-add", add, _conv_add, check=_conv_affine_check),
        ]

    def bn_source(p):
        stats = [p.const(n) for n in ("scale", "bias", "mean", "var")]
        return p.op.BatchNormalization(p.var("x"), *stats)

    for op, fuse in (("Gemm", _gemm_bn), ("MatMul", _gemm_bn), ("ConvTranspose", _conv_transpose_bn)):
        for with_bias in (False, True) if op != "MatMul" else (False,):

            def linear_bn(p, op=op, with_bias=with_bias):
                inputs = (p.var("x"), p.const("w"), *([p.const("b")] if with_bias else []))
                stats = [p.const(n) for n in ("scale", "bias", "mean", "var")]
                return p.op.BatchNormalization(getattr(p.op, op)(*inputs), *stats)

            name = f"{op.lower()}{'-bias' if with_bias else ''}-batchnorm"
            patterns.append(Pattern(name, linear_bn, fuse, check=_linear_bn_check))
    for with_bias in (False, True):

        def bn_conv(p, with_bias=with_bias):
            return p.op.Conv(bn_source(p), p.const("w"), *([p.const("b")] if with_bias else []))

        name = f"batchnorm-conv{'-bias' if with_bias else ''}"
        patterns.append(Pattern(name, bn_conv, _bn_conv, check=_bn_conv_check))
    patterns += [
        Pattern("batchnorm-mul", lambda p: p.op.Mul(bn_source(p), p.const("k")), _bn_mul, check=_bn_affine_check),
        Pattern("batchnorm-add", lambda p: p.op.Add(bn_source(p), p.const("k")), _bn_add, check=_bn_affine_check),
    ]
    return patterns


PATTERNS: list[Pattern] = _patterns()
EXPAND = [Pattern("batchnorm-to-mul-add", lambda p: p.op.BatchNormalization(
    p.var("x"), *[p.const(n) for n in ("scale", "bias", "mean", "var")]), _standalone_bn, check=_standalone_bn_check)]


@dataclass(frozen=True)
class ExpandBatchNorm(Pass):
    name = "expand-batchnorm"
    summary = "an inference BatchNormalization that nothing folds into -> Mul and Add per channel"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_patterns(self, graph, ctx, EXPAND)


@dataclass(frozen=True)
class FuseConvBatchNorm(Pass):
    name = "fuse-conv-bn"
    summary = "BatchNormalization and per-channel constant Mul/Add folded into the Conv (or BatchNormalization) before"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_patterns(self, graph, ctx, PATTERNS)
