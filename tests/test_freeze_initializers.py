"""freeze-initializers: IR-3 weights listed as inputs become constants; newer models keep their interface."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

import irforge
from irforge.backends.onnx import to_proto
from irforge.core_ir import interpret, verify_model
from irforge.passes.manager import PassManager
from irforge.plugins import build_registry

REGISTRY = build_registry(discover=False)
INPUTS = (("x", [2, 3]), ("s", [3]), ("one", [3]))
FEEDS = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}


def _scaled(ir_version: int):
    """y = x * (s + 1), with s an initializer that is also a graph input, as IR 3 required."""
    s = numpy_helper.from_array(np.full((3,), 2.0, np.float32), "s")
    one = numpy_helper.from_array(np.ones((3,), np.float32), "one")
    graph = oh.make_graph(
        [oh.make_node("Add", ["s", "one"], ["k"]), oh.make_node("Mul", ["x", "k"], ["y"])],
        "scaled",
        [oh.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in INPUTS],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[s, one],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 8)], ir_version=ir_version)


def _run(proto, pipeline: str):
    model = irforge.from_onnx(proto)
    PassManager.parse(pipeline, REGISTRY.runnable, pipelines=REGISTRY.pipelines).run(model)
    verify_model(model)
    return model


def test_ir3_initializer_inputs_are_frozen_and_then_fold():
    proto = _scaled(3)
    want = ort.InferenceSession(proto.SerializeToString()).run(None, FEEDS)[0]
    model = _run(proto, "freeze-initializers,constant-fold,dce")
    assert [v.name for v in model.graph.inputs] == ["x"]
    assert [n.op_type for n in model.graph] == ["Mul"]
    np.testing.assert_array_equal(interpret(model, FEEDS)[0], want)
    exported = to_proto(model)
    assert exported.ir_version >= 4
    assert [i.name for i in exported.graph.input] == ["x"]
    np.testing.assert_array_equal(ort.InferenceSession(exported.SerializeToString()).run(None, FEEDS)[0], want)


def test_overridable_defaults_of_newer_models_stay_inputs():
    model = _run(_scaled(8), "freeze-initializers,constant-fold,dce")
    assert [v.name for v in model.graph.inputs] == ["x", "s", "one"]
    assert [n.op_type for n in model.graph] == ["Add", "Mul"]
    fed = interpret(model, {**FEEDS, "s": np.zeros(3, np.float32)})[0]
    np.testing.assert_array_equal(fed, FEEDS["x"])


def test_legacy_only_false_freezes_newer_models_on_request():
    model = _run(_scaled(8), "freeze-initializers{legacy-only=false},constant-fold,dce")
    assert [v.name for v in model.graph.inputs] == ["x"]
    np.testing.assert_array_equal(interpret(model, FEEDS)[0], FEEDS["x"] * 3)


def test_O1_freezes_ir3_models():
    model = _run(_scaled(3), "O1")
    assert [v.name for v in model.graph.inputs] == ["x"]
    assert [n.op_type for n in model.graph] == ["Mul"]
