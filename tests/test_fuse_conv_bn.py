"""fuse-conv-bn: BatchNormalization and per-channel Mul/Add folded into the Conv or BatchNormalization
before them; the same numbers on the interpreter and onnxruntime, and refusals where folding would be wrong."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

import irforge
from irforge.backends.onnx import to_proto
from irforge.core_ir import interpret, verify_model
from irforge.frontends import from_torch
from irforge.passes.fuse_conv_bn import per_channel
from irforge.passes.manager import PassManager
from irforge.plugins import build_registry
from irforge.testing import assert_preserves_semantics

REGISTRY = build_registry(discover=False)
RNG = np.random.default_rng(1)
C_IN, C_OUT = 3, 4


def _init(name: str, array: np.ndarray):
    return numpy_helper.from_array(array.astype(np.float32), name)


def _model(tail: list, extra_inits: list, *, bias=True, group=1, extra_output: str | None = None):
    """x -> Conv(w[, b]) -> ``tail`` nodes -> y."""
    c_in = C_IN if group == 1 else group
    inits = [_init("w", RNG.standard_normal((C_OUT, c_in // group, 3, 3)))]
    conv_inputs = ["x", "w"]
    if bias:
        inits.append(_init("b", RNG.standard_normal(C_OUT)))
        conv_inputs.append("b")
    nodes = [oh.make_node("Conv", conv_inputs, ["c"], pads=[1, 1, 1, 1], group=group), *tail]
    outputs = [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_output:
        outputs.append(oh.make_tensor_value_info(extra_output, TensorProto.FLOAT, None))
    graph = oh.make_graph(nodes, "conv", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, c_in, 5, 5])],
                          outputs, initializer=inits + extra_inits)  # fmt: skip
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _bn_inits(channels=C_OUT):
    return [
        _init("scale", RNG.standard_normal(channels)),
        _init("bias", RNG.standard_normal(channels)),
        _init("mean", RNG.standard_normal(channels)),
        _init("var", RNG.uniform(0.5, 2.0, channels)),
    ]


def _bn(src="c", dst="y", **attrs):
    return oh.make_node("BatchNormalization", [src, "scale", "bias", "mean", "var"], [dst], **attrs)


def _optimize(proto, pipeline="fuse-conv-bn,dce"):
    """Run the pipeline; check interpreter and onnxruntime give the original's numbers."""
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
    want = ort.InferenceSession(proto.SerializeToString()).run(None, feeds)
    model = irforge.from_onnx(proto)
    PassManager.parse(pipeline, REGISTRY.runnable, pipelines=REGISTRY.pipelines).run(model)
    verify_model(model)
    for got, ref in zip(interpret(model, feeds), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    exported = to_proto(model).SerializeToString()
    for got, ref in zip(ort.InferenceSession(exported).run(None, feeds), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    return [n.op_type for n in model.graph]


@pytest.mark.parametrize("bias", [True, False])
def test_conv_batchnorm_is_one_conv(bias):
    assert _optimize(_model([_bn(epsilon=1e-3)], _bn_inits(), bias=bias)) == ["Conv"]


def test_depthwise_conv_batchnorm_is_one_conv():
    assert _optimize(_model([_bn()], _bn_inits(), group=C_OUT)) == ["Conv"]


@pytest.mark.parametrize("shape", [(C_OUT, 1, 1), (1, C_OUT, 1, 1), (1,), ()])
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_per_channel_mul_and_add_fold_into_the_conv(op, shape):
    k = _init("k", RNG.standard_normal(shape))
    assert _optimize(_model([oh.make_node(op, ["c", "k"], ["y"])], [k])) == ["Conv"]


def test_caffe_scale_layer_folds_into_batchnorm_then_conv():
    m, a = _init("m", RNG.standard_normal((C_OUT, 1, 1))), _init("a", RNG.standard_normal((C_OUT, 1, 1)))
    tail = [_bn(dst="n"), oh.make_node("Mul", ["m", "n"], ["s"]), oh.make_node("Add", ["s", "a"], ["y"])]
    assert _optimize(_model(tail, [*_bn_inits(), m, a])) == ["Conv"]


def test_batchnorm_after_a_non_conv_absorbs_the_scale_layer():
    m, a = _init("m", RNG.standard_normal((C_OUT, 1, 1))), _init("a", RNG.standard_normal((C_OUT, 1, 1)))
    tail = [oh.make_node("Relu", ["c"], ["r"]), _bn(src="r", dst="n"), oh.make_node("Mul", ["n", "m"], ["s"]),
            oh.make_node("Add", ["s", "a"], ["y"])]  # fmt: skip
    assert _optimize(_model(tail, [*_bn_inits(), m, a]), "shape-inference,fuse-conv-bn,dce") == [
        "Conv", "Relu", "BatchNormalization"
    ]  # fmt: skip


def test_a_conv_result_read_elsewhere_is_not_fused():
    tail = [_bn(), oh.make_node("Relu", ["c"], ["r"])]
    assert _optimize(_model(tail, _bn_inits(), extra_output="r")) == ["Conv", "BatchNormalization", "Relu"]


def test_a_spatially_varying_operand_is_not_folded():
    k = _init("k", RNG.standard_normal((C_OUT, 5, 5)))
    assert _optimize(_model([oh.make_node("Mul", ["c", "k"], ["y"])], [k])) == ["Conv", "Mul"]


def test_an_operand_that_grows_the_result_is_not_folded():
    k = _init("k", RNG.standard_normal((3, 1, 1, 1, 1)))
    assert _optimize(_model([oh.make_node("Add", ["c", "k"], ["y"])], [k])) == ["Conv", "Add"]


def test_weights_fed_at_run_time_are_not_fused():
    proto = _model([_bn()], _bn_inits())
    proto.graph.input.append(oh.make_tensor_value_info("w", TensorProto.FLOAT, [C_OUT, C_IN, 3, 3]))
    model = irforge.from_onnx(proto)
    PassManager.parse("fuse-conv-bn", REGISTRY.runnable).run(model)
    assert [n.op_type for n in model.graph] == ["Conv", "BatchNormalization"]


def test_training_mode_batchnorm_is_not_fused():
    proto = _model([_bn(training_mode=1)], _bn_inits())
    proto.graph.node[1].output.extend(["rm", "rv"])
    model = irforge.from_onnx(proto)
    PassManager.parse("fuse-conv-bn", REGISTRY.runnable).run(model)
    assert [n.op_type for n in model.graph] == ["Conv", "BatchNormalization"]


def test_per_channel_reads_broadcasting_onto_axis_one():
    assert per_channel(np.ones((4, 1, 1)), 4, 4).shape == (4,)
    assert per_channel(np.ones(()), 4, 4).shape == (4,)
    assert per_channel(np.ones((4,)), 4, 4) is None  # broadcasts onto the last axis
    assert per_channel(np.ones((4, 1, 1)), 4, 5) is None
    assert per_channel(np.ones((1, 1, 1, 1, 1)), 4, 4) is None


def _filled_weight_model(tail: list, extra_inits: list, fill=0.02):
    """As ``_model``, but the weight is ``ConstantOfShape`` (as weights over the folding limit are)."""
    proto = _model(tail, extra_inits)
    del proto.graph.initializer[0]  # w
    proto.graph.initializer.append(numpy_helper.from_array(np.array([C_OUT, C_IN, 3, 3], np.int64), "w_shape"))
    value = numpy_helper.from_array(np.array([fill], np.float32), "value")
    proto.graph.node.insert(0, oh.make_node("ConstantOfShape", ["w_shape"], ["w"], value=value))
    return proto


def _uniform_bn_inits(channels=C_OUT):
    return [_init(n, np.full(channels, v)) for n, v in (("scale", 0.7), ("bias", 0.1), ("mean", 0.3), ("var", 1.5))]


@pytest.mark.parametrize(
    "tail, inits",
    [
        ([_bn()], _uniform_bn_inits()),
        ([oh.make_node("Mul", ["c", "k"], ["y"])], [_init("k", np.array(1.5))]),
        ([oh.make_node("Add", ["c", "k"], ["y"])], [_init("k", RNG.standard_normal((C_OUT, 1, 1)))]),
    ],
    ids=["batchnorm", "mul", "add"],
)
def test_a_filled_weight_absorbs_a_uniform_scale_and_stays_filled(tail, inits):
    ops = _optimize(_filled_weight_model(tail, inits), "shape-inference,fuse-conv-bn,dce")
    assert ops == ["ConstantOfShape", "Conv"]


@pytest.mark.parametrize(
    "tail, inits",
    [
        ([_bn()], _bn_inits()),
        ([oh.make_node("Mul", ["c", "k"], ["y"])], [_init("k", RNG.standard_normal((C_OUT, 1, 1)))]),
    ],
    ids=["batchnorm", "mul"],
)
def test_a_filled_weight_is_not_materialised_for_a_per_channel_scale(tail, inits):
    model = irforge.from_onnx(_filled_weight_model(tail, inits))
    PassManager.parse("shape-inference,fuse-conv-bn", REGISTRY.runnable).run(model)
    assert [n.op_type for n in model.graph] == ["ConstantOfShape", "Conv", tail[0].op_type]


class _LinearAndDeconvNorms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn1 = torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5)
        self.up, self.bn2 = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2), torch.nn.BatchNorm2d(6)
        self.fc2, self.bn3 = torch.nn.Linear(6, 5, bias=False), torch.nn.BatchNorm1d(5)

    def forward(self, x, img):
        return self.bn1(self.fc(x)), self.bn2(self.up(img)), self.bn3(self.fc2(x))


