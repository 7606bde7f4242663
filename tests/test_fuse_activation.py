"""fuse-activation and lower-fused: a Conv, Gemm or MatMul and the activation after it become one
``irforge`` fused op that every backend runs (its decomposition is a model-local function), and
``lower-fused{target=onnxruntime}`` makes it onnxruntime's own FusedConv/FusedGemm.  Near misses
stay; the models keep their outputs on every engine; ResNet-50 and MobileNetV2 fuse completely."""

from __future__ import annotations

import firing_cases as fc
import numpy as np
import onnx
import pytest
import zoo

import irforge
from irforge.core_ir import interpret, parse_model
from irforge.testing import _onnxruntime_outputs, assert_close, assert_preserves_semantics, assert_rewrites

_BEFORE = """model {{
  opset "" = 21
  graph @g(%x: f32[2,3]) {{
    init %w = dense<f32[3,2]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    %t = MatMul(%x, %w)
    %y = Relu(%t){extra_node}
    return %y{extra_output}
  }}
}}"""


def test_matmul_relu_becomes_one_fused_call_with_its_decomposition():
    after = """model {
  opset "" = 21
  opset "irforge" = 1
  func irforge::@FusedMatMul(%A, %B) with {overload = "Relu", attributes = ["activation", "activation_params"], doc = "MatMul followed by Relu: the decomposition of irforge::FusedMatMul", opsets = {"": 21}} {
    %matmul_1 = MatMul(%A, %B)
    %relu_2 = Relu(%matmul_1)
    return %relu_2
  }
  graph @g(%x: f32[2,3]) {
    init %w = dense<f32[3,2]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    %y = irforge::FusedMatMul@Relu(%x, %w) <activation = "Relu", activation_params = floats[]> with {metadata = {"irforge.provenance": "Relu producing %y,MatMul producing %t"}}
    return %y
  }
}"""  # noqa: E501
    before = _BEFORE.format(extra_node="", extra_output="")
    assert_rewrites("fuse-activation", before, after)
    assert_preserves_semantics("fuse-activation", before)


_CONV = """model {{
  opset "" = {opset}
  graph @g(%x: {dtype}[1,2,5,5]{wdecl}) {{
    {winit}
    init %lo = dense<{dtype}[]>[0.0]
    %c = Conv(%x, %w){attrs}
    %mx = ReduceMax(%x) <keepdims = 0>
    %y = {act}
    return %y{extra}
  }}
}}"""


def _conv(act="Relu(%c)", attrs="", extra="", opset=21, dtype="f32", dynamic_w=False):
    w = ", ".join(str(v) for v in np.linspace(-1, 1, 36))
    return _CONV.format(
        opset=opset, dtype=dtype, attrs=attrs, extra=extra, act=act,
        wdecl=f", %w: {dtype}[?,2,3,3]" if dynamic_w else "",
        winit="" if dynamic_w else f"init %w = dense<{dtype}[2,2,3,3]>[{w}]",
    )  # fmt: skip


@pytest.mark.parametrize("case", [
    {"extra": ", %c"},  # the Conv's result is a graph output too
    {"act": "Relu(%c)\n    %z = Neg(%c)", "extra": ", %z"},  # the Conv's result has a second reader
    {"attrs": ' <auto_pad = "SAME_UPPER">'},  # padding depends on the input size
    {"act": "Clip(%c, %lo, %mx)"},  # a bound that is not a constant
    {"act": "Clip(%c, %lo)", "opset": 13},  # Clip's bounds need CastLike (opset 15) in the body
    {"dynamic_w": True},  # the kernel shape is not known
    {"act": "Elu(%c)"},  # not an activation the fused ops take
    {"act": "Mul(%c, %lo)"},  # a Mul that is not SiLU
])  # fmt: skip
def test_near_misses_stay(case):
    text = _conv(**case)
    model = parse_model(text)
    irforge.optimize(model, "fuse-activation")
    assert not model.functions and "Conv" in {n.op_type for n in model.graph}
    assert_preserves_semantics("fuse-activation", text)


def test_an_integer_matmul_is_left_alone():
    text = """model {
  opset "" = 21
  graph @g(%x: i32[2,3]) {
    init %w = dense<i32[3,2]>[1, -1, 2, 0, -3, 1]
    %t = MatMul(%x, %w)
    %y = Relu(%t)
    return %y
  }
}"""
    model = parse_model(text)
    irforge.optimize(model, "fuse-activation")
    assert [n.op_type for n in model.graph] == ["MatMul", "Relu"]


