"""Checks shared by the frontend tests: an imported model computes what the framework computes,
on each named backend, before and after an optimization pipeline."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import irforge
from irforge.core_ir.clone import clone_model
from irforge.core_ir.verifier import verify_model


def run_on(model, backend: str, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    if backend == "reference":
        names = [v.name for v in model.graph.inputs if not v.is_initializer()]
        out = irforge.interpret(model, dict(zip(names, arrays, strict=True)))
        return [np.asarray(o) for o in (out.values() if isinstance(out, dict) else out)]
    return irforge.compile(model, backend)(*arrays)


def assert_matches(model, arrays: Sequence[np.ndarray], expected: Sequence[np.ndarray], *,
                   backends: Sequence[str] = ("reference",), pipeline: str | None = None,
                   rtol: float = 1e-4, atol: float = 1e-4) -> None:  # fmt: skip
    """``model`` on every backend (and, with ``pipeline``, an optimized copy too) within tolerance of
    ``expected``; integer and bool outputs exactly."""
    verify_model(model)
    models = [("imported", model)]
    if pipeline:
        optimized = irforge.optimize(clone_model(model), pipeline)
        models.append((pipeline, optimized))
    for label, m in models:
        for backend in backends:
            got = run_on(m, backend, arrays)
            assert len(got) == len(expected), f"{label} on {backend}: {len(got)} outputs, expected {len(expected)}"
            for i, (g, e) in enumerate(zip(got, expected, strict=True)):
                g, e = np.asarray(g), np.asarray(e)
                where = f"{label} on {backend}, output {i}"
                assert g.shape == e.shape, f"{where}: shape {g.shape}, expected {e.shape}"
                if e.dtype.kind in "fc":
                    np.testing.assert_allclose(g.astype(e.dtype), e, rtol=rtol, atol=atol, equal_nan=True,
                                               err_msg=where)  # fmt: skip
                elif "float" in e.dtype.name:  # ml_dtypes' bfloat16 and float8s: numpy compares them as opaque
                    np.testing.assert_allclose(g.astype(np.float32), e.astype(np.float32), rtol=rtol, atol=atol,
                                               equal_nan=True, err_msg=where)  # fmt: skip
                else:
                    np.testing.assert_array_equal(g, e, err_msg=where)
