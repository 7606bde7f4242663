"""Declarative rewrite patterns: a source pattern written over an op builder, a check on a typed
match object, and a replacement written with the IR builder.

    def source(p):
        x = p.var("x")
        return p.op.Neg(p.op.Neg(x))

    double_neg = Pattern("double-negation", source, lambda b, m: m["x"])

Matching walks from the pattern's (first) output up through producers; ops listed in
``COMMUTATIVE`` also match with their two inputs swapped.  Shared sub-patterns must match the
same node, a variable used twice must bind the same value.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .attributes import Attr
from .dtypes import DataType
from .node import Node
from .tensors import is_tensor_data, num_elements
from .value import Value

COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "And", "Or", "Xor", "Equal", "Sum", "Mean",
                         "BitwiseAnd", "BitwiseOr", "BitwiseXor"})  # fmt: skip


class PatternValue:
    """A value in a source pattern: a variable, or the output of an op pattern."""


@dataclass(eq=False)
class Var(PatternValue):
    name: str
    constant: bool = False

    def __repr__(self) -> str:
        return f"%{self.name}"


@dataclass(eq=False)
class OpPattern:
    op_type: str
    domain: str
    inputs: tuple[PatternValue | None, ...]
    attrs: dict[str, Any]
    num_outputs: int
    outputs: list[OpOutput] = field(default_factory=list)


@dataclass(eq=False)
class OpOutput(PatternValue):
    op: OpPattern
    index: int

    def __repr__(self) -> str:
        return f"{self.op.op_type}(...)#{self.index}"


class _PatternOps:
    def __init__(self, domain: str = ""):
        self._domain = domain

    def __getattr__(self, op_type: str):
        if op_type.startswith("__"):
            raise AttributeError(op_type)

        def make(*inputs: PatternValue | None, _outputs: int = 1, **attrs: Any):
            op = OpPattern(op_type, self._domain, inputs, attrs, _outputs)
            op.outputs = [OpOutput(op, i) for i in range(_outputs)]
            return op.outputs[0] if _outputs == 1 else tuple(op.outputs)

        return make


class PatternBuilder:
    """What a source function receives: ``p.var(name)``, ``p.const(name)``, ``p.op.<Op>(...)``."""

    op = _PatternOps()

    def domain(self, name: str) -> _PatternOps:
        return _PatternOps(name)

    def var(self, name: str) -> Var:
        return Var(name)

    def const(self, name: str) -> Var:
        """A variable that only binds constants (initializers or ``Constant`` outputs)."""
        return Var(name, constant=True)


class Match:
    """The values and nodes a pattern matched, with the predicates checks are written in."""

    def __init__(self, values: dict[str, Value], nodes: list[Node], outputs: list[Value]):
        self.values, self.nodes, self.outputs = values, nodes, outputs
        self.reason: str | None = None

    def __getitem__(self, name: str) -> Value:
        return self.values[name]

    def fail(self, reason: str) -> bool:
        """Record why the match is refused (shown by the debug trace) and return False."""
        self.reason = reason
        return False

    def dtype(self, name: str) -> int | None:
        t = self.values[name].type
        return getattr(t, "dtype", None)

    def shape(self, name: str) -> tuple | None:
        shape = getattr(self.values[name].type, "shape", None)
        return None if shape is None else tuple(shape)

    def rank(self, name: str) -> int | None:
        shape = self.shape(name)
        return None if shape is None else len(shape)

    def constant(self, name: str) -> np.ndarray | None:
        return constant_value(self.values[name])

    def single_use(self, name: str) -> bool:
        v = self.values[name]
        return v.num_uses() == 1 and not v.is_graph_output()


def constant_value(v: Value | None) -> np.ndarray | None:
    """The value's constant payload as an array, or None when it is not a known constant."""
    if v is None:
        return None
    if v.is_constant():
        return v.const_value.numpy()  # type: ignore[union-attr]
    p = v.producer()
    if p is not None and p.op_type == "Constant" and not p.domain and "value" in p.attributes:
        return p.attributes["value"].value.numpy()
    return None


@dataclass(frozen=True)
class Filled:
    """A tensor of one repeated element, made by ``ConstantOfShape`` of a constant shape: known
    without being materialised (weights over the folding limit, placeholder weights)."""

    dims: tuple[int, ...]
    dtype: DataType
    fill: np.ndarray
    """The element, as a one-element 1-D array."""
    shape_value: Value
    """The constant shape input, for building another ``ConstantOfShape`` of the same shape."""


