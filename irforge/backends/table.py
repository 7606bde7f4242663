"""One rule table and one driver for every backend that lowers op by op.

A backend is a :class:`RuleTable`: for each ONNX op a rule ``fn(ctx, node, args) -> results``
and, where the rule does not take every use of the op, a ``check(node) -> reason | None`` that
sees the node's attributes, its values' dtypes and static shapes, and whether its operands are
known at compile time.  :meth:`RuleTable.unsupported` runs every check before anything is
lowered, so ``emit --check-only``, ``irforge.compile`` and ``Backend.unsupported`` refuse a
model up front, with the message a call would give.

The driver parts are shared too: values known at compile time and small (:data:`FOLD_ELEMENTS`)
are computed by the reference interpreter rather than lowered (:func:`fold`), so a ``Reshape``
whose shape comes from ``Shape -> Gather -> Concat`` still gets static dims on every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core_ir.model import Model
from ..core_ir.node import Node
from ..ops.traits import Kind, kind
from .base import Unsupported, collect_unsupported, io_problems, kept_framework_ops, type_problem

FOLD_ELEMENTS = 1 << 16
"""Nodes whose inputs are all known and at most this many elements run in the interpreter."""


class NotStatic(Exception):
    """An input that must be a compile-time constant is computed at run time."""


class Refused(NotStatic):
    """A rule met a use of its op it cannot express exactly (a backstop: its check should have
    said so up front)."""


Rule = Callable[[Any, Node, list], list]
Check = Callable[[Node], "str | None"]


@dataclass(frozen=True)
class Lowering:
    """A rule and the up-front check of the uses it refuses."""

    fn: Rule
    check: Check | None = None


def static(x, what: str = "this input") -> np.ndarray:
    """``x`` as a numpy constant, or :class:`NotStatic` when it is computed at run time."""
    if x is None or isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    raise NotStatic(f"{what} is computed at run time; the compiler needs it at compile time")


def ints(x, what: str) -> list[int]:
    """A static operand as a list of Python ints."""
    return [int(v) for v in static(x, what).reshape(-1)]


def foldable(args: list) -> bool:
    """Whether a node with these arguments is computed at compile time, not lowered."""
    known = all(a is None or isinstance(a, np.ndarray) for a in args)
    return known and sum(a.size for a in args if a is not None) <= FOLD_ELEMENTS


def fold(interpreter, node: Node, args: list) -> list[np.ndarray]:
    """``node`` on known values, through the reference interpreter."""
    return [np.asarray(o) for o in interpreter.evaluate(node, args)]


def op_label(node: Node) -> str:
    return node.op_type if not node.domain else f"{node.domain}::{node.op_type}"


# -- what a check may ask of a node's values -----------------------------------------------------


_NEW_TYPE = frozenset({"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor", "Not",
                       "IsInf", "IsNaN", "ArgMax", "ArgMin", "Shape", "Size", "NonZero"})  # fmt: skip
"""Ops whose result's element type is fixed whatever their inputs' (bool or int64)."""
_KEEPS_TYPE = frozenset({"Softmax", "LogSoftmax", "LayerNormalization"})
"""Opaque ops whose result has their first input's element type."""


def dtype_of(node: Node, index: int, output: bool = False):
    """The ONNX element type of an input (or output), or ``None`` when unknown or omitted.  A value
    the IR has no type for (inside an expanded function body, say) is traced back through the ops
    that keep their input's element type."""
    values = node.outputs if output else node.inputs
    v = values[index] if index < len(values) else None
    for _ in range(64):
        dtype = getattr(getattr(v, "type", None), "dtype", None)
        if dtype is not None or v is None:
            return dtype
        p = v.producer()
        if p is None or p.domain not in ("", "ai.onnx") or p.op_type in _NEW_TYPE:
            return None
        if p.op_type == "Cast":
            return p.attr("to")
        source = {"Where": 1, "CastLike": 1}.get(p.op_type, 0)
        if source >= len(p.inputs) or (kind(p.op_type) == Kind.OPAQUE and p.op_type not in _KEEPS_TYPE):
            return None
        v = p.inputs[source]
    return None


