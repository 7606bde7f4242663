"""Building nodes tersely: ``y = b.op.Add(x, w)``, ``a, b2 = b.op.Split(x, axis=0, _outputs=2)``.

The builder inserts at a fixed point (end of graph by default, or before/after a node), names
results uniquely, and takes attribute kinds and output counts from the ONNX schema when known.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx.defs

from .attributes import AttrKind, infer_attr
from .graph import Graph
from .node import Node
from .tensors import NumpyTensor, is_tensor_data
from .types import TensorType, Type
from .value import Value


class NameGenerator:
    """Fresh value names for a graph tree, never colliding with names already in it."""

    def __init__(self, graph: Graph):
        self._graph = graph
        self._taken_names: set[str] | None = None  # gathered on the first fresh name, if any
        self._counter = 0

    @property
    def _taken(self) -> set[str]:
        if self._taken_names is None:
            root = self._graph
            while root.parent is not None and root.parent.graph is not None:
                root = root.parent.graph
            self._taken_names = {v.name for g in root.all_graphs() for v in g.values() if v.name}
        return self._taken_names

    def reserve(self, names) -> None:
        """Keep ``names`` out of what :meth:`fresh` gives (names an importer will assign itself)."""
        self._taken.update(names)

    def fresh(self, hint: str = "v") -> str:
        while True:
            self._counter += 1
            name = f"{hint}_{self._counter}"
            if name not in self._taken:
                self._taken.add(name)
                return name


class _Ops:
    def __init__(self, builder: Builder, domain: str):
        self._builder, self._domain = builder, domain

    def __getattr__(self, op_type: str):
        if op_type.startswith("__"):
            raise AttributeError(op_type)

        def make(*inputs: Value | None, _outputs: int | None = None, _name: str = "", **attrs: Any):
            node = self._builder.add_node(op_type, inputs, attrs, domain=self._domain,
                                          num_outputs=_outputs, name=_name)  # fmt: skip
            return node.outputs[0] if len(node.outputs) == 1 else node.outputs

        make.__name__ = op_type
        return make


class Builder:
    """Creates nodes in ``graph`` at an insertion point, with schema-aware defaults."""

    def __init__(
        self,
        graph: Graph,
        *,
        before: Node | None = None,
        after: Node | None = None,
        opset: int | None = None,
        names: NameGenerator | None = None,
    ):
        self.graph = graph
        self.before, self.after = before, after
        self.opset = opset or _latest_opset()
        self.names = names or NameGenerator(graph)
        self.created: list[Node] = []

    @property
    def op(self) -> _Ops:
        """Ops of the ONNX domain: ``b.op.Relu(x)``."""
        return _Ops(self, "")

    def domain(self, name: str) -> _Ops:
        """Ops of another domain: ``b.domain("com.microsoft").FusedMatMul(a, c)``."""
        return _Ops(self, name)

    def add_node(
        self,
        op_type: str,
        inputs: Sequence[Value | None],
        attributes: dict[str, Any] | None = None,
        *,
        domain: str = "",
        num_outputs: int | None = None,
        name: str = "",
        output_names: Sequence[str] | None = None,
        output_types: Sequence[Type | None] | None = None,
    ) -> Node:
        schema = _schema(op_type, domain, self.opset)
        kinds = _attr_kinds(op_type, domain, self.opset)
        attrs = [infer_attr(key, val, kinds.get(key)) for key, val in (attributes or {}).items()]
        if output_names is None:
            if num_outputs is None:
                num_outputs = _default_outputs(schema)
            output_names = [self.names.fresh(op_type.lower()) for _ in range(num_outputs)]
        node = Node(op_type, list(inputs), domain=domain, attributes=attrs,
                    outputs=list(output_names), name=name, output_types=output_types)  # fmt: skip
        if self.before is not None:
            self.graph.insert_before(self.before, node)
        elif self.after is not None:
            self.graph.insert_after(self.after, node)
            self.after = node
        else:
            self.graph.append(node)
        self.created.append(node)
        return node

    def constant(self, array: Any, name: str | None = None, dtype=None) -> Value:
        """A new initializer holding ``array``."""
        data = array if is_tensor_data(array) else NumpyTensor(np.asarray(array), dtype)
        v = Value(name or self.names.fresh("const"), TensorType(data.dtype, tuple(data.shape)), data)
        return self.graph.add_initializer(v)

    def input(self, name: str, type: Type | None = None) -> Value:
        return self.graph.append_input(Value(name, type))


@functools.cache
def _latest_opset() -> int:
    """ONNX's newest opset (asked once: passes make thousands of builders)."""
    return onnx.defs.onnx_opset_version()


@functools.lru_cache(maxsize=4096)
def _schema(op_type: str, domain: str, opset: int):
    """ONNX's schema lookup builds a new object per call: importers add thousands of nodes."""
    try:
        return onnx.defs.get_schema(op_type, opset, domain)
    except onnx.defs.SchemaError:
        return None


@functools.lru_cache(maxsize=4096)
def _attr_kinds(op_type: str, domain: str, opset: int) -> dict[str, AttrKind]:
    schema = _schema(op_type, domain, opset)
    if schema is None:
        return {}
    return {key: AttrKind(int(a.type)) for key, a in schema.attributes.items()}


def _default_outputs(schema) -> int:
    if schema is None:
        return 1
    outs = schema.outputs
    if outs and outs[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return max(1, len(outs) - 1) if len(outs) > 1 else 1
    required = [o for o in outs if o.option != onnx.defs.OpSchema.FormalParameterOption.Optional]
    return max(1, len(required))