def filled_value(v: Value | None) -> Filled | None:
    """``v`` as a :class:`Filled` tensor, or None when it is not one.  The ``ConstantOfShape``
    must be valid ONNX (a 1-D int64 shape without negative dims, a one-element ``value``)."""
    p = None if v is None else v.producer()
    if p is None or p.op_type != "ConstantOfShape" or p.domain or len(p.inputs) != 1:
        return None
    shape = constant_value(p.inputs[0])
    if shape is None or shape.dtype != np.int64 or shape.ndim != 1:
        return None
    dims = tuple(shape.tolist())
    if dims and min(dims) < 0:
        return None
    value = p.attributes.get("value")
    if value is None:
        fill, dtype = np.zeros(1, np.float32), DataType.FLOAT
    elif value.ref is None and is_tensor_data(value.value) and num_elements(tuple(value.value.shape)) == 1:
        fill, dtype = value.value.numpy().reshape(1), value.value.dtype
    else:
        return None
    return Filled(dims, dtype, fill, p.inputs[0])  # type: ignore[arg-type]


Replacement = Callable[[Any, Match], "Value | tuple[Value, ...]"]


class Pattern:
    """A named rewrite: ``source`` builds the pattern, ``check`` accepts or refuses a match,
    ``replacement(builder, match)`` returns the new value(s) for the pattern's output(s).

    ``benefit`` orders patterns tried on the same node (higher first).
    """

    def __init__(
        self,
        name: str,
        source: Callable[[PatternBuilder], Any],
        replacement: Replacement,
        check: Callable[[Match], bool] | None = None,
        benefit: int = 1,
    ):
        self.name, self.replacement, self.check, self.benefit = name, replacement, check, benefit
        out = source(PatternBuilder())
        self.outputs: list[PatternValue] = list(out) if isinstance(out, (tuple, list)) else [out]
        if not all(isinstance(o, OpOutput) for o in self.outputs):
            raise TypeError(f"pattern {name!r}: every output must be the result of an op pattern")
        self.root: OpPattern = self.outputs[0].op  # type: ignore[attr-defined]
        self._source = source

    @functools.cached_property
    def defined_at(self) -> str:
        """``file:line`` of the source pattern (read from the file only when asked)."""
        code = getattr(self._source, "__code__", None)
        if code is None:
            return "<unknown>"
        return f"{inspect.getsourcefile(self._source) or code.co_filename}:{code.co_firstlineno}"

    def __repr__(self) -> str:
        return f"Pattern({self.name!r}, root={self.root.op_type})"

    def match(self, node: Node, trace: _Trace | None = None) -> Match | None:
        """The first full match rooted at ``node`` that passes the check, or None."""
        if node.op_type != self.root.op_type or node.domain != self.root.domain:
            return None
        if trace is None and not _inputs_fit(self.root, node):
            return None  # the common miss, told without the generator machinery
        for state in _match_op(self.root, node, _State({}, {}), trace):
            outputs = []
            for o in self.outputs:
                n = state.nodes.get(o.op)  # type: ignore[attr-defined]
                if n is None or o.index >= len(n.outputs):  # type: ignore[attr-defined]
                    break
                outputs.append(n.outputs[o.index])  # type: ignore[attr-defined]
            else:
                m = Match(dict(state.values), list(dict.fromkeys(state.nodes.values())), outputs)
                if self.check is None or self.check(m):
                    return m
                if trace is not None:
                    trace.failed(len(state.nodes), f"check refused: {m.reason or 'returned False'}")
        return None


def _input_fits(pat, v: Value | None) -> bool:
    if pat is None or v is None:
        return pat is None and v is None
    if isinstance(pat, Var):
        if not pat.constant:
            return True
        p = v._producer
        return (v._const_value is not None and not v.is_graph_input()) or (p is not None and p.op_type == "Constant")
    p = v._producer
    return p is not None and p.op_type == pat.op.op_type and p.domain == pat.op.domain