def shape_of(node: Node, index: int, output: bool = False) -> tuple | None:
    """The shape of an input (or output) where the IR knows it (dims may be symbols)."""
    values = node.outputs if output else node.inputs
    v = values[index] if index < len(values) else None
    return getattr(getattr(v, "type", None), "shape", None)


def given(node: Node, index: int) -> bool:
    """Whether optional input ``index`` is given."""
    return index < len(node.inputs) and node.inputs[index] is not None


def constant_input(node: Node, index: int) -> np.ndarray | None:
    """The value of input ``index`` where it is a constant in the IR (an initializer or a
    ``Constant``), else ``None``."""
    from ..core_ir.pattern import constant_value

    v = node.inputs[index] if index < len(node.inputs) else None
    return None if v is None else constant_value(v)


def outputs_used(node: Node) -> int:
    """How many outputs are named (an omitted trailing output is ``None``)."""
    return sum(1 for o in node.outputs if o is not None)


def _untaken_branches(model: Model, known: dict) -> set[int]:
    """The graphs (by id, with every graph inside them) that an ``If`` whose condition is known
    at compile time does not take: never lowered, so never refused."""
    out: set[int] = set()
    for graph in model.graph.all_graphs():
        for node in graph:
            cond = known.get(node.inputs[0]) if node.op_type == "If" and node.inputs else None
            if cond is None or node.domain:
                continue
            untaken = node.attr("else_branch") if bool(np.asarray(cond).reshape(-1)[0]) else node.attr("then_branch")
            if untaken is not None:
                out.update(id(g) for g in untaken.all_graphs())
    return out


def _static_shape(v) -> tuple[int, ...] | None:
    shape = getattr(getattr(v, "type", None), "shape", None)
    return tuple(shape) if shape is not None and all(isinstance(d, int) for d in shape) else None


