"""convert-layout{to=NHWC} and cancel-transposes: CNNs become channels-last with one transpose
after the input, keep their outputs on every engine, and convert back with to=NCHW; the
transposes sink through element-wise ops (constants moved to match), Concat and Flatten."""

from __future__ import annotations

from collections import Counter

import pytest
import zoo

import irforge
from irforge.core_ir import clone_model, interpret, parse_model
from irforge.testing import assert_preserves_semantics

_LAYOUT = "shape-inference,convert-layout{to=NHWC},fixpoint(cancel-transposes,dce){max-iterations=8}"


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_a_cnn_goes_channels_last_with_one_transpose_and_back(name):
    proto = getattr(zoo, name)(size=32)
    feeds = zoo.feeds(proto)
    model = irforge.from_onnx(proto)
    want = interpret(model, feeds)
    irforge.optimize(model, "-O3," + _LAYOUT.removeprefix("shape-inference,"), target="xla")
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert ops["::Transpose"] == 1 and ops["::Conv"] == 0 and ops["::MaxPool"] == 0, ops
    assert all(n.overload.startswith("nhwc") for n in model.graph if n.domain == "irforge")
    (t,) = [n for n in model.graph if n.op_type == "Transpose"]
    assert t.inputs[0].is_graph_input()  # the one transpose is the input's
    for backend in ("reference", "xla", "onnxruntime", "tvm"):
        zoo.assert_close_to_scale(want, irforge.compile(model, backend)(feeds), f"{name} channels-last on {backend}")
    hlo = irforge.emit(model, "hlo", dims={"batch": 1}).data
    assert "convolution" in hlo
    back = irforge.optimize(clone_model(model), "convert-layout{to=NCHW},fixpoint(cancel-transposes,dce)")
    assert Counter(n.op_type for n in back.graph)["Transpose"] == 0
    zoo.assert_close_to_scale(want, irforge.compile(back, "onnxruntime")(feeds), f"{name} back to NCHW")


_SINK = """model {{
  opset "" = 17
  graph @g(%x: f32[1,2,3,4], %z: f32[1,2,3,4], %v: f32[1,4,2,3]) {{
    init %c = dense<f32[4,1,1]>[1.0, 2.0, 3.0, 4.0]
    %t = Transpose(%x) <perm = ints[0, 3, 1, 2]>
    %u = Transpose(%z) <perm = ints[0, 3, 1, 2]>
    {body}
    return %y
  }}
}}"""


@pytest.mark.parametrize(("body", "sunk"), [
    ("%y = Relu(%t)", True),
    ("%a = Add(%t, %u)\n    %y = Sigmoid(%a)", True),
    ("%y = Mul(%t, %c)", True),  # the per-channel constant is moved to channels-last
    ("%y = Sub(%c, %t)", True),
    ("%y = Concat(%t, %u) <axis = 1>", True),
    ("%y = ReduceMean(%t) <axes = ints[2, 3]>", True),
    ("%y = Add(%t, %v)", False),  # %v is not transposed: no rule moves it
    ("%s = Softmax(%t) <axis = 1>\n    %y = Relu(%s)", False),  # Softmax cares about its axis
])  # fmt: skip
def test_transposes_sink_through_layout_agnostic_ops(body, sunk):
    text = _SINK.format(body=body)
    model = parse_model(text)
    irforge.optimize(model, "fixpoint(cancel-transposes,dce)")
    last = model.graph.outputs[0].producer()
    assert (last.op_type == "Transpose") == sunk
    assert_preserves_semantics("fixpoint(cancel-transposes,dce)", text)


def test_pools_and_a_bias_free_conv_go_channels_last():
    text = """model {
  opset "" = 21
  graph @g(%x: f32[1,2,8,8]) {
    init %w = dense<f32[3,2,1,1]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    %c = Conv(%x, %w)
    %m = MaxPool(%c) <kernel_shape = ints[3, 3], strides = ints[2, 2], pads = ints[1, 1, 1, 1]>
    %a = AveragePool(%m) <kernel_shape = ints[2, 2]>
    %g = GlobalAveragePool(%a)
    %y = Flatten(%g)
    return %y
  }
}"""
    model = parse_model(text)
    irforge.optimize(model, _LAYOUT)
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert ops == Counter({"::Transpose": 1, "irforge::FusedConv": 1, "irforge::MaxPool": 1,
                           "irforge::AveragePool": 1, "::ReduceMean": 1, "::Flatten": 1}), ops  # fmt: skip
    assert_preserves_semantics(_LAYOUT, text)


def test_an_unknown_layout_is_an_error():
    model = parse_model('model {\n  opset "" = 21\n  graph @g(%x: f32[2]) {\n    %y = Relu(%x)\n    return %y\n  }\n}')
    with pytest.raises(irforge.passes.PassError, match="no layout 'NCWH'"):
        irforge.optimize(model, "convert-layout{to=NCWH}")
