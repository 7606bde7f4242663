"""Every built-in pass fires on cases made for it, and keeps their outputs when it does; every
pass option and every level runs; the bundled example's levels agree with the original on
onnxruntime.  (The node-suite grid changes few graphs: these are the cases that make each pass
do its work, with random weights, so a wrong rewrite changes a number.)"""

from __future__ import annotations

import dataclasses
import os

import firing_cases as fc
import numpy as np
import pytest

import irforge
from irforge.core_ir import interpret
from irforge.core_ir.dtypes import to_numpy
from irforge.passes import PassManager
from irforge.plugins import build_registry
from irforge.testing import _onnxruntime_outputs, assert_close

REGISTRY = build_registry(discover=False)
EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "small_cnn.onnx")


def test_every_builtin_pass_has_cases_it_fires_on():
    assert set(REGISTRY.passes) <= set(fc.CASES), sorted(set(REGISTRY.passes) - set(fc.CASES))


def _reference_outputs(pass_name: str, case: str, feeds: dict) -> list:
    """What the case computes, from a copy in the plain form every engine runs (topologically
    sorted, weights not among the inputs)."""
    m = fc.model(pass_name, case)
    if pass_name == "topological-sort":
        m.graph.sort()
    return interpret(m, feeds)


@pytest.mark.parametrize(("pass_name", "case"), fc.all_cases())
def test_pass_fires_and_keeps_the_outputs(pass_name, case):
    model = fc.model(pass_name, case)
    feeds = fc.random_feeds(model)
    want = _reference_outputs(pass_name, case, feeds)
    assert PassManager.parse(pass_name, REGISTRY).run(model), f"{pass_name} did nothing on {case}"
    irforge.verify(model)
    precision = PRECISION.get(pass_name)
    assert_close(want, interpret(model, feeds), f"{pass_name} on {case} (reference interpreter)", precision=precision)
    got = _onnxruntime_outputs(model, feeds)  # a second engine, on the rewritten model
    assert_close(want, got, f"{pass_name} on {case} (onnxruntime)", precision=precision)


PRECISION = {"convert-precision": "float16", "convert-precision{to=bfloat16}": "bfloat16"}
"""The passes (and options) meant to change digits: compared with their precision's tolerance."""

STRING_OPTIONS = {"ops": "Gelu+HardSwish", "keep": "Softmax+LayerNormalization", "target": "tvm", "to": "NCHW",
                  "convert-precision.to": "bfloat16"}  # fmt: skip
"""Non-default values of the string options (op lists) the passes take, by option or by pass.option."""


def _non_default(pass_name: str, field: dataclasses.Field):
    default = field.default
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return {0: 3, 1 << 20: 64}.get(default, max(default // 2, 1))
    if isinstance(default, tuple):
        return ("Relu", "Sigmoid")
    if isinstance(default, str) and f"{pass_name}.{field.name}" in STRING_OPTIONS:
        return STRING_OPTIONS[f"{pass_name}.{field.name}"]
    if isinstance(default, str) and field.name in STRING_OPTIONS:
        return STRING_OPTIONS[field.name]
    raise AssertionError(f"no non-default value known for option {field.name}={default!r}")


OPTIONS = [(name, f.name) for name, cls in sorted(REGISTRY.passes.items()) for f in dataclasses.fields(cls)]


def test_every_option_is_listed():
    assert {p for p, _ in OPTIONS} >= {"constant-fold", "freeze-initializers", "shape-inference", "canonicalize"}


@pytest.mark.parametrize(("pass_name", "option"), OPTIONS)
def test_every_pass_option_runs_and_keeps_the_outputs(pass_name, option):
    cls = REGISTRY.passes[pass_name]
    field = next(f for f in dataclasses.fields(cls) if f.name == option)
    p = cls(**{option: _non_default(pass_name, field)})
    text = str(PassManager.from_passes([p]))
    precision = PRECISION.get(text, PRECISION.get(pass_name))
    assert f"{option.replace('_', '-')}=" in text
    for case in fc.CASES[pass_name]:
        model = fc.model(pass_name, case)
        feeds = fc.random_feeds(model)
        want = _reference_outputs(pass_name, case, feeds)
        PassManager.parse(text, REGISTRY).run(model)
        irforge.verify(model)
        if precision:  # keep-io=false: the graph's inputs and outputs are of the lower type too
            feeds = {v.name: feeds[v.name].astype(to_numpy(v.type.dtype)) for v in model.graph.inputs}
            got = [g.astype(w.dtype) for g, w in zip(interpret(model, feeds), want, strict=True)]
        else:
            got = interpret(model, feeds)
        assert_close(want, got, f"{text} on {case}", precision=precision)


@pytest.mark.parametrize("level", ["-O1", "-O2", "-O3"])
def test_the_bundled_example_keeps_its_outputs_at_every_level(level):
    original = irforge.load(EXAMPLE)
    feeds = {"image": np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    want = _onnxruntime_outputs(original, feeds)
    optimized = irforge.optimize(irforge.load(EXAMPLE), level)
    assert len(optimized.graph) < len(original.graph)
    assert_close(want, _onnxruntime_outputs(optimized, feeds), f"{level} on small_cnn (onnxruntime)")
    assert_close(want, interpret(optimized, feeds), f"{level} on small_cnn (reference interpreter)")
