"""fuse-rms-norm: RMS norm in primitives (LLaMA's spelling through both torch exporters, and
hand-written variants) becomes one op: ONNX's RMSNormalization from opset 23,
irforge::RMSNormalization before.  Near misses stay."""

from __future__ import annotations

import pytest
import torch

import irforge
from irforge.core_ir import interpret, parse_model
from irforge.testing import assert_close, assert_preserves_semantics

_RMS = """model {{
  opset "" = {opset}
  graph @g(%x: f32[2,3,8]) {{
    init %axes = dense<i64[1]>[{axis}]
    init %two = dense<f32[]>[2.0]
    init %eps = dense<f32[]>[1e-06]
    init %w = dense<f32[8]>[0.5, 1.0, 1.5, 2.0, -1.0, 0.25, 0.75, 1.25]
    %sq = {square}
    %ms = ReduceMean(%sq, %axes)
    %ve = Add(%ms, %eps)
    %rt = Sqrt(%ve)
    %n = {normalize}
    %y = Mul(%n, %w)
    return %y{extra}
  }}
}}"""


def _rms(opset=18, axis="-1", square="Pow(%x, %two)", normalize="Div(%x, %rt)", extra=""):
    return _RMS.format(opset=opset, axis=axis, square=square, normalize=normalize, extra=extra)


@pytest.mark.parametrize(("case", "op"), [
    ({}, "irforge::RMSNormalization"),
    ({"square": "Mul(%x, %x)", "normalize": "Mul(%x, %inv)\n    %inv = Reciprocal(%rt)"}, "irforge::RMSNormalization"),
    ({"opset": 23}, "::RMSNormalization"),
])  # fmt: skip
def test_an_rms_norm_in_primitives_becomes_one_op_with_its_weight(case, op):
    text = _rms(**case)
    if "%inv" in text:  # the Reciprocal must come first
        text = text.replace("    %n = Mul(%x, %inv)\n    %inv = Reciprocal(%rt)",
                            "    %inv = Reciprocal(%rt)\n    %n = Mul(%x, %inv)")
    model = parse_model(text)
    irforge.optimize(model, "fuse-rms-norm,dce")
    (node,) = model.graph
    assert f"{node.domain}::{node.op_type}" == op
    assert list(node.inputs[1].const_value.numpy()) == [0.5, 1.0, 1.5, 2.0, -1.0, 0.25, 0.75, 1.25]
    if case.get("opset") != 23:  # onnxruntime has no opset 23 kernels for every engine here
        assert_preserves_semantics("fuse-rms-norm,dce", text)


@pytest.mark.parametrize("case", [
    {"axis": "1"},  # a mean over another axis
    {"extra": ", %ms"},  # an intermediate is read elsewhere
    {"normalize": "Div(%rt, %x)"},  # the inverse
])  # fmt: skip
def test_near_misses_stay(case):
    text = _rms(**case)
    model = parse_model(text)
    irforge.optimize(model, "fuse-rms-norm")
    assert "ReduceMean" in {n.op_type for n in model.graph}
    assert_preserves_semantics("fuse-rms-norm", text)


class _LlamaRMSNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + 1e-6))


@pytest.mark.parametrize("dynamo", [False, True])
def test_llama_rms_norm_fuses_through_both_exporters_and_runs_everywhere(dynamo, tmp_path):
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
    path = str(tmp_path / "rms.onnx")
    torch.onnx.export(_LlamaRMSNorm(), (x,), path, opset_version=18, dynamo=dynamo)
    model = irforge.load(path)
    want = interpret(model, [x.numpy()])
    irforge.optimize(model, "-O2")
    assert [n.op_type for n in model.graph] == ["RMSNormalization"]
    for backend in ("onnxruntime", "xla", "tvm"):
        assert_close(want, irforge.compile(model, backend)(x.numpy()), f"fused RMS norm on {backend}")
