"""IR → a JAX function → a StableHLO module (``func.func @main``) through ``jax.export``.

Each node becomes the ``lax`` ops of its rule (:mod:`.rules`) inside ``jax.named_scope`` of the
node's name, so every StableHLO op carries a ``loc("…/node-name/op")`` that points back at the
node.  Values known at compile time (initializers, ``Constant``, ``Shape`` of a static shape and
the small arithmetic on them) stay numpy and are computed by the reference interpreter, so a
``Reshape`` whose shape comes from ``Shape → Gather → Concat`` still gets static dims.  Symbolic
dims (``"batch"``) become dynamic dims (``tensor<?x…>``), refined to static shapes when called.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core_ir.clone import instantiate
from ...core_ir.dimexpr import is_dim_expr, rename, symbols
from ...core_ir.dtypes import DataType, to_numpy
from ...core_ir.errors import MissingExtraError
from ...core_ir.graph import Graph
from ...core_ir.interpreter import Interpreter
from ...core_ir.model import Function, Model
from ...core_ir.node import Node
from ...core_ir.types import TensorType
from ..base import BackendError, Unsupported, UnsupportedError
from ..static_operands import static_inputs
from ..table import NotStatic, foldable, op_label
from .rules import RULES
from .types import CONTROL_FLOW, RANDOM


def import_jax():
    try:
        import jax
    except ImportError:
        raise MissingExtraError("jax", "jax", "the StableHLO and XLA backends") from None
    return jax


@contextlib.contextmanager
def jax_context() -> Iterator[None]:
    """64-bit types on (ONNX's int64/float64 must not shrink) and locations without Python
    tracebacks (the node names are the locations), for this block only."""
    jax = import_jax()
    from jax._src import config

    with jax.enable_x64(True), config.traceback_in_locations_limit(0):
        yield


def find_unsupported(model: Model) -> list[Unsupported]:
    """Every op/dtype/attribute the lowering cannot take, before anything is lowered."""
    return RULES.unsupported(model)


@dataclass
class Lowered:
    """A lowered model: the ``jax.export.Exported`` (its StableHLO module text and portable
    bytecode) and the JAX function it came from (to re-lower at concrete shapes for HLO)."""

    exported: Any
    function: Any
    input_names: list[str]
    output_names: list[str]
    input_specs: list[Any]
    random: bool = False
    """The module draws random numbers: its first argument (before ``input_names``) is the key."""

    @property
    def text(self) -> str:
        return self.exported.mlir_module()

    @property
    def bytecode(self) -> bytes:
        return bytes(self.exported.mlir_module_serialized)


class ShapeDependentError(UnsupportedError):
    """The model computes a shape from its symbolic input dims: it lowers only at concrete shapes."""


def lower(model: Model, backend: str = "stablehlo", static_values: dict[str, np.ndarray] | None = None,
          input_shapes: dict[str, tuple[int, ...]] | None = None) -> Lowered:  # fmt: skip
    """Lower ``model``; graph inputs named in ``static_values`` are bound to those values (see
    :func:`static_inputs`) and are not inputs of the module; ``input_shapes`` fixes the shapes of
    the inputs it names (the module is then specialized to them)."""
    problems = find_unsupported(model)
    if problems:
        raise UnsupportedError(backend, problems)
    jax = import_jax()
    from jax import export

    graph = model.graph
    lowerer = _Lowerer(model)
    static_values = static_values or {}
    bound = {v: np.asarray(static_values[v.name]) for v in graph.inputs if v.name in static_values}
    inputs = [v for v in graph.inputs if not v.is_initializer() and v not in bound]
    random = any(n.op_type in RANDOM and not n.domain for g in graph.all_graphs() for n in g)

    def main(*args):
        env: dict[Any, Any] = dict(bound)
        if random:
            lowerer.key, args = jax.random.wrap_key_data(args[0], impl="threefry2x32"), args[1:]
        for v, a in zip(inputs, args, strict=True):
            env[v] = a
        outs = lowerer.run(graph, env)
        return tuple(jax.numpy.asarray(o) for o in outs)

    with jax_context():
        scope = export.SymbolicScope()
        shapes = input_shapes or {}
        specs = [_spec(v, scope, i, shapes.get(v.name)) for i, v in enumerate(inputs)]
        if random:
            specs.insert(0, jax.ShapeDtypeStruct((2,), np.uint32))
        try:
            exported = export.export(jax.jit(main))(*specs)
        except _NodeUnsupported as e:
            why = e.why
            symbolic = any(not isinstance(d, int) for s in specs for d in s.shape)
            if e.static and symbolic:
                raise ShapeDependentError(backend, [Unsupported(op_label(e.node), 1, e.node.describe(),
                                                                why + " (at symbolic input shapes)")]) from None
            needed = [v.name for v in static_inputs(model) if v.name not in static_values]
            if needed:
                why += f" (it depends on the graph input(s) {', '.join(needed)}: a compiled model specializes on them)"
            raise UnsupportedError(backend, [Unsupported(op_label(e.node), 1, e.node.describe(), why)]) from None
        except _NodeFailed as e:
            raise BackendError(f"lowering {e.node.describe()} failed: {e.why}") from None
    return Lowered(exported, main, [v.name for v in inputs], [v.name for v in graph.outputs], specs, random)


def _spec(v, scope, index: int, concrete: tuple[int, ...] | None = None):
    import jax
    from jax import export

    t = v.type
    if concrete is not None:
        return jax.ShapeDtypeStruct(tuple(concrete), to_numpy(t.dtype))
    if not isinstance(t, TensorType) or t.shape is None:
        raise UnsupportedError("stablehlo", [Unsupported("graph input", 1, f"%{v.name}", "its rank is unknown")])
    dims = []
    for k, d in enumerate(t.shape):
        if isinstance(d, int):
            dims.append(str(d))
        else:
            dims.append(_dim_text(d) if isinstance(d, str) and d else f"d{index}_{k}")
    shape = export.symbolic_shape(", ".join(dims), scope=scope) if dims else ()
    return jax.ShapeDtypeStruct(shape, to_numpy(t.dtype))


def _dim_text(d: str) -> str:
    """A named dim as a jax symbol; a dim expression (``2*batch``) stays an expression over them."""
    if not d.isidentifier() and is_dim_expr(d):
        return rename(d, {s: _symbol(s) for s in symbols(d)})
    return _symbol(d)


def _symbol(name: str) -> str:
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return clean if clean[:1].isalpha() else f"d_{clean}"


class _NodeUnsupported(Exception):
    def __init__(self, node: Node, why: str, static: bool = False):
        self.node, self.why, self.static = node, why, static


class _NodeFailed(Exception):
    def __init__(self, node: Node, why: str):
        self.node, self.why = node, why


class _Lowerer:
    def __init__(self, model: Model):
        self.model = model
        self.functions = dict(model.functions)
        self._interpreters: dict[int, Interpreter] = {}
        self.key: Any = None
        """The traced PRNG key random ops draw from (a Loop's body sees one folded with its step)."""
        self._draws: dict[Node, int] = {}

    def run(self, graph: Graph, env: dict) -> list:
        """Lower ``graph``'s nodes into the current trace; ``env`` maps values to arrays (an
        enclosing graph's values stay visible to subgraphs, as ONNX scoping says)."""
        import jax

        for v in graph.initializers.values():
            if v not in env:
                env[v] = v.const_value.numpy()
        for node in graph:
            args = [None if v is None else self._read(env, v, node) for v in node.inputs]
            with jax.named_scope(_scope_name(node)):
                outs = self._node(node, args, env)
            for v, x in zip(node.outputs, outs, strict=False):
                if v is not None:
                    env[v] = x
        return [self._read(env, v, None) for v in graph.outputs]

    def _read(self, env: dict, v, node):
        if v in env:
            return env[v]
        if v.is_constant():
            return v.const_value.numpy()
        raise _NodeFailed(node, f"%{v.name} is read before it is computed") if node else BackendError(
            f"graph output %{v.name} is never computed")  # fmt: skip

    def _node(self, node: Node, args: list, env: dict) -> list:
        if node.op_type == "Constant" and not node.domain:
            return self._fold(node, args)
        if (node.domain, node.op_type, node.overload) in self.functions:
            return self._composite(node, args, env)
        if node.op_type in CONTROL_FLOW and not node.domain:
            return self._control_flow(node, args, env)
        if node.op_type in RANDOM and not node.domain:  # never folded: every call draws anew
            return [self._random(node, args)]
        if foldable(args):
            return self._fold(node, args)
        try:
            return RULES[node.op_type].fn(self, node, args)
        except NotStatic as e:
            raise _NodeUnsupported(node, str(e), static=True) from None
        except (_NodeUnsupported, _NodeFailed):
            raise
        except Exception as e:
            raise _NodeFailed(node, f"{type(e).__name__}: {e}") from e

    def _fold(self, node: Node, args: list) -> list:
        graph = node.graph
        interp = self._interpreters.get(id(graph))
        if interp is None:
            interp = self._interpreters[id(graph)] = Interpreter(graph, self.model.opset_imports)
        try:
            return [np.asarray(o) for o in interp.evaluate(node, args)]
        except Exception as e:
            raise _NodeFailed(node, f"{type(e).__name__}: {e}") from e

    def _composite(self, node: Node, args: list, env: dict) -> list:
        """A call of a model-local function: ``stablehlo.composite`` named ``domain.op`` whose
        decomposition is the function body, so a consumer that knows the op can use it and XLA
        inlines it otherwise."""
        from jax import lax

        fn: Function = self.functions[(node.domain, node.op_type, node.overload)]
        attrs = {k: _composite_attr(a.value) for k, a in node.attributes.items()}
        attrs = {k: v for k, v in attrs.items() if v is not None}
        graph = instantiate(fn, node.attributes)

        def body(*xs, **_attributes):  # the attributes are bound in ``graph`` already
            inner = dict(zip(graph.inputs, xs, strict=False))
            return tuple(self.run(graph, inner))

        if any(not all(isinstance(d, int) for d in np.shape(a)) for a in args if a is not None):
            # symbolic dims: JAX gives a composite's decomposition the dim variables as extra
            # operands the composite lacks, and the module fails to verify; inline the body
            return list(body(*args))
        out = lax.composite(body, name=f"{node.domain}.{node.op_type}")(*args, **attrs)
        return list(out)

    def _control_flow(self, node: Node, args: list, env: dict) -> list:
        from jax import lax

        jax = import_jax()
        jnp = jax.numpy
        if node.op_type == "If":
            cond = args[0]
            then_g, else_g = node.attr("then_branch"), node.attr("else_branch")
            if isinstance(cond, np.ndarray):
                return self.run(then_g if bool(cond.reshape(-1)[0]) else else_g, dict(env))
            branches = [lambda _, g=g: tuple(jnp.asarray(o) for o in self.run(g, dict(env))) for g in (else_g, then_g)]
            try:
                return list(lax.cond(jnp.reshape(cond, ()).astype(bool), branches[1], branches[0], None))
            except TypeError as e:  # branches whose shapes differ
                raise _NodeUnsupported(node, f"the branches' results differ in shape or type ({e})") from None
        if node.op_type == "Scan":
            return self._scan(node, args, env)
        # Loop without scan outputs: a stablehlo.while over (i, cond, carried...)
        body: Graph = node.attr("body")
        trip, cond0, carried = args[0], args[1], args[2:]
        max_trip = jnp.asarray(np.iinfo(np.int64).max if trip is None else trip, jnp.int64).reshape(())
        go = jnp.asarray(True if cond0 is None else cond0).reshape(()).astype(bool)

        def cond_fn(state):
            i, c, *_ = state
            return (i < max_trip) & c

        def body_fn(state):
            i, _c, *vals = state
            outer_key = self.key
            if outer_key is not None:  # each iteration draws other numbers
                self.key = jax.random.fold_in(outer_key, i)
            inner = dict(env)
            b_in = body.inputs
            inner[b_in[0]] = i
            inner[b_in[1]] = _c
            for v, x in zip(b_in[2:], vals, strict=True):
                inner[v] = x
            outs = self.run(body, inner)
            self.key = outer_key
            return (i + 1, jnp.asarray(outs[0]).reshape(()).astype(bool),
                    *[jnp.asarray(o).astype(x.dtype) for o, x in zip(outs[1:], vals, strict=True)])  # fmt: skip

        init = (jnp.asarray(0, jnp.int64), go, *[jnp.asarray(c) for c in carried])
        try:
            state = lax.while_loop(cond_fn, body_fn, init)
        except TypeError as e:  # a carried value changes shape between iterations
            raise _NodeUnsupported(node, f"a loop-carried value changes shape ({e})") from None
        return list(state[2:])

    def _scan(self, node: Node, args: list, env: dict) -> list:
        """Scan (opset 9 on): a ``lax.scan`` over the scanned axis, each scan input moved to axis 0
        (and reversed where its direction is 1), each scan output stacked on axis 0 and moved to
        its own axis (and reversed) after."""
        from jax import lax

        jnp = import_jax().numpy
        body: Graph = node.attr("body")
        m = node.attr("num_scan_inputs")
        n = len(body.inputs) - m
        states, xs = [jnp.asarray(a) for a in args[:n]], [jnp.asarray(a) for a in args[n:]]
        in_axes = list(node.attr("scan_input_axes") or [0] * m)
        in_dirs = list(node.attr("scan_input_directions") or [0] * m)
        k = len(body.outputs) - n
        out_axes = list(node.attr("scan_output_axes") or [0] * k)
        out_dirs = list(node.attr("scan_output_directions") or [0] * k)
        moved = []
        for x, axis, direction in zip(xs, in_axes, in_dirs, strict=True):
            x = jnp.moveaxis(x, axis % x.ndim, 0)
            moved.append(jnp.flip(x, 0) if direction else x)

        def step(carry, slices):
            inner = dict(env)
            inner.update(zip(body.inputs, [*carry, *slices], strict=True))
            outs = [jnp.asarray(o) for o in self.run(body, inner)]
            return tuple(o.astype(c.dtype) for o, c in zip(outs[:n], carry, strict=True)), tuple(outs[n:])

        try:
            final, stacked = lax.scan(step, tuple(states), tuple(moved))
        except TypeError as e:  # a state changes shape between iterations
            raise _NodeUnsupported(node, f"a scan state changes shape ({e})") from None
        outs = []
        for y, axis, direction in zip(stacked, out_axes, out_dirs, strict=True):
            y = jnp.flip(y, 0) if direction else y
            outs.append(jnp.moveaxis(y, 0, axis % y.ndim))
        return [*final, *outs]

    def _random(self, node: Node, args: list):
        """ONNX's random ops on the module's key (or on ``seed`` where the node fixes one), folded
        with the node's place among the random ops so that no two draw the same numbers."""
        import jax

        jnp = jax.numpy
        seed = node.attr("seed")
        if seed is not None:
            key = jax.random.key(int(seed), impl="threefry2x32")
        else:
            key = jax.random.fold_in(self.key, self._draws.setdefault(node, len(self._draws)))
        op = node.op_type
        source = args[0] if args else None
        dtype = node.attr("dtype")
        if dtype is None:  # ONNX's defaults: int32 indices, float draws, else the input's type
            dtype = int(DataType.INT32) if op == "Multinomial" else int(DataType.FLOAT) if source is None else None
        np_dtype = to_numpy(DataType(dtype)) if dtype is not None else jnp.asarray(source).dtype
        if op == "Multinomial":
            logits = jnp.asarray(source)
            size = int(node.attr("sample_size", 1))
            drawn = jax.random.categorical(key, logits, axis=-1, shape=(size, logits.shape[0]))
            return jnp.transpose(drawn).astype(np_dtype)
        if op == "Bernoulli":
            p = jnp.asarray(source)
            return (jax.random.uniform(key, p.shape, dtype=p.dtype) < p).astype(np_dtype)
        shape = tuple(node.attr("shape")) if source is None else jnp.shape(source)
        if op.startswith("RandomUniform"):
            low, high = float(node.attr("low", 0.0)), float(node.attr("high", 1.0))
            return jax.random.uniform(key, shape, dtype=np_dtype, minval=low, maxval=high)
        mean, scale = float(node.attr("mean", 0.0)), float(node.attr("scale", 1.0))
        return (mean + scale * jax.random.normal(key, shape, dtype=np_dtype)).astype(np_dtype)


def _composite_attr(value):
    if isinstance(value, (int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (int, float)) for v in value):
        return np.asarray(value)
    return None


def _scope_name(node: Node) -> str:
    name = node.name or node.op_type
    return "".join(c if c.isprintable() and c not in '"\\' else "_" for c in name)
