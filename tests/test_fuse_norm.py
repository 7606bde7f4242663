"""fuse-layer-norm: layer norm in primitives becomes LayerNormalization (a constant scale and
shift after it join its weights), and a residual Add before it irforge::SkipLayerNormalization,
which onnxruntime runs as its own kernel.  Near misses stay; a BERT encoder ends with 2L skip
layer norms and the embedding's plain one."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
import zoo

import irforge
from irforge.core_ir import interpret, parse_model
from irforge.testing import assert_close, assert_preserves_semantics

_LN = """model {{
  opset "" = {opset}
  graph @g(%x: f32[2,3,8]) {{
    init %axes = dense<i64[1]>[-1]
    init %two = dense<f32[]>[2.0]
    init %eps = dense<f32[]>[1e-05]
    init %gamma = dense<f32[8]>[0.5, 1.0, 1.5, 2.0, -1.0, 0.25, 0.75, 1.25]
    init %beta = dense<f32[8]>[0.1, -0.2, 0.3, 0.0, 0.5, -0.5, 1.0, 0.2]
    %mean = {mean1}
    %d = Sub(%x, %mean)
    %sq = {square}
    %var = {mean2}
    %ve = Add(%var, %eps)
    %std = Sqrt(%ve)
    %n = Div(%d, %std)
    %s = Mul(%n, %gamma)
    %y = Add(%s, %beta)
    return %y{extra}
  }}
}}"""


def _ln(opset=17, square="Pow(%d, %two)", axes1="-1", axes2="-1", extra="", attr_axes=True):
    def mean(v, axes):
        return f"ReduceMean({v}) <axes = ints[{axes}]>" if attr_axes else f"ReduceMean({v}, %axes)"

    return _LN.format(opset=opset, square=square, mean1=mean("%x", axes1), mean2=mean("%sq", axes2), extra=extra)


@pytest.mark.parametrize("case", [
    {}, {"square": "Mul(%d, %d)"}, {"opset": 18, "attr_axes": False}, {"axes1": "2", "axes2": "-1"},
])  # fmt: skip
def test_a_layer_norm_in_primitives_becomes_one_op_with_its_affine_weights(case):
    text = _ln(**case)
    model = parse_model(text)
    irforge.optimize(model, "shape-inference,fuse-layer-norm,dce")
    (node,) = model.graph
    assert node.op_type == "LayerNormalization" and node.attr("axis") == 2
    np.testing.assert_allclose(node.inputs[1].const_value.numpy(), [0.5, 1.0, 1.5, 2.0, -1.0, 0.25, 0.75, 1.25])
    assert_preserves_semantics("shape-inference,fuse-layer-norm,dce", text)


@pytest.mark.parametrize("case", [
    {"opset": 16},  # no LayerNormalization to fuse into
    {"axes1": "1, 2", "axes2": "-1"},  # the two means over different axes
    {"axes1": "1", "axes2": "1"},  # not the trailing axes
    {"extra": ", %d"},  # an intermediate is read elsewhere
])  # fmt: skip
def test_near_misses_stay(case):
    text = _ln(**case)
    model = parse_model(text)
    irforge.optimize(model, "shape-inference,fuse-layer-norm")
    assert "LayerNormalization" not in {n.op_type for n in model.graph}
    assert_preserves_semantics("shape-inference,fuse-layer-norm", text)


_SKIP = """model {{
  opset "" = 17
  graph @g(%x: f32[2,3,8], %r: f32[{rshape}]) {{
    init %gamma = dense<f32[8]>[0.5, 1.0, 1.5, 2.0, -1.0, 0.25, 0.75, 1.25]
    init %beta = dense<f32[8]>[0.1, -0.2, 0.3, 0.0, 0.5, -0.5, 1.0, 0.2]
    %s = Add(%x, %r)
    %y = LayerNormalization(%s, %gamma, %beta) <axis = {axis}, epsilon = 1e-05>{more}
    return %y{extra}
  }}
}}"""


def _skip(rshape="2,3,8", axis=-1, more="", extra=""):
    return _SKIP.format(rshape=rshape, axis=axis, more=more, extra=extra)


@pytest.mark.parametrize("pre_norm", [False, True])
def test_a_residual_add_joins_the_norm_and_onnxruntime_runs_its_kernel(pre_norm):
    """Pre-norm models read the sum again: it is the fused op's second output."""
    text = _skip(more="\n    %z = Add(%s, %y)", extra=", %z") if pre_norm else _skip()
    model = parse_model(text)
    irforge.optimize(model, "fuse-layer-norm,dce")
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert ops["irforge::SkipLayerNormalization"] == 1 and ops["::LayerNormalization"] == 0
    assert_preserves_semantics("fuse-layer-norm,dce", text)
    assert_preserves_semantics("fuse-layer-norm,dce,lower-fused{target=onnxruntime}", text)
    irforge.optimize(model, "lower-fused{target=onnxruntime}")
    assert "com.microsoft::SkipLayerNormalization" in {f"{n.domain}::{n.op_type}" for n in model.graph}


