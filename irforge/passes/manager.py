"""Runs a pipeline over a model: every graph it holds, fixed-point groups, oscillation checks,
instruments around each pass, and transactions so a failed pass leaves the model as it was."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence

from ..core_ir.clone import clone_model
from ..core_ir.errors import IrforgeError
from ..core_ir.fingerprint import model_fingerprint
from ..core_ir.gcpause import paused_gc
from ..core_ir.model import Model
from ..core_ir.printer import print_model
from .base import Pass, PassContext, PassResult
from .instrumentation import Instrument
from .pipeline import Element, Fixpoint, Pipeline, str_element


class OscillationWarning(UserWarning):
    """A fixed-point group brought the graph back to an earlier state instead of settling."""


class PassFailedError(IrforgeError):
    """A pass raised or left a graph that fails verification; the model was rolled back."""


class PassSkippedWarning(UserWarning):
    """With ``keep_going``, a failed pass was rolled back and the pipeline went on."""


class PassManager:
    """A pipeline and the means to run it.  ``PassManager.parse(text, registry)`` and
    ``PassManager(Pipeline(...))`` give equal managers; ``str(pm)`` is the pipeline text.

    ``provider`` maps a pass name to the plugin that registered it (for error messages);
    ``transactional`` snapshots the model before each pass (one copy of the IR alive at a time).
    """

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        instruments: Sequence[Instrument] = (),
        provider: Callable[[str], str] | None = None,
        transactional: bool = True,
        keep_going: bool = False,
        reproducer_dir: str | None = None,
    ):
        self.pipeline = pipeline
        self.instruments = list(instruments)
        self.provider = provider or (lambda name: "unknown plugin")
        self.transactional = transactional
        self.keep_going = keep_going
        self.reproducer_dir = reproducer_dir
        self._spare: Model | None = None

    @classmethod
    def parse(
        cls, text: str, registry: Mapping[str, type[Pass]], *, pipelines: Mapping[str, str] | None = None, **options
    ) -> PassManager:
        return cls(Pipeline.parse(text, registry, pipelines), **options)

    def __str__(self) -> str:
        return str(self.pipeline)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PassManager) and other.pipeline == self.pipeline

    __hash__ = None  # type: ignore[assignment]

    def run(self, model: Model, ctx: PassContext | None = None) -> bool:
        """Run every pass in order on ``model``; True when any changed it.

        Raises :class:`PassFailedError` naming the pass and its plugin when a pass raises or an
        instrument (verify-each, the honesty check) rejects its result; the model is then as it
        was before that pass.
        """
        ctx = ctx or PassContext()
        ctx.model = model
        changed = False
        self._spare = None
        try:
            for element in self.pipeline.passes:
                changed |= self._element(element, model, ctx)
        finally:
            self._spare = None
        return changed

    def _element(self, element: Element, model: Model, ctx: PassContext) -> bool:
        if isinstance(element, Fixpoint):
            return self._fixpoint(element, model, ctx)
        return self._transaction(element, model, ctx).changed

    def _fixpoint(self, group: Fixpoint, model: Model, ctx: PassContext) -> bool:
        seen = {model_fingerprint(model): 0}
        changed = False
        for iteration in range(1, group.max_iterations + 1):
            round_changed = False
            for element in group.passes:
                round_changed |= self._element(element, model, ctx)
            if not round_changed:
                return changed
            changed = True
            state = model_fingerprint(model)
            if state in seen:
                warnings.warn(
                    f"{group}: iteration {iteration} brought the graph back to its state after iteration "
                    f"{seen[state]}; the passes {', '.join(p.name for p in group.passes)} undo each other",
                    OscillationWarning,
                    stacklevel=2,
                )
                return changed
            seen[state] = iteration
        warnings.warn(f"{group}: still changing after {group.max_iterations} iterations", stacklevel=2)
        return changed

    def _transaction(self, p: Pass, model: Model, ctx: PassContext) -> PassResult:
        snapshot = None
        try:
            # The cycle collector would rescan the whole IR (and its snapshot) again and again
            # while a pass allocates; the garbage of one pass is collected after it instead.
            with paused_gc():
                if self.transactional:
                    # A pass that reports no change leaves its snapshot a true copy of the model
                    # (the honesty check holds passes to that), so the next pass reuses it.
                    snapshot = self._spare if self._spare is not None else clone_model(model)
                    self._spare = None
                for inst in self.instruments:
                    inst.before_pass(p, model, ctx)
                result = self._pass(p, model, ctx)
                for inst in self.instruments:
                    inst.after_pass(p, model, ctx, result)
            if not result.changed:
                self._spare = snapshot
            return result
        except Exception as e:
            if snapshot is None:
                raise
            vars(model).update(vars(snapshot))
            ctx.analyses.clear()
            message = f"pass {p.name!r} (from {self.provider(p.name)}) failed: {type(e).__name__}: {e}"
            if self.reproducer_dir:
                message += "\n" + self._reproducer(p, model, message)
            if self.keep_going:
                warnings.warn(message + "\nthe pass was rolled back and skipped", PassSkippedWarning, stacklevel=2)
                return PassResult(False)
            raise PassFailedError(message + "\nthe model is as it was before this pass") from e

    def _pass(self, p: Pass, model: Model, ctx: PassContext) -> PassResult:
        graphs = list(model.graph.all_graphs()) if p.recurse else [model.graph]
        if p.recurse:
            graphs += [g for fn in model.functions.values() for g in fn.graph.all_graphs()]
        changed, statistics = False, {}
        for g in graphs:
            result = p.run(g, ctx)
            changed |= result.changed
            for k, v in result.statistics.items():
                statistics[k] = statistics.get(k, 0) + v
        ctx.invalidate(p.preserves)
        return PassResult(changed, statistics)

    def _reproducer(self, p: Pass, model: Model, message: str) -> str:
        """Write the IR the pass got and the pass itself; return how to replay it."""
        os.makedirs(self.reproducer_dir, exist_ok=True)  # type: ignore[arg-type]
        path = os.path.join(self.reproducer_dir, f"{re.sub(r'[^A-Za-z0-9_.-]', '_', p.name)}.irf")  # type: ignore[arg-type]
        pipeline = str_element(p)
        rerun = f"irforge optimize {path} -o out.onnx --pipeline '{pipeline}'"
        comment = "".join(f"// {line}\n" for line in message.splitlines())
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"{comment}// full pipeline: {self}\n// rerun: {rerun}\n{print_model(model)}")
        return f"reproducer written to {path}; rerun it with: {rerun}"
