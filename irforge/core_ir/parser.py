"""Reads the text form written by :mod:`irforge.core_ir.printer` back into graphs and models."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from sys import intern

import numpy as np

from .attributes import Attr, AttrKind, SparseTensor
from .dtypes import DataType, from_short_name, is_floating, to_numpy
from .errors import ParseError
from .gcpause import paused_gc
from .graph import Graph
from .model import Function, Model
from .node import Node
from .tensors import NumpyTensor, TensorData
from .text_lexer import Lexer, Token, unquote
from .types import MapType, OptionalType, SequenceType, SparseTensorType, TensorType, Type
from .value import Value

_LIST_ATTRS = {
    "ints": AttrKind.INTS, "floats": AttrKind.FLOATS, "strings": AttrKind.STRINGS,
    "tensors": AttrKind.TENSORS, "graphs": AttrKind.GRAPHS, "types": AttrKind.TYPE_PROTOS,
    "sparse_tensors": AttrKind.SPARSE_TENSORS,
}  # fmt: skip


MAX_NESTING = 64


class _Scope:
    """Names visible in one graph body, with forward references waiting for a definition."""

    def __init__(self, parent: _Scope | None):
        self.parent = parent
        self.defined: dict[str, Value] = {}
        self.pending: dict[str, tuple[Value, Token]] = {}

    def lookup(self, name: str) -> Value | None:
        s: _Scope | None = self
        while s is not None:
            v = s.defined.get(name)
            if v is not None:
                return v
            s = s.parent
        return None


_REF = r"(?:%(?:\#\d+|[A-Za-z0-9_.$/\-]+)|none)"
_REF_RE = re.compile(_REF)
_DIM = r"(?:-?\d+|\?|[A-Za-z_][A-Za-z0-9_.]*)"
_PLAIN_NODE = re.compile(
    rf"""(?:[ \t]*:[ \t]*([a-z0-9]+)\[((?:[ \t]*{_DIM}[ \t]*(?:,[ \t]*{_DIM}[ \t]*)*)?)\])?"""
    rf"""[ \t]*=[ \t]*([A-Za-z_][A-Za-z0-9_.]*)\(((?:[ \t]*{_REF}[ \t]*(?:,[ \t]*{_REF}[ \t]*)*)?)\)"""
    r"""(?:[ \t]+with[ \t]*\{[ \t]*name[ \t]*=[ \t]*("(?:[^"\\\n]|\\.)*")[ \t]*\})?[ \t]*(?://[^\n]*)?(?=\n|$)"""
)
"""The rest of a common node line after its output: ``: f32[n,4] = Op(%a, %b) with {name = "n"}``."""
_NUM = r"[-+]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_PLAIN_INIT = re.compile(
    r"[ \t]+(%[A-Za-z0-9_.$/\-]+)[ \t]*=[ \t]*dense<([a-z0-9]+)\[([0-9, \t]*)\]>"
    rf"\[((?:[ \t]*{_NUM}[ \t]*(?:,[ \t]*{_NUM}[ \t]*)*)?)\][ \t]*(?://[^\n]*)?(?=\n|$)"
)
"""The rest of a common initializer line after ``init``: ``%w = dense<f32[2]>[0.5, 1]``."""