@pytest.mark.parametrize("case", [
    {"rshape": "8"},  # a broadcast residual (a bias): not a skip connection
    {"axis": 1, "rshape": "2,3,8"},  # not over the last axis
])  # fmt: skip
def test_skip_near_misses_stay(case):
    text = _skip(**case)
    model = parse_model(text)
    irforge.optimize(model, "fuse-layer-norm")
    assert "LayerNormalization" in {n.op_type for n in model.graph}
    assert_preserves_semantics("fuse-layer-norm", text)


class _HandWrittenNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(16) + 0.5)
        self.bias = torch.nn.Parameter(torch.rand(16))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-6) * self.weight + self.bias


@pytest.mark.parametrize("dynamo", [False, True])
def test_a_hand_written_torch_norm_fuses_through_both_exporters(dynamo, tmp_path):
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
    path = str(tmp_path / "norm.onnx")
    torch.onnx.export(_HandWrittenNorm(), (x,), path, opset_version=18, dynamo=dynamo)
    model = irforge.load(path)
    want = interpret(model, [x.numpy()])
    irforge.optimize(model, "-O2")
    assert [n.op_type for n in model.graph] == ["LayerNormalization"]
    for backend in ("onnxruntime", "xla", "tvm"):
        assert_close(want, irforge.compile(model, backend)(x.numpy()), f"fused norm on {backend}")


def test_a_bert_encoder_gets_2l_skip_norms_one_plain_norm_and_l_gelus():
    layers = 3
    proto = zoo.bert(layers=layers, hidden=64, heads=4, ffn=128, seq=16, vocab=1000)
    feeds = zoo.feeds(proto)
    model = irforge.from_onnx(proto)
    want = interpret(model, feeds)
    irforge.optimize(model, "-O2")
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert ops["irforge::SkipLayerNormalization"] == 2 * layers and ops["::LayerNormalization"] == 1
    assert ops["irforge::Gelu"] == layers
    for backend in ("onnxruntime", "xla", "tvm"):
        np.testing.assert_allclose(irforge.compile(model, backend)(feeds)[0], want[0], rtol=1e-4, atol=1e-4)
    irforge.optimize(model, "lower-fused{target=onnxruntime}")
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert ops["com.microsoft::SkipLayerNormalization"] == 2 * layers and ops["com.microsoft::BiasGelu"] == layers
    skip_biases = sum(len(n.inputs) == 5 for n in model.graph if n.op_type == "SkipLayerNormalization")
    assert skip_biases == 2 * layers  # each residual branch's linear bias joins the norm
    np.testing.assert_allclose(irforge.compile(model, "onnxruntime")(feeds)[0], want[0], rtol=1e-4, atol=1e-4)
