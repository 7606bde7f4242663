"""The greedy worklist driver: applies patterns until none matches, or a cap is reached.

Every applied rewrite is recorded (pattern, where it is defined, nodes matched, nodes created),
and created nodes carry the provenance of the nodes they replace in their metadata.
"""

from __future__ import annotations

import time
import warnings
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import value as _value
from .builder import Builder, NameGenerator
from .errors import IRError
from .graph import Graph
from .journal import Journal
from .node import Node
from .pattern import Pattern, _Trace
from .rewrite_check import Rejection, RewriteRejected
from .value import Value

PROVENANCE = "irforge.provenance"


@dataclass(frozen=True)
class RewriteRecord:
    pattern: str
    defined_at: str
    matched: tuple[str, ...]
    created: tuple[str, ...]
    seconds: float = 0.0
    """When the rewrite was applied, in seconds since the driver started."""


@dataclass
class RewriteResult:
    records: list[RewriteRecord] = field(default_factory=list)
    near_misses: dict[str, tuple[str, str]] = field(default_factory=dict)
    """With ``debug``: pattern name -> (node, the failed condition of its closest partial match)."""
    rejected: list[Rejection] = field(default_factory=list)
    """While a rewrite checker watches: the rewrites it refused (they were undone)."""

    @property
    def changed(self) -> bool:
        return bool(self.records)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.records:
            out[r.pattern] = out.get(r.pattern, 0) + 1
        return out

    def report(self) -> list[str]:
        """One line per rewrite (pattern, where it is defined, nodes matched -> nodes created),
        then, for each pattern that never applied, its closest miss and the condition that failed."""
        lines = [f"{r.pattern} ({r.defined_at}): {', '.join(r.matched)} -> {', '.join(r.created) or 'nothing'}"
                 for r in self.records]  # fmt: skip
        applied = {r.pattern for r in self.records}
        lines += [f"{name} did not match; closest at {node}: {reason}"
                  for name, (node, reason) in sorted(self.near_misses.items()) if name not in applied]  # fmt: skip
        return lines


def apply_patterns(
    graph: Graph, patterns: Sequence[Pattern], *, max_rewrites: int | None = None, debug: bool = False
) -> RewriteResult:
    """Rewrite ``graph`` with ``patterns`` to a fixed point; stop with a warning after
    ``max_rewrites`` (default: ten per node, plus 100) so that rules undoing each other end."""
    by_root: dict[tuple[str, str], list[Pattern]] = {}
    for p in sorted(patterns, key=lambda p: -p.benefit):
        by_root.setdefault((p.root.op_type, p.root.domain), []).append(p)
    result = RewriteResult()
    start = time.perf_counter()
    cap = max_rewrites if max_rewrites is not None else 10 * len(graph) + 100
    names = NameGenerator(graph) if by_root else None
    work = deque(n for n in graph if (n.op_type, n.domain) in by_root)
    queued = set(work)
    traces: dict[str, tuple[int, str, str]] = {}
    checking = _value.REPLACE_HOOK is not None
    refused: set[tuple[str, Node]] = set()
    while work:
        node = work.popleft()
        queued.discard(node)
        if node.graph is not graph:
            continue  # removed by an earlier rewrite
        for p in by_root.get((node.op_type, node.domain), ()):
            if checking and (p.name, node) in refused:
                continue
            trace = _Trace() if debug else None
            m = p.match(node, trace)
            if m is None:
                if trace is not None and trace.depth >= traces.get(p.name, (-1,))[0]:
                    traces[p.name] = (trace.depth, node.describe(), trace.reason)
                continue
            if len(result.records) >= cap:
                warnings.warn(f"pattern rewriting stopped after {cap} rewrites on graph {graph.name!r}; "
                              "some patterns may undo each other", stacklevel=2)  # fmt: skip
                return result
            if checking:
                # each rewrite in a journal of its own, so that a refused one is undone alone
                journal = Journal().open()
                try:
                    created = _apply(graph, p, m, names)  # type: ignore[arg-type]
                except RewriteRejected as e:
                    journal.rollback()
                    e.rejection.pattern = f"{p.name} ({p.defined_at})"
                    result.rejected.append(e.rejection)
                    refused.add((p.name, node))
                    continue
                except BaseException:
                    journal.rollback()
                    raise
                journal.commit()
            else:
                created = _apply(graph, p, m, names)  # type: ignore[arg-type]
            result.records.append(RewriteRecord(p.name, p.defined_at, tuple(n.describe() for n in m.nodes),
                                                tuple(n.describe() for n in created),
                                                time.perf_counter() - start))  # fmt: skip
            for n in _neighbours(created, m.values.values()):
                if n not in queued and n.graph is graph and (n.op_type, n.domain) in by_root:
                    work.append(n)
                    queued.add(n)
            break
    result.near_misses = {k: (node, reason) for k, (_, node, reason) in traces.items()}
    return result


def _apply(graph: Graph, p: Pattern, m, names: NameGenerator) -> list[Node]:
    root = m.nodes[0]
    b = Builder(graph, before=root, names=names)
    new = p.replacement(b, m)
    new_values = list(new) if isinstance(new, (tuple, list)) else [new]
    if len(new_values) != len(m.outputs):
        raise IRError(f"pattern {p.name!r} ({p.defined_at}): the replacement gave {len(new_values)} values "
                      f"for {len(m.outputs)} outputs")  # fmt: skip
    provenance = ",".join(n.name or n.describe() for n in m.nodes)
    # an unnamed new node is named after the named nodes it replaces (producers first: "conv1+bn"),
    # so locations in a compiler's output still point at the model's own nodes
    joined = "+".join(n.name for n in reversed(m.nodes) if n.name)
    unnamed = [n for n in b.created if not n.name and n.op_type != "Constant"]
    # and they keep what the matched nodes knew of their origin (a frontend's source line, module
    # path, framework op), the producers' first: a fused conv+bn points at the conv's line
    inherited: dict[str, str] = {}
    for n in reversed(m.nodes):
        for key, value in (n.metadata or {}).items():
            inherited.setdefault(key, value)
    inherited.pop(PROVENANCE, None)
    for n in b.created:
        n.metadata = {**inherited, **(n.metadata or {}), PROVENANCE: provenance}
    for i, n in enumerate(unnamed):
        if joined:
            n.name = joined if len(unnamed) == 1 else f"{joined}#{i}"
    for old, value in zip(m.outputs, new_values, strict=True):
        if value is not old:
            if old.type is not None and value.type is None and value.producer() in b.created:
                value.type = old.type
            old.replace_all_uses_with(value)
    # Matched nodes (readers before producers), then producers of bound values that the
    # rewrite left unread (an ONNX-domain op has no effect beyond its outputs).
    bound = [v.producer() for v in m.values.values() if v.producer() is not None and not v.producer().domain]
    for n in [*m.nodes, *bound]:
        if n.graph is graph and not any(o is not None and (o.has_uses() or o.is_graph_output()) for o in n.outputs):
            graph.remove(n)
    return b.created


def _neighbours(created: list[Node], inputs) -> list[Node]:
    """Nodes a rewrite may have made matchable: the new ones, their readers, and the producers
    and readers of the values the match bound (their use counts changed)."""
    out: list[Node] = list(created)
    for n in created:
        for o in n.outputs:
            if o is not None:
                out.extend(user for user, _ in o.uses())
    for v in inputs:
        if isinstance(v, Value):
            if v.producer() is not None:
                out.append(v.producer())
            out.extend(user for user, _ in v.uses())
    return out
