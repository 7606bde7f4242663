"""Reference architectures built in code with seeded random weights (nothing is downloaded):
ResNet-50, MobileNetV2 and a BERT-style encoder, as ONNX models the way exporters write them
(Conv + BatchNormalization, Clip for ReLU6, Gemm heads, MatMul + Add projections, Erf GELU).

Weights are He-scaled so activations stay in range through 50 layers, and the batch-norm
statistics are non-trivial, so a fusion that gets a constant wrong changes the outputs.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Net:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, array: np.ndarray, prefix: str = "w") -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), n))
        return n

    def op(self, op_type: str, inputs: list[str], prefix: str | None = None, **attrs) -> str:
        out = self.name(prefix or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: str | None = "relu",
                gain: float = 1.0):  # fmt: skip
        fan_in = cin // groups * k * k
        w = self.rng.standard_normal((cout, cin // groups, k, k)).astype(np.float32) * math.sqrt(2.0 / fan_in)
        y = self.op("Conv", [x, self.const(w)], "conv", kernel_shape=[k, k], strides=[stride, stride],
                    pads=[k // 2] * 4, group=groups)  # fmt: skip
        scale = (self.rng.uniform(0.5, 1.5, cout) * gain).astype(np.float32)
        bias = self.rng.uniform(-0.2, 0.2, cout).astype(np.float32)
        mean = self.rng.uniform(-0.2, 0.2, cout).astype(np.float32)
        var = self.rng.uniform(0.5, 1.5, cout).astype(np.float32)
        y = self.op("BatchNormalization", [y, self.const(scale), self.const(bias), self.const(mean), self.const(var)],
                    "bn", epsilon=1e-5)  # fmt: skip
        if act == "relu":
            y = self.op("Relu", [y])
        elif act == "relu6":
            y = self.op("Clip", [y, self.const(np.array(0.0, np.float32)), self.const(np.array(6.0, np.float32))])
        return y

    def head(self, x: str, cin: int, classes: int = 1000) -> str:
        y = self.op("GlobalAveragePool", [x], "gap")
        y = self.op("Flatten", [y], "flatten", axis=1)
        w = self.rng.standard_normal((classes, cin)).astype(np.float32) / math.sqrt(cin)
        b = self.rng.uniform(-0.1, 0.1, classes).astype(np.float32)
        return self.op("Gemm", [y, self.const(w), self.const(b)], "fc", transB=1)

    def model(self, name: str, inputs: list, outputs: list) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="irforge-zoo")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def _image_input(size: int):
    return helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, size, size])


def resnet50(seed: int = 0, classes: int = 1000, size: int = 224) -> onnx.ModelProto:
    net = _Net(seed)
    x = net.conv_bn("image", 3, 64, 7, 2)
    x = net.op("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            s = stride if i == 0 else 1
            y = net.conv_bn(x, cin, width, 1)
            y = net.conv_bn(y, width, width, 3, s)
            y = net.conv_bn(y, width, width * 4, 1, act=None, gain=0.3)  # residual branches start small
            short = net.conv_bn(x, cin, width * 4, 1, s, act=None) if i == 0 else x
            x = net.op("Relu", [net.op("Add", [y, short])])
            cin = width * 4
    out = net.head(x, cin, classes)
    return net.model("resnet50", [_image_input(size)],
                     [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", classes])])  # fmt: skip


def mobilenet_v2(seed: int = 0, classes: int = 1000, size: int = 224) -> onnx.ModelProto:
    net = _Net(seed)
    x = net.conv_bn("image", 3, 32, 3, 2, act="relu6")
    cin = 32
    for expand, cout, repeats, stride in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                                          (6, 160, 3, 2), (6, 320, 1, 1)):  # fmt: skip
        for i in range(repeats):
            s = stride if i == 0 else 1
            hidden = cin * expand
            y = net.conv_bn(x, cin, hidden, 1, act="relu6") if expand != 1 else x
            y = net.conv_bn(y, hidden, hidden, 3, s, groups=hidden, act="relu6")
            y = net.conv_bn(y, hidden, cout, 1, act=None)
            x = net.op("Add", [x, y]) if s == 1 and cin == cout else y
            cin = cout
    x = net.conv_bn(x, cin, 1280, 1, act="relu6")
    out = net.head(x, 1280, classes)
    return net.model("mobilenet_v2", [_image_input(size)],
                     [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", classes])])  # fmt: skip


def bert(seed: int = 0, layers: int = 12, hidden: int = 768, heads: int = 12, ffn: int = 3072, seq: int = 128,
         vocab: int = 30522) -> onnx.ModelProto:  # fmt: skip
    """A BERT-style encoder: embeddings, ``layers`` of self-attention + GELU feed-forward with
    post-LayerNorm, as torch's exporter writes them (MatMul + Add, Erf GELU, Softmax)."""
    net = _Net(seed)
    dim = hidden // heads

    def linear(x: str, cin: int, cout: int) -> str:
        w = net.rng.standard_normal((cin, cout)).astype(np.float32) / math.sqrt(cin)
        b = net.rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        return net.op("Add", [net.op("MatMul", [x, net.const(w)]), net.const(b)])

    def layer_norm(x: str) -> str:
        g = net.rng.uniform(0.8, 1.2, hidden).astype(np.float32)
        b = net.rng.uniform(-0.1, 0.1, hidden).astype(np.float32)
        return net.op("LayerNormalization", [x, net.const(g), net.const(b)], "ln", axis=-1, epsilon=1e-12)

    words = net.const((net.rng.standard_normal((vocab, hidden)) * 0.5).astype(np.float32), "words")
    positions = net.const((net.rng.standard_normal((seq, hidden)) * 0.5).astype(np.float32), "positions")
    x = net.op("Add", [net.op("Gather", [words, "input_ids"], "embed", axis=0), positions])
    x = layer_norm(x)
    mask = net.op("Cast", ["attention_mask"], "mask", to=TensorProto.FLOAT)
    mask = net.op("Unsqueeze", [mask, net.const(np.array([1, 2], np.int64))])
    mask = net.op("Mul", [net.op("Sub", [net.const(np.array(1.0, np.float32)), mask]),
                          net.const(np.array(-10000.0, np.float32))])  # fmt: skip
    split = net.const(np.array([0, 0, heads, dim], np.int64), "shape")
    merge = net.const(np.array([0, 0, hidden], np.int64), "shape")
    for _ in range(layers):
        q, k, v = (net.op("Transpose", [net.op("Reshape", [linear(x, hidden, hidden), split])], perm=[0, 2, 1, 3])
                   for _ in range(3))  # fmt: skip
        kt = net.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = net.op("Div", [net.op("MatMul", [q, kt]), net.const(np.array(math.sqrt(dim), np.float32))])
        probs = net.op("Softmax", [net.op("Add", [scores, mask])], axis=-1)
        ctx = net.op("Transpose", [net.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        x = layer_norm(net.op("Add", [x, linear(net.op("Reshape", [ctx, merge]), hidden, hidden)]))
        up = linear(x, hidden, ffn)
        gelu = net.op("Mul", [net.op("Mul", [up, net.op("Add", [net.op("Erf", [net.op("Div", [
            up, net.const(np.array(math.sqrt(2.0), np.float32))])]), net.const(np.array(1.0, np.float32))])]),
            net.const(np.array(0.5, np.float32))])  # fmt: skip
        x = layer_norm(net.op("Add", [x, linear(gelu, ffn, hidden)]))
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq])
    am = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", seq])
    return net.model("bert", [ids, am], [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", seq, hidden])])


def feeds(model: onnx.ModelProto, batch: int = 1, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value if d.dim_value else batch for d in i.type.tensor_type.shape.dim]
        if i.name == "input_ids":
            out[i.name] = rng.integers(0, 1000, shape).astype(np.int64)
        elif i.name == "attention_mask":
            m = np.ones(shape, np.int64)
            m[:, shape[1] * 3 // 4 :] = 0  # padding at the end, as a tokenizer leaves it
            out[i.name] = m
        else:
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def assert_close_to_scale(want: list, got: list, where: str, scale: float = 1e-5) -> None:
    """Outputs within ``scale`` of their magnitude (and 1e-4 relative): fifty float32 layers
    reassociate their sums differently once ops are fused or relaid."""
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=scale * max(1.0, float(np.abs(w).max())), err_msg=where)
