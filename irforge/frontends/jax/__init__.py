"""JAX frontend: a function traced to a jaxpr → the neutral IR.

``jax.make_jaxpr`` traces the function at the example arguments' shapes (dims named in
``abstracted_axes`` stay symbolic, as in ``jax.export``); call wrappers (``jit``/``pjit``,
``closed_call``, ``custom_jvp_call``, ``custom_vjp_call``, ``remat``) are inlined, ``cond``
becomes ``If`` and ``while``/``scan`` become ``Loop``.  Each node keeps its source line and name
stack as metadata.  The primitive table is :mod:`irforge.frontends.jax.ops`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core_ir.builder import Builder, NameGenerator
from ...core_ir.dimexpr import canonical, is_dim_expr
from ...core_ir.dtypes import DataType, from_numpy
from ...core_ir.errors import MissingExtraError
from ...core_ir.graph import Graph
from ...core_ir.model import Model
from ...core_ir.node import Node
from ...core_ir.tensors import NumpyTensor
from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import (
    FRAMEWORK_OP,
    MODULE,
    SOURCE,
    Emitter,
    FrontendError,
    NotMapped,
    Unmapped,
    UnmappedOp,
    UnsupportedOpsError,
    plugin_converters,
)
from . import complex as jax_complex
from .random import RANDOM_PRIMITIVES, is_key, key_selector, physical, physical_params

OPSET = 21
KEEP_DOMAIN = "jax.lax"
"""Domain of primitives kept unconverted with ``keep_unmapped=True``."""


def _jax():
    try:
        import jax
    except ImportError:
        raise MissingExtraError("from_jax needs JAX: pip install jax (or irforge[jax])") from None
    return jax


def from_jax(fn, *example_args: Any, abstracted_axes: Sequence[Any] | None = None,
             keep_unmapped: bool = False, registry: Any = None) -> Model:  # fmt: skip
    """Import ``fn`` as traced by ``jax.make_jaxpr`` on ``example_args`` (arrays, pytrees of arrays,
    or ``jax.ShapeDtypeStruct``).

    ``abstracted_axes`` has one entry per argument: ``None`` or ``{axis: "name"}`` (for a pytree
    argument, the same dict applies to every leaf); those dims become named dims of the IR.
    Raises :class:`~irforge.frontends.UnsupportedOpsError` listing every primitive irforge cannot
    map (with ``keep_unmapped=True`` they stay as ``jax.lax`` nodes instead).
    """
    jax = _jax()
    if not callable(fn):
        raise FrontendError(f"from_jax takes a function, got {type(fn).__name__}")
    specs = _specs(jax, example_args, abstracted_axes)
    try:
        closed = jax.make_jaxpr(fn)(*specs)
    except Exception as e:
        text = str(e).strip()
        first = text.splitlines()[0] if text else ""
        name = getattr(fn, "__name__", type(fn).__name__)
        raise FrontendError(f"jax could not trace {name}: {type(e).__name__}: {first}") from e
    names = _input_names(jax, example_args)
    return from_jaxpr(closed, input_names=names, keep_unmapped=keep_unmapped, registry=registry)


def from_jaxpr(closed, *, input_names: Sequence[str] | None = None, keep_unmapped: bool = False,
               registry: Any = None) -> Model:
    """Import a ``ClosedJaxpr``."""
    from . import ops as jax_ops

    table = {**jax_ops.TABLE, **plugin_converters("jax", registry)}
    unmapped, complex_unmapped = Unmapped(), Unmapped()
    _scan(closed.jaxpr, table, unmapped, complex_unmapped)
    jaxpr = closed.jaxpr
    for what, variables in (("input", jaxpr.invars), ("output", jaxpr.outvars)):
        if any(jax_complex.is_complex(getattr(v, "aval", None)) for v in variables):
            complex_unmapped.add(f"complex function {what}", "", _COMPLEX_IO_WHY)
    advice = _COMPLEX_ADVICE if complex_unmapped.ops else ""
    if not keep_unmapped:
        unmapped.ops.update(complex_unmapped.ops)
        unmapped.raise_if_any("jax", advice)
    complex_unmapped.raise_if_any("jax", advice)
    return _Importer(table, keep_unmapped).run(closed, list(input_names or []))


_COMPLEX_WHY = ("irforge holds complex values as (real, imaginary) pairs, which only the primitives of "
                "irforge.frontends.jax.complex handle")  # fmt: skip
_COMPLEX_IO_WHY = ("ONNX runtimes cannot pass complex arrays: take and return their real and imaginary parts "
                   "(jnp.real, jnp.imag, lax.complex) instead")  # fmt: skip
_COMPLEX_ADVICE = ("Primitives on complex numbers can be neither mapped from a plugin nor kept: rewrite them in "
                   "real arithmetic on the real and imaginary parts.")  # fmt: skip


def _specs(jax, args, abstracted_axes):
    from jax import export

    scope = export.SymbolicScope()
    axes = list(abstracted_axes) if abstracted_axes is not None else [None] * len(args)
    if len(axes) != len(args):
        raise FrontendError(f"abstracted_axes has {len(axes)} entries for {len(args)} arguments")

    def spec(x, named):
        shape, dtype = np.shape(x), getattr(x, "dtype", None) or np.asarray(x).dtype
        if not named:
            return jax.ShapeDtypeStruct(shape, dtype)
        dims = [str(d) for d in shape]
        for axis, name in named.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise FrontendError(f"abstracted_axes: dim name {name!r} is not an identifier")
            if axis >= len(dims):
                raise FrontendError(f"abstracted_axes names axis {axis} of an argument of rank {len(dims)}")
            dims[axis] = name
        return jax.ShapeDtypeStruct(export.symbolic_shape(", ".join(dims), scope=scope), dtype)

    return [jax.tree_util.tree_map(lambda x, n=named: spec(x, n), a) for a, named in zip(args, axes, strict=True)]


def _input_names(jax, args) -> list[str]:
    """A graph-input name for each leaf: ``x`` for a plain argument, ``params.dense.kernel`` for a leaf."""
    names = []
    for i, a in enumerate(args):
        leaves = jax.tree_util.tree_flatten_with_path(a)[0]
        for path, _ in leaves:
            key = re.sub(r"[\[\]'\"]+", ".", jax.tree_util.keystr(path)).strip(".").replace("..", ".")
            names.append(f"arg{i}" + (f".{key}" if key else ""))
    return names


def _subjaxprs(params: dict):
    for v in params.values():
        for x in v if isinstance(v, (tuple, list)) else (v,):
            inner = getattr(x, "jaxpr", None)
            if inner is not None and hasattr(inner, "eqns"):
                yield inner
            elif hasattr(x, "eqns"):
                yield x


def _scan(jaxpr, table, unmapped: Unmapped, complex_unmapped: Unmapped) -> None:
    constant = set(jaxpr.constvars)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        known = all(type(v).__name__ == "Literal" or v in constant for v in eqn.invars)
        if known and not eqn.effects and not any(True for _ in _subjaxprs(eqn.params)):
            constant.update(eqn.outvars)
        if jax_complex.touches_complex(eqn):
            if name not in jax_complex.TABLE and not known:  # a constant one is evaluated by JAX at import
                complex_unmapped.add(f"{name} on complex numbers", location(eqn), _COMPLEX_WHY)
        elif name not in table:
            unmapped.add(name, location(eqn))
        for sub in _subjaxprs(eqn.params):
            _scan(sub, table, unmapped, complex_unmapped)


def location(eqn) -> str:
    from jax._src import source_info_util

    frame = source_info_util.user_frame(eqn.source_info.traceback)
    return f"{frame.file_name}:{frame.start_line}" if frame is not None else ""


def to_dtype(dtype) -> DataType:
    try:
        return from_numpy(np.dtype(dtype))
    except Exception:
        raise NotMapped(f"dtype {dtype}") from None


def dim_of(d):
    """A jaxpr dim (int or symbolic expression) as an IR dim."""
    if isinstance(d, (int, np.integer)):
        return int(d)
    text = str(d).replace(" ", "")
    return canonical(text) if is_dim_expr(text) else None


def aval_type(aval) -> TensorType | None:
    """The IR type of an aval; a key array's is that of its key data."""
    if not hasattr(aval, "shape") or not hasattr(aval, "dtype"):
        return None
    aval = physical(aval)
    return TensorType(to_dtype(aval.dtype), tuple(dim_of(d) for d in aval.shape))


