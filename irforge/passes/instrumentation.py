"""What the manager does around each pass: timing, statistics, IR printing, verify-each, the
honesty check.

An instrument is any object with ``before_pass(pass_, model, ctx)`` and ``after_pass(pass_,
model, ctx, result)``; plugins reach the same points through the pluggy hooks
``irforge_before_pass`` / ``irforge_after_pass``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..core_ir.errors import IrforgeError
from ..core_ir.model import Model
from ..core_ir.printer import print_model
from ..core_ir.verifier import verify_model
from .base import Pass, PassContext, PassResult


class Instrument:
    """What the manager calls around every pass; subclass it and override either method.  Raising
    in ``after_pass`` rejects the pass's result: the pass is rolled back."""

    def before_pass(self, pass_: Pass, model: Model, ctx: PassContext) -> None:
        pass

    def after_pass(self, pass_: Pass, model: Model, ctx: PassContext, result: PassResult) -> None:
        pass


@dataclass
class Timing(Instrument):
    """Wall time per pass name, summed over every run of it."""

    seconds: dict[str, float] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)
    _start: float = 0.0

    def before_pass(self, pass_, model, ctx):
        self._start = time.perf_counter()

    def after_pass(self, pass_, model, ctx, result):
        self.seconds[pass_.name] = self.seconds.get(pass_.name, 0.0) + time.perf_counter() - self._start
        self.runs[pass_.name] = self.runs.get(pass_.name, 0) + 1

    def report(self) -> str:
        total = sum(self.seconds.values()) or 1e-12
        lines = ["pass timing:", f"  {'seconds':>9}  {'share':>6}  {'runs':>4}  pass"]
        for name, s in sorted(self.seconds.items(), key=lambda kv: -kv[1]):
            lines.append(f"  {s:9.4f}  {100 * s / total:5.1f}%  {self.runs[name]:4d}  {name}")
        lines.append(f"  {sum(self.seconds.values()):9.4f}  100.0%        total")
        return "\n".join(lines)


def _all_nodes(model: Model) -> set:
    nodes = set(model.graph.all_nodes())
    for fn in model.functions.values():
        nodes.update(fn.graph.all_nodes())
    return nodes


@dataclass
class Statistics(Instrument):
    """Per pass name, summed over its runs: how many runs changed the model, nodes added and
    removed (by identity, subgraphs and functions included), and the pass's own counters (for
    pattern passes, the rewrites applied per pattern).  Costs a walk of the model per pass."""

    totals: dict[str, dict[str, int]] = field(default_factory=dict)
    _before: list[set] = field(default_factory=list)

    def before_pass(self, pass_, model, ctx):
        self._before.append(_all_nodes(model))

    def after_pass(self, pass_, model, ctx, result):
        before, after = self._before.pop(), _all_nodes(model)
        t = self.totals.setdefault(pass_.name, {"runs": 0, "changed": 0, "nodes added": 0, "nodes removed": 0})
        t["runs"] += 1
        t["changed"] += int(result.changed)
        t["nodes added"] += len(after - before)
        t["nodes removed"] += len(before - after)
        for key, count in result.statistics.items():
            t[key] = t.get(key, 0) + count

    def report(self) -> str:
        lines = ["pass statistics:"]
        for name, t in self.totals.items():
            lines.append(f"  {name}")
            lines += [f"    {count:8d}  {key}" for key, count in t.items() if count or key in ("runs", "changed")]
        return "\n".join(lines)


@dataclass
class PrintIR(Instrument):
    """Prints the IR after all passes, or after the named ones; with ``only_changed``, only when
    the pass changed the graph."""

    names: frozenset[str] | None = None
    only_changed: bool = True
    stream: TextIO = sys.stderr

    def after_pass(self, pass_, model, ctx, result):
        if (self.names is None or pass_.name in self.names) and (result.changed or not self.only_changed):
            self.stream.write(f"// ----- IR after {pass_.name} -----\n{print_model(model)}\n")


class VerifyEach(Instrument):
    """Runs the verifier after every pass, so a broken graph is caught at the pass that broke it."""

    def after_pass(self, pass_, model, ctx, result):
        verify_model(model, raise_on_error=True)


class DishonestPassError(IrforgeError):
    """A pass reported ``changed=False`` but changed the graph."""


class ChangedCheck(Instrument):
    """Checks ``changed=False`` against a structural hash taken before the pass."""

    def __init__(self) -> None:
        from ..core_ir.fingerprint import model_fingerprint  # hashlib: loaded only by those who check

        self._fingerprint = model_fingerprint
        self._before: list[str] = []

    def before_pass(self, pass_, model, ctx):
        self._before.append(self._fingerprint(model))

    def after_pass(self, pass_, model, ctx, result):
        before = self._before.pop()
        if not result.changed and self._fingerprint(model) != before:
            raise DishonestPassError(f"pass {pass_.name!r} reported changed=False but changed the graph")


@dataclass
class HookRelay(Instrument):
    """Forwards to pluggy hooks (``irforge_before_pass`` / ``irforge_after_pass``) of a hook relay."""

    hook: Any

    def before_pass(self, pass_, model, ctx):
        self.hook.irforge_before_pass(pass_=pass_, graph=model.graph, ctx=ctx)

    def after_pass(self, pass_, model, ctx, result):
        self.hook.irforge_after_pass(pass_=pass_, graph=model.graph, ctx=ctx, result=result)


class Progress(Instrument):
    """A status line on a terminal for runs that take a while: the pass running, the pipeline
    steps done of all, and the time elapsed.  Silent until ``delay`` seconds have passed, and
    silent altogether when ``stream`` is not a terminal; the line is cleared when the run ends.
    """

    def __init__(self, total_steps: int, stream: TextIO | None = None, delay: float = 2.0, interval: float = 0.25):
        self.total, self.stream, self.delay, self.interval = total_steps, stream or sys.stderr, delay, interval
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.current, self.step = "", 0
        self._start = time.perf_counter()
        self._shown = False
        self._stop = None

    def set_step(self, step: int) -> None:
        """Called by the manager as it enters each top-level element of the pipeline."""
        self.step = step

    def before_pass(self, pass_, model, ctx):
        self.current = pass_.name
        if self.enabled and self._stop is None:
            import threading

            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._refresh, daemon=True)
            self._thread.start()

    def _line(self) -> str:
        return f"irforge: step {self.step}/{self.total} · {self.current} · {time.perf_counter() - self._start:.1f} s"

    def _refresh(self) -> None:
        while not self._stop.wait(self.interval):  # type: ignore[union-attr]
            if time.perf_counter() - self._start >= self.delay:
                self.stream.write("\r\033[K" + self._line())
                self.stream.flush()
                self._shown = True

    def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
        if self._shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
