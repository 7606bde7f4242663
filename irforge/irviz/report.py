"""The report page: one HTML file with the timeline's data, the viewer and the layout library
inlined, so it opens from ``file://`` with the network off and can be mailed as it is."""

from __future__ import annotations

import json
import os
import re
from importlib import resources
from typing import Any

from ..core_ir.errors import IrforgeError
from .timeline import Recorder

FORMAT_VERSION = 1


def report_data(recorder: Recorder, title: str = "", overlays: list[dict] | None = None) -> dict[str, Any]:
    """What the page is built from (plain JSON).  A node record that is the same in several
    steps is stored once: a step lists the indices of its records."""
    records: list[dict] = []
    index: dict[str, int] = {}
    steps = []
    for step in recorder.steps:
        items = []
        for record in step.snapshot.records.values():
            key = json.dumps(record, separators=(",", ":"))
            if key not in index:
                index[key] = len(records)
                records.append(record)
            items.append(index[key])
        steps.append({"title": step.title, "pass": step.pass_name, "seconds": round(step.seconds, 6),
                      "nodes": step.node_count, "rewrites": step.rewrites, "statistics": step.statistics,
                      "folded": step.folded, "items": items})  # fmt: skip
    return {"version": FORMAT_VERSION, "title": title, "records": records, "steps": steps,
            "origins": recorder.origins, "trailing": recorder.trailing, "overlays": overlays or []}  # fmt: skip


def diff_steps(data: dict[str, Any], before: int, after: int) -> dict[str, list[str]]:
    """Node identities added, removed and rewritten between two steps (the page computes the same).
    Graph inputs and outputs are not nodes, nor are the copies of a function body drawn under
    each call (identities with a ``/``): both are left out."""
    records = data["records"]

    def state(step: int) -> dict[str, int]:
        items = data["steps"][step]["items"]
        return {records[i]["id"]: i for i in items if records[i]["cat"] != "io" and "/" not in records[i]["id"]}

    a, b = state(before), state(after)
    return {"added": sorted(set(b) - set(a)), "removed": sorted(set(a) - set(b)),
            "rewritten": sorted(sid for sid in set(a) & set(b) if a[sid] != b[sid])}  # fmt: skip


def _asset(name: str) -> str:
    return resources.files("irforge.irviz").joinpath(name).read_text(encoding="utf-8")


def render_html(data: dict[str, Any]) -> str:
    """The page as one string.  ``</`` in the data is escaped so no string in a model (a node
    name, a doc string) can end the script element it sits in."""
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    parts = {
        "STYLE": _asset("static/viewer.css"),
        "DATA": payload,
        "LAYOUT_LIBRARY": _script_string(_asset("vendor/dagre.min.js")),
        "LAYOUT_WORKER": _script_string(_asset("static/layout_worker.js")),
        "VIEWER": _asset("static/viewer.js"),
        "TITLE": _html_escape(data.get("title") or "irviz"),
    }
    # one pass over the template: text put in (a node name that reads "@TITLE@") is never rescanned
    page = re.sub(r"/\*@(\w+)@\*/|@(TITLE)@", lambda m: parts[m.group(1) or m.group(2)], _asset("static/page.html"))
    return page


def _script_string(source: str) -> str:
    """A script's source as a JS string literal that cannot close the page's script element."""
    return json.dumps(source).replace("</", "<\\/")


def write_html(data: dict[str, Any], path: str | os.PathLike) -> str:
    """Write the page to ``path`` and return the path."""
    text = render_html(data)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise IrforgeError(f"{path}: cannot write the report: {e.strerror}") from None
    return os.fspath(path)


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
