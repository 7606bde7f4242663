"""Every built-in pass keeps every ONNX node-test case computing the suite's expected outputs,
on the reference interpreter and on onnxruntime (exported model), and leaves a valid graph."""

from __future__ import annotations

import warnings

import node_suite as ns
import pytest
from conftest import COUNTS

import irforge
from irforge.backends.onnx import to_proto
from irforge.core_ir import interpret, verify_model
from irforge.passes.manager import PassManager
from irforge.plugins import build_registry

REGISTRY = build_registry(discover=False)
PASSES = sorted(REGISTRY.passes)
NAMES = list(ns.cases())


@pytest.mark.parametrize("pass_name", PASSES)
@pytest.mark.parametrize("name", NAMES)
def test_pass_keeps_node_suite_outputs(name, pass_name):
    case = ns.cases()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = irforge.from_onnx(case.model)
        PassManager.parse(pass_name, REGISTRY.passes).run(model)
        verify_model(model)
        checked = False
        if ns.passes_reference(name):
            for inputs, expected in case.data_sets:
                ns.assert_similar(expected, interpret(model, ns.feeds(case.model, inputs)), case.rtol, case.atol)
            checked = True
        check, _ = ns.exclusions().get(name, (None, None))
        if ns.passes_ort(name) and check != "ort":
            ns.run_ort(to_proto(model), case)
            checked = True
    COUNTS[f"passes: {pass_name} keeps node-suite outputs" if checked else "passes: case run by neither engine"] += 1
