"""convert-precision: a float32 model computed in float16 or bfloat16.  Products start the
low-precision regions and the other ops follow; casts sit only where the regions end; the
graph's interface, the sensitive ops and the blocked ops stay float32; constants are converted
once and clamped to the type's range.  Outputs agree with float32 within the documented
tolerances (``FLOAT16_TOLERANCE``, ``BFLOAT16_TOLERANCE``) on the reference interpreter,
onnxruntime (float16) and XLA, over the node suite, the light models and whole networks."""

from __future__ import annotations

import os
import warnings

import node_suite as ns
import numpy as np
import onnx
import pytest
import real_models as rm
import zoo
from conftest import COUNTS

import irforge
from irforge.backends.onnx import to_proto
from irforge.core_ir import interpret, parse_model, print_model, verify_model
from irforge.core_ir.clone import clone_model
from irforge.core_ir.dtypes import DataType, to_numpy
from irforge.passes import PassError, PassManager
from irforge.passes.convert_precision import ConvertPrecision
from irforge.plugins import build_registry
from irforge.testing import _onnxruntime_outputs, assert_rewrites
from irforge.testing.backend_conformance import sample_cases

FLOAT16_TOLERANCE = 5e-2
BFLOAT16_TOLERANCE = 2e-2
"""Largest error allowed on a whole network, relative to its output's largest magnitude.  Measured:
float16 3.8e-2 on a random-weight MobileNetV2 (2.2e-2 on onnxruntime, whose CPU kernels compute
float16 in float32), under 1e-3 on ResNet-50 and BERT; bfloat16 under 7.2e-3."""

REGISTRY = build_registry(discover=False)

_MLP = """model {
  opset "" = 21
  graph @g(%x: f32[2,3]) {
    init %w = dense<f32[3,2]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    init %b = dense<f32[2]>[1e9, -1e9]
    %t = MatMul(%x, %w)
    %u = Add(%t, %b)
    %r = Relu(%u)
    %y = Softmax(%r)
    %z = Sigmoid(%y)
    return %z, %r
  }
}"""


def test_a_product_starts_a_float16_region_and_casts_sit_at_its_edges():
    """MatMul converts, Add and Relu follow it, Softmax stays float32 (sensitive) and so does the
    Sigmoid after it; the input is cast once, the output %r keeps its name and float32 type, and
    the 1e9 bias is clamped to float16's largest finite value, not rounded to infinity."""
    assert_rewrites("convert-precision", _MLP, """model {
  opset "" = 21
  graph @g(%x: f32[2,3]) {
    init %w_float16_2 = dense<f16[3,2]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    init %b_float16_3 = dense<f16[2]>[65504.0, -65504.0]
    %cast_1: f16[2,3] = Cast(%x) <to = 10>
    %t: f16[2,2] = MatMul(%cast_1, %w_float16_2)
    %u: f16[2,2] = Add(%t, %b_float16_3)
    %r_float16_5: f16[2,2] = Relu(%u)
    %r: f32[2,2] = Cast(%r_float16_5) <to = 1>
    %y: f32[2,2] = Softmax(%r)
    %z: f32[2,2] = Sigmoid(%y)
    return %z, %r
  }
}""")


def test_without_keep_io_and_keep_sensitive_the_whole_graph_is_float16():
    model = parse_model(_MLP)
    irforge.optimize(model, "convert-precision{keep-io=false keep-sensitive=false}")
    assert {v.type.dtype for n in model.graph for v in n.outputs} == {DataType.FLOAT16}
    assert [v.type.dtype for v in (*model.graph.inputs, *model.graph.outputs)] == [DataType.FLOAT16] * 3
    assert "Cast" not in {n.op_type for n in model.graph}


def test_a_blocked_op_stays_float32_between_casts():
    model = parse_model(_MLP)
    irforge.optimize(model, "convert-precision{block=Relu}")
    ops = {n.op_type: n for n in model.graph}
    assert ops["Relu"].outputs[0].type.dtype == DataType.FLOAT
    assert ops["Add"].outputs[0].type.dtype == DataType.FLOAT16
    assert ops["Relu"].inputs[0].producer().op_type == "Cast"


def test_an_element_wise_op_alone_starts_nothing():
    text = """model {
  opset "" = 21
  graph @g(%x: f32[4]) {
    %y = Tanh(%x)
    return %y
  }
}"""
    model = parse_model(text)
    assert not PassManager.parse("convert-precision", REGISTRY).run(model)


_CONV = """model {{
  opset "" = {opset}
  graph @g(%x: f32[1,2,5,5]) {{
    init %w = dense<f32[3,2,1,1]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    %c = Conv(%x, %w)
    %y = Relu(%c)
    return %y
  }}
}}"""


