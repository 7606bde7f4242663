"""Every built-in pass keeps every ONNX node-test case computing the suite's expected outputs,
on the reference interpreter and on onnxruntime (exported model), and leaves a valid graph."""

from __future__ import annotations

import gc
import os
import warnings

import node_suite as ns
import onnx
import pytest
import real_models as rm
from conftest import COUNTS

import irforge
from irforge.backends.onnx import to_proto
from irforge.core_ir import interpret, verify_model
from irforge.core_ir.fingerprint import model_fingerprint
from irforge.passes.manager import PassManager
from irforge.plugins import build_registry
from irforge.testing import SemanticsChangedError, assert_close
from irforge.testing.backend_conformance import case_op, sample_cases

REGISTRY = build_registry(discover=False)
CHANGES_DIGITS = {"convert-precision"}
"""Passes that round on purpose: held to their precision's tolerance in their own tests
(tests/test_convert_precision.py runs the node suite and the light models), not to float32's."""
PASSES = sorted(set(REGISTRY.passes) - CHANGES_DIGITS)
LEVELS = ["O1", "O2"]
FULL_GRID = os.environ.get("IRFORGE_FULL_GRID") == "1"
PER_PASS = 1
"""Cases of each op a single pass runs in CI; the levels run every sampled case."""


def _grid() -> list[tuple[str, str]]:
    """(case, pass) pairs: all of them with IRFORGE_FULL_GRID=1; in CI a fixed slice.  The slice
    takes up to 6 cases of every op (815 of the 1,884: every op covered, the ops with dozens of
    near-identical variants no longer dominating); the levels run all of them, and each single
    pass runs ``PER_PASS`` of every op's, rotating with the pass, so every sampled case still
    meets several passes and every pass still meets every op."""
    if FULL_GRID:
        return [(name, p) for p in PASSES + LEVELS for name in ns.cases()]
    by_op: dict[str, list[str]] = {}
    for name in sample_cases(6):
        by_op.setdefault(case_op(ns.cases()[name]), []).append(name)
    grid = []
    for index, p in enumerate(PASSES + LEVELS):
        for names in by_op.values():
            k = len(names) if p in LEVELS else min(PER_PASS, len(names))
            grid.extend((names[(index * PER_PASS + j) % len(names)], p) for j in range(k))
    return grid


def _manager(pipeline: str) -> PassManager:
    return PassManager.parse(pipeline, REGISTRY.runnable, pipelines=REGISTRY.pipelines)


@pytest.mark.parametrize(("name", "pass_name"), _grid())
def test_pass_keeps_node_suite_outputs(name, pass_name):
    case = ns.cases()[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ns.load(name)
        before = model_fingerprint(model)
        if not _manager(pass_name).run(model):
            # the graph as imported, whose outputs test_node_suite checks: only the claim is new
            assert model_fingerprint(model) == before, f"{pass_name} said it changed nothing, but it did"
            COUNTS[f"passes: {pass_name} left a node-suite case as imported (fingerprint checked)"] += 1
            return
        COUNTS[f"passes: {pass_name} changed a node-suite case"] += 1
        verify_model(model)
        checked = False
        if ns.passes_reference(name):
            for inputs, expected in case.data_sets:
                got = interpret(model, ns.feeds(case.model, inputs))
                ns.assert_similar(ns.expected(expected), got, case.rtol, case.atol)
            checked = True
        check, _ = ns.exclusions().get(name, (None, None))
        folds = pass_name in ("constant-fold", *LEVELS)
        if ns.passes_ort(name) and check != "ort" and not (check == "ort-folded" and folds):
            ns.run_ort(to_proto(model), case)
            checked = True
    COUNTS[f"passes: {pass_name} keeps node-suite outputs" if checked else "passes: case run by neither engine"] += 1


PREPARE = "freeze-initializers,shape-inference"
LIGHT_PIPELINES = [PREPARE, *(f"{PREPARE},{p}" for p in PASSES), "O1", "O2", "O3",
                   "fixpoint(canonicalize,dce),topological-sort"]  # fmt: skip
"""Each pass after freeze-initializers (in these IR 3 models the weights are graph inputs, which
hide them from every rewrite) and shape-inference (the files carry no types of their own), as in
every level; and every level."""


def light_model_check(path: str, pipeline: str) -> bool:
    """onnxruntime on the original (random, non-uniform weights) and on the optimized export,
    the same random input, tolerances per dtype.  A pass after ``PREPARE`` that leaves the
    prepared model as it was (its fingerprint checked) needs no engine run: the ``PREPARE``
    pipeline's own check covers that model."""
    original = rm.randomized(path)
    model = irforge.from_onnx(original)
    if pipeline.startswith(PREPARE + ","):
        _manager(PREPARE).run(model)
        before = model_fingerprint(model)
        if not _manager(pipeline[len(PREPARE) + 1 :]).run(model):
            assert model_fingerprint(model) == before, f"{pipeline} said it changed nothing, but it did"
            COUNTS[f"passes: {pipeline} left a light model as prepared (fingerprint checked)"] += 1
            return False
    else:
        _manager(pipeline).run(model)
    want, got = rm.onnxruntime_outputs(original, model)
    assert_close(want, got, f"{pipeline} on {os.path.basename(path)} (onnxruntime)")
    return True


HEAVY_PIPELINES = ["freeze-initializers,shape-inference,fuse-matmul-add", "O1", "O3"]
"""On the three models with over 60M weights (alexnet, vgg19, zfnet512: 15 s a check here), CI
runs the levels and the pass that rewrites their dense layers; IRFORGE_FULL_GRID=1 runs them all."""


def _light_cases() -> list:
    def pipelines(path: str) -> list[str]:
        return LIGHT_PIPELINES if FULL_GRID or rm.weight_count(path) < 60_000_000 else HEAVY_PIPELINES

    return [(path, p) for path in rm.MODELS for p in pipelines(path)]


@pytest.mark.parametrize(("path", "pipeline"), _light_cases(), ids=lambda x: os.path.basename(x) if "/" in x else x)
def test_pass_keeps_light_model_outputs(path, pipeline):
    try:
        if light_model_check(path, pipeline):
            COUNTS[f"passes: {pipeline} keeps light-model outputs (onnxruntime)"] += 1
    finally:  # an IR is cyclic: its weights go with the next full collection, which may be far off
        gc.collect()


BROKEN = {
    "scale-times-1.1": lambda s, t: (s * 1.1, t),
    "mean-sign-flipped": lambda s, t: (s, t + 0.2 * s),  # shift = bias - mean*s: a flipped mean adds 2*mean*s
}


BN_MODELS = [p for p in rm.MODELS if any(n.op_type == "BatchNormalization" for n in onnx.load(p).graph.node)]


@pytest.mark.parametrize("breakage", sorted(BROKEN))
@pytest.mark.parametrize("path", BN_MODELS, ids=os.path.basename)
def test_a_broken_conv_bn_fusion_fails_the_real_model_check(path, breakage, monkeypatch):
    """The check above must notice a wrong fusion on every model where the fusion fires."""
    from irforge.passes import fuse_conv_bn

    pipeline = "freeze-initializers,shape-inference,fuse-conv-bn"
    model = irforge.from_onnx(rm.randomized(path))
    _manager("freeze-initializers,shape-inference").run(model)
    assert _manager("fuse-conv-bn").run(model)
    right = fuse_conv_bn._bn_scale_shift
    monkeypatch.setattr(fuse_conv_bn, "_bn_scale_shift", lambda m: BROKEN[breakage](*right(m)))
    with pytest.raises(SemanticsChangedError):
        light_model_check(path, pipeline)
