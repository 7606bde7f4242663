"""Run a backend over the ONNX backend node-test suite of the installed ``onnx`` package.

Each case ends in one of: ``pass`` (every output within the suite's own tolerances),
``unsupported`` (the backend refused the model with :class:`UnsupportedError` before running it),
``wrong`` (it ran and a number is off: a bug, and the one outcome that must never happen),
``error`` (lowering, compiling or running failed some other way) or ``not-loaded`` (irforge
itself cannot import the case).  A third-party backend can measure itself the same way:
``run_suite(MyBackend())``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import onnx

from ..backends.base import Backend, UnsupportedError

OUTCOMES = ("pass", "unsupported", "refused-late", "wrong", "error", "not-loaded", "nondeterministic")
"""*refused-late*: the backend accepted the model up front (``unsupported()`` empty) and then
refused it while compiling or running: its checks and its rules disagree, a bug."""
RANDOM_OPS = frozenset({"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli",
                        "Multinomial"})  # fmt: skip
"""A case holding one of these draws numbers no other engine draws: only its outputs' shapes and
dtypes are compared (outcome ``nondeterministic``)."""
ATOL_FLOOR = {"DFT": 1e-5}
"""Absolute tolerances raised for every engine alike.  The suite holds DFT to 1e-7 on outputs up
to 540, below float32's rounding there (3e-5), and its own expected outputs carry that rounding:
``test_dft_inverse_opset19`` stores an exact 0 as 1.9e-7, so only numpy's own float32 pocketfft
meets 1e-7 on every case."""


@dataclass
class CaseResult:
    name: str
    op: str
    outcome: str
    detail: str = ""


@functools.cache
def cases() -> dict[str, object]:
    """name -> onnx ``TestCase`` (model, data sets, tolerances), in the suite's order."""
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in node_cases.collect_testcases(None)}


def case_op(case) -> str:
    """The op a case tests: its last node's (the others build its inputs)."""
    nodes = case.model.graph.node
    return nodes[-1].op_type if nodes else "?"


def sample_cases(per_op: int) -> list[str]:
    """A fixed, representative slice of the suite: for every op, ``per_op`` of its cases spread
    evenly over the suite's order (all of them where it has fewer).  Every op stays covered while
    the ops with dozens of near-identical variants (Cast, Attention, Reshape) stop dominating."""
    by_op: dict[str, list[str]] = {}
    for name, case in cases().items():
        by_op.setdefault(case_op(case), []).append(name)
    chosen = set()
    for names in by_op.values():
        n = len(names)
        chosen.update(names if n <= per_op else (names[i * n // per_op] for i in range(per_op)))
    return [name for name in cases() if name in chosen]


def convert(x):
    """A suite value as the engines take it: the generators store some inputs and outputs as
    ``TensorProto``/``SequenceProto``/``OptionalProto`` messages or numpy scalars."""
    from onnx import numpy_helper

    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, onnx.SequenceProto):
        return [convert(e) for e in numpy_helper.to_list(x)]
    if isinstance(x, onnx.OptionalProto):
        return convert(numpy_helper.to_optional(x))
    if isinstance(x, np.generic):
        return np.array(x)
    if isinstance(x, list):
        return [convert(e) for e in x]
    return x


def assert_similar(expected: list, actual: list, rtol: float, atol: float) -> None:
    """The comparison onnx's own backend test runner makes."""
    from onnx.backend.test.runner import Runner

    Runner.assert_similar_outputs(expected, actual, rtol=rtol, atol=atol)


def run_case(backend: Backend, name: str, prepare: Callable | None = None) -> CaseResult:
    """Load case ``name``, optionally ``prepare`` the model (a pipeline), compile and run it on
    every data set of the case."""
    from ..frontends.onnx import load

    case = cases()[name]
    op = case_op(case)
    try:
        model = load(case.model)
        if prepare is not None:
            prepare(model)
    except Exception as e:
        return CaseResult(name, op, "not-loaded", f"{type(e).__name__}: {e}"[:300])
    problems = backend.unsupported(model)
    if problems:
        return CaseResult(name, op, "unsupported", "; ".join(f"{p.op}: {p.why}" for p in problems)[:300])
    try:
        exe = backend.compile(model)
    except UnsupportedError as e:
        return CaseResult(name, op, "refused-late", "; ".join(p.why for p in e.problems)[:300])
    except Exception as e:
        return CaseResult(name, op, "error", f"compile: {type(e).__name__}: {e}"[:300])
    random = any(n.op_type in RANDOM_OPS and not n.domain for g in model.graph.all_graphs() for n in g)
    for inputs, outputs in case.data_sets:
        feeds = [convert(v) for v in inputs]
        try:
            with np.errstate(all="ignore"):
                got = exe(*feeds)
        except UnsupportedError as e:
            return CaseResult(name, op, "refused-late", "; ".join(p.why for p in e.problems)[:300])
        except Exception as e:
            return CaseResult(name, op, "error", f"run: {type(e).__name__}: {e}"[:300])
        want = [convert(o) for o in outputs]
        if random:
            alike = len(want) == len(got) and all(
                np.shape(w) == np.shape(g) and np.asarray(w).dtype == np.asarray(g).dtype
                for w, g in zip(want, got, strict=True))
            if not alike:
                return CaseResult(name, op, "wrong", "the random draws' shapes or dtypes differ")
            continue
        try:
            assert_similar(want, got, rtol=case.rtol, atol=max(case.atol, ATOL_FLOOR.get(op, 0.0)))
        except AssertionError as e:
            return CaseResult(name, op, "wrong", str(e).strip().splitlines()[-1][:300] if str(e).strip() else "differs")
        except Exception as e:  # the comparison itself could not be made: types or shapes differ
            return CaseResult(name, op, "wrong", f"{type(e).__name__}: {e}"[:300])
    return CaseResult(name, op, "nondeterministic" if random else "pass")


def run_suite(backend: Backend, names: Iterable[str] | None = None, prepare: Callable | None = None,
              progress: Callable[[CaseResult], None] | None = None) -> list[CaseResult]:  # fmt: skip
    results = []
    for name in names if names is not None else cases():
        r = run_case(backend, name, prepare)
        results.append(r)
        if progress is not None:
            progress(r)
    return results


def summary(results: list[CaseResult]) -> dict[str, int]:
    out = dict.fromkeys(OUTCOMES, 0)
    for r in results:
        out[r.outcome] += 1
    return out
