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
from .model import Model
from .node import Node
from .serde import Serializer, model_to_proto

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


def _gather_elements(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """ONNX's reference kernel goes through ``np.choose``, which takes at most 64 choices: it
    fails on any axis longer than that (past rank 2).  ``take_along_axis`` has no such limit."""
    axis = axis + data.ndim if axis < 0 else axis
    indices = np.asarray(indices, dtype=np.int64)
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    # the other dims of the indices may be shorter than the data's: those elements are not read
    data = data[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(indices.shape))]
    return np.take_along_axis(data, indices, axis=axis)


def _max_pool(x: np.ndarray, *, kernel_shape, auto_pad="NOTSET", ceil_mode=0, dilations=None, pads=None,
              storage_order=0, strides=None):  # fmt: skip
    """ONNX's reference MaxPool gives wrong ``Indices`` in 3-D and fails on some 3-D pads; this
    one takes every window at once.  A window's maximum is its first largest element (a NaN
    wins, as in XLA and torch); ``Indices`` are positions in the flattened input, row-major (or,
    with ``storage_order=1``, column-major within each plane)."""
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    kernel = [int(k) for k in kernel_shape]
    n = len(kernel)
    spatial = x.shape[2:]
    strides = [int(s) for s in strides] if strides else [1] * n
    dilations = [int(d) for d in dilations] if dilations else [1] * n
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    begin, end, out = [], [], []
    for i in range(n):
        size, s, e = spatial[i], strides[i], extent[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // s)
            total = max((o - 1) * s + e - size, 0)
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            hi = total - lo
        else:
            lo, hi = (0, 0) if auto_pad == "VALID" else (int(pads[i]), int(pads[i + n])) if pads else (0, 0)
            room = size + lo + hi - e
            o = (-(-room // s) if ceil_mode else room // s) + 1
            if ceil_mode and (o - 1) * s >= size + lo:
                o -= 1  # the last window must start inside the input or the left pad
        begin.append(lo)
        end.append(max(hi, (o - 1) * s + e - size - lo))
        out.append(o)
    low = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    width = [(0, 0), (0, 0), *zip(begin, end, strict=True)]
    padded = np.pad(x, width, constant_values=low)
    planes = np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[:2] + (1,) * n) * int(np.prod(spatial))
    grids = np.meshgrid(*[np.arange(d, dtype=np.int64) for d in spatial], indexing="ij")
    order = list(range(n)) if not storage_order else list(range(n))[::-1]
    place = np.zeros(spatial, np.int64)
    for i in order:  # row-major: the last dim varies fastest; column-major: the first
        place = place * spatial[i] + grids[i]
    positions = np.pad(planes + place, width, constant_values=np.iinfo(np.int64).max)
    axes = tuple(range(2, 2 + n))
    views = []
    for a in (padded, positions):
        w = np.lib.stride_tricks.sliding_window_view(a, extent, axis=axes)
        w = w[(Ellipsis, *[slice(None, None, d) for d in dilations])]  # the dilated taps
        w = w[(slice(None), slice(None), *[slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides, strict=True)])]
        views.append(w.reshape((*w.shape[: 2 + n], -1)))
    values, where = views
    nan = np.isnan(values) if np.issubdtype(values.dtype, np.floating) else np.zeros(values.shape, bool)
    best = np.where(nan.any(axis=-1), nan.argmax(axis=-1), values.argmax(axis=-1))[..., None]
    y = np.take_along_axis(values, best, axis=-1)[..., 0]
    return y, np.take_along_axis(where, best, axis=-1)[..., 0]


_STANDARD_FIXES: dict[tuple[str, str], Kernel] = {("", "GatherElements"): _gather_elements, ("", "MaxPool"): _max_pool}
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
        self._impls: dict[tuple[str, str], type] = {}
        self._plan: list[tuple[Node, Any, onnx.NodeProto]] = []
        for node in self.graph:
            self._plan.append((node, None, None))

    def _instantiate(self, node: Node, inputs: list[Any]):
        proto = onnx.NodeProto()
        self._serializer.node(node, proto)
        from onnx.reference.op_run import RuntimeContextError

        host = self._host
        custom = _KERNELS.get((node.domain, node.op_type))
        if custom is not None and node.domain != "":
            return _as_oprun(node.domain, node.op_type, custom)(proto, _run_params(host)), proto
        fixed = _STANDARD_FIXES.get((node.domain, node.op_type))
        if fixed is not None:
            return _as_oprun(node.domain, node.op_type, fixed)(proto, _run_params(host)), proto
        key = (node.domain, node.op_type)
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
        return [env[name(v)] for v in g.outputs]


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
    new_ops = [_as_oprun(d, op, k) for (d, op), k in _KERNELS.items() if d != ""]
    return ReferenceEvaluator(proto, new_ops=new_ops or None)


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
