"""What a backend accepts up front it runs: for every model whose ``unsupported()`` is empty,
compiling and calling it raises no :class:`UnsupportedError` (its checks and its rules agree).
The node suite is held to the same rule case by case in ``test_backend_conformance``
(outcome *refused-late*); here the model zoo, as loaded and after ``-O2``."""

from __future__ import annotations

import functools

import pytest
import zoo

import irforge
from irforge.backends import UnsupportedError

MODELS = {
    "resnet50": lambda: zoo.resnet50(classes=10, size=32),
    "mobilenet_v2": lambda: zoo.mobilenet_v2(classes=10, size=32),
    "bert": lambda: zoo.bert(layers=2, hidden=64, heads=4, ffn=128, seq=16, vocab=100),
}


@functools.cache
def _feeds(name: str):
    return zoo.feeds(MODELS[name]())


@pytest.mark.parametrize("backend", ["xla", "tvm"])
@pytest.mark.parametrize("level", ["-O0", "-O2"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_model_accepted_up_front_runs(name, level, backend):
    model = irforge.optimize(irforge.from_onnx(MODELS[name]()), level, target=backend)
    problems = irforge.unsupported(model, backend)
    assert not problems, f"{name} {level} on {backend}: refused up front: {problems}"  # the zoo runs on both
    try:
        outputs = irforge.compile(model, backend)(_feeds(name))
    except UnsupportedError as e:
        pytest.fail(f"{name} {level} on {backend}: accepted up front, refused at the call: {e}")
    assert outputs and all(o.size for o in outputs)
