"""Models: the main graph plus opset imports, model-local functions and metadata."""

from __future__ import annotations

from dataclasses import dataclass, field

from .attributes import Attr
from .graph import Graph


@dataclass(eq=False)
class Function:
    """A model-local function (ONNX ``FunctionProto``): a graph with formal attributes.

    Nodes in the body may reference formal attributes through ``Attr.ref``.
    """

    domain: str
    name: str
    graph: Graph
    attributes: list[str] = field(default_factory=list)
    attribute_defaults: dict[str, Attr] = field(default_factory=dict)
    overload: str = ""
    doc_string: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.domain, self.name, self.overload)

    @property
    def opset_imports(self) -> dict[str, int]:
        return self.graph.opset_imports


@dataclass(eq=False)
class Model:
    """What a model file holds.  ``opset_imports`` maps domain → version (``""`` is ONNX)."""

    graph: Graph
    opset_imports: dict[str, int] = field(default_factory=lambda: {"": 21})
    functions: dict[tuple[str, str, str], Function] = field(default_factory=dict)
    ir_version: int = 10
    producer_name: str = "irforge"
    producer_version: str = ""
    domain: str = ""
    model_version: int = 0
    doc_string: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def add_function(self, fn: Function) -> None:
        self.functions[fn.key] = fn

    def __str__(self) -> str:
        from .printer import print_model

        return print_model(self)
