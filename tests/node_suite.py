"""The ONNX backend node-test suite, generated from the installed ``onnx`` package."""

from __future__ import annotations

import functools
import os
import warnings

import numpy as np
import onnx

from irforge.testing.backend_conformance import assert_similar, cases, convert

__all__ = ["assert_similar", "cases", "convert", "exclusions", "expected", "feeds", "ort_session"]

EXCLUSIONS_FILE = os.path.join(os.path.dirname(__file__), "node_suite_exclusions.txt")


@functools.cache
def exclusions() -> dict[str, tuple[str, str]]:
    """name -> (check, reason): cases a check skips, each with the reason written down."""
    out = {}
    with open(EXCLUSIONS_FILE, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, check, reason = (part.strip() for part in line.split("|", 2))
            out[name] = (check, reason)
    return out


def load(name: str):
    """The case's model as irforge loads it; one the loader refuses to upgrade (listed with check
    ``upgrade``), at its own opset."""
    import irforge

    case = cases()[name]
    if exclusions().get(name, (None, None))[0] == "upgrade":
        return irforge.load(case.model.SerializeToString(), upgrade=False)
    return irforge.from_onnx(case.model)


def feeds(model: onnx.ModelProto, inputs: list) -> dict:
    return {i.name: convert(v) for i, v in zip(model.graph.input, inputs, strict=False)}


def expected(outputs: list) -> list:
    return [convert(o) for o in outputs]


def ort_session(model_bytes: bytes):
    import onnxruntime as ort

    ort.set_default_logger_severity(4)
    so = ort.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


def run_ort(model: onnx.ModelProto, case) -> None:
    """Run every data set of ``case`` on ``model`` with onnxruntime; raise if any output differs."""
    sess = ort_session(model.SerializeToString())
    names = [o.name for o in sess.get_outputs()]
    for inputs, want in case.data_sets:
        got = sess.run(names, feeds(model, inputs))
        assert_similar(expected(want), got, case.rtol, case.atol)


def run_reference(model: onnx.ModelProto, case) -> None:
    from onnx.reference import ReferenceEvaluator

    ev = ReferenceEvaluator(model)
    for inputs, want in case.data_sets:
        got = ev.run(None, feeds(model, inputs))
        assert_similar(expected(want), got, case.rtol, case.atol)


@functools.cache
def passes_ort(name: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_ort(cases()[name].model, cases()[name])
        return True
    except Exception:
        return False


@functools.cache
def passes_reference(name: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_reference(cases()[name].model, cases()[name])
        return True
    except Exception:
        return False


def to_list(x):
    return list(x) if isinstance(x, list | tuple) else x


__all__ = ["assert_similar", "cases", "exclusions", "np", "passes_ort", "passes_reference"]