def _inputs_fit(p: OpPattern, node: Node) -> bool:
    """A necessary condition for a match, one level deep: the right number of inputs, each made
    by the op the pattern wants there (in either order for a commutative op), constants where it
    wants constants."""
    ins = node._inputs
    pins = p.inputs
    if len(ins) != len(pins):
        return False
    if all(_input_fits(a, b) for a, b in zip(pins, ins, strict=True)):
        return True
    return (len(pins) == 2 and p.op_type in COMMUTATIVE and not p.domain
            and _input_fits(pins[1], ins[0]) and _input_fits(pins[0], ins[1]))  # fmt: skip


@dataclass
class _State:
    values: dict[str, Value]
    nodes: dict[OpPattern, Node]

    def copy(self) -> _State:
        return _State(dict(self.values), dict(self.nodes))


class _Trace:
    """Keeps the closest partial match: most pattern nodes matched before the failure."""

    def __init__(self) -> None:
        self.depth, self.reason = -1, ""

    def failed(self, depth: int, reason: str) -> None:
        if depth > self.depth:
            self.depth, self.reason = depth, reason


def _match_op(p: OpPattern, node: Node, state: _State, trace: _Trace | None) -> Iterator[_State]:
    seen = state.nodes.get(p)
    if seen is not None:
        if seen is node:
            yield state
        elif trace is not None:
            trace.failed(len(state.nodes), f"{p.op_type} must be the node already matched")
        return
    if node.op_type != p.op_type or node.domain != p.domain:
        if trace is not None:
            trace.failed(len(state.nodes), f"wanted {p.op_type}, found {node.describe()}")
        return
    if len(node.inputs) != len(p.inputs) or len(node.outputs) < p.num_outputs:
        if trace is not None:
            trace.failed(len(state.nodes), f"{node.describe()} has {len(node.inputs)} inputs, "
                                           f"the pattern {len(p.inputs)}")  # fmt: skip
        return
    for key, want in p.attrs.items():
        a: Attr | None = node.attributes.get(key)
        got = None if a is None else a.value
        if got != want and not (isinstance(got, (list, tuple)) and list(got) == list(want)):
            if trace is not None:
                trace.failed(len(state.nodes), f"{node.describe()}: attribute {key}={got!r}, wanted {want!r}")
            return
    state = state.copy()
    state.nodes[p] = node
    orders = [p.inputs]
    if p.op_type in COMMUTATIVE and not p.domain and len(p.inputs) == 2:
        orders.append(p.inputs[::-1])
    for order in orders:
        yield from _match_inputs(list(order), list(node.inputs), state, trace)


def _match_inputs(pats: list, values: list, state: _State, trace: _Trace | None) -> Iterator[_State]:
    if not pats:
        yield state
        return
    pat, value = pats[0], values[0]
    for s in _match_value(pat, value, state, trace):
        yield from _match_inputs(pats[1:], values[1:], s, trace)


def _match_value(pat, value: Value | None, state: _State, trace: _Trace | None) -> Iterator[_State]:
    if pat is None or value is None:
        if pat is None and value is None:
            yield state
        elif trace is not None:
            trace.failed(len(state.nodes), "an optional input is present in one and absent in the other")
        return
    if isinstance(pat, Var):
        bound = state.values.get(pat.name)
        if bound is not None:
            if bound is value:
                yield state
            elif trace is not None:
                trace.failed(len(state.nodes), f"%{pat.name} is bound to %{bound.name}, not %{value.name}")
            return
        if pat.constant and constant_value(value) is None:
            if trace is not None:
                trace.failed(len(state.nodes), f"%{value.name} is not a constant")
            return
        s = state.copy()
        s.values[pat.name] = value
        yield s
        return
    producer = value.producer()
    if producer is None or value.index != pat.index:
        if trace is not None:
            trace.failed(len(state.nodes), f"%{value.name} is not output {pat.index} of a {pat.op.op_type}")
        return
    yield from _match_op(pat.op, producer, state, trace)


def pattern(
    name: str, replacement: Replacement, *, check: Callable[[Match], bool] | None = None, benefit: int = 1
) -> Callable[[Callable[[PatternBuilder], Any]], Pattern]:
    """Decorator form of :class:`Pattern`: the decorated function is the source pattern.

        @pattern("double-negation", lambda b, m: m["x"])
        def double_negation(p):
            return p.op.Neg(p.op.Neg(p.var("x")))
    """

    def build(source: Callable[[PatternBuilder], Any]) -> Pattern:
        return Pattern(name, source, replacement, check, benefit)

    return build
