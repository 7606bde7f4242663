"""A neighbourhood view: the nodes within ``depth`` edges of one node, in every step."""

from __future__ import annotations

from typing import Any

from ..core_ir.errors import IrforgeError


def find_node(data: dict[str, Any], key: str) -> str:
    """The identity of the node named ``key`` (node name, output value name or identity),
    looked up from the last step back."""
    records = data["records"]
    for step in reversed(data["steps"]):
        for i in step["items"]:
            r = records[i]
            if r["cat"] != "io" and (r["id"] == key or r.get("name") == key
                                     or any(o and o[0] == key for o in r.get("out") or ())):  # fmt: skip
                return r["id"]
    raise IrforgeError(f"--focus {key}: no node or value of that name; `irforge print` lists the names")


def focus(data: dict[str, Any], key: str, depth: int) -> dict[str, Any]:
    """``data`` cut down to the neighbourhood of ``key`` (inputs and outputs count as nodes)."""
    if depth < 0:
        raise IrforgeError(f"--depth {depth}: give 0 or more edges")
    centre = find_node(data, key)
    records = data["records"]
    keep: set[str] = set()
    for step in data["steps"]:
        neighbours: dict[str, set[str]] = {}
        for i in step["items"]:
            r = records[i]
            for inp in r["in"]:
                if inp and inp[2]:
                    neighbours.setdefault(r["id"], set()).add(inp[2])
                    neighbours.setdefault(inp[2], set()).add(r["id"])
        if not any(records[i]["id"] == centre for i in step["items"]):
            continue
        frontier = {centre}
        keep.add(centre)
        for _ in range(depth):
            frontier = {n for f in frontier for n in neighbours.get(f, ())} - keep
            keep |= frontier
    out = dict(data)
    out["steps"] = [{**s, "items": [i for i in s["items"] if records[i]["id"] in keep]} for s in data["steps"]]
    out["title"] = f"{data.get('title') or 'graph'}: {depth} around {key}"
    return out
