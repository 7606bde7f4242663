"""Operations: an op type in a domain, ordered inputs and outputs, typed attributes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from . import journal as _journal
from .attributes import GRAPH_KINDS, Attr, infer_attr
from .errors import IRError
from .types import Type
from .value import Value

if TYPE_CHECKING:
    from .graph import Graph


_NO_ATTRIBUTES: Mapping[str, Attr] = MappingProxyType({})


class Node:
    """One operation.  Inputs may be ``None`` (an omitted optional input); so may outputs.

    The node owns its output values.  Inputs are only changed through :meth:`set_input` and
    friends, which keep the inputs' use lists right.
    """

    __slots__ = (
        "_attrs",
        "_box",
        "_doc_string",
        "_domain",
        "_graph",
        "_inputs",
        "_metadata",
        "_name",
        "_op_type",
        "_outputs",
        "_overload",
    )

    def __init__(
        self,
        op_type: str,
        inputs: Sequence[Value | None] = (),
        *,
        domain: str = "",
        attributes: Mapping[str, Any] | Iterable[Attr] = (),
        outputs: int | Sequence[str | Value | None] = 1,
        name: str = "",
        overload: str = "",
        output_types: Sequence[Type | None] | None = None,
    ):
        self._op_type, self._domain, self._overload, self._name = op_type, domain, overload, name
        self._doc_string = ""
        self._metadata: dict[str, str] | None = None
        self._graph: Graph | None = None
        self._box = None
        self._attrs: dict[str, Attr] | None = None  # allocated on first use: most nodes have none
        if attributes:
            items = attributes.items() if isinstance(attributes, Mapping) else ((a.name, a) for a in attributes)
            self._attrs = {key: infer_attr(key, val) for key, val in items}
        self._inputs: list[Value | None] = []
        for v in inputs:
            self._append_input_raw(v)
        specs = [None] * outputs if isinstance(outputs, int) else list(outputs)
        self._outputs: list[Value | None] = []
        for i, spec in enumerate(specs):
            if spec is None and not isinstance(outputs, int):
                self._outputs.append(None)
                continue
            v = spec if isinstance(spec, Value) else Value(spec)
            if v._producer is not None or v._graph is not None:
                raise IRError(f"value %{v.name} is already defined; a value has one definition")
            if spec is v and _journal.ACTIVE is not None:
                _journal.touch(v)
            if output_types is not None and output_types[i] is not None:
                v._type = output_types[i]
            v._producer, v._index = self, i
            self._outputs.append(v)

    # -- fields: plain reads, journaled writes ------------------------------------------------
    op_type = _journal.journaled("_op_type", "The operator, e.g. ``Conv``.")
    domain = _journal.journaled("_domain", "The operator's domain (``''`` is ONNX).")
    overload = _journal.journaled("_overload", "Function overload name, usually empty.")
    name = _journal.journaled("_name", "The node's name (ONNX node name), possibly empty.")
    doc_string = _journal.journaled("_doc_string")
    metadata = _journal.journaled("_metadata", "Source metadata (provenance); replace the dict to change it.")

    def _save(self) -> tuple:
        attrs = None if self._attrs is None else dict(self._attrs)
        return (self._op_type, self._domain, self._overload, self._name, self._doc_string, self._metadata,
                attrs, list(self._inputs), list(self._outputs))  # fmt: skip

    def _restore(self, state: tuple) -> None:
        (self._op_type, self._domain, self._overload, self._name, self._doc_string, self._metadata, self._attrs,
         self._inputs, self._outputs) = state  # fmt: skip

    # -- views -----------------------------------------------------------------------------
    @property
    def attributes(self) -> Mapping[str, Attr]:
        """Name → attribute, read-only: change them with :meth:`set_attribute` and
        :meth:`remove_attribute`, which keep subgraph parents and the undo journal right."""
        return MappingProxyType(self._attrs) if self._attrs else _NO_ATTRIBUTES

    @property
    def inputs(self) -> tuple[Value | None, ...]:
        return tuple(self._inputs)

    @property
    def outputs(self) -> tuple[Value | None, ...]:
        return tuple(self._outputs)

    @property
    def output(self) -> Value:
        """The single output of a one-output node."""
        if len(self._outputs) != 1 or self._outputs[0] is None:
            raise IRError(f"{self.describe()} has {len(self._outputs)} outputs, not one")
        return self._outputs[0]

    @property
    def graph(self) -> Graph | None:
        return self._graph

    def describe(self) -> str:
        """How errors name this node: ``Add "name"`` or ``Add producing %y``."""
        op = f"{self.domain}::{self.op_type}" if self.domain else self.op_type
        if self.name:
            return f'{op} "{self.name}"'
        first = next((o for o in self._outputs if o is not None), None)
        return f"{op} producing %{first.name}" if first is not None else op

    def __repr__(self) -> str:
        return f"Node({self.describe()})"

    def attr(self, name: str, default: Any = None) -> Any:
        """The value of attribute ``name``, or ``default`` if absent."""
        a = self._attrs.get(name) if self._attrs else None
        return default if a is None else a.value

    def set_attribute(self, name: str, value: Any, kind=None) -> None:
        """Set (or replace) attribute ``name``; ``value`` may be an :class:`Attr` or a plain value
        whose kind is inferred (or given as ``kind``).  A subgraph it replaces is dropped: its
        nodes stop reading outer values, as removed nodes do."""
        attr = infer_attr(name, value, kind)
        attr.name = name
        if _journal.ACTIVE is not None:
            _journal.touch(self)
        if self._attrs is None:
            self._attrs = {}
        self._drop_subgraphs(name, keep=attr.graphs)
        self._attrs[name] = attr
        for g in attr.graphs:
            g._set_parent(self)

    def remove_attribute(self, name: str) -> None:
        """Drop attribute ``name`` (absent is fine), and the subgraph it held."""
        if self._attrs and name in self._attrs:
            if _journal.ACTIVE is not None:
                _journal.touch(self)
            self._drop_subgraphs(name)
            del self._attrs[name]

    def _drop_subgraphs(self, name: str, keep: Sequence[Graph] = ()) -> None:
        old = self._attrs.get(name) if self._attrs else None
        if old is None:
            return
        for g in old.graphs:
            if not any(g is k for k in keep):
                for n in g:
                    n._detach()

    def subgraphs(self) -> list[Graph]:
        """Graphs held in this node's attributes (If branches, Loop/Scan bodies)."""
        if not self._attrs:
            return []
        return [g for a in self._attrs.values() if a.kind in GRAPH_KINDS for g in a.graphs]

    # -- input mutation: the only code that edits use lists ---------------------------------
    def _append_input_raw(self, v: Value | None) -> None:
        if v is not None:
            v._add_use(self, len(self._inputs))
        self._inputs.append(v)

    def set_input(self, index: int, value: Value | None) -> None:
        old = self._inputs[index]
        if old is value:
            return
        if _journal.ACTIVE is not None:
            _journal.touch(self)
        if old is not None:
            old._remove_use(self, index)
        if value is not None:
            value._add_use(self, index)
        self._inputs[index] = value

    def set_inputs(self, values: Sequence[Value | None]) -> None:
        """Replace all inputs (the count may change)."""
        if _journal.ACTIVE is not None:
            _journal.touch(self)
        for i, v in enumerate(self._inputs):
            if v is not None:
                v._remove_use(self, i)
        self._inputs = []
        for v in values:
            self._append_input_raw(v)

    def append_input(self, value: Value | None) -> None:
        if _journal.ACTIVE is not None:
            _journal.touch(self)
        self._append_input_raw(value)

    def replace_input_with(self, old: Value, new: Value | None) -> None:
        """Replace every occurrence of ``old`` among this node's inputs."""
        for i, v in enumerate(self._inputs):
            if v is old:
                self.set_input(i, new)

    def _detach(self) -> None:
        """Drop this node's uses (and those inside its subgraphs): it is leaving the IR."""
        if _journal.ACTIVE is not None:
            _journal.touch(self)
        for i, v in enumerate(self._inputs):
            if v is not None:
                v._remove_use(self, i)
            self._inputs[i] = None
        for g in self.subgraphs():
            for n in g:
                n._detach()
