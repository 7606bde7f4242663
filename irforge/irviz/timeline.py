"""A pipeline run as irviz's timeline: a model state after every pass that changed the model,
with the pass's time, its rewrites, and where each new node came from.

:class:`Recorder` is an ordinary pass-manager instrument, so ``irforge optimize --viz`` and
``irviz --pipeline`` record exactly what the manager ran, fixed-point rounds included.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from ..core_ir.model import Model
from ..passes.base import Pass, PassContext, PassResult
from ..passes.instrumentation import Instrument
from ..passes.pipeline import str_element
from .snapshot import NodeIds, Snapshot, provenance


@dataclass
class Step:
    """One model state: the input, or the state after a pass that changed the model."""

    title: str
    snapshot: Snapshot
    seconds: float = 0.0
    pass_name: str = ""
    rewrites: list[dict[str, Any]] = field(default_factory=list)
    statistics: dict[str, int] = field(default_factory=dict)
    folded: list[list[Any]] = field(default_factory=list)
    """The passes before this one that changed nothing: ``[pipeline text, seconds]`` each."""

    @property
    def node_count(self) -> int:
        return sum(1 for r in self.snapshot.records.values() if r["cat"] != "io" and "/" not in r["id"])


class Recorder(Instrument):
    """Records a model state after every pass that changes it (see :func:`irforge.irviz.write_report`).

    ``origins`` maps a node's identity to where it was created: the step, the pass, and for a
    pattern rewrite the pattern, its source line and the identities of the nodes it replaced.
    """

    def __init__(self, model: Model | None = None) -> None:
        self.ids = NodeIds()
        self.steps: list[Step] = []
        self.origins: dict[str, dict[str, Any]] = {}
        self.trailing: list[list[Any]] = []
        self._started: list[float] = []
        if model is not None:
            self.start(model)

    def start(self, model: Model, title: str = "input") -> None:
        """Record the model as the first step (called for you by the first pass)."""
        if not self.steps:
            self.steps.append(Step(title, Snapshot(model, self.ids)))

    def before_pass(self, pass_: Pass, model: Model, ctx: PassContext) -> None:
        self.start(model)
        self._started.append(time.perf_counter())

    def after_pass(self, pass_: Pass, model: Model, ctx: PassContext, result: PassResult) -> None:
        seconds = time.perf_counter() - self._started.pop()
        text = str_element(pass_)
        if not result.changed:
            self.trailing.append([text, round(seconds, 6)])
            return
        previous = self.steps[-1].snapshot
        snapshot = Snapshot(model, self.ids, previous)
        index = len(self.steps)
        step = Step(text, snapshot, seconds, pass_.name, statistics=dict(result.statistics), folded=self.trailing)
        self.trailing = []
        by_name = {r["name"]: sid for sid, r in previous.records.items() if r.get("name")}
        for r in result.rewrites:
            created = [snapshot.describe[d] for d in r.created if d in snapshot.describe]
            matched = [previous.describe.get(d) or by_name.get(_quoted_name(d)) for d in r.matched]
            at = short_location(r.defined_at)
            step.rewrites.append({"pattern": r.pattern, "at": at, "seconds": round(r.seconds, 6),
                                  "matched": [m for m in matched if m], "created": created,
                                  "text": [list(r.matched), list(r.created)]})  # fmt: skip
            for sid in created:
                if sid not in previous.records:
                    self.origins[sid] = {"step": index, "pass": pass_.name, "pattern": r.pattern,
                                         "at": at, "from": [m for m in matched if m]}  # fmt: skip
        for sid, record in snapshot.records.items():
            if sid not in previous.records and sid not in self.origins and record["cat"] != "io":
                sources = [by_name.get(n) or previous.describe.get(n) for n in provenance(record)]
                self.origins[sid] = {"step": index, "pass": pass_.name, "from": [s for s in sources if s]}
        self.steps.append(step)


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def short_location(defined_at: str) -> str:
    """``irforge/passes/fuse_gelu.py:104`` rather than the install's absolute path; a plugin's
    pattern keeps its own path."""
    path, _, line = defined_at.rpartition(":")
    if path.startswith(_PACKAGE_ROOT + os.sep):
        return f"{os.path.relpath(path, _PACKAGE_ROOT)}:{line}"
    return defined_at


def _quoted_name(describe: str) -> str:
    """The node name in a :meth:`Node.describe` text (``Add "name"``), or ``""``."""
    return describe.split('"', 2)[1] if describe.count('"') >= 2 else ""
