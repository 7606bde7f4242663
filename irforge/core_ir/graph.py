"""Graphs: an ordered node list plus inputs, outputs and initializers.

The node list is doubly linked through small boxes, so insertion and removal are O(1) and
iterating while mutating is safe: a removed node's box stays linked forward, so an iterator
sitting on it continues with the node that followed it, and nodes inserted after the cursor
are visited.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from . import journal as _journal
from .errors import IRError
from .node import Node
from .value import Value


class _Box:
    __slots__ = ("erased", "next", "node", "prev")

    def __init__(self, node: Node | None):
        self.node, self.erased = node, False
        self.prev: _Box = self
        self.next: _Box = self


class Graph:
    """A dataflow graph; also the body of If/Loop/Scan attributes and of model-local functions.

    Subgraphs may read values of enclosing graphs directly (the ``Value`` objects are shared).
    """

    def __init__(
        self,
        inputs: Sequence[Value] = (),
        outputs: Sequence[Value] = (),
        nodes: Iterable[Node] = (),
        initializers: Iterable[Value] = (),
        name: str = "",
        opset_imports: dict[str, int] | None = None,
    ):
        self.name = name
        self.doc_string = ""
        self.metadata: dict[str, str] = {}
        self.opset_imports: dict[str, int] = dict(opset_imports or {})
        self._parent: Node | None = None
        self._sentinel = _Box(None)
        self._len = 0
        self._inputs: list[Value] = []
        self._input_set: set[Value] = set()
        self._outputs: list[Value] = []
        self._initializers: dict[str, Value] = {}
        for v in inputs:
            self.append_input(v)
        for v in initializers:
            self.add_initializer(v)
        for n in nodes:
            self.append(n)
        for v in outputs:
            self.append_output(v)

    # -- nodes -----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Node]:
        box = self._sentinel.next
        while box is not self._sentinel:
            if not box.erased:
                yield box.node  # type: ignore[misc]
            box = box.next

    def reversed(self) -> Iterator[Node]:
        box = self._sentinel.prev
        while box is not self._sentinel:
            if not box.erased:
                yield box.node  # type: ignore[misc]
            box = box.prev

    def __len__(self) -> int:
        return self._len

    @property
    def nodes(self) -> list[Node]:
        """A snapshot list of the nodes, in order."""
        return list(self)

    @property
    def parent(self) -> Node | None:
        """The node whose attribute holds this graph, for subgraphs."""
        return self._parent

    def _set_parent(self, node: Node | None) -> None:
        if self._parent is not node:
            if _journal.ACTIVE is not None:
                _journal.touch(self)
            self._parent = node

    # -- undo journal: the graph's own fields (the node list is logged operation by operation) --
    def _save(self) -> tuple:
        return (self.name, self.doc_string, dict(self.metadata), dict(self.opset_imports), self._parent,
                list(self._inputs), set(self._input_set), list(self._outputs), dict(self._initializers))  # fmt: skip

    def _restore(self, state: tuple) -> None:
        (self.name, self.doc_string, self.metadata, self.opset_imports, self._parent, self._inputs,
         self._input_set, self._outputs, self._initializers) = state  # fmt: skip

    def _touch(self) -> None:
        if _journal.ACTIVE is not None:
            _journal.touch(self)

    def append(self, node: Node) -> Node:
        self._link(node, self._sentinel.prev)
        return node

    def prepend(self, node: Node) -> Node:
        self._link(node, self._sentinel)
        return node

    def insert_after(self, anchor: Node, nodes: Node | Sequence[Node]) -> None:
        after = self._box_of(anchor)
        for n in [nodes] if isinstance(nodes, Node) else list(nodes):
            self._link(n, after)
            after = n._box

    def insert_before(self, anchor: Node, nodes: Node | Sequence[Node]) -> None:
        before = self._box_of(anchor).prev
        for n in [nodes] if isinstance(nodes, Node) else list(nodes):
            self._link(n, before)
            before = n._box

    def move_before(self, anchor: Node, node: Node) -> None:
        """Reposition ``node`` (already in this graph) right before ``anchor``; uses are unchanged."""
        self._unlink(node)
        self._link(node, self._box_of(anchor).prev)

    def move_after(self, anchor: Node, node: Node) -> None:
        self._unlink(node)
        self._link(node, self._box_of(anchor))

    def remove(self, nodes: Node | Iterable[Node], *, safe: bool = True) -> None:
        """Remove nodes from the graph; they are detached from their inputs and cannot come back.

        With ``safe`` (the default) it first checks that no output of a removed node is still
        read by a node outside the removed set or is a graph output, and raises
        :class:`IRError` without changing anything if one is.
        """
        batch = [nodes] if isinstance(nodes, Node) else list(nodes)
        for n in batch:
            if n._graph is not self:
                raise IRError(f"{n.describe()} is not in graph {self.name!r}")
        if safe:
            doomed = set(batch)
            for n in batch:
                for out in n._outputs:
                    if out is None:
                        continue
                    if out._output_of:
                        raise IRError(f"cannot remove {n.describe()}: its output %{out.name} is a graph output")
                    for user, _ in out.uses():
                        if user not in doomed and not _inside(user, doomed):
                            raise IRError(
                                f"cannot remove {n.describe()}: its output %{out.name} is still "
                                f"used by {user.describe()}"
                            )
        for n in batch:
            self._unlink(n)
            n._detach()

    def _box_of(self, node: Node) -> _Box:
        if node._graph is not self:
            raise IRError(f"{node.describe()} is not in graph {self.name!r}")
        return node._box  # type: ignore[return-value]

    def _link(self, node: Node, after: _Box) -> None:
        if node._graph is not None:
            raise IRError(f"{node.describe()} is already in a graph; remove or move it first")
        box = _Box(node)
        box.prev, box.next = after, after.next
        after.next.prev = box
        after.next = box
        node._box, node._graph = box, self
        self._len += 1
        if _journal.ACTIVE is not None:
            _journal.record(self._unlink_raw, box)
        for g in node.subgraphs():
            g._set_parent(node)

    def _unlink(self, node: Node) -> None:
        box = self._box_of(node)
        self._unlink_raw(box)
        if _journal.ACTIVE is not None:
            _journal.record(self._relink_raw, box)

    def _unlink_raw(self, box: _Box) -> None:
        box.prev.next = box.next
        box.next.prev = box.prev
        box.erased = True  # box.next stays valid so live iterators move on
        box.node._box, box.node._graph = None, None  # type: ignore[union-attr]
        self._len -= 1

    def _relink_raw(self, box: _Box) -> None:
        """Undo of :meth:`_unlink_raw`: operations are undone in reverse order, so the box's old
        neighbours are next to each other again and it goes back between them."""
        box.prev.next = box
        box.next.prev = box
        box.erased = False
        box.node._box, box.node._graph = box, self  # type: ignore[union-attr]
        self._len += 1

    # -- inputs, initializers, outputs -----------------------------------------------------
    @property
    def inputs(self) -> tuple[Value, ...]:
        return tuple(self._inputs)

    @property
    def outputs(self) -> tuple[Value, ...]:
        return tuple(self._outputs)

    @property
    def initializers(self) -> dict[str, Value]:
        """Name → constant value (a copy; use add/remove_initializer to change it)."""
        return dict(self._initializers)

    def append_input(self, value: Value) -> Value:
        if value._producer is not None or (value._graph is not None and value._graph is not self):
            raise IRError(f"value %{value.name} is already defined elsewhere")
        if value in self._input_set:
            raise IRError(f"value %{value.name} is already an input of graph {self.name!r}")
        self._touch()
        value._touch_graph(self)
        self._inputs.append(value)
        self._input_set.add(value)
        return value

    def remove_input(self, value: Value) -> None:
        if value not in self._input_set:
            raise IRError(f"%{value.name} is not an input of graph {self.name!r}")
        if value._uses and not value.is_initializer():
            raise IRError(f"cannot remove input %{value.name}: it is still used")
        self._touch()
        self._inputs.remove(value)
        self._input_set.discard(value)
        if not value.is_initializer():
            value._touch_graph(None)

    def add_initializer(self, value: Value) -> Value:
        if value.const_value is None:
            raise IRError(f"initializer %{value.name} has no constant payload")
        if not value.name:
            raise IRError("an initializer needs a name")
        if value._producer is not None or (value._graph is not None and value._graph is not self):
            raise IRError(f"value %{value.name} is already defined elsewhere")
        if value.name in self._initializers and self._initializers[value.name] is not value:
            raise IRError(f"graph {self.name!r} already has an initializer named {value.name!r}")
        self._touch()
        value._touch_graph(self)
        self._initializers[value.name] = value
        return value

    def remove_initializer(self, value: Value) -> None:
        if self._initializers.get(value.name) is not value:
            raise IRError(f"%{value.name} is not an initializer of graph {self.name!r}")
        if value._uses or value._output_of:
            raise IRError(f"cannot remove initializer %{value.name}: it is still used")
        self._touch()
        del self._initializers[value.name]
        if value not in self._input_set:
            value._touch_graph(None)

    def rename_initializer(self, value: Value, new_name: str) -> None:
        """Rename a value that is an initializer, keeping the name index right."""
        if self._initializers.get(value.name) is not value:
            raise IRError(f"%{value.name} is not an initializer of graph {self.name!r}")
        if new_name in self._initializers:
            raise IRError(f"graph {self.name!r} already has an initializer named {new_name!r}")
        self._touch()
        del self._initializers[value.name]
        value.name = new_name
        self._initializers[new_name] = value

    def append_output(self, value: Value) -> None:
        self._touch()
        self._outputs.append(value)
        _mark_output(value, self)

    def set_output(self, index: int, value: Value) -> None:
        old = self._outputs[index]
        if old is value:
            return
        self._touch()
        _unmark_output(old, self)
        self._outputs[index] = value
        _mark_output(value, self)

    def set_outputs(self, values: Sequence[Value]) -> None:
        self._touch()
        for v in self._outputs:
            _unmark_output(v, self)
        self._outputs = []
        for v in values:
            self.append_output(v)

    # -- whole-graph helpers ---------------------------------------------------------------
    def all_graphs(self) -> Iterator[Graph]:
        """This graph and every subgraph nested in it, outermost first."""
        yield self
        sentinel = self._sentinel
        box = sentinel.next
        while box is not sentinel:  # the list walked directly: this runs before every pass
            n = box.node
            if n._attrs and not box.erased:
                for g in n.subgraphs():
                    yield from g.all_graphs()
            box = box.next

    def all_nodes(self) -> Iterator[Node]:
        """Every node, including those in nested subgraphs (pre-order)."""
        for n in self:
            yield n
            for g in n.subgraphs():
                yield from g.all_nodes()

    def values(self) -> Iterator[Value]:
        """Every value defined in this graph (not in subgraphs): inputs, initializers, outputs."""
        yield from self._inputs
        for v in self._initializers.values():
            if v not in self._input_set:
                yield v
        for n in self:
            for o in n._outputs:
                if o is not None:
                    yield o

    def sort(self) -> None:
        """Reorder nodes topologically (stable: keeps the current order where it is valid).

        Reads of outer-scope values made inside subgraphs count as dependencies of the node that
        holds the subgraph.  Raises :class:`IRError` naming a node on a cycle.
        """
        nodes = list(self)
        pos = {n: i for i, n in enumerate(nodes)}
        if _in_order(nodes, pos, self):
            return
        indeg = dict.fromkeys(nodes, 0)
        succ: dict[Node, list[Node]] = {n: [] for n in nodes}
        for n in nodes:
            for dep in _dependencies(n, pos):
                indeg[n] += 1
                succ[dep].append(n)
        import heapq

        ready = [pos[n] for n in nodes if indeg[n] == 0]
        heapq.heapify(ready)
        order: list[Node] = []
        while ready:
            n = nodes[heapq.heappop(ready)]
            order.append(n)
            for s in succ[n]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(ready, pos[s])
        if len(order) != len(nodes):
            stuck = next(n for n in nodes if indeg[n] > 0)
            raise IRError(f"graph {self.name!r} has a cycle through {stuck.describe()}")
        if order == nodes:
            return
        old_boxes = [n._box for n in nodes]
        for box in old_boxes:
            box.erased = True  # an iterator sitting on one moves on to the end
        self._chain([_Box(n) for n in order])
        if _journal.ACTIVE is not None:
            _journal.record(self._restore_boxes, old_boxes)

    def _chain(self, boxes: list[_Box]) -> None:
        """Make ``boxes`` (one per node of this graph) the node list, in their order."""
        prev = self._sentinel
        for box in boxes:
            box.prev, prev.next = prev, box
            box.erased = False
            box.node._box = box  # type: ignore[union-attr]
            prev = box
        prev.next, self._sentinel.prev = self._sentinel, prev

    def _restore_boxes(self, boxes: list[_Box]) -> None:
        """Undo of a sort: the very boxes of the old order come back, so undoing the operations
        logged before the sort finds the neighbours it expects."""
        for n in self:
            n._box.erased = True  # type: ignore[union-attr]
        self._chain(boxes)

    def __str__(self) -> str:
        from .printer import print_graph

        return print_graph(self)

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {self._len} nodes)"


def _in_order(nodes: list[Node], pos: dict[Node, int], graph: Graph) -> bool:
    """True when every node already comes after the producers it reads (the common case, checked
    in one cheap walk); nodes holding subgraphs send the question to the full sort."""
    for i, n in enumerate(nodes):
        if n._attrs and n.subgraphs():
            return False
        for v in n._inputs:
            if v is not None:
                p = v._producer
                if p is not None and p._graph is graph and pos[p] >= i:
                    return False
    return True


def _dependencies(node: Node, pos: dict[Node, int]) -> list[Node]:
    deps = []
    seen = set()
    stack = [node]
    while stack:
        n = stack.pop()
        for v in n._inputs:
            if v is not None and v._producer is not None:
                p = v._producer
                while p is not None and p not in pos:  # climb from a nested node to our level
                    p = p._graph._parent if p._graph is not None else None
                if p is not None and p is not node and p not in seen:
                    seen.add(p)
                    deps.append(p)
        for g in n.subgraphs():
            stack.extend(g)
    return deps


def _inside(node: Node, doomed: set[Node]) -> bool:
    g = node._graph
    while g is not None and g._parent is not None:
        if g._parent in doomed:
            return True
        g = g._parent._graph
    return False


def _mark_output(value: Value, graph: Graph) -> None:
    if _journal.ACTIVE is not None:
        _journal.touch(value)
    if value._output_of is None:
        value._output_of = []
    value._output_of.append(graph)


def _unmark_output(value: Value, graph: Graph) -> None:
    assert value._output_of is not None
    if _journal.ACTIVE is not None:
        _journal.touch(value)
    value._output_of.remove(graph)
