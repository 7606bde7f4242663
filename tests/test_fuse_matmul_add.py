"""fuse-matmul-add, and CSE comparing small constants by value: same numbers, fewer nodes."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

import irforge
from irforge.backends.onnx import to_proto
from irforge.core_ir import interpret, verify_model
from irforge.passes.manager import PassManager
from irforge.plugins import build_registry

REGISTRY = build_registry(discover=False)
RNG = np.random.default_rng(0)


def _linear(x_shape, *, bias_first=False, extra_matmul_reader=False, weight_input=False, bias_shape=(5,)):
    """x @ W + b, as exporters write nn.Linear; the switches make variants the fusion must refuse."""
    k = x_shape[-1] if isinstance(x_shape[-1], int) else 4
    w = numpy_helper.from_array(RNG.standard_normal((k, 5)).astype(np.float32), "w")
    b = numpy_helper.from_array(RNG.standard_normal(bias_shape).astype(np.float32), "b")
    nodes = [
        oh.make_node("MatMul", ["x", "w"], ["p"]),
        oh.make_node("Add", ["b", "p"] if bias_first else ["p", "b"], ["y"]),
    ]
    outputs = [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_matmul_reader:
        nodes.append(oh.make_node("Relu", ["p"], ["r"]))
        outputs.append(oh.make_tensor_value_info("r", TensorProto.FLOAT, None))
    inputs = [oh.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    if weight_input:
        inputs.append(oh.make_tensor_value_info("w", TensorProto.FLOAT, [k, 5]))
    graph = oh.make_graph(nodes, "linear", inputs, outputs, initializer=[b] if weight_input else [w, b])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]), w


def _optimize(proto, pipeline):
    """Run the pipeline; check interpreter and onnxruntime give the original's numbers."""
    shape = [d if isinstance(d, int) else 3 for d in (d.dim_value or d.dim_param for d in
             proto.graph.input[0].type.tensor_type.shape.dim)]  # fmt: skip
    feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
    if len(proto.graph.input) > 1:
        feeds["w"] = RNG.standard_normal((shape[-1], 5)).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString()).run(None, feeds)
    model = irforge.from_onnx(proto)
    PassManager.parse(pipeline, REGISTRY.runnable, pipelines=REGISTRY.pipelines).run(model)
    verify_model(model)
    for got, ref in zip(interpret(model, feeds), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    exported = to_proto(model).SerializeToString()
    for got, ref in zip(ort.InferenceSession(exported).run(None, feeds), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    return [n.op_type for n in model.graph]


def test_a_rank_2_linear_layer_is_one_gemm():
    assert _optimize(_linear((3, 4))[0], "shape-inference,fuse-matmul-add") == ["Gemm"]


def test_a_bias_written_first_is_fused_too():
    assert _optimize(_linear((3, 4), bias_first=True)[0], "shape-inference,fuse-matmul-add") == ["Gemm"]


def test_a_bias_of_shape_1_n_is_flattened():
    assert "Gemm" in _optimize(_linear((3, 4), bias_shape=(1, 5))[0], "shape-inference,fuse-matmul-add")


def test_a_batched_input_is_flattened_and_restored():
    ops = _optimize(_linear((2, 3, 4))[0], "shape-inference,fuse-matmul-add")
    assert ops == ["Reshape", "Gemm", "Reshape"]


@pytest.mark.parametrize(
    ("variant", "why"),
    [
        ({"x_shape": ("batch", 3, 4)}, "a symbolic dim: the restored shape cannot be written out"),
        ({"x_shape": (3, 4), "extra_matmul_reader": True}, "the product is read elsewhere"),
        ({"x_shape": (3, 4), "weight_input": True}, "the weight is an input, not a constant"),
        ({"x_shape": (3, 4), "bias_shape": (3, 5)}, "the bias broadcasts over rows"),
    ],
)
def test_what_the_fusion_refuses(variant, why):
    proto, _ = _linear(**variant)
    assert "Gemm" not in _optimize(proto, "shape-inference,fuse-matmul-add"), why


def test_projections_sharing_an_input_share_one_flattening_after_o1():
    """Q, K and V read the same activations: their flattening Reshapes merge, because CSE
    compares the (separately written) shape constants by value."""
    k = 4
    weights = [numpy_helper.from_array(RNG.standard_normal((k, 5)).astype(np.float32), f"w{i}") for i in range(3)]
    biases = [numpy_helper.from_array(RNG.standard_normal(5).astype(np.float32), f"b{i}") for i in range(3)]
    nodes = []
    for i in range(3):
        nodes += [oh.make_node("MatMul", ["x", f"w{i}"], [f"p{i}"]), oh.make_node("Add", [f"p{i}", f"b{i}"], [f"y{i}"])]
    graph = oh.make_graph(
        nodes, "qkv", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, k])],
        [oh.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(3)],
        initializer=weights + biases,
    )  # fmt: skip
    ops = _optimize(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]), "O1")
    assert ops.count("Gemm") == 3 and ops.count("MatMul") == 0 and ops.count("Add") == 0
    assert ops.count("Reshape") == 4  # one flattening, three restorations


