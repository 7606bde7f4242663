"""Per-node numbers drawn as colour scales over the graph.

Accepted as they come: Model Explorer's node-data JSON (one graph's ``{"results": ...}`` or a
model's ``{graph_id: {"results": ...}}``, with its ``thresholds`` or ``gradient``), onnxruntime's
profiler output (a list of trace events; the mean kernel time per node), and plain
``{"name": ..., "values": {key: number}}`` or ``{key: number}``.  A key is a node name, one of
a node's output value names, or an irviz node identity.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from typing import Any

from ..core_ir.errors import IrforgeError


class OverlayError(IrforgeError):
    """An overlay file that cannot be read, or whose keys name nothing in the model."""


def read_overlay(path: str | os.PathLike) -> tuple[str, Any]:
    """The file's name (the overlay's default name) and its JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            return os.path.splitext(os.path.basename(path))[0], json.load(f)
    except OSError as e:
        raise OverlayError(f"{path}: cannot read the overlay: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise OverlayError(f"{path}: not a JSON overlay: {e}") from None


def normalize_overlay(raw: Any, records: Iterable[dict], *, name: str = "overlay", where: str = "") -> dict:
    """``raw`` (any accepted form) keyed by node identity: ``{"name", "values", "unit"?,
    "gradient"?, "thresholds"?, "colors"?, "unmatched"}``."""
    where = where or name
    overlay: dict[str, Any] = {"name": name}
    if isinstance(raw, list):
        keyed, overlay["unit"] = _onnxruntime_profile(raw, where), "µs"
        overlay["name"] = f"{name}: mean kernel time"
    elif isinstance(raw, dict) and "results" in raw:
        keyed = _model_explorer(raw, overlay, where)
    elif isinstance(raw, dict) and raw and all(isinstance(v, dict) and "results" in v for v in raw.values()):
        keyed = {}
        for graph in raw.values():  # a model's data: every graph's results together
            keyed.update(_model_explorer(graph, overlay, where))
    elif isinstance(raw, dict) and isinstance(raw.get("values"), dict):
        keyed = raw["values"]
        overlay["name"] = str(raw.get("name", name))
        if raw.get("unit"):
            overlay["unit"] = str(raw["unit"])
    elif isinstance(raw, dict):
        keyed = raw
    else:
        raise OverlayError(f"{where}: an overlay is a JSON object or an onnxruntime profile (a list), "
                           f"not {type(raw).__name__}")  # fmt: skip
    by_key = _keys(records)
    values: dict[str, float] = {}
    colors: dict[str, str] = {}
    unmatched = 0
    for key, value in keyed.items():
        number = _number(value, key, where)
        sid = by_key.get(str(key))
        if sid is None:
            unmatched += 1
            continue
        if number is not None:
            values[sid] = number
        if key in overlay.get("_colors", {}):
            colors[sid] = overlay["_colors"][key]
    overlay.pop("_colors", None)
    if keyed and not values:
        sample = ", ".join(repr(k) for k in list(keyed)[:3])
        raise OverlayError(f"{where}: none of its {len(keyed)} keys ({sample}, ...) names a node or value of the "
                           "model; key it by node name or output value name")  # fmt: skip
    overlay.update(values=values, unmatched=unmatched)
    if colors:
        overlay["colors"] = colors
    return overlay


def _model_explorer(graph: dict, overlay: dict, where: str) -> dict:
    results = graph.get("results")
    if not isinstance(results, dict):
        raise OverlayError(f"{where}: Model Explorer node data needs a 'results' object")
    if graph.get("name"):
        overlay["name"] = str(graph["name"])
    if graph.get("gradient"):
        overlay["gradient"] = [[float(g["stop"]), str(g.get("bgColor", "#ffffff"))] for g in graph["gradient"]]
    if graph.get("thresholds"):
        overlay["thresholds"] = [[float(t["value"]), str(t.get("bgColor", "#ffffff"))] for t in graph["thresholds"]]
    overlay.setdefault("_colors", {}).update({k: r["bgColor"] for k, r in results.items()
                                              if isinstance(r, dict) and r.get("bgColor")})  # fmt: skip
    return {k: (r.get("value") if isinstance(r, dict) else r) for k, r in results.items()}


def _onnxruntime_profile(events: list, where: str) -> dict[str, float]:
    total: dict[str, float] = {}
    runs: dict[str, int] = {}
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            node = e["name"][: -len("_kernel_time")]
            total[node] = total.get(node, 0.0) + float(e.get("dur", 0))
            runs[node] = runs.get(node, 0) + 1
    if not total:
        raise OverlayError(f"{where}: a list, but no onnxruntime node events ('cat': 'Node', '..._kernel_time') "
                           "in it; write one with SessionOptions.enable_profiling")  # fmt: skip
    return {node: total[node] / runs[node] for node in total}


def _keys(records: Iterable[dict]) -> dict[str, str]:
    by_key: dict[str, str] = {}
    for r in records:
        if r["cat"] == "io":
            continue
        for out in r.get("out") or ():
            if out:
                by_key.setdefault(out[0], r["id"])
        if r.get("name"):
            by_key[r["name"]] = r["id"]
        by_key[r["id"]] = r["id"]
    return by_key


def _number(value: Any, key: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OverlayError(f"{where}: the value for {key!r} is {value!r}, not a number")
    return float(value) if math.isfinite(value) else None