def test_bfloat16_leaves_an_op_its_opset_cannot_compute_in_without_wrapping_it_in_casts():
    """ONNX's Conv has bfloat16 from opset 22: before, nothing converts (the Relu after it
    follows the Conv, so no cast pair appears); from 22 the Conv and the Relu convert."""
    old = parse_model(_CONV.format(opset=21))
    assert not PassManager.parse("convert-precision{to=bfloat16}", REGISTRY).run(old)
    new = parse_model(_CONV.format(opset=22))
    irforge.optimize(new, "convert-precision{to=bf16}")
    assert [n.op_type for n in new.graph] == ["Cast", "Conv", "Relu", "Cast"]
    assert new.graph.nodes[1].outputs[0].type.dtype == DataType.BFLOAT16


def test_a_constant_read_by_a_float32_op_keeps_its_exact_float32_copy():
    text = """model {
  opset "" = 21
  graph @g(%x: f32[2,3]) {
    init %w = dense<f32[3,2]>[0.1, -1.0, 2.0, 0.3, -0.5, 1.7]
    %t = MatMul(%x, %w)
    %s = ReduceSum(%w)
    return %t, %s
  }
}"""
    model = parse_model(text)
    irforge.optimize(model, "convert-precision")
    matmul, reduce_sum = (n for n in model.graph if n.op_type in ("MatMul", "ReduceSum"))
    assert matmul.inputs[1].type.dtype == DataType.FLOAT16
    assert reduce_sum.inputs[0].const_value.numpy().dtype == np.float32
    np.testing.assert_array_equal(reduce_sum.inputs[0].const_value.numpy(),
                                  np.array([[0.1, -1.0], [2.0, 0.3], [-0.5, 1.7]], np.float32))  # fmt: skip


def test_a_value_read_inside_a_subgraph_is_cast_back():
    text = """model {
  opset "" = 21
  graph @g(%x: f32[2,3], %c: bool[]) {
    init %w = dense<f32[3,2]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    %t = MatMul(%x, %w)
    %y = If(%c) <then_branch = graph @then() {
      %a = Relu(%t)
      return %a
    }, else_branch = graph @else() {
      %b = Neg(%t)
      return %b
    }>
    return %y
  }
}"""
    model = parse_model(text)
    irforge.optimize(model, "convert-precision")
    verify_model(model)
    (if_node,) = (n for n in model.graph if n.op_type == "If")
    for branch in if_node.attributes.values():
        (inner,) = branch.value
        assert inner.inputs[0].type.dtype == DataType.FLOAT
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) / 7, "c": np.array(True)}
    np.testing.assert_allclose(interpret(model, feeds)[0], interpret(parse_model(text), feeds)[0], rtol=1e-2)


def test_the_options_spell_and_parse_back():
    pm = PassManager.parse("convert-precision{to=bfloat16 block=Exp,Pow keep-io=false}", REGISTRY)
    assert str(pm) == "convert-precision{to=bfloat16 keep-io=false block=Exp,Pow}"
    assert str(PassManager.from_passes([ConvertPrecision(block=("Exp", "Pow"))])) == "convert-precision{block=Exp,Pow}"


def test_an_unknown_precision_is_an_error_naming_the_choices_before_anything_runs():
    model = parse_model(_MLP)
    with pytest.raises(PassError, match=r"at column .*use to=float16 or to=bfloat16"):
        irforge.optimize(model, "-O2,convert-precision{to=float8}")
    assert print_model(model) == print_model(parse_model(_MLP))  # -O2 did not run either
    with pytest.raises(PassError, match="use to=float16 or to=bfloat16"):
        ConvertPrecision(to="int8")


# -- whole networks ---------------------------------------------------------------------------

def _relative_error(want: list, got: list) -> float:
    scale = max(float(np.abs(w).max()) for w in want)
    return max(float(np.abs(np.asarray(g, np.float64) - w).max()) for w, g in zip(want, got, strict=True)) / scale


NETWORKS = {
    "mobilenet_v2": lambda: zoo.mobilenet_v2(size=64),
    "resnet50": lambda: zoo.resnet50(size=64),
    "bert": lambda: zoo.bert(layers=2, hidden=64, heads=4, ffn=128, seq=16),
}


