"""shape-inference, constant-fold, inline-functions and the -O levels: IR in, IR out, same numbers."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.reference
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx import helper as oh

import irforge
from irforge.backends.onnx import to_proto
from irforge.core_ir import Model, interpret, parse_graph, verify_model
from irforge.core_ir.types import TensorType
from irforge.passes.base import PassContext, PassError
from irforge.passes.manager import PassFailedError, PassManager
from irforge.passes.shape_inference import merge_types
from irforge.plugins import build_registry

REGISTRY = build_registry(discover=False)


def _pm(text: str) -> PassManager:
    return PassManager.parse(text, REGISTRY.runnable, pipelines=REGISTRY.pipelines)


def _feeds(g) -> dict:
    rng = np.random.default_rng(0)
    return {v.name: rng.standard_normal([d if isinstance(d, int) else 2 for d in v.type.shape]).astype(np.float32)
            for v in g.inputs}  # fmt: skip


def _run(text: str, pipeline: str):
    """Parse, run the pipeline, check the numbers did not move; the graph and whether it changed."""
    g = parse_graph(text)
    feeds = _feeds(g)
    before = interpret(g, feeds)
    model = Model(g, opset_imports={"": 21})
    changed = _pm(pipeline).run(model)
    verify_model(model)
    for a, b in zip(before, interpret(g, feeds), strict=True):
        np.testing.assert_array_equal(a, b)
    return g, changed


SHAPE_CHAIN = """graph @g(%x: f32[batch,3,4]) {
  %s = Shape(%x)
  %i = Constant() <value = dense<i64[1]>[0]>
  %b = Gather(%s, %i) <axis = 0>
  %c = Constant() <value = dense<i64[1]>[12]>
  %t = Concat(%b, %c) <axis = 0>
  %r = Reshape(%x, %t)
  %y = Relu(%r)
  return %y
}
"""


def test_shape_inference_types_every_value_and_propagates_shape_data():
    g, changed = _run(SHAPE_CHAIN, "shape-inference")
    types = {o.name: str(o.type) for n in g for o in n.outputs}
    assert changed
    assert types["s"] == "i64[3]" and types["t"] == "i64[2]"
    assert types["r"] == "f32[batch,12]"  # the symbolic dim flows through Shape→Gather→Concat→Reshape
    assert types["y"] == "f32[batch,12]"


def test_shape_inference_is_idempotent():
    g = parse_graph(SHAPE_CHAIN)
    model = Model(g, opset_imports={"": 21})
    assert _pm("shape-inference").run(model)
    assert not _pm("shape-inference").run(model)


def test_shape_inference_skips_onnx_when_every_type_is_static(monkeypatch):
    g = parse_graph(SHAPE_CHAIN.replace("batch", "5"))
    model = Model(g, opset_imports={"": 21})
    assert _pm("shape-inference").run(model)  # the first run types every value
    assert all(str(o.type) != "None" for n in g for o in n.outputs)

    def refuse(*args):
        raise AssertionError("ONNX's inference ran on a fully typed graph")

    monkeypatch.setattr(onnx.shape_inference.C, "infer_shapes", refuse)
    assert not _pm("shape-inference").run(model)


def test_shape_inference_types_constants_from_their_tensors(monkeypatch):
    g = parse_graph("""graph @g(%x: f32[2]) {
  %c = Constant() <value = dense<f32[2]>[1.0, 2.0]>
  %y = Add(%x, %c)
  return %y
}
""")
    g_nodes = list(g)
    g_nodes[1].outputs[0].type = TensorType(1, (2,))
    assert g_nodes[0].outputs[0].type is None
    monkeypatch.setattr(onnx.shape_inference.C, "infer_shapes", lambda *a: (_ for _ in ()).throw(AssertionError))
    assert _pm("shape-inference").run(Model(g, opset_imports={"": 21}))
    assert str(g_nodes[0].outputs[0].type) == "f32[2]"


def test_merge_never_forgets_a_known_dim():
    known = TensorType(1, (2, "batch", None))
    assert merge_types(known, TensorType(1, (None, 5, 7))) == TensorType(1, (2, 5, 7))  # a value beats a symbol
    assert merge_types(known, TensorType(1, ("n", None, "m"))) == TensorType(1, (2, "batch", "m"))
    assert merge_types(known, TensorType(7, (2, 3, 4))) == known  # a dtype disagreement keeps the IR's
    assert merge_types(None, known) == known and merge_types(known, None) == known


def test_shape_inference_leaves_large_weights_in_place():
    w = np.ones((256, 256), np.float32)
    g = parse_graph("graph @g(%x: f32[4,256]) {\n  %y = MatMul(%x, %w)\n  return %y\n}\n".replace(
        "{\n", "{\n  init %w = dense<f32[1]>[1.0]\n", 1))  # fmt: skip
    g.initializers["w"].const_value = irforge.core_ir.tensors.NumpyTensor(w)
    g.initializers["w"].type = TensorType(1, (256, 256))
    model = Model(g, opset_imports={"": 21})
    _pm("shape-inference").run(model)
    assert str(next(iter(g)).outputs[0].type) == "f32[4,256]"
    assert g.initializers["w"].const_value.numpy() is not None and g.initializers["w"].is_constant()


def test_constant_fold_folds_the_shape_chain_of_a_static_input():
    g, changed = _run(SHAPE_CHAIN.replace("batch", "5"), "shape-inference,constant-fold,dce")
    assert changed
    assert [n.op_type for n in g] == ["Reshape", "Relu"]
    shape = next(iter(g)).inputs[1]
    assert shape.is_constant() and shape.const_value.numpy().tolist() == [5, 12]


def test_constant_fold_folds_shape_and_size_of_static_shapes_only():
    text = """graph @g(%x: f32[2,3,4], %z: f32[n,3]) {
  %s = Shape(%x) <start = 1>
  %k = Size(%x)
  %sz = Shape(%z)
  %f = Cast(%k) <to = 1>
  %y = Mul(%x, %f)
  return %y, %s, %sz
}
"""
    g, changed = _run(text, "constant-fold")
    assert changed
    assert [n.op_type for n in g] == ["Constant", "Shape", "Mul"]  # %s stays a graph output, as a Constant
    assert g.outputs[1].producer().attr("value").numpy().tolist() == [3, 4]


def test_constant_fold_never_materialises_a_tensor_over_the_limit():
    text = """graph @g(%x: f32[3]) {
  %shape = Constant() <value = dense<i64[2]>[100000, 100000]>
  %big = ConstantOfShape(%shape)
  %s = ReduceSum(%big)
  %y = Add(%x, %s)
  return %y
}
"""
    g = parse_graph(text)
    result = REGISTRY.passes["constant-fold"]().run(g, PassContext())
    assert "ConstantOfShape" in [n.op_type for n in g]
    assert result.statistics["over-size-limit"] >= 1


def test_constant_fold_respects_a_configured_size_limit():
    text = """graph @g(%x: f32[64]) {
  %shape = Constant() <value = dense<i64[1]>[64]>
  %ones = ConstantOfShape(%shape) <value = dense<f32[1]>[1.0]>
  %y = Add(%x, %ones)
  return %y
}
"""
    g, _ = _run(text, "constant-fold{size-limit=100}")
    assert "ConstantOfShape" in [n.op_type for n in g]  # 256 bytes > 100
    g, _ = _run(text, "constant-fold{size-limit=1024}")
    assert [n.op_type for n in g] == ["Add"]


@pytest.mark.parametrize(
    "shape, value, folded",
    [
        ("dense<i64[2]>[2, 3]", "", True),  # default value: f32 zeros
        ("dense<i64[2]>[2, 3]", " <value = dense<i32[1]>[7]>", True),
        ("dense<i64[0]>[]", " <value = dense<f16[1]>[1.5]>", True),  # a scalar
        ("dense<i32[2]>[2, 3]", "", False),  # the schema asks for int64
        ("dense<i64[2,1]>[2, 3]", "", False),  # the shape must be 1-D
        ("dense<i64[2]>[2, -3]", "", False),  # no negative dims
        ("dense<i64[1]>[2]", " <value = dense<f32[2]>[1.0, 2.0]>", False),  # one-element value only
    ],
)
def test_constant_fold_reads_constant_of_shape_types_like_onnx(shape, value, folded):
    g = parse_graph(f"graph @g() {{\n  %s = Constant() <value = {shape}>\n  %f = ConstantOfShape(%s){value}\n"
                    "  %y = Identity(%f)\n  return %y\n}\n")  # fmt: skip
    before = interpret(g, {}) if folded else None
    REGISTRY.passes["constant-fold"]().run(g, PassContext())
    assert ("ConstantOfShape" not in [n.op_type for n in g]) == folded
    if folded:
        (after,) = interpret(g, {})
        np.testing.assert_array_equal(after, before[0])
        assert after.dtype == before[0].dtype


RELABELLINGS = """graph @g(%x: f32[2,3,4]) {
  %c = Constant() <value = dense<f32[2,3,4]>[DATA]>
  %shape = Constant() <value = dense<i64[2]>[0, -1]>
  %r = Reshape(%c, %shape)
  %f = Flatten(%c) <axis = 2>
  %axes = Constant() <value = dense<i64[2]>[1, -1]>
  %u = Unsqueeze(%c, %axes)
  %s = Squeeze(%u, %axes)
  %i = Identity(%c)
  %r2 = Reshape(%r, %shape)
  %y = Add(%x, %s)
  return %y, %r2, %f, %i
}
""".replace("DATA", ", ".join(str(float(k)) for k in range(24)))


def test_constant_fold_relabels_shapes_exactly_as_the_kernels_do():
    """Reshape, Flatten, Squeeze, Unsqueeze and Identity fold as their input's data under the
    shape inference gives (no kernel runs); the results are the reference kernels' to the bit."""
    g = parse_graph(RELABELLINGS)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    model = Model(g, opset_imports={"": 21})
    expected = onnx.reference.ReferenceEvaluator(to_proto(model)).run(None, {"x": x})
    result = REGISTRY.passes["constant-fold"]().run(g, PassContext())
    assert result.statistics["folded"] >= 6
    assert not {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"} & {n.op_type for n in g}
    for want, got in zip(expected, interpret(g, {"x": x}), strict=True):
        assert want.shape == got.shape and want.dtype == got.dtype
        np.testing.assert_array_equal(got, want)


def test_constant_fold_keeps_random_ops():
    g = parse_graph("graph @g(%x: f32[3]) {\n  %r = RandomNormal() <shape = ints[3]>\n"
                    "  %y = Add(%x, %r)\n  return %y\n}\n")  # fmt: skip
    REGISTRY.passes["constant-fold"]().run(g, PassContext())
    assert [n.op_type for n in g] == ["RandomNormal", "Add"]


def _function_model() -> onnx.ModelProto:
    body = [
        oh.make_node("Add", ["a", "b"], ["s"]),
        oh.make_node("Constant", [], ["k"], value=oh.make_tensor("k", TensorProto.FLOAT, [], [2.0])),
        oh.make_node("Mul", ["s", "k"], ["m"]),
        oh.make_node("LeakyRelu", ["m"], ["c"]),
    ]
    body[3].attribute.append(onnx.AttributeProto(name="alpha", ref_attr_name="slope", type=onnx.AttributeProto.FLOAT))
    fn = oh.make_function("my", "ScaledAdd", ["a", "b"], ["c"], body, [oh.make_opsetid("", 21)])
    fn.attribute_proto.append(oh.make_attribute("slope", 0.5))
    graph = oh.make_graph(
        [oh.make_node("ScaledAdd", ["x", "y"], ["t"], domain="my", slope=0.1),
         oh.make_node("ScaledAdd", ["t", "y"], ["z"], domain="my")],
        "g", [oh.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "xy"],
        [oh.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
    )  # fmt: skip
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid("my", 1)], functions=[fn])


