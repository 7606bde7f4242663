"""The verifier: SSA, scoping, use-list consistency and ONNX schema checks, all problems at once.

Cheap enough to run after every pass (one linear walk; schema facts are cached per op/version).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from functools import lru_cache

import onnx.defs

from .attributes import AttrKind
from .dtypes import DataType
from .errors import Problem, VerificationError
from .gcpause import paused_gc
from .graph import Graph
from .model import Model
from .node import Node
from .payload_check import payload_problem
from .types import TensorType
from .value import Value

_OPTIONAL = onnx.defs.OpSchema.FormalParameterOption.Optional
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic
_TENSOR_RE = re.compile(r"tensor\((\w+)\)$")
_DTYPE_BY_ONNX_NAME = {
    onnx.helper.tensor_dtype_to_string(int(dt)).replace("TensorProto.", "").lower(): int(dt) for dt in DataType
}
_DTYPE_BY_ONNX_NAME.update({"float": DataType.FLOAT, "double": DataType.DOUBLE, "string": DataType.STRING})


_MISSING = object()
_SCHEMA_DOMAINS = frozenset({"", "ai.onnx.ml", "ai.onnx.preview.training", "ai.onnx.preview"})


class _Schema:
    """What the verifier needs of an ``OpSchema``, precomputed once."""

    __slots__ = (
        "attrs", "in_params", "in_range", "max_in", "max_out", "min_in", "min_out", "out_params", "out_range",
        "required", "variadic_in",
    )  # fmt: skip

    def __init__(self, s: onnx.defs.OpSchema):
        self.min_in, self.max_in = s.min_input, s.max_input
        self.min_out, self.max_out = s.min_output, s.max_output
        self.in_range, self.out_range = range(self.min_in, self.max_in + 1), range(self.min_out, self.max_out + 1)
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
                    # a heterogeneous variadic (Scan's V, Loop's V) lets each value take its own type
                    var = None if f.option == _VARIADIC and not f.is_homogeneous else ts
                    out.append((var, allowed[ts], f.option, f.name))
                else:
                    m = _TENSOR_RE.match(ts)
                    known = m is not None and m.group(1) in _DTYPE_BY_ONNX_NAME
                    fixed = frozenset({_DTYPE_BY_ONNX_NAME[m.group(1)]}) if known else None
                    out.append((None, fixed, f.option, f.name))
            return out

        self.in_params = params(s.inputs)
        self.variadic_in = bool(self.in_params) and self.in_params[-1][2] == _VARIADIC
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
        self.names: list[str | None] = []  # of every defined value, to find a name defined twice
        # op_type (ONNX domain) or (op_type, domain) -> what to check such nodes against
        self.schemas: dict[str | tuple[str, str], _Schema | str | None] = {}
        self.graphs: list[Graph] = []
        self.use_entries = self.expected_use_entries = 0

    def add(self, rule: str, msg: str, node: Node | None = None, value: Value | None = None) -> None:
        self.problems.append(Problem(
            rule, msg, node.describe() if node is not None else None,
            value.name if value is not None else None,
        ))  # fmt: skip

    def graph(self, g: Graph, outer: tuple[set[Value], ...] = (), what: str = "graph") -> None:
        """One walk over the nodes; the common case (everything fine) takes the shortest path.

        ``outer`` holds the live definition sets of the enclosing graphs (not copies, so a subgraph
        costs its own size only).  Use lists are checked by count: every input slot must be listed
        by its value (checked inline for the usual one or two readers), and the lists together
        must hold no more than those slots; only a mismatch pays for the full search.
        """
        self.graphs.append(g)
        defined: set[Value] = set()
        schemas, order_bad = self.schemas, False
        add_defined, add_name = defined.add, self.names.append
        slots = dict_slots = entries = 0
        for v in itertools.chain(g._inputs, g._initializers.values()):
            if v not in defined:  # an initializer may also be an input
                add_defined(v)
                add_name(v.name)
                entries += len(v._uses or ())
        for v in g._initializers.values():
            if v.const_value is None:
                self.add("initializer", "initializer has no payload", value=v)
            else:
                problem = payload_problem(v.const_value)
                if problem is not None:
                    self.add("initializer", f"initializer %{v.name} {problem}", value=v)
        for n in g:
            schema = schemas.get(n.op_type if not n.domain else (n.op_type, n.domain), _MISSING)
            if schema is _MISSING:
                schema = schemas[n.op_type if not n.domain else (n.op_type, n.domain)] = self.resolve(n)
            ins, outs = n._inputs, n._outputs
            slots += len(ins)
            checked = schema.__class__ is _Schema
            if checked:
                if len(ins) not in schema.in_range or len(outs) not in schema.out_range:
                    self.check_arity(n, schema)
                if n._attrs or schema.required:
                    self.check_attributes(n, schema)
                params = schema.in_params
                if schema.variadic_in and len(ins) > len(params):
                    params = params + [params[-1]] * (len(ins) - len(params))
                nparams = len(params)
            else:
                if schema is not None:
                    self.add(*schema.split("|", 1), n)  # type: ignore[arg-type]
                nparams = 0
            bound: dict[str, int] | None = None
            for i, v in enumerate(ins):
                if v is None:
                    slots -= 1
                    if i < nparams and params[i][2] != _OPTIONAL:
                        self.add("schema", f"required input {i} ({params[i][3]}) is missing", n)
                    continue
                if v not in defined and not any(v in s for s in outer):
                    order_bad |= self.undefined_input(g, n, i, v)
                u = v._uses
                if type(u) is list and ((u[0] is n and u[1] == i) or (len(u) > 2 and u[2] is n and u[3] == i)):
                    pass  # the usual one or two readers, checked inline
                elif v.is_used_by(n, i):
                    dict_slots += type(u) is dict
                else:
                    self.add("use-list", f"input {i} %{v.name} does not list this node as a use", n, v)
                if i < nparams:
                    t = v.type
                    if t.__class__ is TensorType:
                        var, allowed, _, _ = params[i]
                        dt = t.dtype
                        if allowed is not None and dt not in allowed:
                            self.type_problem(n, v, params[i], f"input {i}", None)
                        if var is not None:
                            if bound is None:
                                bound = {var: dt}
                            elif bound.setdefault(var, dt) != dt:
                                self.type_problem(n, v, params[i], f"input {i}", bound[var])
            if n._attrs:
                for a in n._attrs.values():
                    for sub in a.graphs:
                        self.graph(sub, (defined, *outer), f"subgraph {a.name}")
                    if a.kind == AttrKind.TENSOR and a.value is not None:
                        problem = payload_problem(a.value)
                        if problem is not None:
                            self.add("attribute", f"tensor attribute {a.name!r} {problem}", n)
            for j, o in enumerate(outs):
                if o is None:
                    continue
                if o._producer is not n:
                    self.add("use-list", f"output %{o.name} does not name this node as its producer", n, o)
                add_name(o.name)
                add_defined(o)
                entries += len(o._uses or ())
                if checked and o.type.__class__ is TensorType:
                    self.check_output_type(n, j, o, schema, {} if bound is None else bound)
        # a flat use list holds two entries per use, a dict one
        self.expected_use_entries += 2 * (slots - dict_slots) + dict_slots
        self.use_entries += entries
        if order_bad:
            self.cycles(g)
        for i, v in enumerate(g.outputs):
            if v not in defined and not any(v in s for s in outer):
                self.add("ssa", f"{what} output {i} %{v.name} is not defined", value=v)

    def check_unique_names(self) -> None:
        """Names are collected on the fast path; only when two values share one is it found here."""
        names = self.names
        unnamed = names.count(None)
        if len(set(names)) == len(names) - unnamed + (unnamed > 0):
            return
        seen: dict[str, Value] = {}
        for g in self.graphs:
            defs = [(None, v) for v in itertools.chain(g._inputs, g._initializers.values())]
            defs += [(n, o) for n in g for o in n._outputs if o is not None]
            for n, v in defs:
                if v.name is not None and seen.setdefault(v.name, v) is not v:
                    self.add("ssa", f"the name %{v.name} is defined twice", n, v)
                    seen[v.name] = v

    def undefined_input(self, g: Graph, n: Node, i: int, v: Value) -> bool:
        """Report an input not (yet) defined; True when it is defined later (an order problem)."""
        if v.producer() is not None and v.producer().graph is g:
            self.add("ssa", f"input {i} %{v.name} is used before it is defined", n, v)
            return True
        self.add("ssa", f"input {i} %{v.name} is not defined in this graph or an enclosing one", n, v)
        return False

    def check_use_counts(self) -> None:
        """Every registered use must be a real input slot: catches uses left by removed nodes."""
        if self.use_entries != self.expected_use_entries:
            values = {v for g in self.graphs for v in g.values()}
            stale = [
                (v, user)
                for v in values
                for user, idx in v.uses()
                if user.graph is None or idx >= len(user.inputs) or user.inputs[idx] is not v
            ]
            for v, user in stale[:10]:
                self.add("use-list", f"%{v.name} lists a use by {user.describe()}, which does not read it", value=v)

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

    def resolve(self, n: Node) -> _Schema | str | None:
        """What to check nodes of this op against: a schema, nothing, or a problem to report."""
        domain, op = n.domain, n.op_type
        version = self.opsets.get(domain)
        known_elsewhere = (domain, op) in self.functions or (domain, op) in self.kernels
        if version is None:
            if domain == "" or known_elsewhere:
                return None
            return f"opset|domain {domain!r} is not imported by the model (add an opset import)"
        s = _schema(op, domain, version) if domain in _SCHEMA_DOMAINS else None
        if s is not None:
            return s
        if known_elsewhere:
            return None
        if domain in ("", "ai.onnx.ml") or _known_domain(domain):
            return f"schema|op {op} does not exist in domain {domain!r} version {version}"
        return (
            f"unknown-domain|domain {domain!r} has no schemas, functions or kernels; "
            "install the plugin that provides it"
        )

    def check_arity(self, n: Node, s: _Schema) -> None:
        ins, outs = n._inputs, n._outputs
        if not s.min_in <= len(ins) <= s.max_in:
            self.add("schema", f"has {len(ins)} inputs; {n.op_type} takes {s.min_in}..{s.max_in}", n)
        if not s.min_out <= len(outs) <= s.max_out:
            self.add("schema", f"has {len(outs)} outputs; {n.op_type} gives {s.min_out}..{s.max_out}", n)

    def check_attributes(self, n: Node, s: _Schema) -> None:
        attrs = n._attrs or {}
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

    def check_output_type(self, n: Node, i: int, v: Value, s: _Schema, bound: dict[str, int]) -> None:
        params = s.out_params
        if i < len(params):
            p = params[i]
        elif params and params[-1][2] == _VARIADIC:
            p = params[-1]
        else:
            return
        dt = v.type.dtype
        if p[1] is not None and dt not in p[1]:
            self.type_problem(n, v, p, f"output {i}", None)
        if p[0] is not None:
            prev = bound.setdefault(p[0], dt)
            if prev != dt:
                self.type_problem(n, v, p, f"output {i}", prev)

    def type_problem(self, n: Node, v: Value, p, where: str, bound_to: int | None) -> None:
        var, _, _, pname = p
        dt = DataType(v.type.dtype).name
        if bound_to is None:
            self.add("type", f"{where} ({pname}) %{v.name} is {dt}, which {n.op_type} does not accept", n, v)
        else:
            self.add("type", f"{where} ({pname}) %{v.name} is {dt} but type {var} is already bound to "
                             f"{DataType(bound_to).name}", n, v)  # fmt: skip


def _collect(g: Graph, opsets, functions, kernels, subject) -> list[Problem]:
    ver = _Verifier(opsets, functions, kernels)
    with paused_gc():
        ver.graph(g)
        ver.check_use_counts()
        ver.check_unique_names()
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
    """Every problem of the model's graphs and functions, found in one walk; raises
    :class:`VerificationError` listing them unless ``raise_on_error`` is false."""
    from .interpreter import registered_kernels

    kernels = set(registered_kernels())
    functions = {(d, n) for d, n, _ in model.functions}
    problems = _recursive_functions(model)
    problems += _collect(model.graph, model.opset_imports, functions, kernels, "model")
    for fn in model.functions.values():
        opsets = fn.opset_imports or model.opset_imports
        for p in _collect(fn.graph, opsets, functions, kernels, "function"):
            p.message = f"in function {fn.domain}::{fn.name}: {p.message}"
            problems.append(p)
    if problems and raise_on_error:
        raise VerificationError(problems, f"model {model.graph.name!r}")
    return problems


def _recursive_functions(model: Model) -> list[Problem]:
    """A function that calls itself, directly or through others, has no finite expansion: no
    runtime accepts it.  One problem per cycle, naming its functions in call order."""
    key = {(fn.domain, fn.name, fn.overload): fn for fn in model.functions.values()}
    calls: dict[tuple, list[tuple]] = {}
    for k, fn in key.items():
        calls[k] = sorted({(n.domain, n.op_type, n.overload) for n in fn.graph.all_nodes()
                           if (n.domain, n.op_type, n.overload) in key})  # fmt: skip
    problems, state = [], dict.fromkeys(key, 0)  # 0 unseen, 1 on the current path, 2 done
    for root in key:
        if state[root]:
            continue
        path, stack = [root], [iter(calls[root])]
        state[root] = 1
        while stack:  # iterative: a chain of a thousand functions is no RecursionError
            callee = next(stack[-1], None)
            if callee is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[callee] == 1:
                cycle = [*path[path.index(callee):], callee]
                names = " -> ".join(f"{d}::{n}" + (f"@{o}" if o else "") for d, n, o in cycle)
                problems.append(Problem("function", f"function {names.split(' -> ')[0]} calls itself: {names}; "
                                        "no runtime can expand it", None, None))  # fmt: skip
            elif state[callee] == 0:
                state[callee] = 1
                path.append(callee)
                stack.append(iter(calls[callee]))
    return problems