def test_batchnorm_after_a_gemm_or_a_transposed_convolution_folds_into_its_weights():
    torch.manual_seed(0)
    module = _LinearAndDeconvNorms()
    for bn in (module.bn1, module.bn2, module.bn3):  # statistics far from the identity
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.uniform_(-1, 1)
    module.eval()
    args = (torch.randn(3, 6), torch.randn(2, 4, 5, 4))
    model = from_torch(module, args)
    feeds = {"x": args[0].numpy(), "img": args[1].numpy()}
    optimized = assert_preserves_semantics("O1", model, feeds)  # the linear layers become Gemm first
    assert "BatchNormalization" not in {n.op_type for n in optimized.graph}


def test_batchnorm_after_a_gemm_whose_result_is_read_elsewhere_stays():
    class Both(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.bn = torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5)

        def forward(self, x):
            h = self.fc(x)
            return self.bn(h), h

    x = torch.randn(3, 6)
    optimized = assert_preserves_semantics("O1", from_torch(Both().eval(), (x,)), {"x": x.numpy()})
    assert "BatchNormalization" in {n.op_type for n in optimized.graph}


@pytest.mark.parametrize("rank", [2, 4])
def test_expand_batchnorm_turns_a_standalone_one_into_mul_and_add(rank):
    shape = [2, C_OUT] + [5] * (rank - 2)
    nodes = [oh.make_node("Relu", ["x"], ["r"]), _bn(src="r", dst="n"), oh.make_node("Relu", ["n"], ["y"])]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], _bn_inits())  # fmt: skip
    model = irforge.from_onnx(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
    rewritten = assert_preserves_semantics("shape-inference,expand-batchnorm,dce", model)
    assert [n.op_type for n in rewritten.graph] == ["Relu", "Mul", "Add", "Relu"]
    assert rewritten.graph.nodes[1].inputs[1].const_value.numpy().shape == (C_OUT,) + (1,) * (rank - 2)


def test_expand_batchnorm_leaves_training_mode_alone():
    proto = _model([_bn(training_mode=1)], _bn_inits())
    proto.graph.node[1].output.extend(["rm", "rv"])
    model = irforge.from_onnx(proto)
    assert not PassManager.parse("expand-batchnorm", REGISTRY.runnable).run(model)


def _bn_then_conv(group: int, pads: list[int], bias: bool):
    c_in, c_out = 4, 8
    inits = [*_bn_inits(c_in), _init("w", RNG.standard_normal((c_out, c_in // group, 3, 3)))]
    conv_inputs = ["n", "w"]
    if bias:
        inits.append(_init("b", RNG.standard_normal(c_out)))
        conv_inputs.append("b")
    nodes = [oh.make_node("Relu", ["x"], ["r"]), _bn(src="r", dst="n"),
             oh.make_node("Conv", conv_inputs, ["y"], pads=pads, group=group)]  # fmt: skip
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2, c_in, 7, 7])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)  # fmt: skip
    return irforge.from_onnx(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))


@pytest.mark.parametrize(("group", "bias"), [(1, True), (1, False), (2, True), (4, False)])
def test_batchnorm_before_an_unpadded_conv_folds_into_its_input_channels(group, bias):
    rewritten = assert_preserves_semantics("shape-inference,fuse-conv-bn,dce", _bn_then_conv(group, [0, 0, 0, 0], bias))
    assert [n.op_type for n in rewritten.graph] == ["Relu", "Conv"]


def test_batchnorm_before_a_padded_conv_stays():
    """The Conv's zero padding meets the normalized values: folding would change the border."""
    model = _bn_then_conv(1, [1, 1, 1, 1], True)
    PassManager.parse("shape-inference,fuse-conv-bn", REGISTRY.runnable).run(model)
    assert [n.op_type for n in model.graph] == ["Relu", "BatchNormalization", "Conv"]
