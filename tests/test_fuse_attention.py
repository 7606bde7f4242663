"""fuse-attention: scaled dot-product attention in primitives (any scale form, an optional
additive mask, K transposed or given as K^T) becomes irforge::Attention, and onnxruntime's
MultiHeadAttention (or, with Q, K and V packed, Attention) after lower-fused, the head split and
merge absorbed.  Both torch exporters and irforge's own torch frontend give graphs it matches;
near misses stay."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import onnx
import pytest
import torch
import zoo

import irforge
from irforge.core_ir import interpret, parse_model
from irforge.testing import assert_close, assert_preserves_semantics

_CORE = """model {{
  opset "" = 17
  graph @g(%q: f32[2,3,5,4], %k: f32[2,3,5,4], %v: f32[2,3,5,4], %mask: f32[{mask_shape}]) {{
    init %c = dense<f32[]>[2.0]
    %kt = Transpose(%k) <perm = ints[{perm}]>
    %s = MatMul(%q, %kt)
    %d = {scale}
    %a = {masked}
    %p = Softmax(%a) <axis = {axis}>
    %y = MatMul(%p, %v)
    return %y{extra}
  }}
}}"""


def _core(scale="Div(%s, %c)", masked="Add(%d, %mask)", mask_shape="2,1,1,5", perm="0, 1, 3, 2", axis=-1, extra=""):
    return _CORE.format(scale=scale, masked=masked, mask_shape=mask_shape, perm=perm, axis=axis, extra=extra)


@pytest.mark.parametrize("case", [
    {}, {"scale": "Mul(%s, %c)"}, {"scale": "Identity(%s)"}, {"masked": "Identity(%d)"}, {"mask_shape": "5"},
])  # fmt: skip
def test_scaled_dot_product_attention_becomes_one_op(case):
    text = _core(**case)
    model = parse_model(text)
    irforge.optimize(model, "canonicalize,fuse-attention,dce")  # canonicalize drops the Identity stand-ins
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert ops == Counter({"irforge::Attention": 1}), ops
    (node,) = model.graph
    assert node.attr("scale") == pytest.approx(2.0 if "Mul" in case.get("scale", "") else
                                               1.0 if "Identity" in case.get("scale", "") else 0.5)  # fmt: skip
    assert_preserves_semantics("canonicalize,fuse-attention,dce", text)


@pytest.mark.parametrize("case", [
    {"axis": 2},  # a softmax over another axis
    {"extra": ", %s"},  # the scores are read elsewhere
    {"masked": "Mul(%d, %mask)"},  # a multiplicative mask: not attention's
    {"scale": "Div(%s, %mask)", "mask_shape": "5"},  # a scale that is not a constant
])  # fmt: skip
def test_near_misses_stay(case):
    text = _core(**case)
    model = parse_model(text)
    irforge.optimize(model, "fuse-attention")
    assert "Softmax" in {n.op_type for n in model.graph}
    assert_preserves_semantics("fuse-attention", text)


class _SelfAttention(torch.nn.Module):
    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))

    def forward(self, x, mask):
        b, s, d = x.shape

        def split(t):
            return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        w = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5 + mask, -1)
        return self.o((w @ v).transpose(1, 2).reshape(b, s, d))


def _imported(module: torch.nn.Module, args: tuple, how: str):
    """``module`` through irforge's from_torch or a torch exporter (torchscript or dynamo)."""
    if how == "from_torch":
        return irforge.from_torch(module, args)
    buf = io.BytesIO()
    torch.onnx.export(module, args, buf, opset_version=17, dynamo=how == "dynamo")
    return irforge.from_onnx(onnx.load_from_string(buf.getvalue()))


@pytest.mark.parametrize("how", ["torchscript", "dynamo", "from_torch"])
def test_torch_attention_fuses_and_onnxruntime_runs_its_attention_kernel(how):
    torch.manual_seed(0)
    module = _SelfAttention().eval()
    x, mask = torch.randn(2, 6, 32), torch.zeros(2, 1, 1, 6)
    mask[1, ..., 4:] = -1e4
    model = _imported(module, (x, mask), how)
    feeds = [x.numpy(), mask.numpy()]
    want = interpret(model, feeds)
    irforge.optimize(model, "-O2")
    assert sum(n.op_type == "Attention" for n in model.graph) == 1 and "Softmax" not in {n.op_type for n in model.graph}
    for backend in ("onnxruntime", "xla", "tvm"):
        assert_close(want, irforge.compile(model, backend)(*feeds), f"fused attention on {backend}")
    irforge.optimize(model, "-O0", target="onnxruntime")
    assert [n.op_type for n in model.graph if n.domain] == ["Attention"]  # Q, K, V packed by -O2
    for backend in ("reference", "onnxruntime"):
        assert_close(want, irforge.compile(model, backend)(*feeds), f"packed Attention on {backend}")


