"""The ONNX node-test suite on the XLA backend: every case passes or is refused up front as
unsupported; a wrong number or a crash fails.  The floor pins today's coverage."""

from __future__ import annotations

import functools

import pytest

import irforge
from irforge.backends.conformance import cases, run_case, summary

PASSING_FLOOR = 1340
"""Cases passing on xla when this floor was set (docs/backend-coverage.md has the table)."""


@functools.cache
def _xla():
    return irforge.backend("xla")


def _prepare(model):
    prepared = irforge._prepared(model, _xla())
    model.graph, model.functions = prepared.graph, prepared.functions


@functools.cache
def _result(name: str):
    return run_case(_xla(), name, _prepare)


@pytest.mark.parametrize("name", list(cases()))
def test_case_passes_or_is_refused_up_front(name):
    r = _result(name)
    assert r.outcome in ("pass", "unsupported"), f"{name} ({r.op}): {r.outcome}: {r.detail}"


def test_coverage_does_not_fall():
    counts = summary([_result(n) for n in cases()])
    assert counts["wrong"] == 0 and counts["error"] == 0, counts
    assert counts["pass"] >= PASSING_FLOOR, counts
