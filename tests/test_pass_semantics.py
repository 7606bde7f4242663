"""Every built-in pass keeps every ONNX node-test case computing the suite's expected outputs,
on the reference interpreter and on onnxruntime (exported model), and leaves a valid graph."""

from __future__ import annotations

import os
import warnings

import node_suite as ns
import numpy as np
import onnx
import pytest
import test_light_models as tlm
from conftest import COUNTS

import irforge
from irforge.backends.onnx import to_proto
from irforge.core_ir import interpret, verify_model
from irforge.passes.manager import PassManager
from irforge.plugins import build_registry

REGISTRY = build_registry(discover=False)
PASSES = sorted(REGISTRY.passes)
LEVELS = ["O1", "O2"]
NAMES = list(ns.cases())


def _manager(pipeline: str) -> PassManager:
    return PassManager.parse(pipeline, REGISTRY.runnable, pipelines=REGISTRY.pipelines)


@pytest.mark.parametrize("pass_name", PASSES + LEVELS)
@pytest.mark.parametrize("name", NAMES)
def test_pass_keeps_node_suite_outputs(name, pass_name):
    case = ns.cases()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = irforge.from_onnx(case.model)
        if _manager(pass_name).run(model):
            COUNTS[f"passes: {pass_name} changed a node-suite case"] += 1
        verify_model(model)
        checked = False
        if ns.passes_reference(name):
            for inputs, expected in case.data_sets:
                ns.assert_similar(expected, interpret(model, ns.feeds(case.model, inputs)), case.rtol, case.atol)
            checked = True
        check, _ = ns.exclusions().get(name, (None, None))
        folds = pass_name in ("constant-fold", *LEVELS)
        if ns.passes_ort(name) and check != "ort" and not (check == "ort-folded" and folds):
            ns.run_ort(to_proto(model), case)
            checked = True
    COUNTS[f"passes: {pass_name} keeps node-suite outputs" if checked else "passes: case run by neither engine"] += 1


@pytest.mark.parametrize("pipeline", [*PASSES, *LEVELS, "fixpoint(canonicalize,dce),topological-sort"])
@pytest.mark.parametrize("path", tlm.MODELS, ids=os.path.basename)
def test_pass_keeps_light_model_outputs(path, pipeline):
    """onnxruntime on the original and on the optimized export, same random input."""
    original = onnx.load(path)
    model = irforge.load(path)
    _manager(pipeline).run(model)
    verify_model(model)
    exported = to_proto(model)
    onnx.checker.check_model(exported, full_check=True)
    feeds = tlm._random_feeds(original)
    want = ns.ort_session(original.SerializeToString()).run(None, feeds)
    got = ns.ort_session(exported.SerializeToString()).run(None, feeds)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    COUNTS[f"passes: {pipeline} keeps light-model outputs (onnxruntime)"] += 1
