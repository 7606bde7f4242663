"""The reference interpreter: runs any graph on numpy inputs.

Standard ops run on ONNX's reference kernels (``onnx.reference.ops``), looked up once per node
with the node's opset; ops of other domains run on kernels registered with
:func:`register_kernel` (plugins do this through ``irforge_register_kernels``).  It is the
semantic oracle of the test suite and the engine of constant folding, so it works on the IR
directly: constant payloads go to the kernels as the numpy arrays they already are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx.helper

from .errors import InterpreterError
from .graph import Graph
from .kernels import batch_normalization, conv_transpose, gather_elements, grid_sample, max_pool
from .model import Model
from .node import Node
from .serde import Serializer, model_to_proto
from .value import Value

Kernel = Callable[..., Any]
_KERNELS: dict[tuple[str, str], Kernel] = {}


def register_kernel(domain: str, op_type: str, kernel: Kernel) -> None:
    """Make ``domain::op_type`` runnable: ``kernel(*inputs, **attributes) -> output or tuple``.

    Attributes arrive as Python values (ints, floats, strings, lists, numpy arrays).
    """
    _KERNELS[(domain, op_type)] = kernel


def registered_kernels() -> dict[tuple[str, str], Kernel]:
    return dict(_KERNELS)


def _as_oprun(domain: str, op_type: str, kernel: Kernel):
    from onnx.reference.op_run import OpRun

    def _run(self, *args, **kwargs):
        kwargs.pop("context", None)
        kwargs.pop("attributes", None)
        out = kernel(*args, **kwargs)
        return tuple(out) if isinstance(out, tuple | list) else (out,)

    return type(op_type, (OpRun,), {"op_domain": domain, "_run": _run})


_STANDARD_FIXES: dict[tuple[str, str], Kernel] = {
    ("", "GatherElements"): gather_elements, ("", "MaxPool"): max_pool, ("", "GridSample"): grid_sample,
    ("", "ConvTranspose"): conv_transpose, ("", "BatchNormalization"): batch_normalization,
}
"""Standard ops whose ONNX reference kernel fails on valid input, and the kernel used instead."""


class Interpreter:
    """A graph prepared for running: kernels are looked up once, then ``run`` many times."""

    def __init__(self, graph: Graph | Model, opset_imports: Mapping[str, int] | None = None):
        if isinstance(graph, Model):
            model = graph
        else:
            opsets = dict(opset_imports or graph.opset_imports or {"": onnx.defs.onnx_opset_version()})
            model = Model(graph, opset_imports=opsets)
        self.model = model
        self.graph = model.graph
        self._serializer = Serializer(value_info=False)
        self._serializer.reserve(self.graph)
        opsets = dict(model.opset_imports)
        opsets.setdefault("", onnx.defs.onnx_opset_version())
        for domain, _ in _KERNELS:
            opsets.setdefault(domain, 1)
        self._host = _make_host(model, opsets)
        self._impls: dict[tuple[str, str], type] = {}  # (domain, op type[@overload])
        self._plan: list[tuple[Node, Any, onnx.NodeProto]] = []
        for node in self.graph:
            self._plan.append((node, None, None))

    def _instantiate(self, node: Node, inputs: list[Any]):
        proto = onnx.NodeProto()
        self._serializer.node(node, proto)
        _name_overloads([proto])
        from onnx.reference.op_run import RuntimeContextError

        host = self._host
        custom = _KERNELS.get((node.domain, node.op_type))
        if custom is not None and node.domain != "":
            return _as_oprun(node.domain, node.op_type, custom)(proto, _run_params(host)), proto
        fixed = _STANDARD_FIXES.get((node.domain, node.op_type))
        if fixed is not None:
            return _as_oprun(node.domain, node.op_type, fixed)(proto, _run_params(host)), proto
        key = (node.domain, _overload_name(node.op_type, node.overload))
        try:
            cls = self._impls.get(key)
            if cls is None:  # the kernel class depends only on the op (and the fixed opsets)
                cls = self._impls[key] = host._load_impl(proto)
        except RuntimeContextError:
            cls = host._load_impl(proto, [_type_of(x) for x in inputs])
        except NotImplementedError as e:
            raise InterpreterError(
                f"no kernel for {node.describe()}: {e}. Register one with "
                "irforge.core_ir.register_kernel or a plugin's irforge_register_kernels hook"
            ) from None
        return cls(proto, _run_params(host)), proto

    def evaluate(self, node: Node, args: Sequence[Any]) -> list[Any]:
        """Run one node of this graph on the given input values (constant folding uses this)."""
        try:
            inst, _ = self._instantiate(node, list(args))
            outs = inst.run(*args, context={}) if inst.need_context() else inst.run(*args)
        except InterpreterError:
            raise
        except Exception as e:  # a kernel's own error: name the node that hit it
            raise InterpreterError(f"{node.describe()} failed: {type(e).__name__}: {e}") from e
        return list(outs)

    def run(self, inputs: Mapping[str, Any] | Sequence[Any]) -> list[Any]:
        """Outputs in graph-output order; ``inputs`` by name or in graph-input order.

        Graph inputs that are also initializers may be omitted (their payload is the default).
        """
        env = self._execute(inputs)
        name = self._serializer.name
        return [env[name(v)] for v in self.graph.outputs]

    def values(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[Value, Any]:
        """Every value of the main graph (inputs, initializers, node results) after a run: what
        bisecting compares a rewrite against."""
        env = self._execute(inputs)
        name = self._serializer.name
        g = self.graph
        out = {v: env[name(v)] for v in [*g.inputs, *g._initializers.values()] if name(v) in env}
        for node in g:
            for v in node.outputs:
                if v is not None and name(v) in env:
                    out[v] = env[name(v)]
        return out

    def _execute(self, inputs: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
        g = self.graph
        name = self._serializer.name
        if not isinstance(inputs, Mapping):
            if len(inputs) > len(g.inputs):
                raise InterpreterError(f"graph takes {len(g.inputs)} inputs, got {len(inputs)}")
            inputs = {name(v): x for v, x in zip(g.inputs, inputs, strict=False)}
        env: dict[str, Any] = {"": None}
        for v in g._initializers.values():
            env[name(v)] = v.const_value.numpy()
        for v in g.inputs:
            key = name(v)
            if key in inputs:
                env[key] = inputs[key]
            elif key not in env:
                raise InterpreterError(f"no value given for graph input %{key}")
        for key in inputs:
            if key not in env:
                raise InterpreterError(f"{key!r} is not an input of the graph")
        for i, (node, inst, _proto) in enumerate(self._plan):
            try:
                args = [None if v is None else env[name(v)] for v in node._inputs]
            except KeyError as e:
                raise InterpreterError(f"{node.describe()} reads {e.args[0]!r} before it is computed") from None
            try:
                if inst is None:
                    inst, _proto = self._instantiate(node, args)
                    if not _context_dependent(inst):
                        self._plan[i] = (node, inst, _proto)
                if inst.need_context():
                    outs = inst.run(*args, context=env)
                else:
                    outs = inst.run(*args)
            except InterpreterError:
                raise
            except Exception as e:  # a kernel's own error: name the node that hit it
                raise InterpreterError(f"{node.describe()} failed: {type(e).__name__}: {e}") from e
            for v, x in zip(node._outputs, outs, strict=False):
                if v is not None:
                    env[name(v)] = x
        return env


def _context_dependent(inst: Any) -> bool:
    return type(inst).__name__ == "OpFunctionContextDependant"


def _type_of(x: Any) -> onnx.TypeProto | None:
    if isinstance(x, np.ndarray):
        from .dtypes import from_numpy

        return onnx.helper.make_tensor_type_proto(int(from_numpy(x.dtype)), list(x.shape))
    return None


def _run_params(host) -> dict[str, Any]:
    return {
        "log": lambda pattern, *args: None,
        "opsets": host.opsets,
        "verbose": 0,
        "new_ops": host.new_ops_,
        "existing_functions": host.functions_.copy(),
        "evaluator_cls": host.__class__,
    }


def _make_host(model: Model, opsets: dict[str, int]):
    """An evaluator of an empty model that knows the opsets, functions and custom kernels."""
    from onnx.reference import ReferenceEvaluator

    shell = Model(Graph(name="host"), opset_imports=opsets, functions=model.functions, ir_version=10)
    proto = model_to_proto(shell)
    for fp in proto.functions:
        fp.name = _overload_name(fp.name, fp.overload)
        fp.overload = ""
        _name_overloads(fp.node)
    new_ops = [_as_oprun(d, op, k) for (d, op), k in _KERNELS.items() if d != ""]
    return ReferenceEvaluator(proto, new_ops=new_ops or None)


def _overload_name(op_type: str, overload: str) -> str:
    return f"{op_type}@{overload}" if overload else op_type


def _name_overloads(nodes) -> None:
    """Calls of overloaded functions name the overload in their op type: ONNX's reference
    evaluator finds functions by domain and name alone, so overloads would shadow each other."""
    for n in nodes:
        if n.overload:
            n.op_type, n.overload = _overload_name(n.op_type, n.overload), ""
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _name_overloads(g.node)


def interpret(
    graph: Graph | Model,
    inputs: Mapping[str, Any] | Sequence[Any],
    opset_imports: Mapping[str, int] | None = None,
) -> list[Any]:
    """Run ``graph`` (or a model's main graph) on numpy inputs and return its outputs.

    Raises :class:`InterpreterError` naming the node whose kernel failed or is missing.
    """
    return Interpreter(graph, opset_imports).run(inputs)


__all__ = ["Interpreter", "interpret", "register_kernel", "registered_kernels"]
