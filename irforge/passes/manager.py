"""Runs a pipeline over a model: every graph it holds, fixed-point groups, oscillation checks,
instruments around each pass, and transactions so a failed pass leaves the model as it was."""

from __future__ import annotations

import gc
import os
import re
import signal
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from ..core_ir.clone import clone_model
from ..core_ir.equality import models_equal
from ..core_ir.errors import IrforgeError
from ..core_ir.gcpause import paused_gc
from ..core_ir.journal import Journal
from ..core_ir.model import Model
from ..core_ir.printer import print_model
from ..core_ir.rewrite_check import RewriteChecker, RewriteRejected
from .base import Pass, PassContext, PassResult
from .instrumentation import Instrument
from .pipeline import Element, Fixpoint, Pipeline, str_element


class OscillationWarning(UserWarning):
    """A fixed-point group brought the graph back to an earlier state instead of settling."""


class PassFailedError(IrforgeError):
    """A pass raised or left a graph that fails verification; the model was rolled back."""


class PassTimeoutError(IrforgeError):
    """A pass ran past the manager's ``pass_timeout`` (it was stopped and rolled back)."""


class RewriteRejectedWarning(UserWarning):
    """A rewrite checker refused a rewrite that changed numbers; it was undone (a pattern
    rewrite alone, any other with its whole pass)."""


class PassSkippedWarning(UserWarning):
    """With ``keep_going``, a failed pass was rolled back and the pipeline went on."""