def test_inline_functions_binds_attributes_and_defaults_and_drops_the_function():
    proto = _function_model()
    feeds = {"x": np.array([-1, 2, -3], np.float32), "y": np.array([0.5, -4, 1], np.float32)}
    want = ort.InferenceSession(proto.SerializeToString()).run(None, feeds)
    model = irforge.from_onnx(proto)
    assert _pm("inline-functions").run(model)
    verify_model(model)
    assert not model.functions
    assert [n.op_type for n in model.graph] == ["Add", "Constant", "Mul", "LeakyRelu"] * 2
    alphas = [n.attr("alpha") for n in model.graph if n.op_type == "LeakyRelu"]
    assert alphas == pytest.approx([0.1, 0.5])  # the call's value, then the function's default
    assert "t" in {o.name for n in model.graph for o in n.outputs}  # the call's result keeps its name
    got = interpret(model, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    exported = to_proto(model)
    np.testing.assert_allclose(ort.InferenceSession(exported.SerializeToString()).run(None, feeds)[0], want[0])


def test_inline_functions_refuses_a_function_that_calls_itself():
    fn = oh.make_function("my", "Loopy", ["a"], ["b"], [oh.make_node("Loopy", ["a"], ["b"], domain="my")],
                          [oh.make_opsetid("", 21), oh.make_opsetid("my", 1)])  # fmt: skip
    graph = oh.make_graph([oh.make_node("Loopy", ["x"], ["y"], domain="my")], "g",
                          [oh.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, [3])])  # fmt: skip
    model = irforge.from_onnx(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid("my", 1)],
                                            functions=[fn]))  # fmt: skip
    with pytest.raises(PassFailedError, match="calls itself"):
        _pm("inline-functions").run(model)
    assert [n.op_type for n in model.graph] == ["Loopy"]  # rolled back


