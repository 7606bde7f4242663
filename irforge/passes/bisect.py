"""Finding the rewrite that changed a model's outputs: ``irforge bisect``.

The pipeline runs on a copy of the model, pass by pass.  After each pass that changed it, the
model runs on the same inputs as the original (reference interpreter) and its outputs are compared
with the tolerance of their type.  The first pass after which they differ is undone by its
journal and run once more under a :class:`~irforge.core_ir.rewrite_check.RewriteChecker` whose
cones start from the values of a real run of the model as it was: the first replacement whose
two sides disagree on those values is the first wrong rewrite.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core_ir.clone import clone_model
from ..core_ir.dtypes import TOLERANCES
from ..core_ir.errors import IrforgeError
from ..core_ir.interpreter import Interpreter
from ..core_ir.model import Model
from ..core_ir.rewrite_check import Rejection, RewriteChecker, difference, random_inputs
from .base import Pass, PassContext, PassResult
from .instrumentation import Instrument
from .manager import PassFailedError, PassManager


@dataclass
class BisectResult:
    """What :func:`bisect` found.  ``differs`` tells whether any pass changed the outputs."""

    pipeline: str
    passes_run: int
    """Pass runs compared (a pass in a fixed-point group counts once per round)."""
    first_pass: str | None = None
    step: int | None = None
    """Which pass run (from 1) first changed the outputs."""
    outputs: list[str] = field(default_factory=list)
    """How each output that differs differs."""
    rewrite: Rejection | None = None
    """The first rewrite of that pass whose two sides disagree, when one does."""
    checked: str = ""
    """The checker's summary of that pass's rewrites."""

    @property
    def differs(self) -> bool:
        return self.first_pass is not None

    def report(self) -> str:
        if not self.differs:
            return f"the outputs agree after each of the {self.passes_run} pass runs of '{self.pipeline}'"
        lines = [f"the outputs differ after pass run {self.step} of '{self.pipeline}': {self.first_pass}",
                 *(f"  {o}" for o in self.outputs)]  # fmt: skip
        if self.rewrite is not None:
            lines += [f"first rewrite that changes numbers (replacement {self.rewrite.index} of the pass):",
                      *(f"  {s}" for s in str(self.rewrite).splitlines())]  # fmt: skip
        else:
            lines.append(f"no single rewrite of {self.first_pass} changes numbers beyond the tolerance "
                         f"({self.checked}): its small differences add up, or it edits nodes in place")  # fmt: skip
        return "\n".join(lines)


class _Differs(Exception):
    def __init__(self, pass_: Pass, step: int, outputs: list[str]):
        super().__init__(f"the outputs differ after {pass_.name}")
        self.pass_, self.step, self.outputs = pass_, step, outputs


class _CompareOutputs(Instrument):
    """After each pass that changed the model: run it and compare with the original's outputs."""

    def __init__(self, feeds: Mapping[str, Any], expected: list, names: list[str], precision: str | None):
        self.feeds, self.expected, self.names, self.precision = feeds, expected, names, precision
        self.runs = 0

    def after_pass(self, pass_: Pass, model: Model, ctx: PassContext, result: PassResult) -> None:
        self.runs += 1
        if not result.changed:
            return
        try:
            actual = Interpreter(model).run(self.feeds)
        except IrforgeError as e:
            raise _Differs(pass_, self.runs, [f"the model no longer runs: {e}"]) from None
        outputs = []
        for name, e, a in zip(self.names, self.expected, actual, strict=True):
            rtol, atol = TOLERANCES.get(self.precision or np.asarray(e).dtype.name, (0.0, 0.0))
            found = difference(e, a, rtol, atol)
            if found is not None:
                outputs.append(f"output %{name}: {found}")
        if outputs:
            raise _Differs(pass_, self.runs, outputs)


def bisect(
    model: Model,
    pipeline: str,
    feeds: Mapping[str, Any] | None = None,
    *,
    seed: int = 0,
    registry: Any = None,
    precision: str | None = None,
) -> BisectResult:
    """Find the first pass of ``pipeline``, then its first rewrite, after which ``model``'s
    outputs differ on ``feeds`` (by default seeded random inputs).

    ``model`` is not changed.  ``registry`` is as for :meth:`PassManager.parse`; ``precision``
    (e.g. ``"float16"``) compares outputs with that type's tolerance instead of their own.
    """
    work = clone_model(model)
    feeds = dict(feeds) if feeds is not None else random_inputs(work, seed)
    try:
        expected = Interpreter(work).run(feeds)
    except IrforgeError as e:
        raise IrforgeError(f"bisect: the original model does not run on the inputs: {e}") from None
    names = [v.name or f"#{i}" for i, v in enumerate(work.graph.outputs)]
    compare = _CompareOutputs(feeds, expected, names, precision)
    pm = PassManager.parse(pipeline.strip(), registry, instruments=[compare])
    text = pipeline.strip()
    try:
        pm.run(work)
    except PassFailedError as e:
        found = e.__cause__
        if not isinstance(found, _Differs):
            raise
    else:
        return BisectResult(text, compare.runs)
    # the pass was rolled back: run it again, checking each rewrite against the real values
    checker = RewriteChecker(known=[Interpreter(work).values(feeds)])
    single = PassManager.from_passes([found.pass_], provider=pm.provider, rewrite_checker=checker)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        single.run(work)
    first = checker.rejections[0] if checker.rejections else None
    return BisectResult(text, found.step, found.pass_.name, found.step, found.outputs, first, checker.summary())


__all__ = ["BisectResult", "bisect"]
