"""SSA values and their use lists.

Only :meth:`Node._set_input_raw` (called by every input setter) and :meth:`Graph` output setters
touch a use list; everything else goes through them, so use-def chains are right at all times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from . import journal as _journal
from .errors import IRError
from .tensors import TensorData
from .types import Type

if TYPE_CHECKING:
    from .graph import Graph
    from .node import Node

REPLACE_HOOK: Callable[[Value, Value], None] | None = None
"""Called as ``hook(old, new)`` before every :meth:`Value.replace_all_uses_with` (a rewrite's
last step, whatever pass makes it) while a :class:`~irforge.core_ir.rewrite_check.RewriteChecker`
watches; it may raise to refuse the replacement, before anything has changed."""


class Value:
    """An SSA value: defined once (by a node output, a graph input or an initializer), used many times.

    ``uses()`` lists ``(node, input_index)`` pairs in the order they were made; graph outputs are
    tracked separately (``is_graph_output()``) because they are not node inputs.
    """

    __slots__ = (
        "_const_value",
        "_doc_string",
        "_graph",
        "_index",
        "_metadata",
        "_name",
        "_output_of",
        "_producer",
        "_type",
        "_uses",
    )

    def __init__(
        self,
        name: str | None = None,
        type: Type | None = None,
        const_value: TensorData | None = None,
    ):
        self._name = name
        self._type = type
        self._const_value = const_value
        self._doc_string = ""
        self._metadata: dict[str, str] | None = None
        self._producer: Node | None = None
        self._index: int | None = None
        self._graph: Graph | None = None  # set for graph inputs and initializers
        # None (no uses); a flat list [node, index, node, index, ...] while small (no tuple per
        # use: this is the IR's most numerous object); a dict {(node, index): None} once a value
        # has many readers, for O(1) removal.  Only _add_use/_remove_use touch it.
        self._uses: list | dict[tuple[Node, int], None] | None = None
        self._output_of: list[Graph] | None = None

    def __repr__(self) -> str:
        return f"Value(%{self.name}: {self.type})"

    # -- fields: plain reads, journaled writes ------------------------------------------------
    name = _journal.journaled("_name", "The value's name (unique in its model).")
    type = _journal.journaled("_type", "Its :class:`Type`, or ``None`` when unknown.")
    const_value = _journal.journaled("_const_value", "The tensor payload of an initializer, else ``None``.")
    doc_string = _journal.journaled("_doc_string")
    metadata = _journal.journaled("_metadata", "Free-form string metadata; replace the dict to change it.")

    def _touch_graph(self, graph: Graph | None) -> None:
        if _journal.ACTIVE is not None:
            _journal.touch(self)
        self._graph = graph

    def _save(self) -> tuple:
        uses = self._uses
        return (self._name, self._type, self._const_value, self._doc_string, self._metadata, self._producer,
                self._index, self._graph, None if uses is None else uses.copy(),
                None if self._output_of is None else list(self._output_of))  # fmt: skip

    def _restore(self, state: tuple) -> None:
        (self._name, self._type, self._const_value, self._doc_string, self._metadata, self._producer,
         self._index, self._graph, self._uses, self._output_of) = state  # fmt: skip

    # -- definition ------------------------------------------------------------------------
    def producer(self) -> Node | None:
        """The node that defines this value, or ``None`` for graph inputs and initializers."""
        return self._producer

    @property
    def index(self) -> int | None:
        """Which output of its producer this value is."""
        return self._index

    @property
    def graph(self) -> Graph | None:
        """The graph that defines this value (its producer's graph, or the graph it is input of)."""
        if self._producer is not None:
            return self._producer.graph
        return self._graph

    def is_graph_input(self) -> bool:
        return self._graph is not None and self in self._graph._input_set

    def is_initializer(self) -> bool:
        return self._graph is not None and self._graph._initializers.get(self.name) is self

    def is_graph_output(self) -> bool:
        return bool(self._output_of)

    def is_constant(self) -> bool:
        """True for initializers that are not overridable graph inputs."""
        return self.const_value is not None and not self.is_graph_input()

    # -- uses ------------------------------------------------------------------------------
    def uses(self) -> list[tuple[Node, int]]:
        """``(node, input_index)`` for every node input that reads this value (a snapshot)."""
        uses = self._uses
        if not uses:
            return []
        if type(uses) is list:
            return list(zip(uses[::2], uses[1::2], strict=True))
        return list(uses)

    def iter_uses(self) -> Iterator[tuple[Node, int]]:
        return iter(self.uses())

    def users(self) -> list[Node]:
        """Distinct consuming nodes, in first-use order."""
        return list(dict.fromkeys(n for n, _ in self.uses()))

    def num_uses(self) -> int:
        uses = self._uses
        if not uses:
            return 0
        return len(uses) // 2 if type(uses) is list else len(uses)

    def has_uses(self) -> bool:
        """True when a node reads this value or it is a graph output."""
        return bool(self._uses) or bool(self._output_of)

    def is_used_by(self, node: Node, index: int) -> bool:
        uses = self._uses
        if not uses:
            return False
        if type(uses) is list:
            return any(uses[i] is node and uses[i + 1] == index for i in range(0, len(uses), 2))
        return (node, index) in uses

    def replace_all_uses_with(self, new: Value, *, include_graph_outputs: bool = True) -> None:
        """Make every reader of this value read ``new`` instead.

        Graph-output slots move too (unless ``include_graph_outputs=False``).  So that a graph
        keeps its interface, when ``new`` is a node result that is not itself a graph output it
        takes over this value's name (this value is renamed ``<name>__replaced``).
        """
        if new is self:
            return
        if REPLACE_HOOK is not None:
            REPLACE_HOOK(self, new)
        for node, i in self.uses():
            node.set_input(i, new)
        if include_graph_outputs and self._output_of:
            graphs = list(dict.fromkeys(self._output_of))
            take_name = new._producer is not None and not new._output_of and self.name
            for g in graphs:
                for i, v in enumerate(g._outputs):
                    if v is self:
                        g.set_output(i, new)
            if take_name:
                old_name = self.name
                self.name = f"{old_name}__replaced"
                new.name = old_name

    # -- internal: the single place that edits use lists -----------------------------------
    _SMALL = 16  # uses kept in a flat list up to this many; a dict beyond

    def _add_use(self, node: Node, index: int) -> None:
        if _journal.ACTIVE is not None:
            _journal.touch(self)
        uses = self._uses
        if uses is None:
            self._uses = [node, index]
        elif type(uses) is list:
            uses.append(node)
            uses.append(index)
            if len(uses) > 2 * self._SMALL:
                self._uses = dict.fromkeys(zip(uses[::2], uses[1::2], strict=True))
        else:
            uses[(node, index)] = None

    def _remove_use(self, node: Node, index: int) -> None:
        if _journal.ACTIVE is not None:
            _journal.touch(self)
        uses = self._uses
        if type(uses) is list:
            for i in range(0, len(uses), 2):
                if uses[i] is node and uses[i + 1] == index:
                    del uses[i : i + 2]
                    return
        elif uses is not None and (node, index) in uses:
            del uses[(node, index)]
            return
        raise IRError(f"internal: use of %{self.name} by {node.describe()} input {index} missing")
