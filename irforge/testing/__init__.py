"""Helpers for testing passes, irforge's own and plugins': "this IR in, that IR out", and "the
outputs did not change" on the reference interpreter and, where installed, onnxruntime.

    from irforge.testing import assert_rewrites, assert_preserves_semantics

    assert_rewrites("my-pass", before_text, after_text)
    assert_preserves_semantics("-O2", model)

Tolerances are per dtype (``TOLERANCES``): a float16 model is not held to float32's digits, and
an integer result must be exact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..core_ir.clone import clone_model
from ..core_ir.dtypes import TOLERANCES
from ..core_ir.errors import IrforgeError
from ..core_ir.graph import Graph
from ..core_ir.interpreter import interpret
from ..core_ir.model import Model
from ..core_ir.parser import parse
from ..core_ir.printer import print_model
from ..core_ir.types import TensorType
from ..core_ir.verifier import verify_model


class SemanticsChangedError(IrforgeError, AssertionError):
    """A rewrite changed what the model computes; the message names the output and the engine."""


def _as_model(model: Model | Graph | str) -> Model:
    if isinstance(model, str):
        parsed = parse(model)
        return parsed if isinstance(parsed, Model) else Model(parsed)
    return model if isinstance(model, Model) else Model(model)


def _run(pipeline: str, model: Model, passes: Sequence[type]) -> bool:
    from ..api import registry as installed
    from ..passes import PassManager, VerifyEach

    registry = installed()
    known = {**registry.runnable, **{cls.name: cls for cls in passes}}
    return PassManager.parse(pipeline, known, pipelines=registry.pipelines, instruments=[VerifyEach()]).run(model)


def assert_rewrites(pipeline: str, before: str, after: str, *, passes: Sequence[type] = ()) -> Model:
    """Run ``pipeline`` on the IR text ``before`` and check the result prints as ``after`` does
    (both are parsed and printed, so spacing and elided defaults do not matter).  ``passes`` are
    pass classes to know besides the installed ones (the pass under test, before it is packaged)."""
    model = _as_model(before)
    _run(pipeline, model, passes)
    got, want = print_model(model), print_model(_as_model(after))
    if got != want:
        raise AssertionError(f"{pipeline} produced:\n{got}\nexpected:\n{want}")
    return model


def random_feeds(model: Model, seed: int = 0, symbolic: int = 2) -> dict[str, np.ndarray]:
    """Seeded random inputs for every graph input that is not an initializer; symbolic dims take
    the size ``symbolic``."""
    from ..core_ir.dtypes import to_numpy

    rng = np.random.default_rng(seed)
    feeds = {}
    for v in model.graph.inputs:
        if v.is_initializer():
            continue
        if not isinstance(v.type, TensorType) or v.type.shape is None:
            raise IrforgeError(f"input %{v.name} has no tensor shape: pass feeds yourself")
        shape = [d if isinstance(d, int) else symbolic for d in v.type.shape]
        dtype = np.dtype(to_numpy(v.type.dtype))
        if dtype.kind == "f":
            feeds[v.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind in "iu":
            feeds[v.name] = rng.integers(0, 8, shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[v.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            raise IrforgeError(f"input %{v.name}: no random data for {dtype}; pass feeds yourself")
    return feeds


def assert_close(expected: list, actual: list, where: str, *, precision: str | None = None) -> None:
    """Compare output lists with the tolerance of each output's dtype (``TOLERANCES``), or of
    ``precision`` when given: a model computed in float16 keeps float32 outputs, not their digits."""
    if len(expected) != len(actual):
        raise SemanticsChangedError(f"{where}: {len(actual)} outputs, expected {len(expected)}")
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        e, a = np.asarray(e), np.asarray(a)
        if e.shape != a.shape or e.dtype != a.dtype:
            raise SemanticsChangedError(f"{where}: output {i} is {a.dtype}{list(a.shape)}, expected "
                                        f"{e.dtype}{list(e.shape)}")  # fmt: skip
        rtol, atol = TOLERANCES.get(precision or e.dtype.name, (0.0, 0.0))
        try:
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as err:
            raise SemanticsChangedError(f"{where}: output {i} changed\n{err}") from None


def _onnxruntime_outputs(model: Model, feeds: Mapping[str, np.ndarray]) -> list | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    from ..backends.onnx import to_proto

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(to_proto(model).SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, dict(feeds))


def assert_preserves_semantics(
    pipeline: str,
    model: Model | Graph | str,
    feeds: Mapping[str, np.ndarray] | None = None,
    *,
    passes: Sequence[type] = (),
    onnxruntime: bool = True,
    seed: int = 0,
) -> Model:
    """Run ``pipeline`` on a copy of ``model`` and check the copy still verifies and computes the
    same outputs: on the reference interpreter, and on onnxruntime (when installed and asked)
    for the original and the rewritten model.  Returns the rewritten copy; ``model`` is untouched.
    ``passes`` as for :func:`assert_rewrites`.
    """
    original = _as_model(model)
    rewritten = clone_model(original)
    feeds = dict(feeds) if feeds is not None else random_feeds(original, seed)
    _run(pipeline, rewritten, passes)
    verify_model(rewritten)
    assert_close(interpret(original, feeds), interpret(rewritten, feeds), f"{pipeline} (reference interpreter)")
    if onnxruntime:
        want = _onnxruntime_outputs(original, feeds)
        if want is not None:
            assert_close(want, _onnxruntime_outputs(rewritten, feeds), f"{pipeline} (onnxruntime)")
    return rewritten


__all__ = [
    "TOLERANCES", "SemanticsChangedError", "assert_close", "assert_preserves_semantics", "assert_rewrites",
    "random_feeds",
]  # fmt: skip