class JaxContext(Emitter):
    """What a primitive converter gets as its first argument: an :class:`Emitter` plus the equation
    (``cx.eqn``) and its output avals (``cx.out_avals``)."""

    def __init__(self, graph: Graph, builder: Builder, importer: _Importer):
        super().__init__(graph, builder)
        self.importer = importer
        self.eqn = None

    @property
    def out_avals(self) -> list:
        return [physical(v.aval) for v in self.eqn.outvars]

    @property
    def out_dtype(self) -> DataType:
        return to_dtype(self.out_avals[0].dtype)

    @property
    def out_shape(self) -> tuple:
        return tuple(dim_of(d) for d in self.out_avals[0].shape)

    def rank(self, v: Value) -> int:
        return len(v.type.shape)

    def shape(self, v: Value) -> tuple:
        return v.type.shape

    def dtype(self, v: Value) -> DataType:
        return v.type.dtype

    def value(self, x, dtype: DataType | None = None) -> Value:
        """``x`` (a Value or a literal) as a Value."""
        if isinstance(x, Value):
            return x
        from ...core_ir.dtypes import to_numpy

        arr = np.asarray(x)
        return self.const(arr.astype(to_numpy(dtype)) if dtype is not None else arr)

    def typed(self, op_type: str, *inputs, **attrs) -> Value:
        """One node typed with the equation's (first) output aval."""
        return self.node_typed(op_type, inputs, attrs).outputs[0]

    def node_typed(self, op_type: str, inputs, attrs=None, *, outputs: int = 1, domain: str = "") -> Node:
        types = [aval_type(a) for a in self.out_avals[:outputs]]
        types += [None] * (outputs - len(types))
        return self.node(op_type, [self.value(i) if i is not None else None for i in inputs], attrs,
                         outputs=outputs, types=types, domain=domain)  # fmt: skip

    def dim_value(self, d) -> Value:
        """Size ``d`` (an int or a symbolic dim) as a 1-element int64 tensor."""
        return self.importer.dim_value(self, d)

    def inline(self, closed, args: Sequence, graph: Graph | None = None, prefix: str = "") -> list:
        """Convert a (closed) sub-jaxpr with its inputs bound to ``args``; its outputs."""
        return self.importer.inline(closed, list(args), self.graph if graph is None else graph, prefix)


