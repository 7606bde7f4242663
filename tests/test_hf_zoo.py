"""The models users bring, end to end: every ``transformers`` architecture of the zoo
(``benchmarks/hf_zoo.py``, small configs, random weights), imported through ``irforge.from_torch``
and through ``torch.onnx.export``, runs on onnxruntime, xla and tvm and matches PyTorch."""

from __future__ import annotations

import functools
import os
import sys

import numpy as np
import pytest
import torch

import irforge

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import hf_zoo

ENGINES = ["onnxruntime", "xla", "tvm"]
RTOL = 1e-4
"""Largest difference from PyTorch, relative to the output's largest value."""

EXPORT_FAILS = {"t5-encoder": "torch.onnx.export cannot decompose T5's FX graph (ConversionError, step 2/3)"}
"""Architectures the peer exporter itself refuses: the export path has nothing to import."""


@functools.cache
def _built(name: str):
    module, args = hf_zoo.ZOO[name](True)
    with torch.no_grad():
        expected = module(*args).numpy()
    return module, args, expected


@functools.cache
def _imported(name: str, how: str):
    module, args, _ = _built(name)
    return hf_zoo.imported(module, args, how)


def _cases():
    for name in hf_zoo.ZOO:
        for how in hf_zoo.IMPORTS:
            marks = [pytest.mark.xfail(strict=True, reason=EXPORT_FAILS[name])] if how == "export" and (
                name in EXPORT_FAILS) else []  # fmt: skip
            for engine in ENGINES:
                yield pytest.param(name, how, engine, marks=marks, id=f"{name}-{how}-{engine}")


@pytest.mark.parametrize(("name", "how", "engine"), list(_cases()))
def test_zoo_model_matches_pytorch(name, how, engine):
    _, args, expected = _built(name)
    model = _imported(name, how)
    assert not irforge.unsupported(model, engine), irforge.unsupported(model, engine)  # accepted up front
    (got,) = irforge.compile(model, engine)(*[x.numpy() for x in args])
    scale = float(np.abs(expected).max())
    assert scale > 1e-6, f"{name}: outputs collapsed to {scale:g}; the comparison would mean nothing"
    difference = float(np.abs(np.asarray(got, np.float64) - expected).max()) / scale
    assert difference < RTOL, f"{name} via {how} on {engine}: {difference:.2e} of the output's scale"
