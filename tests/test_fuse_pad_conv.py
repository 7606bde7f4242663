"""fuse-pad-conv: a zero Pad of the spatial axes becomes the Conv's own padding; every other Pad
(crops, other modes or values, batch or channel padding, a second reader, automatic padding) stays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from irforge.core_ir import parse_model
from irforge.frontends import from_torch
from irforge.passes import PassManager
from irforge.plugins import build_registry
from irforge.testing import assert_preserves_semantics, assert_rewrites

REGISTRY = build_registry(discover=False)


def _manager(pipeline: str) -> PassManager:
    return PassManager.parse(pipeline, REGISTRY.runnable, pipelines=REGISTRY.pipelines)

_GRAPH = """model {{
  opset "" = 21
  graph @g(%x: f32[1,2,6,5]) {{
    init %w = dense<f32[3,2,3,3]>[{w}]
    init %pads = dense<i64[8]>[{pads}]{value_init}
    %p = Pad(%x, %pads{value}){mode}
    %y = Conv(%p, %w){conv}
    return %y{extra}
  }}
}}"""
_W = ", ".join(str(float(v)) for v in np.linspace(-1, 1, 54))


def _graph(pads="0, 0, 1, 2, 0, 0, 0, 1", value="", mode="", conv=" <pads = ints[1, 0, 1, 0]>", extra="",
           value_init=""):  # fmt: skip
    return _GRAPH.format(w=_W, pads=pads, value=value, mode=mode, conv=conv, extra=extra, value_init=value_init)


def test_a_zero_pad_of_the_spatial_axes_joins_the_conv_pads():
    after = f"""model {{
  opset "" = 21
  graph @g(%x: f32[1,2,6,5]) {{
    init %w = dense<f32[3,2,3,3]>[{_W}]
    %y = Conv(%x, %w) <pads = ints[2, 2, 1, 1]> with {{metadata = {{"irforge.provenance": "Conv producing %y,Pad producing %p"}}}}
    return %y
  }}
}}"""  # noqa: E501
    assert_rewrites("fuse-pad-conv,dce", _graph(), after)
    assert_preserves_semantics("fuse-pad-conv,dce", _graph())
    with_value = _graph(value=", %zero", value_init="\n    init %zero = dense<f32[]>[0.0]")
    assert_preserves_semantics("fuse-pad-conv,dce", with_value)


@pytest.mark.parametrize("case", [
    {"pads": "1, 0, 1, 2, 0, 0, 0, 1"},  # pads the batch axis
    {"pads": "0, 0, -1, 2, 0, 0, 0, 1"},  # crops
    {"mode": ' <mode = "reflect">'},
    {"value": ", %one", "value_init": "\n    init %one = dense<f32[]>[1.0]"},
    {"conv": ' <auto_pad = "SAME_UPPER">'},
    {"extra": ", %p"},  # the padded tensor is read elsewhere
])  # fmt: skip
def test_near_misses_stay(case):
    model = parse_model(_graph(**case))
    assert not _manager("fuse-pad-conv").run(model)
    assert "Pad" in {n.op_type for n in model.graph}
    if "-1" not in case.get("pads", ""):  # ONNX's reference Pad cannot crop (negative pads)
        assert_preserves_semantics("fuse-pad-conv,dce", _graph(**case))


class _PaddedConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.dw = torch.nn.Conv1d(4, 4, 5, groups=4)

    def forward(self, x, s):
        f = torch.nn.functional
        return self.conv(f.pad(x, (2, 1, 0, 3))), self.dw(f.pad(s, (4, 0)))


def test_padded_convolutions_from_torch_fuse_under_O1_and_keep_their_outputs():
    torch.manual_seed(0)
    module = _PaddedConv().eval()
    args = (torch.randn(2, 3, 9, 7), torch.randn(2, 4, 11))
    model = from_torch(module, args)
    optimized = assert_preserves_semantics("O1", model, {"x": args[0].numpy(), "s": args[1].numpy()})
    assert "Pad" not in {n.op_type for n in optimized.graph}


_POOL = """model {{
  opset "" = 21
  graph @g(%x: f32[1,2,6,5]) {{
    init %pads = dense<i64[8]>[0, 0, 1, 0, 0, 0, 1, 2]
    init %value = dense<f32[]>[{value}]
    %p = Pad(%x, %pads, %value)
    %y = {pool}(%p) <kernel_shape = ints[3, 3]{attrs}>
    return %y
  }}
}}"""


@pytest.mark.parametrize(("pool", "value", "attrs"), [
    ("AveragePool", "0.0", ""),
    ("AveragePool", "0.0", ", count_include_pad = 1, pads = ints[1, 1, 0, 0]"),
    ("MaxPool", "-inf", ", strides = ints[2, 2]"),
])  # fmt: skip
def test_a_pad_joins_a_pool_where_its_own_padding_means_the_same(pool, value, attrs):
    text = _POOL.format(pool=pool, value=value, attrs=attrs)
    model = parse_model(text)
    _manager("fuse-pad-conv,dce").run(model)
    (node,) = model.graph
    assert node.op_type == pool and sum(node.attr("pads")) > 0
    assert_preserves_semantics("fuse-pad-conv", text)


@pytest.mark.parametrize(("pool", "value", "attrs"), [
    ("MaxPool", "0.0", ""),  # zeros may beat negative inputs: MaxPool's own padding never does
    ("AveragePool", "1.0", ""),
    ("AveragePool", "0.0", ", pads = ints[1, 1, 0, 0]"),  # pads of its own that it does not count
    ("AveragePool", "0.0", ", ceil_mode = 1"),
])  # fmt: skip
def test_pads_that_pools_cannot_express_stay(pool, value, attrs):
    text = _POOL.format(pool=pool, value=value, attrs=attrs)
    model = parse_model(text)
    assert not _manager("fuse-pad-conv").run(model)