def test_levels_are_named_pipelines_that_parse_and_print():
    for level in ("O1", "O2", "O3"):
        pm = _pm(level)
        assert pm.pipeline.passes and PassManager.parse(str(pm), REGISTRY.runnable) == pm
    assert not _pm("O0").pipeline.passes
    assert str(_pm("O1,cse")).endswith(",cse")


def test_a_pattern_runs_by_name_in_a_pipeline():
    g, changed = _run("graph @g(%x: f32[2,3]) {\n  %a = Neg(%x)\n  %b = Neg(%a)\n  %y = Relu(%b)\n  return %y\n}\n",
                      "double-neg")  # fmt: skip
    assert changed and [n.op_type for n in g] == ["Relu"]


def test_an_unknown_name_lists_passes_and_patterns():
    with pytest.raises(PassError, match=r"unknown pass 'no-such-pass'.*double-neg"):
        _pm("no-such-pass")


def test_o1_simplifies_a_graph_end_to_end():
    text = """graph @g(%x: f32[2,3]) {
  %zero = Constant() <value = dense<f32[1]>[0.0]>
  %one = Constant() <value = dense<f32[1]>[1.0]>
  %two = Add(%one, %one)
  %a = Add(%x, %zero)
  %b = Mul(%a, %two)
  %c = Mul(%a, %two)
  %d = Identity(%b)
  %y = Add(%c, %d)
  return %y
}
"""
    g, changed = _run(text, "O1")
    assert changed and [n.op_type for n in g] == ["Mul", "Add"]


