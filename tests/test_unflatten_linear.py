"""The onnxruntime lowering computes flattened linear layers on their 3-D tensors again: the
Reshapes around Gemm go, Gemm becomes MatMul + Add, and the contrib kernels take the bias; a
region with a second flattened operand or an unrestored end stays."""

from __future__ import annotations

import numpy as np
import pytest

import irforge
from irforge.core_ir import parse_model
from irforge.passes.unflatten_linear import unflatten_linear_layers
from irforge.testing import assert_preserves_semantics


def _weights(rows: int, cols: int, seed: int) -> str:
    values = np.random.default_rng(seed).standard_normal(rows * cols).round(3)
    return f"dense<f32[{rows},{cols}]>[" + ", ".join(repr(float(v)) for v in values) + "]"


_MLP = f"""model {{{{
  opset "" = 21
  graph @g(%x: f32[2,3,4], %r: f32[2,3,4], %e: f32[6,8]) {{{{
    init %flat = dense<i64[2]>[-1, 4]
    init %back = dense<i64[3]>[2, 3, 4]
    init %w1 = {_weights(4, 8, 1)}
    init %b1 = {_weights(1, 8, 2).replace("f32[1,8]", "f32[8]")}
    init %w2 = {_weights(8, 4, 3)}
    init %b2 = {_weights(1, 4, 4).replace("f32[1,4]", "f32[4]")}
    %f: f32[6,4] = Reshape(%x, %flat)
    %h: f32[6,8] = Gemm(%f, %w1, %b1)
    %a: f32[6,8] = {{act}}
    %o: f32[6,4] = Gemm(%a, %w2, %b2)
    %y: f32[2,3,4] = Reshape(%o, %back)
    %z = Add(%y, %r)
    return %z
  }}}}
}}}}"""


def test_a_flattened_mlp_runs_on_the_3d_tensor_again():
    text = _MLP.format(act="Relu(%h)")
    model = parse_model(text)
    assert unflatten_linear_layers(model.graph) == 1
    assert [n.op_type for n in model.graph] == ["MatMul", "Add", "Relu", "MatMul", "Add", "Add"]
    assert model.graph.nodes[2].outputs[0].type.shape == (2, 3, 8)
    assert_preserves_semantics("dce", model)  # the rewritten graph verifies and computes the same
    original = parse_model(text)
    feeds = {"x": np.ones((2, 3, 4), np.float32), "r": np.zeros((2, 3, 4), np.float32),
             "e": np.zeros((6, 8), np.float32)}  # fmt: skip
    np.testing.assert_allclose(irforge.interpret(model, feeds)[0], irforge.interpret(original, feeds)[0], rtol=1e-5)


@pytest.mark.parametrize("act", [
    "Softmax(%h)",  # an op it does not list as element-wise
    "Add(%h, %e)",  # a second, already flat operand
])  # fmt: skip
def test_regions_it_does_not_know_stay(act):
    model = parse_model(_MLP.format(act=act))
    assert unflatten_linear_layers(model.graph) == 0