def test_cse_does_not_merge_through_an_overridable_initializer():
    """A graph input with an initializer is a default the caller may replace: never a constant."""
    shape = numpy_helper.from_array(np.array([-1], np.int64), "s1")
    shape2 = numpy_helper.from_array(np.array([-1], np.int64), "s2")
    graph = oh.make_graph(
        [oh.make_node("Reshape", ["x", "s1"], ["a"]), oh.make_node("Reshape", ["x", "s2"], ["b"])],
        "g",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2]),
         oh.make_tensor_value_info("s2", TensorProto.INT64, [1])],
        [oh.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in "ab"],
        initializer=[shape, shape2],
    )  # fmt: skip
    model = irforge.from_onnx(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)]))
    PassManager.parse("cse", REGISTRY.runnable).run(model)
    assert [n.op_type for n in model.graph] == ["Reshape", "Reshape"]


def _sandwich(*, restore=(-1, 4), scale=(0.5,), leak_inner=False, allowzero=0):
    """Reshape → GELU (reads its input twice) → Reshape, as the fusion leaves between two layers."""
    consts = {"s1": np.array([2, 3, 4], np.int64), "s2": np.array(restore, np.int64),
              "root2": np.array(1.4142135, np.float32), "one": np.array([1.0], np.float32),
              "half": np.array(scale, np.float32)}  # fmt: skip
    nodes = [
        oh.make_node("Reshape", ["x", "s1"], ["y"], allowzero=allowzero),
        oh.make_node("Div", ["y", "root2"], ["d"]),
        oh.make_node("Erf", ["d"], ["e"]),
        oh.make_node("Add", ["e", "one"], ["a"]),
        oh.make_node("Mul", ["y", "a"], ["m"]),
        oh.make_node("Mul", ["m", "half"], ["o"]),
        oh.make_node("Reshape", ["o", "s2"], ["out"], allowzero=allowzero),
    ]
    outputs = [oh.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    if leak_inner:
        outputs.append(oh.make_tensor_value_info("e", TensorProto.FLOAT, None))
    graph = oh.make_graph(nodes, "gelu", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [6, 4])], outputs,
                          initializer=[numpy_helper.from_array(v, k) for k, v in consts.items()])  # fmt: skip
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])


@pytest.mark.parametrize("allowzero", [0, 1])  # the torch exporter writes allowzero=1; without 0s it is the same
def test_reshapes_around_an_elementwise_dag_cancel(allowzero):
    ops = _optimize(_sandwich(allowzero=allowzero), "shape-inference,cancel-reshapes")
    assert ops == ["Div", "Erf", "Add", "Mul", "Mul"]


@pytest.mark.parametrize(
    ("variant", "why"),
    [
        ({"restore": (3, 8)}, "the second Reshape does not restore the first one's input shape"),
        ({"scale": (0.5, 0.5, 0.5, 0.5)}, "a constant of shape [4] could broadcast differently"),
        ({"leak_inner": True}, "a value inside the region is a graph output"),
    ],
)
def test_what_cancel_reshapes_refuses(variant, why):
    assert _optimize(_sandwich(**variant), "shape-inference,cancel-reshapes").count("Reshape") == 2, why