def test_gather_elements_runs_along_axes_longer_than_64():
    # ONNX's reference kernel fails past 64 elements along the axis (np.choose's limit): the
    # interpreter (the engine of constant folding too) must not
    rng = np.random.default_rng(0)
    data = rng.standard_normal((2, 3, 99)).astype(np.float32)
    index = rng.integers(-99, 99, (2, 3, 40)).astype(np.int64)
    g = parse_graph("""
        graph @g(%d: f32[2,3,99], %i: i64[2,3,40]) {
          %y = GatherElements(%d, %i) <axis = 2>
          return %y
        }""")
    expected = np.take_along_axis(data, np.where(index < 0, index + 99, index), axis=2)
    np.testing.assert_array_equal(interpret(g, {"d": data, "i": index})[0], expected)
    session = ort.InferenceSession(to_proto(Model(g)).SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"d": data, "i": index})[0], expected)


@pytest.mark.parametrize("shape, attrs", [
    ((1, 2, 4, 5, 3), {"kernel_shape": [2, 2, 2]}),  # ONNX's reference kernel: wrong indices
    ((2, 2, 4, 5, 6), {"kernel_shape": [2, 2, 2], "pads": [0, 1, 0, 1, 0, 1]}),  # ... and an IndexError
    ((1, 2, 9, 8), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "ceil_mode": 1}),
    ((1, 3, 8, 8), {"kernel_shape": [3, 3], "strides": [3, 3], "ceil_mode": 1, "dilations": [1, 2]}),
    ((1, 3, 7, 6), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 7, 6), {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 7, 6), {"kernel_shape": [2, 2], "storage_order": 1}),
])  # fmt: skip
def test_max_pool_values_and_indices_agree_with_onnxruntime(shape, attrs, tmp_path):
    node = oh.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           oh.make_tensor_value_info("i", TensorProto.INT64, None)])  # fmt: skip
    proto = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)])
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x.reshape(-1)[:5] = 1.0  # ties: the first wins
    expected = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    onnx.save(proto, str(tmp_path / "pool.onnx"))
    got = irforge.compile(irforge.load(str(tmp_path / "pool.onnx")), "reference")(x)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)