def test_a_bert_encoder_gets_l_attentions_and_runs_on_onnxruntime_kernels_only():
    layers = 3
    proto = zoo.bert(layers=layers, hidden=64, heads=4, ffn=128, seq=16, vocab=1000)
    feeds = zoo.feeds(proto)
    model = irforge.from_onnx(proto)
    want = interpret(model, feeds)
    irforge.optimize(model, "-O2")
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert ops["irforge::Attention"] == layers and ops["irforge::SkipLayerNormalization"] == 2 * layers
    assert ops["::LayerNormalization"] == 1 and ops["irforge::Gelu"] == layers and ops["::Softmax"] == 0
    irforge.optimize(model, "-O0", target="onnxruntime")
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert ops["com.microsoft::Attention"] == layers and not model.functions
    assert ops["::MatMul"] == 3 * layers  # the output projection and the two FFN layers: Q, K, V went into Attention
    for backend in ("reference", "onnxruntime"):
        np.testing.assert_allclose(irforge.compile(model, backend)(feeds)[0], want[0], rtol=1e-4, atol=1e-4)


_BOOLEAN = """model {{
  opset "" = 17
  graph @g(%q: f32[2,3,5,4], %k: f32[2,3,5,4], %v: f32[2,3,5,4], %keep: bool[2,1,1,5]) {{
    init %c = dense<f32[]>[2.0]
    init %fill = dense<f32[]>[{fill}]
    %kt = Transpose(%k) <perm = ints[0, 1, 3, 2]>
    %s = MatMul(%q, %kt)
    %d = Div(%s, %c)
    %a = {where}
    %p = Softmax(%a) <axis = -1>
    %y = MatMul(%p, %v)
    return %y
  }}
}}"""


@pytest.mark.parametrize(("where", "fill"), [
    ("Where(%keep, %d, %fill)", "-inf"),  # where(keep, scores, -inf)
    ("Where(%keep, %d, %fill)", "-3.4028234663852886e+38"),  # GPT-2: torch.finfo(float32).min
    ("Where(%drop, %fill, %d)\n    %drop = Not(%keep)", "-inf"),  # masked_fill(~keep, -inf)
])  # fmt: skip
def test_a_boolean_mask_becomes_the_additive_mask_it_equals(where, fill):
    text = _BOOLEAN.format(where=where, fill=fill)
    if "%drop" in text:  # Not first
        text = text.replace("    %a = Where(%drop, %fill, %d)\n    %drop = Not(%keep)",
                            "    %drop: bool[2,1,1,5] = Not(%keep)\n    %a = Where(%drop, %fill, %d)")  # fmt: skip
    model = parse_model(text)
    irforge.optimize(model, "fuse-attention,dce")
    ops = [n.op_type for n in model.graph]
    assert "Softmax" not in ops and ops.count("Attention") == 1 and ops.count("Where") == 1
    feeds = {"q": np.random.default_rng(0).standard_normal((2, 3, 5, 4)).astype(np.float32),
             "k": np.random.default_rng(1).standard_normal((2, 3, 5, 4)).astype(np.float32),
             "v": np.random.default_rng(2).standard_normal((2, 3, 5, 4)).astype(np.float32),
             "keep": np.array([True, True, True, False, False] * 2).reshape(2, 1, 1, 5)}  # fmt: skip
    assert_preserves_semantics("fuse-attention,dce", text, feeds)


def test_a_boolean_mask_with_a_finite_fill_stays():
    """Where(keep, scores, -1e4) differs from scores - 1e4 on a fully masked row."""
    model = parse_model(_BOOLEAN.format(where="Where(%keep, %d, %fill)", fill="-10000.0"))
    irforge.optimize(model, "fuse-attention")
    assert "Softmax" in {n.op_type for n in model.graph}


class _CausalAttention(_SelfAttention):
    """GPT-2's masking: ``torch.where(causal, scores, finfo.min)`` before the softmax."""

    def forward(self, x, mask):
        b, s, d = x.shape

        def split(t):
            return t.view(b, s, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        causal = torch.ones(s, s, dtype=torch.bool).tril().view(1, 1, s, s)
        scores = torch.where(causal, q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, torch.finfo(x.dtype).min)
        return self.o((torch.softmax(scores + mask, -1) @ v).transpose(1, 2).reshape(b, s, d))


@pytest.mark.parametrize("how", ["torchscript", "dynamo"])
def test_causal_masking_by_where_fuses_from_both_exporters(how):
    """(irforge's from_torch writes these products as bmm between views, and the Where with its
    4-D condition keeps cancel-reshapes from removing the views: that graph does not fuse yet.)"""
    torch.manual_seed(0)
    module = _CausalAttention().eval()
    x, mask = torch.randn(2, 6, 32), torch.zeros(2, 1, 1, 6)
    model = _imported(module, (x, mask), how)
    feeds = [x.numpy(), mask.numpy()]
    want = interpret(model, feeds)
    irforge.optimize(model, "-O2")
    ops = [n.op_type for n in model.graph]
    assert ops.count("Attention") == 1 and "Softmax" not in ops, ops
    for backend in ("reference", "onnxruntime", "xla"):
        assert_close(want, irforge.compile(model, backend)(*feeds), f"causal attention on {backend}")
