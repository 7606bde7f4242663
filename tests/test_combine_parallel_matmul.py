"""combine-parallel-matmul: sibling linear layers (MatMul by constant weights with or without a
bias Add, or Gemm) reading one input become one wider product and a Split; layers of different
forms, non-constant weights and products read elsewhere stay apart.  On a BERT encoder the Q, K
and V projections pack, and onnxruntime's lowering then writes its packed Attention kernel."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import zoo

import irforge
from irforge.core_ir import interpret, parse_model
from irforge.testing import assert_preserves_semantics, assert_rewrites


def _weights(rows: int, cols: int, seed: int) -> str:
    values = np.random.default_rng(seed).standard_normal(rows * cols).round(3)
    return f"dense<f32[{rows},{cols}]>[" + ", ".join(repr(float(v)) for v in values) + "]"


def test_three_projections_with_biases_become_one_matmul_add_and_split():
    before = f"""model {{
  opset "" = 21
  graph @g(%x: f32[2,5,4]) {{
    init %wq = dense<f32[4,2]>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    init %wk = dense<f32[4,2]>[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0]
    init %wv = dense<f32[4,3]>[{", ".join(str(float(i)) for i in range(12))}]
    init %bq = dense<f32[2]>[0.5, 0.25]
    init %bk = dense<f32[2]>[-0.5, -0.25]
    init %bv = dense<f32[3]>[1.0, 2.0, 3.0]
    %q0 = MatMul(%x, %wq)
    %q = Add(%q0, %bq)
    %k0 = MatMul(%x, %wk)
    %k = Add(%bk, %k0)
    %v0 = MatMul(%x, %wv)
    %v = Add(%v0, %bv)
    %qk = Mul(%q, %k)
    return %qk, %v
  }}
}}"""
    after = """model {
  opset "" = 21
  graph @g(%x: f32[2,5,4]) {
    init %const_1 = dense<f32[4,7]>[1.0, 2.0, -1.0, -2.0, 0.0, 1.0, 2.0, 3.0, 4.0, -3.0, -4.0, 3.0, 4.0, 5.0,
                                    5.0, 6.0, -5.0, -6.0, 6.0, 7.0, 8.0, 7.0, 8.0, -7.0, -8.0, 9.0, 10.0, 11.0]
    init %const_3 = dense<f32[7]>[0.5, 0.25, -0.5, -0.25, 1.0, 2.0, 3.0]
    init %const_5 = dense<i64[3]>[2, 2, 3]
    %matmul_2: f32[2,5,7] = MatMul(%x, %const_1)
    %add_4: f32[2,5,7] = Add(%matmul_2, %const_3)
    %q: f32[2,5,2], %k: f32[2,5,2], %v: f32[2,5,3] = Split(%add_4, %const_5) <axis = -1>
    %qk = Mul(%q, %k)
    return %qk, %v
  }
}"""
    assert_rewrites("combine-parallel-matmul", before, after)
    assert_preserves_semantics("combine-parallel-matmul", before)


def test_gemms_combine_with_their_transposed_weights():
    text = f"""model {{
  opset "" = 21
  graph @g(%x: f32[3,4]) {{
    init %w1 = {_weights(5, 4, 1)}
    init %w2 = {_weights(4, 6, 2)}
    init %b1 = dense<f32[5]>[1.0, 2.0, 3.0, 4.0, 5.0]
    init %b2 = dense<f32[6]>[0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    %y1 = Gemm(%x, %w1, %b1) <transB = 1>
    %y2 = Gemm(%x, %w2, %b2)
    return %y1, %y2
  }}
}}"""
    model = parse_model(text)
    irforge.optimize(model, "combine-parallel-matmul")
    assert [n.op_type for n in model.graph] == ["Gemm", "Split"]
    assert_preserves_semantics("combine-parallel-matmul", text)


@pytest.mark.parametrize("case", [
    "%y1 = MatMul(%x, %w1)\n    %a = Add(%y1, %b1)\n    %y2 = MatMul(%x, %w2)\n    return %a, %y2",  # bias / none
    "%y1 = MatMul(%x, %w1)\n    %y2 = MatMul(%x, %z)\n    return %y1, %y2",  # weights not constant
    "%y1 = MatMul(%x, %w1)\n    %y2 = MatMul(%w3, %x)\n    return %y1, %y2",  # x on the other side
])  # fmt: skip
def test_near_misses_stay(case):
    text = f"""model {{
  opset "" = 21
  graph @g(%x: f32[4,4], %z: f32[4,4]) {{
    init %w1 = {_weights(4, 4, 1)}
    init %w2 = {_weights(4, 4, 2)}
    init %w3 = {_weights(4, 4, 3)}
    init %b1 = dense<f32[4]>[1.0, 2.0, 3.0, 4.0]
    {case}
  }}
}}"""
    model = parse_model(text)
    irforge.optimize(model, "combine-parallel-matmul")
    assert "Split" not in {n.op_type for n in model.graph}


@pytest.mark.parametrize("combine", [True, False])
def test_bert_projections_pack_into_onnxruntimes_attention(combine):
    layers = 2
    proto = zoo.bert(layers=layers, hidden=64, heads=4, ffn=128, seq=16, vocab=1000)
    feeds = zoo.feeds(proto)
    model = irforge.from_onnx(proto)
    want = interpret(model, feeds)
    pipeline = "-O2" if combine else "-O2".replace("-O2", irforge.passes.levels.LEVELS["O2"].replace(
        ",combine-parallel-matmul", ""))  # fmt: skip
    irforge.optimize(model, pipeline, target="onnxruntime")
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    kernel = "com.microsoft::Attention" if combine else "com.microsoft::MultiHeadAttention"
    assert ops[kernel] == layers and ops["::Split"] == 0, ops
    for backend in ("reference", "onnxruntime"):
        zoo.assert_close_to_scale(want, irforge.compile(model, backend)(feeds), f"{kernel} on {backend}", scale=1e-4)