class Parser:
    def __init__(self, text: str | Iterable[str], source: str = "<text>"):
        self.source = source
        # tokens are read as they are needed (never more than two ahead): a million-node
        # text would otherwise hold gigabytes of tokens
        self._lexer = Lexer(text, source)
        self._ahead: Token | None = None
        self._types: dict[tuple, TensorType] = {}
        self._tokens = self._lexer.tokens
        self.tok: Token = next(self._tokens)
        self._depth = 0

    # -- token helpers ---------------------------------------------------------------------
    def advance(self) -> None:
        ahead = self._ahead
        if ahead is None:
            self.tok = next(self._tokens)  # past the end it keeps giving "eof"
        else:
            self.tok, self._ahead = ahead, None

    def peek(self) -> Token:
        """The token after the current one."""
        if self._ahead is None:
            self._ahead = next(self._tokens)
        return self._ahead

    def error(self, msg: str, tok: Token | None = None) -> ParseError:
        tok = tok or self.tok
        found = tok.text or "end of input"
        return ParseError(f"{msg} (found {found!r})", tok.line, tok.col, self.source)

    def next(self) -> Token:
        t = self.tok
        self.advance()
        return t

    def at(self, text: str) -> bool:
        t = self.tok
        return t.text == text and t.kind in ("punct", "ident")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.advance()
            return True
        return False

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise self.error(f"expected {text!r}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            raise self.error(f"expected {what}")
        return self.next()

    def name_of(self, tok: Token) -> str:
        body = tok.text[1:]
        return unquote(body) if body.startswith('"') else body

    def string(self) -> str:
        return unquote(self.expect_kind("string", "a string").text)

    def integer(self) -> int:
        t = self.expect_kind("number", "an integer")
        try:
            return int(t.text)
        except ValueError:
            raise self.error("expected an integer", t) from None

    # -- entry points ----------------------------------------------------------------------
    def parse_top(self) -> Graph | Model:
        if self.at("model"):
            result: Graph | Model = self.model()
        elif self.at("graph"):
            result = self.graph(None)
        else:
            raise self.error("expected 'graph' or 'model'")
        if self.tok.kind != "eof":
            raise self.error("unexpected text after the end")
        return result

    def model(self) -> Model:
        self.expect("model")
        extras = self.with_dict()
        self.expect("{")
        opsets: dict[str, int] = {}
        functions: list[Function] = []
        while self.accept("opset"):
            domain = self.string()
            self.expect("=")
            opsets[domain] = self.integer()
        while self.at("func"):
            functions.append(self.function())
        graph = self.graph(None)
        self.expect("}")
        m = Model(graph, opset_imports=opsets)
        m.ir_version = extras.get("ir_version", m.ir_version)
        m.producer_name = extras.get("producer_name", "")
        m.producer_version = extras.get("producer_version", "")
        m.domain = extras.get("domain", "")
        m.model_version = extras.get("model_version", 0)
        m.doc_string = extras.get("doc", "")
        m.metadata = extras.get("metadata", {})
        for fn in functions:
            m.add_function(fn)
        return m

    def function(self) -> Function:
        self.expect("func")
        domain = ""
        if self.tok.kind in ("ident", "string"):
            t = self.next()
            domain = unquote(t.text) if t.kind == "string" else t.text
            self.expect("::")
        name = self.name_of(self.expect_kind("symbol", "a function name '@name'"))
        g, extras = self.graph_rest(None, name)
        fn = Function(domain, name, g, attributes=list(extras.get("attributes", [])))
        fn.overload = extras.get("overload", "")
        fn.doc_string = extras.get("doc", "")
        fn.metadata = extras.get("metadata", {})
        for a in extras.get("defaults", []):
            fn.attribute_defaults[a.name] = a
            if a.name not in fn.attributes:
                fn.attributes.append(a.name)
        return fn

    def graph(self, parent: _Scope | None) -> Graph:
        self.expect("graph")
        name = self.name_of(self.expect_kind("symbol", "a graph name '@name'"))
        self._enter("graphs (If/Loop/Scan bodies)")
        try:
            g, _ = self.graph_rest(parent, name)
        finally:
            self._depth -= 1
        return g

    def _enter(self, what: str) -> None:
        """Nesting past :data:`MAX_NESTING` is refused with the limit named: the IR's walks recurse,
        and an ONNX file cannot nest that deep anyway (protobuf decodes 100 message levels)."""
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise self.error(f"{what} nest more than {MAX_NESTING} deep; irforge reads up to {MAX_NESTING} levels "
                             "(an ONNX file holds at most about 33: protobuf decodes 100 message levels)")

    def graph_rest(self, parent: _Scope | None, name: str) -> tuple[Graph, dict]:
        scope = _Scope(parent)
        g = Graph(name=name)
        self.expect("(")
        if not self.at(")"):
            while True:
                g.append_input(self.value_decl(scope))
                if not self.accept(","):
                    break
        self.expect(")")
        extras = self.with_dict()
        g.doc_string = extras.get("doc", "")
        g.metadata = extras.get("metadata", {})
        g.opset_imports = extras.get("opsets", {})
        self.expect("{")
        self.body(g, scope)
        self.expect("}")
        for nm, (v, tok) in scope.pending.items():
            if parent is None:
                raise ParseError(f"value %{nm} is used but never defined", tok.line, tok.col, self.source)
            if parent.lookup(nm) is not None:  # defined in an outer scope after all
                raise ParseError(f"value %{nm} is used before its definition", tok.line, tok.col, self.source)
            parent.pending.setdefault(nm, (v, tok))
        return g, extras

    def value_decl(self, scope: _Scope) -> Value:
        tok = self.expect_kind("value", "a value '%name'")
        v = self.define(scope, tok)
        if self.accept(":"):
            v.type = self.type_()
        extras = self.with_dict()
        v.doc_string = extras.get("doc", "")
        v.metadata = extras.get("metadata") or None
        return v

    def key_of(self, tok: Token) -> tuple[str, str | None]:
        """Scope key and value name of a ``%name`` token (``%#N`` is an unnamed value)."""
        if tok.text.startswith("%#"):
            return tok.text, None
        name = self.name_of(tok)
        return name, name

    def define(self, scope: _Scope, tok: Token) -> Value:
        key, name = self.key_of(tok)
        if key in scope.pending:
            v, _ = scope.pending.pop(key)
        else:
            v = Value(name)
        scope.defined[key] = v
        return v

    def ref(self, scope: _Scope) -> Value | None:
        if self.accept("none"):
            return None
        return self.resolve(scope, self.expect_kind("value", "a value '%name' or 'none'"))

    def resolve(self, scope: _Scope, tok: Token) -> Value:
        """The value a ``%name`` reference names: defined already, or pending until it is."""
        key, name = self.key_of(tok)
        v = scope.lookup(key)
        if v is None:
            if key in scope.pending:
                return scope.pending[key][0]
            v = Value(name)
            scope.pending[key] = (v, tok)
        return v

    def body(self, g: Graph, scope: _Scope) -> None:
        while True:
            if self.accept("return"):
                outs = []
                if not self.at("}"):
                    while True:
                        tok = self.tok
                        v = self.ref(scope)
                        if v is None:
                            raise self.error("a graph output cannot be 'none'", tok)
                        outs.append(v)
                        if not self.accept(","):
                            break
                g.set_outputs(outs)
                return
            if self.at("init") and self._ahead is None and self.plain_init(g, scope):
                continue
            if self.accept("init"):
                tok = self.expect_kind("value", "an initializer '%name'")
                existing = scope.defined.get(self.key_of(tok)[0])
                if existing is not None and existing in g._input_set:
                    v = existing
                else:
                    v = self.define(scope, tok)
                self.expect("=")
                v.const_value = self.tensor()
                if v.type is None:
                    v.type = self.tensor_type(v.const_value.dtype, tuple(v.const_value.shape))
                extras = self.with_dict()
                v.doc_string = extras.get("doc", v.doc_string)
                v.metadata = extras.get("metadata") or v.metadata
                g.add_initializer(v)
                continue
            if self.tok.kind == "eof":
                raise self.error("missing 'return' at the end of the graph body")
            if not (self.tok.kind == "value" and self._ahead is None and self.plain_node(g, scope)):
                self.node(g, scope)

    def plain_node(self, g: Graph, scope: _Scope) -> bool:
        """The common node line (``%y = Op(%a, %b) with {name = "n"}``: one untyped output, an
        ONNX op, no attributes) read in one regular-expression step instead of a dozen tokens;
        False, with nothing consumed, for any other line."""
        lexer = self._lexer
        m = _PLAIN_NODE.match(lexer.text, lexer.pos)
        if m is None:
            return False
        out_tok, line = self.tok, self.tok.line
        out_type = None
        if m.group(1) is not None:
            dt = from_short_name(m.group(1))
            if dt is None:
                return False  # the general path reports it
            dims = tuple(None if d == "?" else int(d) if d.lstrip("-").isdigit() else intern(d)
                         for d in (x.strip() for x in m.group(2).split(",")) if d)  # fmt: skip
            out_type = self.tensor_type(dt, dims)
        start = m.start(4)
        inputs = [self.ref_text(scope, r.group(), line, start + r.start() + 1)
                  for r in _REF_RE.finditer(m.group(4))]  # fmt: skip
        output = self.define(scope, out_tok)
        if out_type is not None:
            output.type = out_type
        quoted = m.group(5)
        name = "" if not quoted else quoted[1:-1] if "\\" not in quoted else unquote(quoted)
        g.append(Node(intern(m.group(3)), inputs, outputs=[output], name=name))
        lexer.pos = m.end()
        self.advance()
        return True

    def plain_init(self, g: Graph, scope: _Scope) -> bool:
        """The common initializer line (``init %w = dense<f32[2,3]>[...]``, numbers, nothing
        after) in one regular-expression step; False, with nothing consumed, for any other."""
        lexer, line = self._lexer, self.tok.line
        m = _PLAIN_INIT.match(lexer.text, lexer.pos)
        if m is None:
            return False
        dt = from_short_name(m.group(2))
        if dt is None or dt in (DataType.STRING, DataType.BOOL):
            return False
        shape = tuple(int(d) for d in m.group(3).split(",")) if m.group(3).strip() else ()
        body = m.group(4)
        items = [x.strip() for x in body.split(",")] if body.strip() else []
        if len(items) != (int(np.prod(shape)) if shape else 1):
            return False  # the general path reports it
        tok = Token("value", m.group(1), line, m.start(1) + 1)
        existing = scope.defined.get(self.key_of(tok)[0])
        v = existing if existing is not None and existing in g._input_set else self.define(scope, tok)
        v.const_value = NumpyTensor(_numbers(items, dt, to_numpy(dt)).reshape(shape), dt)
        if v.type is None:
            v.type = self.tensor_type(dt, shape)
        g.add_initializer(v)
        lexer.pos = m.end()
        self.advance()
        return True

    def ref_text(self, scope: _Scope, text: str, line: int, col: int) -> Value | None:
        """:meth:`ref` for a reference already cut out of its line."""
        return None if text == "none" else self.resolve(scope, Token("value", text, line, col))

    def node(self, g: Graph, scope: _Scope) -> None:
        outputs: list[Value | None] = []
        if self.tok.kind == "value" or self.at("_"):
            while True:
                if self.accept("_"):
                    outputs.append(None)
                else:
                    outputs.append(self.value_decl(scope))
                if not self.accept(","):
                    break
            self.expect("=")
        domain, op = "", self.op_name()
        if self.accept("::"):
            domain, op = op, self.op_name()
        overload = ""
        if self.tok.kind == "symbol":
            overload = self.name_of(self.next())
        self.expect("(")
        inputs: list[Value | None] = []
        if not self.at(")"):
            while True:
                inputs.append(self.ref(scope))
                if not self.accept(","):
                    break
        self.expect(")")
        attrs: list[Attr] = []
        if self.accept("<"):
            while True:
                attrs.append(self.attr(scope))
                if not self.accept(","):
                    break
            self.expect(">")
        extras = self.with_dict()
        node = Node(op, inputs, domain=domain, attributes=attrs, outputs=outputs,
                    name=extras.get("name", ""), overload=overload)  # fmt: skip
        node.doc_string = extras.get("doc", "")
        node.metadata = extras.get("metadata") or None
        g.append(node)

    def op_name(self) -> str:
        t = self.tok
        if t.kind == "ident":
            self.advance()
            return intern(t.text)
        if t.kind == "string":
            self.advance()
            return intern(unquote(t.text))
        raise self.error("expected an op name")

    # -- attributes ------------------------------------------------------------------------
    def attr(self, scope: _Scope | None) -> Attr:
        t = self.tok
        if t.kind not in ("ident", "string"):
            raise self.error("expected an attribute name")
        self.advance()
        name = unquote(t.text) if t.kind == "string" else t.text
        self.expect("=")
        if self.tok.kind == "symbol":
            ref = self.name_of(self.next())
            self.expect(":")
            kind_tok = self.expect_kind("ident", "an attribute kind")
            try:
                kind = AttrKind[kind_tok.text.upper()]
            except KeyError:
                raise self.error("unknown attribute kind", kind_tok) from None
            return Attr(name, kind, None, ref=ref)
        kind, value = self.attr_value(scope)
        return Attr(name, kind, value)

    def attr_value(self, scope: _Scope | None) -> tuple[AttrKind, object]:
        t = self.tok
        if t.kind == "number":
            self.advance()
            if _is_int(t.text):
                return AttrKind.INT, int(t.text)
            return AttrKind.FLOAT, float(np.float32(t.text))
        if t.kind == "string":
            self.advance()
            return AttrKind.STRING, unquote(t.text)
        if t.kind != "ident":
            raise self.error("expected an attribute value")
        if t.text in _LIST_ATTRS and self.peek().text == "[":
            kind = _LIST_ATTRS[t.text]
            self.advance()
            self.advance()
            items: list = []
            if not self.at("]"):
                while True:
                    items.append(self.list_item(kind, scope))
                    if not self.accept(","):
                        break
            self.expect("]")
            return kind, tuple(items)
        if t.text in ("dense", "elided"):
            return AttrKind.TENSOR, self.tensor()
        if t.text == "sparse":
            return AttrKind.SPARSE_TENSOR, self.tensor()
        if t.text == "graph":
            return AttrKind.GRAPH, self.graph(scope)
        if t.text == "type":
            self.advance()
            self.expect("<")
            ty = self.type_()
            self.expect(">")
            return AttrKind.TYPE_PROTO, ty
        raise self.error("expected an attribute value")

    def list_item(self, kind: AttrKind, scope: _Scope | None):
        if kind == AttrKind.INTS:
            return self.integer()
        if kind == AttrKind.FLOATS:
            return float(np.float32(self.expect_kind("number", "a number").text))
        if kind == AttrKind.STRINGS:
            return self.string()
        if kind in (AttrKind.TENSORS, AttrKind.SPARSE_TENSORS):
            return self.tensor()
        if kind == AttrKind.GRAPHS:
            return self.graph(scope)
        return self.type_()

    # -- types and tensors -----------------------------------------------------------------
    def dtype(self) -> DataType:
        t = self.expect_kind("ident", "an element type")
        dt = from_short_name(t.text)
        if dt is None:
            raise self.error("unknown element type", t)
        return dt

    def type_(self) -> Type | None:
        if self.accept("?"):
            return None
        t = self.tok
        if t.kind == "ident" and t.text in ("seq", "opt", "map", "sparse") and self.peek().text == "<":
            self.advance()
            self.advance()
            if t.text == "map":
                key = self.dtype()
                self.expect(",")
                ty: Type = MapType(key, self.type_())
            elif t.text == "sparse":
                dt = self.dtype()
                ty = SparseTensorType(dt, self.shape())
            else:
                self._enter("types")
                try:
                    elem = self.type_()
                finally:
                    self._depth -= 1
                ty = SequenceType(elem) if t.text == "seq" else OptionalType(elem)
            self.expect(">")
            return ty
        return self.tensor_type(self.dtype(), self.shape())

    def tensor_type(self, dtype: DataType, shape) -> TensorType:
        """One shared object per distinct type (types are immutable): most values of a large
        graph have one of a few types."""
        key = (dtype, shape)
        t = self._types.get(key)
        if t is None:
            t = self._types[key] = TensorType(dtype, shape)
        return t

    def shape(self):
        self.expect("[")
        if self.accept("*"):
            self.expect("]")
            return None
        dims: list = []
        if not self.at("]"):
            while True:
                t = self.next()
                if t.kind == "number" and _is_int(t.text):
                    dims.append(int(t.text))
                elif t.text == "?":
                    dims.append(None)
                elif t.kind in ("ident", "number"):
                    dims.append(t.text)
                elif t.kind == "string":
                    dims.append(unquote(t.text))
                else:
                    raise self.error("expected a dimension", t)
                if not self.accept(","):
                    break
        self.expect("]")
        return tuple(dims)

    def tensor(self) -> TensorData:
        t = self.expect_kind("ident", "a tensor literal")
        if t.text == "elided":
            raise self.error("this constant was elided when printed; print without eliding to parse", t)
        if t.text == "sparse":
            self.expect("<")
            dt = self.dtype()
            dims = self.shape()
            self.expect(">")
            self.expect("(")
            self.expect("values")
            self.expect("=")
            values = self.tensor()
            self.expect(",")
            self.expect("indices")
            self.expect("=")
            indices = self.tensor()
            self.expect(")")
            if values.dtype != dt:
                raise self.error("sparse values have the wrong element type", t)
            return SparseTensor(values, indices, dims or ())
        if t.text != "dense":
            raise self.error("expected 'dense<...>'", t)
        self.expect("<")
        dt = self.dtype()
        shape = self.shape()
        self.expect(">")
        if shape is None or any(not isinstance(d, int) for d in shape):
            raise self.error("a tensor literal needs a static shape", t)
        npdt = to_numpy(dt)
        if self.tok.kind == "string":
            data = unquote(self.next().text)
            if not data.startswith("0x"):
                raise self.error("expected hex data '0x...'")
            try:
                raw = bytes.fromhex(data[2:])
                array = np.frombuffer(raw, dtype=npdt).reshape(shape)
            except ValueError as e:
                raise self.error(f"bad tensor data: {e}") from None
            return NumpyTensor(array, dt)
        if self.at("[") and self._ahead is None and (numbers := self._lexer.number_list()) is not None:
            self.advance()  # past the "]" the lexer consumed
            items: list = numbers
        else:
            items = self.elements()
        count = int(np.prod(shape)) if shape else 1
        if len(items) != count:
            raise self.error(f"tensor of shape {list(shape)} needs {count} elements, got {len(items)}", t)
        if dt == DataType.STRING:
            array = np.array(items, dtype=object).reshape(shape)
        elif dt == DataType.BOOL:
            array = np.array(items, dtype=bool).reshape(shape)
        else:
            array = _numbers(items, dt, npdt).reshape(shape)
        return NumpyTensor(array, dt)

    def elements(self) -> list:
        """``[e, e, ...]`` of a tensor literal, one token at a time (strings, booleans, numbers)."""
        self.expect("[")
        items: list = []
        if not self.at("]"):
            while True:
                it = self.next()
                if it.kind == "string":
                    items.append(unquote(it.text).encode("utf-8", "surrogateescape"))
                elif it.kind == "number":
                    items.append(it.text)
                elif it.text in ("true", "false"):
                    items.append(it.text == "true")
                else:
                    raise self.error("expected a tensor element", it)
                if not self.accept(","):
                    break
        self.expect("]")
        return items

    # -- `with {...}` dictionaries ---------------------------------------------------------
    def with_dict(self) -> dict:
        if not self.accept("with"):
            return {}
        self.expect("{")
        d: dict = {}
        if not self.at("}"):
            while True:
                key = self.expect_kind("ident", "a key").text
                self.expect("=")
                d[key] = self.dict_value()
                if not self.accept(","):
                    break
        self.expect("}")
        return d

    def dict_value(self):
        t = self.tok
        if t.kind == "string":
            return self.string()
        if t.kind == "number":
            return self.integer()
        if self.accept("{"):
            m: dict = {}
            if not self.at("}"):
                while True:
                    k = self.string()
                    self.expect(":")
                    m[k] = self.integer() if self.tok.kind == "number" else self.string()
                    if not self.accept(","):
                        break
            self.expect("}")
            return m
        if self.accept("["):
            items = []
            if not self.at("]"):
                while True:
                    items.append(self.string())
                    if not self.accept(","):
                        break
            self.expect("]")
            return items
        if self.accept("<"):
            attrs = []
            while True:
                attrs.append(self.attr(None))
                if not self.accept(","):
                    break
            self.expect(">")
            return attrs
        raise self.error("expected a value")


def _numbers(items: list, dt: DataType, npdt: np.dtype) -> np.ndarray:
    if any(isinstance(x, bool) for x in items):
        return np.array(items, dtype=np.float64).astype(npdt)
    if is_floating(dt) or any(not _is_int(x) for x in items):
        return np.array(items, dtype=np.float64).astype(npdt)  # numpy reads the strings itself
    ints = [int(x) for x in items]
    if npdt.kind in "iu":
        return np.array(ints, dtype=npdt)
    return np.array(ints, dtype=np.int64).astype(npdt)


def _is_int(text: str) -> bool:
    return text.lstrip("+-").isdigit()


def parse(text: str | Iterable[str], source: str = "<text>") -> Graph | Model:
    """Read a graph (``graph @...``) or a model (``model ...``) from its text form: a string, or
    an open text file (or any iterable of lines), which is read a line at a time.

    Raises :class:`~irforge.core_ir.errors.ParseError` with line and column on bad text.
    """
    parser = Parser(text, source)
    with paused_gc():
        try:
            return parser.parse_top()
        except json.JSONDecodeError as e:  # a quoted literal the lexer took but JSON cannot read
            raise parser.error(f"a malformed string literal ({e.msg})") from None


def parse_graph(text: str | Iterable[str], source: str = "<text>") -> Graph:
    """:func:`parse` for text that must hold a graph (``graph @...``)."""
    result = parse(text, source)
    if not isinstance(result, Graph):
        raise ParseError("expected a graph, found a model", 1, 1, source)
    return result


def parse_model(text: str | Iterable[str], source: str = "<text>") -> Model:
    """:func:`parse` for text that must hold a model (``model ...``)."""
    result = parse(text, source)
    if not isinstance(result, Model):
        raise ParseError("expected a model, found a graph", 1, 1, source)
    return result
