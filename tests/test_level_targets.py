"""``-O3 --target X`` on real architectures: ResNet-50, MobileNetV2 and a BERT encoder as
exporters write them, a ViT block and a BERT through irforge's torch frontend.  For each target
the optimized model runs on that target's engine (and, lowered for onnxruntime, on the reference
interpreter through the contrib ops' kernels) and matches the original within 1e-4 of the output
scale; every fused op is where the counts say."""

from __future__ import annotations

from collections import Counter

import pytest
import torch_models
import zoo

import irforge
from irforge.backends import UnsupportedError
from irforge.core_ir import clone_model, interpret


def _zoo(name):
    proto = {"resnet50": lambda: zoo.resnet50(size=32), "mobilenet_v2": lambda: zoo.mobilenet_v2(size=32),
             "bert": lambda: zoo.bert(layers=2, hidden=64, heads=4, ffn=128, seq=16, vocab=1000)}[name]()  # fmt: skip
    return irforge.from_onnx(proto), zoo.feeds(proto)


def _torch(name):
    module, args, _ = torch_models.MODELS[name]()
    return irforge.from_torch(module, args), [a.numpy() for a in args]


MODELS = {"resnet50": lambda: _zoo("resnet50"), "mobilenet_v2": lambda: _zoo("mobilenet_v2"),
          "bert": lambda: _zoo("bert"), "vit_block (from_torch)": lambda: _torch("vit_block"),
          "bert (from_torch)": lambda: _torch("bert")}  # fmt: skip

EXPECTED = {  # fused ops after -O3, by model (op -> count)
    "bert": {"irforge::Attention": 2, "irforge::SkipLayerNormalization": 4, "irforge::Gelu": 2},
    "vit_block (from_torch)": {"irforge::Attention": 1},
}


REFUSED: dict[tuple[str, str], str] = {}
"""(model, target) pairs the target cannot run (an up-front UnsupportedError), with its reason."""


def _run(model, backend, feeds):
    exe = irforge.compile(model, backend)
    return exe(feeds) if isinstance(feeds, dict) else exe(*feeds)


@pytest.fixture(scope="module", params=sorted(MODELS))
def original(request):
    model, feeds = MODELS[request.param]()
    return request.param, model, feeds, interpret(model, feeds)


@pytest.mark.parametrize("target", ["onnxruntime", "xla", "tvm"])
def test_o3_for_each_target_keeps_the_outputs_on_that_target(original, target):
    name, model, feeds, want = original
    optimized = irforge.optimize(clone_model(model), "-O3", target=target)
    ops = Counter(f"{n.domain}::{n.op_type}" for n in optimized.graph)
    if target != "onnxruntime":
        for op, count in EXPECTED.get(name, {}).items():
            assert ops[op] == count, (name, op, ops)
    else:  # these always have a kernel in float32; Attention needs its head split, FusedGemm its activation
        assert not ops["irforge::SkipLayerNormalization"] + ops["irforge::Gelu"] + ops["irforge::FusedConv"], ops
    if (name, target) in REFUSED:  # the backend refuses the model up front, naming the op, optimized or not
        with pytest.raises(UnsupportedError, match=REFUSED[name, target]):
            _run(optimized, target, feeds)
        return
    where = f"{name} -O3 --target {target}"
    zoo.assert_close_to_scale(want, _run(optimized, target, feeds), f"{where} on {target}", scale=1e-4)
    if target == "onnxruntime":
        zoo.assert_close_to_scale(want, _run(optimized, "reference", feeds), f"{where}, reference", scale=1e-4)
