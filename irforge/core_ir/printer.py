"""The text form of graphs and models: readable, MLIR-like, and read back exactly by ``parse``.

    graph @main(%x: f32[batch,3], %w: f32[3]) {
      %y: f32[batch,3] = Add(%x, %w) with {name = "add0"}
      %z = com.microsoft::Gelu(%y)
      return %z
    }

Large constants print as hex bytes; ``elide_above`` shortens them to ``elided<...>`` for reading
(such text cannot be parsed back).
"""

from __future__ import annotations

import io
from typing import TextIO

import numpy as np

from .attributes import Attr, AttrKind, SparseTensor
from .dtypes import DataType, bit_width, is_floating, short_name
from .graph import Graph
from .model import Function, Model
from .node import Node
from .tensors import TensorData, num_elements, peek
from .text_lexer import format_ident, format_name, quote
from .types import format_shape, format_type
from .value import Value

LIST_LIMIT = 64  # tensors with more elements print as hex bytes


class Printer:
    def __init__(self, elide_above: int | None = None):
        self.elide_above = elide_above
        self._anon: dict[Value, int] = {}

    # -- names -----------------------------------------------------------------------------
    def ref(self, v: Value | None) -> str:
        if v is None:
            return "none"
        if v.name is None:
            return f"%#{self._anon.setdefault(v, len(self._anon))}"
        return "%" + format_name(v.name)

    def decl(self, v: Value) -> str:
        s = self.ref(v)
        if v.type is not None:
            s += f": {format_type(v.type)}"
        extras = _value_extras(v)
        return f"{s} with {extras}" if extras else s

    # -- graphs ----------------------------------------------------------------------------
    def graph(self, g: Graph, indent: str = "", keyword: str = "graph") -> str:
        w = io.StringIO()
        self.write_graph(g, w, indent, keyword)
        return w.getvalue()

    def write_graph(self, g: Graph, w: TextIO, indent: str = "", keyword: str = "graph") -> None:
        """Write the graph's text to ``w`` line by line: a million-node model never exists as one
        string unless the caller asks for one."""
        params = ", ".join(self.decl(v) for v in g.inputs)
        head = f"{keyword} @{format_name(g.name)}({params})"
        extras = _dict_text({"doc": g.doc_string or None, "metadata": g.metadata or None,
                             "opsets": g.opset_imports or None})  # fmt: skip
        if extras:
            head += f" with {extras}"
        w.write(head + " {\n")
        self._body(g, indent + "  ", w)
        w.write(f"{indent}}}")

    def _body(self, g: Graph, ind: str, w: TextIO) -> None:
        for v in g._initializers.values():
            extras = _value_extras(v)
            tail = f" with {extras}" if extras else ""
            w.write(f"{ind}init {self.ref(v)} = {self.tensor(v.const_value)}{tail}\n")
        for n in g:
            w.write(f"{ind}{self.node(n, ind)}\n")
        w.write(f"{ind}return {', '.join(self.ref(v) for v in g.outputs)}\n".replace("return \n", "return\n"))

    def node(self, n: Node, ind: str = "", *, metadata: bool = True) -> str:
        """One node's line (without indent or newline); ``metadata=False`` leaves out its source
        metadata, for reports that show a few nodes."""
        results = ", ".join("_" if o is None else self.decl(o) for o in n.outputs)
        op = format_ident(n.op_type)
        if n.domain:
            op = f"{format_ident(n.domain)}::{op}"
        if n.overload:
            op += f"@{format_name(n.overload)}"
        args = ", ".join(self.ref(v) for v in n.inputs)
        line = f"{results} = {op}({args})" if n.outputs else f"{op}({args})"
        if n._attrs:
            attrs = ", ".join(self.attr(a, ind) for a in n._attrs.values())
            line += f" <{attrs}>"
        extras = _dict_text({"name": n.name or None, "doc": n.doc_string or None,
                             "metadata": (n.metadata or None) if metadata else None})  # fmt: skip
        if extras:
            line += f" with {extras}"
        return line

    # -- attributes and tensors ------------------------------------------------------------
    def attr(self, a: Attr, ind: str) -> str:
        kind = AttrKind(a.kind)
        if a.ref is not None:
            return f"{format_ident(a.name)} = @{format_name(a.ref)} : {kind.name.lower()}"
        return f"{format_ident(a.name)} = {self.attr_value(kind, a.value, ind)}"

    def attr_value(self, kind: AttrKind, value, ind: str) -> str:
        k = AttrKind
        if kind == k.INT:
            return str(value)
        if kind == k.FLOAT:
            return _float(value)
        if kind == k.STRING:
            return quote(value)
        if kind == k.TENSOR:
            return self.tensor(value)
        if kind == k.SPARSE_TENSOR:
            return self.sparse(value)
        if kind == k.GRAPH:
            return self.graph(value, ind + "  ")
        if kind == k.TYPE_PROTO:
            return f"type<{format_type(value)}>"
        if kind == k.INTS:
            return f"ints[{', '.join(str(v) for v in value)}]"
        if kind == k.FLOATS:
            return f"floats[{', '.join(_float(v) for v in value)}]"
        if kind == k.STRINGS:
            return f"strings[{', '.join(quote(v) for v in value)}]"
        if kind == k.TENSORS:
            return f"tensors[{', '.join(self.tensor(v) for v in value)}]"
        if kind == k.SPARSE_TENSORS:
            return f"sparse_tensors[{', '.join(self.sparse(v) for v in value)}]"
        if kind == k.GRAPHS:
            return f"graphs[{', '.join(self.graph(v, ind + '  ') for v in value)}]"
        if kind == k.TYPE_PROTOS:
            return f"types[{', '.join(format_type(v) for v in value)}]"
        raise ValueError(f"unknown attribute kind {kind}")

    def tensor(self, t: TensorData) -> str:
        if isinstance(t, SparseTensor):
            return self.sparse(t)
        head = f"dense<{short_name(t.dtype)}{format_shape(tuple(t.shape))}>"
        count = num_elements(tuple(t.shape))
        if self.elide_above is not None and count > self.elide_above:
            return f"elided<{short_name(t.dtype)}{format_shape(tuple(t.shape))}>"
        array = peek(t)
        if t.dtype == DataType.STRING:
            items = (quote(v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v))
                     for v in array.ravel())  # fmt: skip
            return f"{head}[{', '.join(items)}]"
        as_list = count <= LIST_LIMIT or bit_width(t.dtype) % 8 != 0
        if as_list and is_floating(t.dtype) and count and np.isnan(array.astype(np.float64)).any():
            as_list = bit_width(t.dtype) % 8 != 0  # NaN payloads only survive as bytes
        if t.dtype in (DataType.COMPLEX64, DataType.COMPLEX128):
            as_list = False
        if not as_list:
            return f'{head}"0x{np.ascontiguousarray(array).tobytes().hex().upper()}"'
        flat = array.ravel()
        if t.dtype == DataType.BOOL:
            items = ("true" if x else "false" for x in flat)
        elif is_floating(t.dtype):
            items = (_float(x) for x in flat)
        else:
            ints = flat.tolist() if flat.dtype.kind in "iu" else flat.astype(np.int64).tolist()
            items = (str(x) for x in ints)
        return f"{head}[{', '.join(items)}]"

    def sparse(self, s: SparseTensor) -> str:
        shape = format_shape(s.dims)
        return (
            f"sparse<{short_name(s.dtype)}{shape}>(values = {self.tensor(s.values)}, "
            f"indices = {self.tensor(s.indices)})"
        )


