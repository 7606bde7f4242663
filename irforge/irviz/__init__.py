"""irviz: any graph, before and after any pass, as one self-contained HTML page (or DOT, SVG, PNG).

``write_report(model, "report.html", "-O2")`` runs the pipeline on a copy of the model and writes
a page with a step per pass that changed it: node counts, time, every pattern rewrite with its
source line, a diff between any two steps, and the provenance of every node.  The page holds its
data, its scripts and its layout library (dagre, in a Web Worker), and fetches nothing.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import webbrowser
from collections.abc import Sequence
from typing import Any

from ..core_ir.clone import clone_model
from ..core_ir.errors import IrforgeError
from ..core_ir.model import Model
from .focus import focus as focus_data
from .graphviz import FORMATS, render, to_dot
from .overlay import OverlayError, normalize_overlay, read_overlay
from .report import diff_steps, render_html, report_data, write_html
from .timeline import Recorder, Step

__all__ = [
    "FORMATS",
    "OverlayError",
    "Recorder",
    "Step",
    "diff_steps",
    "normalize_overlay",
    "record",
    "render_html",
    "report",
    "show",
    "to_dot",
    "write_html",
    "write_report",
]


def record(model: Model, pipeline: str | None = None, *, target: str | None = None, verify_each: bool = True,
           recorder: Recorder | None = None) -> Recorder:  # fmt: skip
    """Run ``pipeline`` (pipeline text or a level, as for :func:`irforge.optimize`) on a copy of
    ``model`` and return what was recorded; without a pipeline, the model alone."""
    from ..passes import PassManager, VerifyEach
    from ..passes.levels import with_target

    recorder = recorder or Recorder()
    copy = clone_model(model)
    recorder.start(copy)
    if pipeline or target:
        text = with_target((pipeline or "O0").strip().removeprefix("-"), target)
        instruments = [recorder, *([VerifyEach()] if verify_each else [])]
        PassManager.parse(text, instruments=instruments).run(copy)
    return recorder


def report(
    model: Model | Recorder,
    pipeline: str | None = None,
    *,
    target: str | None = None,
    title: str = "",
    overlays: Sequence[str | os.PathLike | dict] = (),
    focus: str | None = None,
    depth: int = 2,
) -> dict:
    """The page's data for ``model`` (after ``pipeline``, step by step) or for a finished
    :class:`Recorder`; ``overlays`` are JSON files or already-read JSON objects."""
    if isinstance(model, Recorder) and (pipeline or target):
        raise IrforgeError("irviz: a Recorder holds the run it recorded; give a pipeline or a target with a model")
    recorder = model if isinstance(model, Recorder) else record(model, pipeline, target=target)
    data = report_data(recorder, title)
    for overlay in overlays:
        if isinstance(overlay, (str, os.PathLike)):
            name, raw = read_overlay(overlay)
            where = os.fspath(overlay)
        else:
            name, raw, where = "overlay", overlay, "overlay"
        data["overlays"].append(normalize_overlay(raw, data["records"], name=name, where=where))
    if focus is not None:
        data = focus_data(data, focus, depth)
    return data


def write_report(model: Model | Recorder, path: str | os.PathLike, pipeline: str | None = None, *,
                 format: str | None = None, step: int = -1, **options: Any) -> str:  # fmt: skip
    """Write ``model``'s report to ``path``: HTML (the viewer), or with ``format`` (or the
    path's extension) ``dot``, ``svg`` or ``png`` of one step (default: the last).  Takes the
    options of :func:`report`; returns the path."""
    fmt = format or os.path.splitext(os.fspath(path))[1].lstrip(".").lower() or "html"
    if fmt not in ("html", *FORMATS):
        raise IrforgeError(f"irviz: no format {fmt!r}; use html, {', '.join(FORMATS)}")
    data = report(model, pipeline, **options)
    if fmt == "html":
        return write_html(data, path)
    if not -len(data["steps"]) <= step < len(data["steps"]):
        raise IrforgeError(f"irviz: no step {step}; this run has steps 0 to {len(data['steps']) - 1}")
    dot = to_dot(data, step)
    payload = dot.encode() if fmt == "dot" else render(dot, fmt)
    try:
        with open(path, "wb") as f:
            f.write(payload)
    except OSError as e:
        raise IrforgeError(f"{path}: cannot write: {e.strerror}") from None
    return os.fspath(path)


def show(model: Model | Recorder, pipeline: str | None = None, *, path: str | os.PathLike | None = None,
         **options: Any) -> str:  # fmt: skip
    """Write the report (to ``path``, or a temporary file) and open it in a browser where one
    exists; returns the file's path either way."""
    if path is None:
        fd, path = tempfile.mkstemp(prefix="irviz-", suffix=".html")
        os.close(fd)
    written = write_report(model, path, pipeline, **options)
    with contextlib.suppress(webbrowser.Error):  # no browser here (a server, CI): the path is the result
        webbrowser.get().open("file://" + os.path.abspath(written))
    return written