class _Importer:
    def __init__(self, table, keep_unmapped: bool):
        self.table, self.keep_unmapped = table, keep_unmapped
        self.graph = Graph(name="jaxpr", opset_imports={"": OPSET})
        self.names = NameGenerator(self.graph)
        self.dim_sources: dict[str, tuple[Value, int]] = {}  # symbol → (graph input, axis)
        self.opset = OPSET

    def require_opset(self, version: int) -> None:
        """Import at ONNX opset ``version`` at least (an op that first appears there was used)."""
        self.opset = max(self.opset, version)
        self.graph.opset_imports[""] = self.opset

    def run(self, closed, input_names: list[str]) -> Model:
        g = self.graph
        jaxpr = closed.jaxpr
        if len(input_names) != len(jaxpr.invars):
            input_names = [f"arg{i}" for i in range(len(jaxpr.invars))]
        self.names.reserve(input_names)
        env: dict[Any, Any] = {}
        for var, name in zip(jaxpr.invars, input_names, strict=True):
            t = aval_type(var.aval)
            v = g.append_input(Value(name, t))
            env[var] = v
            for axis, d in enumerate(t.shape if t is not None else ()):
                if isinstance(d, str) and d.isidentifier():
                    self.dim_sources.setdefault(d, (v, axis))
        self._bind_consts(g, jaxpr.constvars, closed.consts, env)
        outs = self.convert(jaxpr, g, env, "")
        e = Emitter(g, Builder(g, opset=OPSET, names=self.names))
        finals = []
        for i, v in enumerate(outs):
            if not isinstance(v, Value):
                v = e.emit("Identity", e.const(np.asarray(v)))
            elif v.is_graph_input() or v.is_initializer() or v in finals:
                t = v.type
                v = e.emit("Identity", v)
                v.type = t
            finals.append(v)
            if v.name.startswith(("identity", "const")):
                v.name = self.names.fresh(f"out{i}")
        g.set_outputs(finals)
        return Model(g, opset_imports={"": self.opset, **({KEEP_DOMAIN: 1} if self.keep_unmapped else {})},
                     producer_name="irforge.from_jax")  # fmt: skip

    def _bind_consts(self, g: Graph, constvars, consts, env) -> None:
        for var, c in zip(constvars, consts, strict=True):
            arr = np.asarray(c)
            if arr.dtype.kind == "c":  # the pair layout (jax_complex)
                arr = np.stack([arr.real, arr.imag], axis=-1) if arr.size > 16 else arr
            if arr.size <= 16:
                env[var] = arr  # small constants fold into their users
                continue
            name = self.names.fresh("const")
            dtype = to_dtype(arr.dtype)
            env[var] = g.add_initializer(Value(name, TensorType(dtype, arr.shape), NumpyTensor(arr, dtype)))

    def inline(self, closed, args: list, graph: Graph, prefix: str) -> list:
        jaxpr = getattr(closed, "jaxpr", closed)
        consts = getattr(closed, "consts", [])
        env: dict[Any, Any] = {}
        if len(args) != len(jaxpr.invars):
            raise FrontendError(f"a sub-jaxpr takes {len(jaxpr.invars)} operands, {len(args)} given")
        env.update(zip(jaxpr.invars, args, strict=True))
        root = graph
        while root.parent is not None and root.parent.graph is not None:
            root = root.parent.graph
        self._bind_consts(root, jaxpr.constvars, consts, env)
        return self.convert(jaxpr, graph, env, prefix)

    def convert(self, jaxpr, graph: Graph, env: dict, prefix: str) -> list:
        cx = JaxContext(graph, Builder(graph, opset=OPSET, names=self.names), self)
        for eqn in jaxpr.eqns:
            args = [_read(env, v) for v in eqn.invars]
            result = self._call(cx, eqn, args, prefix)
            results = list(result) if isinstance(result, (list, tuple)) else [result]
            if len(results) != len(eqn.outvars):
                raise FrontendError(f"{eqn.primitive.name}: converter gave {len(results)} results for "
                                    f"{len(eqn.outvars)} outputs")  # fmt: skip
            for var, r in zip(eqn.outvars, results, strict=True):
                env[var] = r
        return [_read(env, v) for v in jaxpr.outvars]

    def _call(self, cx: JaxContext, eqn, args, prefix: str):
        name = eqn.primitive.name
        cx.eqn = eqn
        cx.metadata = {FRAMEWORK_OP: name}
        loc = location(eqn)
        if loc:
            cx.metadata[SOURCE] = loc
        stack = str(eqn.source_info.name_stack)
        if stack:
            cx.metadata[MODULE] = stack
        fn = self.table.get(name)
        if jax_complex.touches_complex(eqn):
            if not any(isinstance(a, Value) for a in args):
                return jax_complex.evaluate(eqn, args)
            fn = jax_complex.TABLE.get(name)
        first = len(cx.b.created)
        try:
            if fn is None:
                raise NotMapped("no mapping")
            params = eqn.params
            if name not in RANDOM_PRIMITIVES and any(is_key(v.aval) for v in (*eqn.invars, *eqn.outvars)):
                params, selectors = physical_params(name, params, [v.aval for v in eqn.invars],
                                                    [v.aval for v in eqn.outvars])  # fmt: skip
                trailing = len(cx.out_avals[0].shape) - len(eqn.outvars[0].aval.shape)
                args = [key_selector(cx, a, trailing) if i in selectors else a for i, a in enumerate(args)]
            result = fn(cx, *args, **params)
        except NotMapped as e:
            if not self.keep_unmapped:
                raise UnsupportedOpsError("jax", [UnmappedOp(name, 1, loc, str(e))]) from None
            del cx.b.created[first:]
            result = self._keep(cx, eqn, name, args)
        except FrontendError:
            raise
        except Exception as e:  # the mapping's own failure: name the equation
            raise FrontendError(f"converting {name}{' at ' + loc if loc else ''} failed: {type(e).__name__}: {e}; "
                                "import with keep_unmapped=True to keep the primitive as it is, and please "
                                "report it") from e  # fmt: skip
        created = cx.b.created[first:]
        if created and not created[-1].name:
            created[-1].name = self.names.fresh(prefix + name)
        return result

    def _keep(self, cx: JaxContext, eqn, name: str, args):
        inputs = [cx.value(a) for a in args]
        attrs = {}
        for k, p in eqn.params.items():
            if isinstance(p, (int, float, str)) and not isinstance(p, bool):
                attrs[k] = p
            elif isinstance(p, (tuple, list)) and p and all(isinstance(x, int) for x in p):
                attrs[k] = list(p)
        n = cx.node_typed(name, inputs, attrs, outputs=len(eqn.outvars), domain=KEEP_DOMAIN)
        return list(n.outputs)

    def dim_value(self, cx: JaxContext, d) -> Value:
        if isinstance(d, (int, np.integer)):
            return cx.const(np.asarray([int(d)], np.int64))
        from ...core_ir.dimexpr import symbols

        text = dim_of(d)
        if text is None:
            raise NotMapped(f"the size {d} is not an expression of the inputs' dims")
        env: dict[str, Value] = {}
        for s in symbols(text):
            if s not in self.dim_sources:
                raise NotMapped(f"the symbolic dim {s} is not the size of any input")
            v, axis = self.dim_sources[s]
            env[s] = cx.emit("Shape", v, start=axis, end=axis + 1)
        if text in env:
            return env[text]
        return _eval_dim(cx, text, env)


def _eval_dim(cx: Emitter, text: str, env: dict[str, Value]) -> Value:
    """A dim expression over 1-element int64 tensors, as ONNX arithmetic."""
    import ast

    ops = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.FloorDiv: "Div", ast.Mod: "Mod"}

    def walk(n):
        if isinstance(n, ast.Constant):
            return cx.const(np.asarray([int(n.value)], np.int64))
        if isinstance(n, ast.Name):
            return env[n.id]
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return cx.emit("Neg", walk(n.operand))
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return cx.emit(ops[type(n.op)], walk(n.left), walk(n.right))
        raise NotMapped(f"the dim expression {text}")

    return walk(ast.parse(text, mode="eval").body)


def _read(env, var):
    if type(var).__name__ == "Literal":
        return np.asarray(var.val, dtype=var.aval.dtype)
    if type(var).__name__ == "DropVar":
        return None
    return env[var]
