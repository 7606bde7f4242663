"""DOT text of one step, and SVG or PNG drawn from it by Graphviz's ``dot``: for papers and CI
artifacts, where a static picture is wanted rather than the interactive page."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from ..core_ir.errors import IrforgeError

FILL = {"product": "#b6e3ff", "activation": "#ffdfb6", "normalization": "#d8b9ff", "attention": "#ff8182",
        "pooling": "#aceebb", "reduction": "#c8e1ff", "shape": "#eaeef2", "control": "#ffd8b5",
        "constant": "#f6f8fa", "fused": "#ffb8e0", "custom": "#fff8c5", "elementwise": "#dafbe1",
        "io": "#ffffff"}  # fmt: skip
FORMATS = ("dot", "svg", "png")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(data: dict[str, Any], step: int = -1) -> str:
    """One step as a DOT digraph: nodes coloured by kind, name scopes as nested clusters, edges
    labelled with the value's type.  Fused ops are drawn as one node (their bodies are for the page)."""
    records = data["records"]
    items = [records[i] for i in data["steps"][step]["items"] if "/" not in records[i]["id"]]
    present = {r["id"] for r in items}
    tree: dict = {"nodes": [], "scopes": {}}
    for r in items:
        where = tree
        for part in r["scope"]:
            where = where["scopes"].setdefault(part, {"nodes": [], "scopes": {}})
        where["nodes"].append(r)
    lines = [f"digraph {_quote(data.get('title') or 'graph')} {{",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
             '  edge [fontname="Helvetica", fontsize=9, color="#8c959f"];']  # fmt: skip
    counter = [0]

    def emit(scope: dict, indent: str) -> None:
        for r in scope["nodes"]:
            text = r["name"] if r["cat"] == "io" else r["op"] + (f"\n{r['name']}" if r.get("name") else "")
            fill = FILL.get(r["cat"], "#ffffff")
            lines.append(f'{indent}{_quote(r["id"])} [label={_quote(text)}, fillcolor="{fill}"];')
        for name, inner in scope["scopes"].items():
            counter[0] += 1
            lines.append(f"{indent}subgraph cluster_{counter[0]} {{")
            lines.append(f'{indent}  label={_quote(name.lstrip("#"))}; style="rounded"; color="#afb8c1";')
            emit(inner, indent + "  ")
            lines.append(f"{indent}}}")

    emit(tree, "  ")
    for r in items:
        for inp in r["in"]:
            if inp and inp[2] in present:
                lines.append(f'  {_quote(inp[2])} -> {_quote(r["id"])} [label={_quote(inp[1])}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(dot_text: str, fmt: str) -> bytes:
    """``dot_text`` drawn by Graphviz as ``svg`` or ``png``."""
    if fmt not in ("svg", "png"):
        raise IrforgeError(f"irviz: no format {fmt!r}; use one of {', '.join(FORMATS)} or html")
    exe = shutil.which("dot")
    if exe is None:
        raise IrforgeError(
            "irviz: --format svg and png need Graphviz's `dot`, which is not installed; install the Debian "
            "package graphviz (apt-get install graphviz), or write --format dot or html"
        )
    done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode(), capture_output=True, check=False)
    if done.returncode != 0:
        raise IrforgeError(f"irviz: dot failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")
    return done.stdout