def test_float16_fuses_and_stays_a_call_for_onnxruntime():
    """onnxruntime's FusedConv is float32 only: a float16 fused op keeps its function."""
    text = _conv(dtype="f16", act="Clip(%c, %lo)")
    model = parse_model(text)
    irforge.optimize(model, "fuse-activation,lower-fused{target=onnxruntime}")
    (node,) = [n for n in model.graph if n.domain]
    assert (node.domain, node.op_type, node.attr("activation")) == ("irforge", "FusedConv", "Clip")
    assert_preserves_semantics("fuse-activation,lower-fused{target=onnxruntime}", text)


def _fused_case():
    model = fc.model("fuse-activation", "activations")
    feeds = fc.random_feeds(model)
    return model, feeds, interpret(model, feeds)


def test_every_activation_runs_on_every_backend():
    model, feeds, want = _fused_case()
    irforge.optimize(model, "shape-inference,fuse-activation")
    fused = {(n.op_type, n.attr("activation")) for n in model.graph if n.domain == "irforge"}
    assert fused == {("FusedConv", "Relu"), ("FusedConv", "Clip"), ("FusedConv", "HardSigmoid"),
                     ("FusedGemm", "LeakyRelu"), ("FusedMatMul", "Silu"), ("FusedMatMul", "Gelu")}  # fmt: skip
    for backend in ("reference", "onnxruntime", "xla", "tvm"):
        got = irforge.compile(model, backend)(**feeds)
        assert_close(want, got, f"fused activations on {backend}")
    hlo = irforge.emit(model, "stablehlo").data
    assert hlo.count("stablehlo.composite") == 6 and '"irforge.FusedConv"' in hlo


def test_onnxruntime_lowering_uses_the_contrib_kernels_where_they_exist():
    model, feeds, want = _fused_case()
    irforge.optimize(model, "shape-inference,fuse-activation,lower-fused{target=onnxruntime}")
    ops = sorted(f"{n.domain}::{n.op_type}:{n.attr('activation')}" for n in model.graph if n.domain)
    assert ops == ["com.microsoft::FastGelu:None", "com.microsoft::FusedConv:Clip",
                   "com.microsoft::FusedConv:HardSigmoid", "com.microsoft::FusedConv:Relu",
                   "com.microsoft::FusedGemm:LeakyRelu", "irforge::FusedMatMul:Silu"]  # fmt: skip
    # GELU after a MatMul: the MatMul, then onnxruntime's FastGelu (its FusedGemm has no GELU)
    assert {f.name for f in model.functions.values()} == {"FusedMatMul"}  # the lowered ones' are dropped
    assert_close(want, irforge.compile(model, "onnxruntime")(**feeds), "lowered for onnxruntime")
    assert_close(want, interpret(model, feeds), "lowered, on the reference kernels of the contrib ops")


def _count(model, op_type: str, domain: str = "") -> int:
    return sum(n.op_type == op_type and n.domain == domain for n in model.graph)


def _relu_after_conv(proto: onnx.ModelProto) -> int:
    made_by = {o: n.op_type for n in proto.graph.node for o in n.output}
    return sum(n.op_type == "Relu" and made_by.get(n.input[0]) == "Conv" for n in proto.graph.node)


def _conv_bn_relu(proto: onnx.ModelProto) -> int:
    made_by = {o: n for n in proto.graph.node for o in n.output}
    out = 0
    for n in proto.graph.node:
        bn = made_by.get(n.input[0]) if n.op_type in ("Relu", "Clip") else None
        if bn is not None and bn.op_type == "BatchNormalization" and made_by[bn.input[0]].op_type == "Conv":
            out += 1
    return out


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_cnns_fold_every_batchnorm_and_fuse_every_conv_activation(name):
    proto = getattr(zoo, name)(size=64)
    feeds = zoo.feeds(proto)
    want = _onnxruntime_outputs(irforge.from_onnx(proto), feeds)
    model = irforge.optimize(irforge.from_onnx(proto), "-O2")
    assert _count(model, "BatchNormalization") == 0
    proto2 = irforge.to_onnx(model)
    assert _relu_after_conv(proto2) == 0 and _count(model, "Conv") + _count(model, "Clip") + _count(model, "Relu") > 0
    assert _count(model, "FusedConv", "irforge") == _conv_bn_relu(proto)
    zoo.assert_close_to_scale(want, _onnxruntime_outputs(model, feeds), f"{name} -O2 (onnxruntime)")
    irforge.optimize(model, "lower-fused{target=onnxruntime}")
    assert _count(model, "FusedConv", "com.microsoft") == _conv_bn_relu(proto)
    assert _count(model, "FusedConv", "irforge") == 0
    got = _onnxruntime_outputs(model, feeds)
    zoo.assert_close_to_scale(want, got, f"{name} -O2 --target onnxruntime (onnxruntime)")
