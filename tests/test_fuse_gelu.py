"""fuse-gelu: GELU spelled in primitives (both torch exporters' erf and tanh forms, hand-written
orders) becomes one op: ONNX's ``Gelu`` from opset 20, ``irforge::Gelu`` before, onnxruntime's
``Gelu``/``FastGelu`` after ``lower-fused``.  Wrong constants and shared intermediates stay."""

from __future__ import annotations

import io

import numpy as np
import onnx
import pytest
import torch
import zoo

import irforge
from irforge.core_ir import interpret, parse_model
from irforge.testing import assert_close, assert_preserves_semantics

_ERF = """model {{
  opset "" = {opset}
  graph @g(%x: f32[2,8]) {{
    init %root2 = dense<f32[]>[{root2}]
    init %one = dense<f32[]>[1.0]
    init %half = dense<f32[]>[0.5]
    %d = {scale}
    %e = Erf(%d)
    %a = Add(%one, %e)
    %h = Mul(%half, %x)
    %y = Mul(%a, %h)
    return %y{extra}
  }}
}}"""


def _erf(opset=17, root2="1.4142135", scale="Div(%x, %root2)", extra=""):
    return _ERF.format(opset=opset, root2=root2, scale=scale, extra=extra)


@pytest.mark.parametrize(("opset", "op"), [(17, "irforge::Gelu@none"), (21, "Gelu")])
def test_an_erf_gelu_in_any_order_becomes_one_op(opset, op):
    for text in (_erf(opset), _erf(opset, root2="0.70710677", scale="Mul(%root2, %x)")):
        model = parse_model(text)
        irforge.optimize(model, "fuse-gelu,dce")
        (node,) = model.graph
        assert f"{node.domain}::{node.op_type}@{node.overload}".strip(":@") == op
        assert_preserves_semantics("fuse-gelu,dce", text)


@pytest.mark.parametrize("case", [
    {"root2": "1.5"},  # not sqrt(2): some other curve
    {"root2": "1.4142135", "scale": "Mul(%x, %root2)"},  # multiplied by sqrt(2), not divided
    {"extra": ", %e"},  # an intermediate is a graph output
])  # fmt: skip
def test_near_misses_stay(case):
    text = _erf(**case)
    model = parse_model(text)
    irforge.optimize(model, "fuse-gelu")
    assert "Erf" in {n.op_type for n in model.graph}
    assert_preserves_semantics("fuse-gelu", text)


class _Gelus(torch.nn.Module):
    def forward(self, x):
        f = torch.nn.functional
        return f.gelu(x), f.gelu(x * 2, approximate="tanh")


@pytest.mark.parametrize("dynamo", [False, True])
def test_both_torch_exporters_gelus_fuse_and_run_everywhere(dynamo):
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(0))
    buf = io.BytesIO()
    torch.onnx.export(_Gelus(), (x,), buf, opset_version=17, dynamo=dynamo)
    model = irforge.from_onnx(onnx.load_from_string(buf.getvalue()))
    want = interpret(model, [x.numpy()])
    irforge.optimize(model, "-O2")
    gelus = sorted(n.overload for n in model.graph if n.op_type == "Gelu")
    assert gelus == ["none", "tanh"] and len(model.graph) == 3  # the two GELUs and the x * 2
    for backend in ("reference", "onnxruntime", "xla", "tvm"):
        assert_close(want, irforge.compile(model, backend)(x.numpy()), f"fused GELUs on {backend}")
    irforge.optimize(model, "lower-fused{target=onnxruntime}")
    assert sorted(n.op_type for n in model.graph if n.domain == "com.microsoft") == ["FastGelu", "Gelu"]
    for backend in ("reference", "onnxruntime"):
        assert_close(want, irforge.compile(model, backend)(x.numpy()), f"onnxruntime's GELUs on {backend}")


def test_a_bert_encoder_gets_one_gelu_per_layer():
    proto = zoo.bert(layers=3, hidden=64, heads=4, ffn=128, seq=16, vocab=1000)
    feeds = zoo.feeds(proto)
    model = irforge.from_onnx(proto)
    want = interpret(model, feeds)
    irforge.optimize(model, "-O2")
    assert sum(n.op_type == "Gelu" for n in model.graph) == 3 and "Erf" not in {n.op_type for n in model.graph}
    got = irforge.compile(model, "onnxruntime")(feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
