"""The TVM backend: the IR as a Relax ``IRModule`` built with ``relax.BlockBuilder``, compiled with
``tvm.compile`` and run on the Relax VM.

Relax here is given static shapes: ``compile`` lowers and builds once per set of input shapes
(and values of shape-fixing inputs) it meets, and caches the result.  Ops without a rule in
:mod:`.rules`, control flow and unsupported element types are refused up front, by name.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ...core_ir.dtypes import to_numpy
from ...core_ir.errors import MissingExtraError, first_line
from ...core_ir.interpreter import Interpreter
from ...core_ir.model import Model
from ...core_ir.node import Node
from ..base import (
    Artifact,
    Backend,
    BackendError,
    Executable,
    Unsupported,
    UnsupportedError,
    static_input_shapes,
)
from ..inputs import input_specs
from ..static_operands import static_inputs
from ..table import NotStatic, fold, foldable
from .control_flow import CONTROL_FLOW, lower_control_flow
from .rules import DTYPES, RULES

TARGET = "llvm"


def import_tvm():
    try:
        import tvm
    except ImportError:
        raise MissingExtraError("tvm", "tvm", "the TVM backend") from None
    return tvm


def find_unsupported(model: Model) -> list[Unsupported]:
    """Every op/dtype/attribute the Relax lowering cannot take, before anything is lowered."""
    return RULES.unsupported(model)


class _Context:
    """What a rule may ask of the lowering: expressions, their static shapes and dtypes."""

    def __init__(self, bb):
        self.bb = bb
        self._constants: dict[int, tuple[Any, np.ndarray]] = {}

    def expr(self, x):
        """An expression for ``x``; numpy constants keep their dtype (``relax.const`` would turn
        int64 into int32 and float64 into float32 unless told)."""
        from tvm import relax

        if not isinstance(x, np.ndarray):
            return x
        c = relax.const(np.array(x, order="C"), str(x.dtype))  # (ascontiguousarray makes 0-d 1-d)
        self._constants[id(c)] = (c, x)
        return c

    def emit(self, e):
        return self.bb.emit(e)

    def shape(self, e) -> list[int]:
        if isinstance(e, np.ndarray):
            return list(e.shape)
        if id(e) in self._constants:
            return list(self._constants[id(e)][1].shape)
        return [int(d) for d in self._typed(e).shape]

    def dtype(self, e) -> str:
        if isinstance(e, np.ndarray):
            return str(e.dtype)
        if id(e) in self._constants:
            return str(self._constants[id(e)][1].dtype)
        return str(self._typed(e).dtype)

    def _typed(self, e):
        """The tensor type of ``e`` (a call not yet emitted is normalized to get one)."""
        return self.bb.normalize(e).ty

    def scalar(self, value, like):
        return self.expr(np.array(value, dtype=self.dtype(like)))


def lower(model: Model, shapes: dict[str, tuple[int, ...]], static_values: dict[str, np.ndarray] | None = None):
    """A Relax IRModule of ``model`` at the given input shapes (``static_values`` bind inputs whose
    values fix shapes)."""
    problems = find_unsupported(model)
    if problems:
        raise UnsupportedError("tvm", problems)
    import_tvm()
    from tvm import relax

    graph = model.graph
    static_values = static_values or {}
    bb = relax.BlockBuilder()
    ctx = _Context(bb)
    env: dict[Any, Any] = {}
    params = []
    for v in graph.inputs:
        if v.is_initializer():
            continue
        if v.name in static_values:
            env[v] = np.asarray(static_values[v.name])
            continue
        dtype = str(np.dtype(to_numpy(v.type.dtype)))
        var = relax.Var(_ident(v.name), relax.TensorType(shape=list(shapes[v.name]), dtype=dtype))
        env[v] = var
        params.append(var)
    driver = _Driver(ctx, model)
    try:
        with bb.function("main", params):
            with bb.dataflow():
                results = [ctx.expr(x) for x in driver.run(graph, env)]
                out = bb.emit_output(relax.Tuple(results))
            bb.emit_func_output(out)
    except BaseException:
        # TVM's function scope leaves its binding block and scope open when the body raises, and
        # the builder then warns from C++ as it is freed: close them, the error is raised anyway
        bb._end_block()
        bb.end_scope()
        raise
    mod = bb.get()
    try:
        relax.analysis.well_formed(mod)  # raises on the first violation
    except Exception as e:
        raise BackendError(f"the Relax module irforge built is not well formed (a bug: please report it): {e}") from e
    return mod


def _ident(name: str) -> str:
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return clean if clean[:1].isalpha() else f"v_{clean}"


def _read(env: dict, v):
    if v in env:
        return env[v]
    if v.is_constant():
        return v.const_value.numpy()
    raise BackendError(f"%{v.name} is read before it is computed")


class _Driver:
    """Lowers a graph node by node into the function being built: constants and small known
    values folded, control flow unrolled at compile time (:mod:`.control_flow`), every other op
    through its rule."""

    def __init__(self, ctx: _Context, model: Model):
        self.ctx, self.model = ctx, model
        self._interpreters: dict[int, Interpreter] = {}

    def run(self, graph, env: dict) -> list:
        """Lower ``graph`` with ``env`` binding its inputs (and the outer values it reads); its outputs."""
        for v in graph.initializers.values():
            env.setdefault(v, v.const_value.numpy())
        for node in graph:
            args = [None if v is None else _read(env, v) for v in node.inputs]
            outs = self.node(node, args, env)
            for v, x in zip(node.outputs, outs, strict=False):
                if v is not None:
                    env[v] = x
        return [_read(env, v) for v in graph.outputs]

    def node(self, node: Node, args: list, env: dict) -> list:
        ctx = self.ctx
        if node.op_type in CONTROL_FLOW and not node.domain:
            try:
                return lower_control_flow(self, node, args, env)
            except NotStatic as e:
                raise UnsupportedError("tvm", [Unsupported(node.op_type, 1, node.describe(), str(e))]) from None
        if node.op_type == "Constant" or foldable(args):
            try:
                return fold(self._interpreter(node.graph), node, args)
            except Exception as e:
                raise BackendError(f"lowering {node.describe()} failed: {e}") from e
        try:
            outs = RULES[node.op_type].fn(ctx, node, args)
            # emitting infers the result's type: where TVM refuses the shapes, it refuses here
            return [o if o is None or isinstance(o, np.ndarray) else ctx.emit(o) for o in outs]
        except NotStatic as e:
            raise UnsupportedError("tvm", [Unsupported(node.op_type, 1, node.describe(), str(e))]) from None
        except (UnsupportedError, BackendError):
            raise
        except Exception as e:
            raise BackendError(f"lowering {node.describe()} failed: {type(e).__name__}: {e}") from e

    def _interpreter(self, graph) -> Interpreter:
        interp = self._interpreters.get(id(graph))
        if interp is None:
            interp = self._interpreters[id(graph)] = Interpreter(graph, self.model.opset_imports)
        return interp


class TVMBackend(Backend):
    name = "tvm"
    lowering = "lower-fused{target=tvm},cse,dce"
    targets = ("relax",)
    expands_functions = True
    inlines_functions = True

    def supported_ops(self) -> set[tuple[str, str]]:
        return RULES.supported_ops()

    def unsupported(self, model: Model) -> list[Unsupported]:
        return find_unsupported(model)

    def lower(self, model: Model, target: str | None = None, dims: dict[str, int] | None = None) -> Artifact:
        mod = lower(model, static_input_shapes(model, dims or {}, "the Relax module"))
        return Artifact("relax", mod.script(), mod)

    def compile(self, model: Model, device: str = "cpu") -> Executable:
        if device != "cpu":
            raise BackendError(f"the tvm backend runs on the cpu here, not {device!r}")
        tvm = import_tvm()
        from tvm import relax

        t0 = time.perf_counter()
        names = [v.name for v in model.graph.inputs if not v.is_initializer()]
        static = {v.name for v in static_inputs(model)}
        built: dict[tuple, Any] = {}

        def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
            values = {n: a for n, a in zip(names, arrays, strict=True) if n in static}
            shapes = {n: a.shape for n, a in zip(names, arrays, strict=True)}
            key = (tuple(sorted(shapes.items())), tuple((n, a.tobytes()) for n, a in values.items()))
            vm = built.get(key)
            if vm is None:
                mod = lower(model, shapes, values)
                try:
                    mod = relax.transform.LegalizeOps()(mod)
                    with tvm.transform.PassContext(opt_level=3):
                        ex = tvm.compile(mod, target=TARGET)
                except Exception as e:
                    said = f"{type(e).__name__}: {first_line(e)}"
                    raise BackendError(f"tvm could not compile the model for inputs {shapes}: {said}") from e
                vm = built[key] = relax.VirtualMachine(ex, tvm.cpu())
            traced = [tvm.runtime.tensor(np.array(a, order="C")) for n, a in zip(names, arrays, strict=True)
                      if n not in static]  # fmt: skip
            try:
                out = vm["main"](*traced)
            except Exception as e:
                raise BackendError(f"tvm failed to run the model: {type(e).__name__}: {first_line(e)}") from e
            return [np.asarray(o.numpy()) for o in out]

        return Executable(
            self.name,
            run,
            names,
            [v.name for v in model.graph.outputs],
            time.perf_counter() - t0,
            inputs=input_specs(model),
        )


__all__ = ["DTYPES", "RULES", "TVMBackend", "find_unsupported", "lower"]