class RuleTable:
    """The rules of one backend, with the ops its driver lowers itself (``Constant``, control
    flow, random ops) and the element types it takes."""

    def __init__(self, backend: str, label: str, dtypes: frozenset, native: Iterable[str] = ("Constant",),
                 native_check: Check | None = None):  # fmt: skip
        self.backend, self.label, self.dtypes = backend, label, frozenset(dtypes)
        self.native = frozenset(native)
        self.native_check = native_check
        self.rules: dict[str, Lowering] = {}

    def rule(self, *ops: str, check: Check | None = None):
        """Decorator: ``fn`` lowers ``ops``; ``check`` refuses the uses it does not take."""

        def register(fn: Rule) -> Rule:
            for op in ops:
                self.rules[op] = Lowering(fn, check)
            return fn

        return register

    def add(self, op: str, fn: Rule, check: Check | None = None) -> None:
        self.rules[op] = Lowering(fn, check)

    def set_check(self, op: str, check: Check) -> None:
        """Give ``op``'s rule the up-front check of the uses it refuses."""
        self.rules[op] = Lowering(self.rules[op].fn, check)

    def __contains__(self, op: str) -> bool:
        return op in self.rules

    def __getitem__(self, op: str) -> Lowering:
        return self.rules[op]

    def __setitem__(self, op: str, lowering: Lowering) -> None:
        self.rules[op] = lowering

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self):
        return iter(self.rules)

    def supported_ops(self) -> set[tuple[str, str]]:
        return {("", op) for op in (*self.rules, *self.native)}

    def static_values(self, model: Model) -> dict:
        """The values the driver knows at compile time, as it will compute them: constants,
        graph inputs that fix a shape (a compiled model specializes on them: their value is
        ``None`` here, known only at the call), ``Shape`` and ``Size`` of static shapes, and the
        results of nodes computed from those alone and small enough to fold (:func:`foldable`),
        run here through the reference interpreter as the lowering will run them."""
        from .static_operands import static_inputs

        known: dict = dict.fromkeys(static_inputs(model))
        self._fold_graph(model, model.graph, known)
        return known

    def _fold_graph(self, model: Model, graph, known: dict) -> None:
        """Fill ``known`` from ``graph``'s nodes in order; an ``If`` whose condition is known
        takes its branch's results, as the driver inlines it."""
        from ..core_ir.interpreter import Interpreter

        interpreter = Interpreter(graph, model.opset_imports)
        for v in graph.initializers.values():
            known[v] = v.const_value.numpy()
        for node in graph:
            subgraphs = node.subgraphs()
            if subgraphs:
                for g in subgraphs:
                    self._fold_graph(model, g, known)
                cond = known.get(node.inputs[0]) if node.op_type == "If" and node.inputs else None
                if cond is not None and not node.domain:
                    taken = node.attr("then_branch") if bool(np.asarray(cond).reshape(-1)[0]) else node.attr(
                        "else_branch")  # fmt: skip
                    for o, r in zip(node.outputs, taken.outputs, strict=False):
                        if o is not None and r in known:  # a value, or None: known at the call
                            known[o] = known[r]
                continue
            if node.domain not in ("", "ai.onnx") or node.op_type in self.native - {"Constant"}:
                continue
            if node.op_type in ("Shape", "Size") and _static_shape(node.inputs[0]) is not None:
                args = [np.zeros(_static_shape(node.inputs[0]), np.int8)]
            elif all(v is None or v in known or v.is_constant() for v in node.inputs):
                args = [None if v is None else known[v] if v in known else v.const_value.numpy()
                        for v in node.inputs]  # fmt: skip
            else:
                continue
            if any(a is None and v is not None for a, v in zip(args, node.inputs, strict=True)):
                known.update(dict.fromkeys(o for o in node.outputs if o is not None))  # known at the call
                continue
            if not foldable(args):
                continue
            try:
                outs = fold(interpreter, node, args)
            except Exception:
                continue  # the lowering will fail on it the same way, and say so
            known.update((o, x) for o, x in zip(node.outputs, outs, strict=False) if o is not None)

    def node_problems(self, node: Node, functions: dict) -> list[str]:
        """Why ``node`` cannot be lowered: its op, attributes or value types."""
        out: list[str] = []
        if (node.domain, node.op_type, node.overload) in functions:
            pass  # lowered from its function body, whose nodes are checked with the function
        elif node.domain not in ("", "ai.onnx"):
            return [f"no lowering for ops of domain {node.domain!r}"]
        elif node.op_type in self.native:
            why = self.native_check(node) if self.native_check else None
            if why:
                out.append(why)
        elif node.op_type not in self.rules:
            return [f"no {self.label} lowering rule"]
        else:
            check = self.rules[node.op_type].check
            why = check(node) if check else None
            if why:
                out.append(why)
        for v in (*node.inputs, *node.outputs):
            if v is not None:
                why = type_problem(v.type, self.dtypes)
                if why:
                    out.append(why)
        return out

    def unsupported(self, model: Model) -> list[Unsupported]:
        """Every op/dtype/attribute this table cannot take, before anything is lowered."""
        found: list[tuple[Node, str, str]] = []
        functions = dict(model.functions)
        known = self.static_values(model)
        untaken = _untaken_branches(model, known)
        for graph in model.graph.all_graphs():
            if id(graph) in untaken:
                continue
            for node in graph:
                if node.domain in ("torch.aten", "jax.lax"):
                    continue  # refused by name below
                if node.op_type == "If" and not node.domain and node.inputs[0] in known:
                    continue  # its condition is known when lowering: the driver inlines the branch it picks
                if node.outputs and all(o is None or o in known for o in node.outputs) and node.op_type != "Constant":
                    continue  # computed by the interpreter while lowering: no rule runs
                found.extend((node, op_label(node), why) for why in self.node_problems(node, functions))
        return kept_framework_ops(model) + collect_unsupported(found) + io_problems(model, self.dtypes)


__all__ = ["FOLD_ELEMENTS", "Check", "Lowering", "NotStatic", "Refused", "Rule", "RuleTable", "constant_input",
           "dtype_of", "fold",
           "foldable", "given", "ints", "op_label", "outputs_used", "shape_of", "static"]  # fmt: skip