def _float(x) -> str:
    s = str(x) if isinstance(x, np.generic) else str(np.float32(x))
    if s in ("inf", "-inf", "nan"):
        return s
    if "." not in s and "e" not in s:
        s += ".0"
    return s


def _value_extras(v: Value) -> str:
    return _dict_text({"doc": v.doc_string or None, "metadata": v.metadata or None})


def _dict_text(d: dict) -> str:
    items = []
    for k, v in d.items():
        if v is None:
            continue
        if isinstance(v, dict):
            inner = ", ".join(f"{quote(str(a))}: {b if isinstance(b, int) else quote(b)}"
                              for a, b in v.items())  # fmt: skip
            items.append(f"{k} = {{{inner}}}")
        elif isinstance(v, int):
            items.append(f"{k} = {v}")
        elif isinstance(v, list):
            items.append(f"{k} = [{', '.join(quote(x) for x in v)}]")
        else:
            items.append(f"{k} = {quote(v)}")
    return "{" + ", ".join(items) + "}" if items else ""


def print_graph(g: Graph, elide_above: int | None = None) -> str:
    """The text form of a graph (parse it back with :func:`irforge.core_ir.parse`)."""
    return Printer(elide_above).graph(g) + "\n"


def print_function(fn: Function, p: Printer | None = None) -> str:
    w = io.StringIO()
    write_function(fn, w, p or Printer())
    return w.getvalue()


def write_function(fn: Function, w: TextIO, p: Printer) -> None:
    g = fn.graph
    params = ", ".join(p.decl(v) for v in g.inputs)
    domain = format_ident(fn.domain) + "::" if fn.domain else ""
    head = f"func {domain}@{format_name(fn.name)}({params})"
    extras = _dict_text({
        "overload": fn.overload or None, "attributes": fn.attributes or None,
        "doc": fn.doc_string or None, "metadata": fn.metadata or None,
        "opsets": g.opset_imports or None,
    })  # fmt: skip
    if fn.attribute_defaults:
        defaults = ", ".join(p.attr(a, "  ") for a in fn.attribute_defaults.values())
        extras = (extras[:-1] + ", " if extras else "{") + f"defaults = <{defaults}>}}"
    if extras:
        head += f" with {extras}"
    w.write(head + " {\n")
    p._body(g, "    ", w)
    w.write("  }")


def print_model(m: Model, elide_above: int | None = None) -> str:
    """The text form of a model: header, opset imports, functions, then the main graph."""
    w = io.StringIO()
    write_model(m, w, elide_above)
    return w.getvalue()


def write_model(m: Model, w: TextIO, elide_above: int | None = None) -> None:
    """:func:`print_model` written to a file as it goes."""
    p = Printer(elide_above)
    extras = _dict_text({
        "ir_version": m.ir_version, "producer_name": m.producer_name or None,
        "producer_version": m.producer_version or None, "domain": m.domain or None,
        "model_version": m.model_version or None, "doc": m.doc_string or None,
        "metadata": m.metadata or None,
    })  # fmt: skip
    w.write(f"model with {extras} {{\n" if extras else "model {\n")
    for domain, version in m.opset_imports.items():
        w.write(f"  opset {quote(domain)} = {version}\n")
    for fn in m.functions.values():
        w.write("  ")
        write_function(fn, w, p)
        w.write("\n")
    w.write("  ")
    p.write_graph(m.graph, w, "  ")
    w.write("\n}\n")