class PassManager:
    """A pipeline and the means to run it.  ``PassManager.parse(text)`` and
    ``PassManager.from_passes([...])`` give equal managers; ``str(pm)`` is the pipeline text.

    ``provider`` maps a pass name to the plugin that registered it (for error messages);
    ``transactional`` runs each pass under an undo journal (:mod:`irforge.core_ir.journal`), so a
    pass that fails is rolled back at a cost proportional to what it changed; with
    ``paranoid_rollback`` the model is also copied before each pass and every rollback is
    compared with the copy (a debugging aid: it costs a copy per pass); ``pass_timeout`` (seconds)
    stops a pass that runs longer, as if it had raised (a timer signal: on the main thread of a
    POSIX process, and only between Python bytecodes, so a pass stuck inside one C call is
    stopped when that call returns); ``rewrite_checker`` checks every rewrite as it is made
    (:mod:`irforge.core_ir.rewrite_check`): a pattern rewrite that changes numbers is undone
    alone, any other pass that makes one is rolled back whole, and the pipeline goes on.
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
        paranoid_rollback: bool = False,
        pass_timeout: float | None = None,
        rewrite_checker: RewriteChecker | None = None,
    ):
        self.pipeline = pipeline
        self.instruments = list(instruments)
        self.provider = provider or (lambda name: "unknown plugin")
        self.transactional = transactional
        self.keep_going = keep_going
        self.reproducer_dir = reproducer_dir
        self.paranoid_rollback = paranoid_rollback
        if pass_timeout is not None and not pass_timeout > 0:
            raise IrforgeError(f"pass timeout {pass_timeout} s: give a number of seconds above 0, or none")
        self.pass_timeout = pass_timeout
        self.rewrite_checker = rewrite_checker

    @classmethod
    def parse(
        cls,
        text: str,
        registry: Mapping[str, type[Pass]] | Any = None,
        *,
        pipelines: Mapping[str, str] | None = None,
        **options: Any,
    ) -> PassManager:
        """A manager for pipeline text (``"-O2"``, ``"O2"``, ``"cse,dce"``, ...).

        ``registry`` is either a plain mapping of pass names to classes, or a plugin registry
        (:func:`irforge.plugins.build_registry`); without one, the installed registry (built-ins
        and every plugin) is used.  With a plugin registry its named pipelines are known, its
        plugins' ``irforge_before_pass``/``irforge_after_pass`` hooks are called around every
        pass, and errors name the plugin that provided the failing pass.
        """
        if registry is None:
            from ..core_ir.installed import installed_registry  # the installed plugins: what "no registry" means

            registry = installed_registry()
        if hasattr(registry, "runnable"):
            from .instrumentation import HookRelay

            plugin_registry = registry
            registry = plugin_registry.runnable
            pipelines = {**plugin_registry.pipelines, **(pipelines or {})}
            options.setdefault("provider", lambda name: plugin_registry.provider("runnable", name))
            options["instruments"] = [HookRelay(plugin_registry.plugin_manager.hook), *options.get("instruments", ())]
        return cls(Pipeline.parse(text, registry, pipelines), **options)

    @classmethod
    def from_passes(cls, passes: Iterable[Element], **options: Any) -> PassManager:
        """A manager for pass instances (and :class:`Fixpoint` groups) built in Python; equal to
        ``PassManager.parse(str(pm))`` of the same pipeline."""
        return cls(Pipeline(tuple(passes)), **options)

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
        if not isinstance(model, Model):
            raise IrforgeError(f"PassManager.run takes a Model, not a {type(model).__name__}: wrap a graph as "
                               "Model(graph)")  # fmt: skip
        ctx = ctx or PassContext()
        ctx.model = model
        changed = False
        # The model's objects (millions on a big graph) are set aside from the cycle collector
        # for the run: between passes its full collections would rescan them all, for nothing,
        # since a model being optimized is alive.  What passes make and drop is still collected.
        gc.freeze()
        try:
            for step, element in enumerate(self.pipeline.passes, 1):
                for inst in self.instruments:
                    if hasattr(inst, "set_step"):
                        inst.set_step(step)
                changed |= self._element(element, model, ctx)
        finally:
            gc.unfreeze()
        return changed

    def _element(self, element: Element, model: Model, ctx: PassContext) -> bool:
        if isinstance(element, Fixpoint):
            return self._fixpoint(element, model, ctx)
        return self._transaction(element, model, ctx).changed

    def _fixpoint(self, group: Fixpoint, model: Model, ctx: PassContext) -> bool:
        # States are fingerprinted after each changing round from the second on: rounds that
        # bring the graph back to an earlier state repeat themselves, so a cycle is still caught
        # (one or two rounds later), and most groups settle by the second round, where a
        # fingerprint of a million-node model would be the most expensive thing the group does.
        seen: dict[str, int] = {}
        changed = False
        for iteration in range(1, group.max_iterations + 1):
            round_changed = False
            for element in group.passes:
                round_changed |= self._element(element, model, ctx)
            if not round_changed:
                return changed
            changed = True
            if iteration == 1:
                continue  # most groups settle in the next round: no state to remember yet
            from ..core_ir.fingerprint import model_fingerprint  # hashlib: not paid by runs that settle

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
        journal = Journal() if self.transactional else None
        copy = clone_model(model) if self.paranoid_rollback else None
        header = _model_header(model)
        rejections = len(self.rewrite_checker.rejections) if self.rewrite_checker is not None else 0
        try:
            # The cycle collector would rescan the whole IR again and again while a pass
            # allocates; the garbage of one pass is collected after it instead.
            with paused_gc():
                if journal is not None:
                    journal.open()
                try:
                    for inst in self.instruments:
                        inst.before_pass(p, model, ctx)
                    with _deadline(self.pass_timeout, p.name), self._checking(model, p):
                        result = self._pass(p, model, ctx)
                    for inst in self.instruments:
                        inst.after_pass(p, model, ctx, result)
                except BaseException:
                    if journal is not None:
                        journal.rollback()
                        _restore_header(model, header)
                    raise
                if journal is not None:
                    journal.commit()
            self._warn_rejections(rejections, "the rewrite was undone")
            return result
        except Exception as e:
            if journal is None:
                raise
            ctx.analyses.clear()
            message = f"pass {p.name!r} (from {self.provider(p.name)}) failed: {type(e).__name__}: {e}"
            if copy is not None:
                diff = models_equal(model, copy)
                if diff is not None:
                    raise PassFailedError(f"{message}\nand the rollback did not restore the model: {diff}") from e
            if isinstance(e, RewriteRejected):
                self._warn_rejections(rejections, "the pass was rolled back and the pipeline goes on")
                return PassResult(False)
            if self.reproducer_dir:
                message += "\n" + self._reproducer(p, model, message)
            if self.keep_going:
                warnings.warn(message + "\nthe pass was rolled back and skipped", PassSkippedWarning, stacklevel=2)
                return PassResult(False)
            raise PassFailedError(message + "\nthe model is as it was before this pass") from e

    def _warn_rejections(self, start: int, outcome: str) -> None:
        if self.rewrite_checker is not None:
            for rejection in self.rewrite_checker.rejections[start:]:
                warnings.warn(f"{rejection}\n{outcome}", RewriteRejectedWarning, stacklevel=5)

    def _checking(self, model: Model, p: Pass):
        if self.rewrite_checker is None:
            return nullcontext()
        from .fused_ops import function_for

        return self.rewrite_checker.watching(model, p.name, function_for)

    def _pass(self, p: Pass, model: Model, ctx: PassContext) -> PassResult:
        graphs = list(model.graph.all_graphs()) if p.recurse else [model.graph]
        if p.recurse:
            graphs += [g for fn in model.functions.values() for g in fn.graph.all_graphs()]
        changed, statistics, rewrites = False, {}, []
        for g in graphs:
            result = p.run(g, ctx)
            changed |= result.changed
            rewrites += result.rewrites
            for k, v in result.statistics.items():
                statistics[k] = statistics.get(k, 0) + v
        ctx.invalidate(p.preserves)
        return PassResult(changed, statistics, rewrites)

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


def _model_header(model: Model) -> dict:
    """The model's own fields, with its dicts copied: the journal covers graphs, nodes and values,
    and this covers what a pass may change on the model itself (functions, opset imports)."""
    header = dict(vars(model))
    for key in ("opset_imports", "functions", "metadata"):
        header[key] = dict(header[key])
    return header


def _restore_header(model: Model, header: dict) -> None:
    vars(model).update(header)


@contextmanager
def _deadline(seconds: float | None, name: str):
    """Raise :class:`PassTimeoutError` in the pass when ``seconds`` pass (SIGALRM)."""
    if not seconds:
        yield
        return
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        warnings.warn("pass_timeout needs the main thread of a POSIX process; passes run without a time limit",
                      stacklevel=3)  # fmt: skip
        yield
        return

    def expire(signum, frame):
        raise PassTimeoutError(f"pass {name!r} ran past the pass timeout of {seconds:g} s and was stopped")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