@pytest.mark.parametrize("to", ["float16", "bfloat16"])
@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_whole_networks_after_o2_agree_within_the_documented_tolerance(network, to):
    proto = NETWORKS[network]()
    model = irforge.from_onnx(proto)
    feeds = zoo.feeds(proto)
    want = interpret(model, feeds)
    converted = irforge.optimize(clone_model(model), f"-O2,convert-precision{{to={to}}}")
    verify_model(converted)
    low = {DataType.FLOAT16: "float16", DataType.BFLOAT16: "bfloat16"}
    assert sum(low.get(getattr(v.type, "dtype", None)) == to for n in converted.graph for v in n.outputs) > 0
    tolerance = FLOAT16_TOLERANCE if to == "float16" else BFLOAT16_TOLERANCE
    engines = {"reference": lambda: interpret(converted, feeds),
               "xla": lambda: irforge.compile(converted, "xla")(**feeds)}  # fmt: skip
    if to == "float16":  # onnxruntime's CPU kernels have no bfloat16
        engines["onnxruntime"] = lambda: _onnxruntime_outputs(converted, feeds)
    for engine, run in engines.items():
        got = run()
        assert [np.asarray(g).dtype for g in got] == [w.dtype for w in want]
        error = _relative_error(want, got)
        assert error <= tolerance, f"{network} in {to} on {engine}: error {error:.2e} of the output scale"
        COUNTS[f"convert-precision: {to} networks within tolerance ({engine})"] += 1


def test_float16_halves_the_weights_of_a_network():
    proto = zoo.resnet50(size=64)
    model = irforge.optimize(irforge.from_onnx(proto), "-O2")
    before = sum(v.const_value.numpy().nbytes for v in model.graph.initializers.values())
    irforge.optimize(model, "convert-precision")
    after = sum(v.const_value.numpy().nbytes for v in model.graph.initializers.values())
    assert after < 0.51 * before


# -- the node suite and the light models ------------------------------------------------------

ROUNDING_SENSITIVE = {
    "test_logsoftmax_large_number_expanded_ver18": "exp of inputs near 10 overflows float16's 65504",
    "test_tan": "tan near pi/2 multiplies float16's input rounding",
    "test_det_2d": "the reference interpreter's Det (numpy.linalg) has no float16",
    "test_det_nd": "the reference interpreter's Det (numpy.linalg) has no float16",
    "test_dynamicquantizelinear_expanded": "its uint8 output rounds a float16 quotient",
    "test_dynamicquantizelinear_min_adjusted_expanded": "its uint8 output rounds a float16 quotient",
}
"""Node-suite cases whose float16 result cannot match float32 (or cannot run on the reference)."""


def _low_feeds(model, feeds: dict) -> dict:
    return {v.name: feeds[v.name].astype(to_numpy(v.type.dtype)) for v in model.graph.inputs if v.name in feeds}


@pytest.mark.parametrize("keep_io", ["true", "false"])
@pytest.mark.parametrize("name", sample_cases(6))
def test_node_suite_cases_stay_valid_and_close_in_float16(name, keep_io):
    """With keep-io=false every op the schema allows converts: the node suite then checks the
    schema reading, op by op.  The result must verify, pass onnx's checker, and match the suite's
    expected outputs within float16's tolerance (relative to each output's scale)."""
    case = ns.cases()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ns.load(name)
        if not PassManager.parse(f"convert-precision{{keep-io={keep_io}}}", REGISTRY).run(model):
            COUNTS["convert-precision: node-suite case with nothing to convert"] += 1
            return
        verify_model(model)
        onnx.checker.check_model(to_proto(model), full_check=True)
        if not ns.passes_reference(name) or name in ROUNDING_SENSITIVE:
            COUNTS["convert-precision: node-suite case converted, checked for validity only"] += 1
            return
        for inputs, expected in case.data_sets:
            got = interpret(model, _low_feeds(model, ns.feeds(case.model, inputs)))
            for want, out in zip(ns.expected(expected), got, strict=True):
                want, out = np.asarray(want), np.asarray(out)
                assert out.shape == want.shape
                if want.dtype.kind != "f":
                    np.testing.assert_array_equal(out, want)
                    continue
                finite = np.isfinite(want)
                np.testing.assert_array_equal(np.isfinite(out), finite)
                scale = max(float(np.abs(want[finite]).max(initial=0.0)), 1e-3)
                np.testing.assert_allclose(out[finite].astype(np.float64), want[finite], rtol=0, atol=1e-2 * scale)
    COUNTS["convert-precision: node-suite case converted and close in float16"] += 1


@pytest.mark.parametrize("path", [p for p in rm.MODELS if rm.weight_count(p) < 60_000_000], ids=os.path.basename)
def test_light_models_after_o2_run_on_onnxruntime_in_float16(path):
    original = rm.randomized(path)
    model = irforge.optimize(irforge.from_onnx(original), "freeze-initializers,-O2,convert-precision")
    want, got = rm.onnxruntime_outputs(original, model)
    error = _relative_error(want, got)
    assert error <= FLOAT16_TOLERANCE, f"{os.path.basename(path)}: error {error:.2e} of the output scale"
    COUNTS["convert-precision: light models within tolerance in float16 (onnxruntime)"] += 1
