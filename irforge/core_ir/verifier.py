"""The verifier: SSA, scoping, use-list consistency and ONNX schema checks, all problems at once.

Cheap enough to run after every pass (one linear walk; schema facts are cached per op/version).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import onnx.defs

from .attributes import AttrKind
from .dtypes import DataType
from .errors import Problem, VerificationError
from .graph import Graph
from .model import Model
from .node import Node
from .types import TensorType
from .value import Value

_OPTIONAL = onnx.defs.OpSchema.FormalParameterOption.Optional
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic
_TENSOR_RE = re.compile(r"tensor\((\w+)\)$")
_DTYPE_BY_ONNX_NAME = {
    onnx.helper.tensor_dtype_to_string(int(dt)).replace("TensorProto.", "").lower(): int(dt) for dt in DataType
}
_DTYPE_BY_ONNX_NAME.update({"float": DataType.FLOAT, "double": DataType.DOUBLE, "string": DataType.STRING})


_SCHEMA_DOMAINS = frozenset({"", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview"})


class _Schema:
    """What the verifier needs of an ``OpSchema``, precomputed once."""

    __slots__ = ("attrs", "in_params", "max_in", "max_out", "min_in", "min_out", "out_params", "required")

    def __init__(self, s: onnx.defs.OpSchema):
        self.min_in, self.max_in = s.min_input, s.max_input
        self.min_out, self.max_out = s.min_output, s.max_output
        allowed: dict[str, frozenset[int] | None] = {}
        for tc in s.type_constraints:
            codes = set()
            for t in tc.allowed_type_strs:
                m = _TENSOR_RE.match(t)
                if m is None or m.group(1) not in _DTYPE_BY_ONNX_NAME:
                    codes = None
                    break
                codes.add(_DTYPE_BY_ONNX_NAME[m.group(1)])
            allowed[tc.type_param_str] = None if codes is None else frozenset(codes)

        def params(formals):
            out = []
            for f in formals:
                ts = f.type_str
                if ts in allowed:
                    out.append((ts, allowed[ts], f.option, f.name))
                else:
                    m = _TENSOR_RE.match(ts)
                    known = m is not None and m.group(1) in _DTYPE_BY_ONNX_NAME
                    fixed = frozenset({_DTYPE_BY_ONNX_NAME[m.group(1)]}) if known else None
                    out.append((None, fixed, f.option, f.name))
            return out

        self.in_params = params(s.inputs)
        self.out_params = params(s.outputs)
        self.attrs = {name: int(a.type) for name, a in s.attributes.items()}
        self.required = [name for name, a in s.attributes.items() if a.required]


@lru_cache(maxsize=4096)
def _schema(op_type: str, domain: str, version: int) -> _Schema | None:
    try:
        return _Schema(onnx.defs.get_schema(op_type, version, domain))
    except onnx.defs.SchemaError:
        return None


@lru_cache(maxsize=256)
def _known_domain(domain: str) -> bool:
    return domain in {s.domain for s in onnx.defs.get_all_schemas_with_history()}


class _Verifier:
    def __init__(self, opsets: dict[str, int], functions: Iterable[tuple[str, str]], kernels: set):
        self.opsets = opsets
        self.functions = set(functions)
        self.kernels = kernels
        self.problems: list[Problem] = []
        self.names: dict[str, Value] = {}

    def add(self, rule: str, msg: str, node: Node | None = None, value: Value | None = None) -> None:
        self.problems.append(Problem(
            rule, msg, node.describe() if node is not None else None,
            value.name if value is not None else None,
        ))  # fmt: skip

    def define(self, v: Value, node: Node | None = None) -> None:
        if v.name is None:
            return
        other = self.names.get(v.name)
        if other is not None and other is not v:
            self.add("ssa", f"the name %{v.name} is defined twice", node, v)
        self.names[v.name] = v

    def graph(self, g: Graph, visible: set[Value], what: str = "graph") -> None:
        defined = set(visible)
        for v in g.inputs:
            self.define(v)
            defined.add(v)
        for v in g._initializers.values():
            if v not in g._input_set:
                self.define(v)
            defined.add(v)
            if v.const_value is None:
                self.add("initializer", "initializer has no payload", value=v)
        later = {o for n in g for o in n._outputs if o is not None}
        order_bad = False
        for n in g:
            for i, v in enumerate(n._inputs):
                if v is None:
                    continue
                if v not in defined:
                    if v in later:
                        order_bad = True
                        self.add("ssa", f"input {i} %{v.name} is used before it is defined", n, v)
                    else:
                        self.add("ssa", f"input {i} %{v.name} is not defined in this graph or an "
                                        "enclosing one", n, v)  # fmt: skip
                if not v.is_used_by(n, i):
                    self.add("use-list", f"input {i} %{v.name} does not list this node as a use", n, v)
            self.node(n, defined)
            for o in n._outputs:
                if o is not None:
                    if o._producer is not n:
                        self.add("use-list", f"output %{o.name} does not name this node as its producer", n, o)
                    self.define(o, n)
                    defined.add(o)
        if order_bad:
            self.cycles(g)
        for i, v in enumerate(g.outputs):
            if v not in defined:
                self.add("ssa", f"{what} output {i} %{v.name} is not defined", value=v)

    def cycles(self, g: Graph) -> None:
        import networkx as nx

        dg = nx.DiGraph()
        for n in g:
            dg.add_node(n)
            for v in n._inputs:
                p = v.producer() if v is not None else None
                if p is not None and p.graph is g:
                    dg.add_edge(p, n)
        try:
            cycle = nx.find_cycle(dg)
        except nx.NetworkXNoCycle:
            self.add("order", f"graph {g.name!r} is not topologically sorted (Graph.sort() fixes it)")
            return
        path = " -> ".join(a.describe() for a, _ in cycle)
        self.add("cycle", f"graph {g.name!r} has a cycle: {path} -> {cycle[0][0].describe()}")

    def node(self, n: Node, defined: set[Value]) -> None:
        domain = n.domain
        for a in (n._attrs or {}).values():
            for sub in a.graphs:
                self.graph(sub, defined, f"subgraph {a.name}")
        version = self.opsets.get(domain)
        if version is None:
            if domain == "" or (domain, n.op_type) in self.functions or (domain, n.op_type) in self.kernels:
                return
            self.add("opset", f"domain {domain!r} is not imported by the model (add an opset import)", n)
            return
        s = _schema(n.op_type, domain, version) if domain in _SCHEMA_DOMAINS else None
        if s is None:
            if (domain, n.op_type) in self.functions or (domain, n.op_type) in self.kernels:
                return
            if domain in ("", "ai.onnx.ml") or _known_domain(domain):
                self.add("schema", f"op {n.op_type} does not exist in domain {domain!r} version {version}", n)
            else:
                self.add("unknown-domain", f"domain {domain!r} has no schemas, functions or kernels; "
                                           "install the plugin that provides it", n)  # fmt: skip
            return
        self.check_schema(n, s)

    def check_schema(self, n: Node, s: _Schema) -> None:
        ins, outs = n._inputs, n._outputs
        if not s.min_in <= len(ins) <= s.max_in:
            self.add("schema", f"has {len(ins)} inputs; {n.op_type} takes {s.min_in}..{s.max_in}", n)
        if not s.min_out <= len(outs) <= s.max_out:
            self.add("schema", f"has {len(outs)} outputs; {n.op_type} gives {s.min_out}..{s.max_out}", n)
        attrs = n._attrs or {}
        if attrs or s.required:
            for name, a in attrs.items():
                kind = s.attrs.get(name)
                if kind is None:
                    self.add("attribute", f"unknown attribute {name!r} for {n.op_type}", n)
                elif kind != a.kind:
                    self.add("attribute", f"attribute {name!r} is {AttrKind(a.kind).name}, "
                                          f"{n.op_type} wants {AttrKind(kind).name}", n)  # fmt: skip
            for name in s.required:
                if name not in attrs:
                    self.add("attribute", f"required attribute {name!r} is missing", n)
        bound: dict[str, int] = {}
        params = s.in_params
        for i, v in enumerate(ins):
            p = params[i] if i < len(params) else (params[-1] if params and params[-1][2] == _VARIADIC else None)
            if p is None:
                continue
            if v is None:
                if p[2] != _OPTIONAL:
                    self.add("schema", f"required input {i} ({p[3]}) is missing", n)
                continue
            self.check_type(n, v, p, bound, f"input {i}")
        for i, v in enumerate(outs):
            if v is None or v.type is None:
                continue
            params = s.out_params
            p = params[i] if i < len(params) else (params[-1] if params and params[-1][2] == _VARIADIC else None)
            if p is not None:
                self.check_type(n, v, p, bound, f"output {i}")

    def check_type(self, n: Node, v: Value, p, bound: dict[str, int], where: str) -> None:
        t = v.type
        if not isinstance(t, TensorType):
            return
        var, allowed, _, pname = p
        dt = int(t.dtype)
        if allowed is not None and dt not in allowed:
            self.add("type", f"{where} ({pname}) %{v.name} is {DataType(dt).name}, which "
                             f"{n.op_type} does not accept", n, v)  # fmt: skip
        if var is not None:
            prev = bound.setdefault(var, dt)
            if prev != dt:
                self.add("type", f"{where} ({pname}) %{v.name} is {DataType(dt).name} but type "
                                 f"{var} is already bound to {DataType(prev).name}", n, v)  # fmt: skip


def _collect(g: Graph, opsets, functions, kernels, subject) -> list[Problem]:
    ver = _Verifier(opsets, functions, kernels)
    ver.graph(g, set())
    return ver.problems


def verify(
    graph: Graph | Model, *, opset_imports: dict[str, int] | None = None, raise_on_error: bool = True
) -> list[Problem]:
    """Check every invariant; raise :class:`VerificationError` listing all problems found.

    With ``raise_on_error=False`` the problems are returned instead.
    """
    if isinstance(graph, Model):
        return verify_model(graph, raise_on_error=raise_on_error)
    from .interpreter import registered_kernels

    opsets = dict(opset_imports or graph.opset_imports or {"": onnx.defs.onnx_opset_version()})
    problems = _collect(graph, opsets, (), set(registered_kernels()), "graph")
    if problems and raise_on_error:
        raise VerificationError(problems, f"graph {graph.name!r}")
    return problems


def verify_model(model: Model, *, raise_on_error: bool = True) -> list[Problem]:
    from .interpreter import registered_kernels

    kernels = set(registered_kernels())
    functions = {(d, n) for d, n, _ in model.functions}
    problems = []
    problems += _collect(model.graph, model.opset_imports, functions, kernels, "model")
    for fn in model.functions.values():
        opsets = fn.opset_imports or model.opset_imports
        for p in _collect(fn.graph, opsets, functions, kernels, "function"):
            p.message = f"in function {fn.domain}::{fn.name}: {p.message}"
            problems.append(p)
    if problems and raise_on_error:
        raise VerificationError(problems, f"model {model.graph.name!r}")
    return problems
