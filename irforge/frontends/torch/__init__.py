"""PyTorch frontend: ``torch.export`` → core ATen (``run_decompositions``) → the neutral IR.

The exported program is read directly (no ONNX detour): parameters and buffers become
initializers named after their state-dict keys and sharing the module's memory; dims declared
with ``torch.export.Dim`` become named dims (derived ones as expressions: ``2*batch``); each
node keeps its source line, module path and ATen op as metadata; ``cond`` and ``while_loop``
become ``If`` and ``Loop``.  The op table is :mod:`irforge.frontends.torch.ops`.
"""

from __future__ import annotations

import operator
import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core_ir.builder import Builder, NameGenerator
from ...core_ir.dimexpr import canonical, is_dim_expr, rename
from ...core_ir.dtypes import DataType
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
from . import complex as torch_complex
from .caches import register_cache_pytrees

OPSET = 21
KEEP_DOMAIN = "torch.aten"
"""Domain of ops kept unconverted with ``keep_unmapped=True``."""


def _torch():
    try:
        import torch
    except ImportError:
        raise MissingExtraError("from_torch needs PyTorch: pip install torch (or irforge[torch])") from None
    return torch


def from_torch(module, example_args: Sequence[Any] = (), *, example_kwargs: dict | None = None,
               dynamic_shapes: Any = None, keep_unmapped: bool = False, strict: bool = False, registry: Any = None,
               decompose: bool | str = "auto") -> Model:  # fmt: skip
    """Import ``module`` (a ``torch.nn.Module``) as exported by ``torch.export`` on ``example_args``.

    ``dynamic_shapes`` is passed to ``torch.export.export``; its ``Dim`` names become the IR's
    named dims.  ``decompose``: ``"auto"`` imports the exported program as it is when irforge maps
    every op in it (``linear``, ``layer_norm``, ``scaled_dot_product_attention``, ...) and otherwise
    lowers it to core ATen with ``run_decompositions`` first; ``True`` always decomposes; ``False``
    never does.  Raises :class:`~irforge.frontends.UnsupportedOpsError` listing every ATen op
    irforge cannot map (with ``keep_unmapped=True`` they stay as ``torch.aten`` nodes instead).
    """
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise FrontendError(f"from_torch takes a torch.nn.Module, got {type(module).__name__}; "
                            "wrap a function in a Module whose forward calls it")  # fmt: skip
    args = tuple(example_args)
    register_cache_pytrees()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch's own deprecations, not the user's concern
            ep = torch.export.export(module, args, kwargs=example_kwargs, dynamic_shapes=dynamic_shapes,
                                     strict=strict)  # fmt: skip
    except Exception as e:
        raise _export_failed(module, e) from e
    names = _dim_names(ep, module, args, example_kwargs, dynamic_shapes)
    try:
        return import_program(ep, keep_unmapped=keep_unmapped, dim_names=names, decompose=decompose,
                              registry=registry)
    except FrontendError:
        raise
    except Exception as e:  # run_decompositions failing is torch.export's limit, named as such
        raise _export_failed(module, e) from e


def import_program(ep, *, keep_unmapped: bool = False, dim_names: dict[str, str] | None = None,
                   decompose: bool | str = "auto", registry: Any = None) -> Model:  # fmt: skip
    """An ``ExportedProgram`` straight from ``torch.export.export``, decomposed as ``decompose``
    says (see :func:`from_torch`)."""
    if decompose == "auto":
        try:  # every op mapped as exported: no second trace, and larger ops (LayerNormalization, not its parts)
            return from_exported_program(ep, keep_unmapped=False, dim_names=dim_names, registry=registry)
        except UnsupportedOpsError:
            pass
    if decompose:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            ep = ep.run_decompositions()
    return from_exported_program(ep, keep_unmapped=keep_unmapped, dim_names=dim_names, registry=registry)


def _export_failed(module, e: Exception) -> FrontendError:
    """torch.export's reason in one paragraph: its first line and its first distinct bullet
    points (torch's message runs to thousands of characters), with advice where the cause is known."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    first = lines[0] if lines else type(e).__name__
    bullets = list(dict.fromkeys(line[2:] for line in lines[1:] if line.startswith("- ")))[:3]
    text = f"torch.export could not export {type(module).__name__}: {type(e).__name__}: {first}"
    if bullets:
        text += " " + " ".join(b if b.endswith(".") else b + "." for b in bullets)
    if "specialized it to be a constant" in str(e):
        text += (" torch.export treats a dim of size 0 or 1 in the example as a constant: give an example "
                 "of size 2 or more along every dim marked dynamic (a batch of 2, not 1).")
    return FrontendError(text)


def from_exported_program(ep, *, keep_unmapped: bool = False, dim_names: dict[str, str] | None = None,
                          registry: Any = None) -> Model:
    """Import an ``ExportedProgram`` that is already in core ATen (after ``run_decompositions``)."""
    from . import ops as torch_ops

    table = {**torch_ops.TABLE, **plugin_converters("torch", registry)}
    unmapped, complex_unmapped = Unmapped(), Unmapped()
    users = {s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"}
    _scan(ep.graph_module, table, unmapped, complex_unmapped, users)
    advice = _COMPLEX_ADVICE if complex_unmapped.ops else ""
    if not keep_unmapped:
        unmapped.ops.update(complex_unmapped.ops)
        unmapped.raise_if_any("torch", advice)
    complex_unmapped.raise_if_any("torch", advice)
    return _Importer(ep, table, dim_names or {}, keep_unmapped).run()


# -- the scan: every op looked up before anything is built -----------------------------------


EFFECT_TOKEN = object()
"""What a ``torch.export`` effect token becomes: nothing in the graph (see ``with_effects``)."""


def op_name(target) -> str:
    """The table key of an FX call target: ``aten.add.Tensor``, ``operator.getitem``, ``higher_order.cond``."""
    if hasattr(target, "_schema") or hasattr(target, "_opname"):
        return str(target)
    name = getattr(target, "__name__", str(target))
    module = getattr(target, "__module__", "") or ""
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    if module.startswith("torch"):
        return f"torch.{name}"
    return name


def location(node) -> str:
    """``file:line`` of the user's code that made ``node``: the innermost frame outside torch itself."""
    trace = node.meta.get("stack_trace") or ""
    found = re.findall(r'File "([^"]+)", line (\d+)', trace)
    if not found:
        return ""
    mine = [f for f in found if _TORCH_DIR not in f[0]]
    file, line = (mine or found)[-1]
    return f"{file}:{line}"


_TORCH_DIR = "/site-packages/torch/"


def _lookup(table, node):
    name = op_name(node.target)
    if torch_complex.touches_complex(node):  # only converters that know the (real, imaginary) layout
        table = torch_complex.TABLE
    if name in table:
        return table[name]
    packet = name.rsplit(".", 1)[0]  # aten.add.Tensor → aten.add: one converter for every overload
    return table.get(packet + ".*")


def _scan(gm, table, unmapped: Unmapped, complex_unmapped: Unmapped, user_inputs: set[str] = frozenset(),
          *, top: bool = True) -> None:  # fmt: skip
    """Every op without a converter goes to ``unmapped``; complex numbers the import cannot carry go to
    ``complex_unmapped`` (never kept as ``torch.aten`` ops: their operands are in irforge's layout)."""
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            sub = getattr(gm, node.target, None)
            if hasattr(sub, "graph"):
                _scan(sub, table, unmapped, complex_unmapped, top=False)
        elif node.op == "call_function" and _lookup(table, node) is None:
            if torch_complex.touches_complex(node):
                complex_unmapped.add(f"{op_name(node.target)} on complex numbers", location(node), _COMPLEX_WHY)
            else:
                unmapped.add(op_name(node.target), location(node))
        elif top and node.op == "placeholder" and node.name in user_inputs:
            if torch_complex.is_complex(node.meta.get("val")):
                complex_unmapped.add("complex graph input", node.name, _COMPLEX_IO_WHY["input"])
        elif top and node.op == "output":
            for a in node.all_input_nodes:
                if torch_complex.is_complex(a.meta.get("val")):
                    complex_unmapped.add("complex graph output", location(a), _COMPLEX_IO_WHY["output"])


_COMPLEX_WHY = ("irforge holds complex tensors as (real, imaginary) pairs, which only the ops of "
                "irforge.frontends.torch.complex handle")  # fmt: skip
_COMPLEX_ADVICE = ("Ops on complex numbers can be neither mapped from a plugin nor kept: rewrite them in "
                   "real arithmetic on torch.view_as_real(z).")  # fmt: skip
_COMPLEX_IO_WHY = {
    "input": "ONNX runtimes cannot feed complex tensors: pass torch.view_as_real(x) and call "
             "torch.view_as_complex inside the module",
    "output": "ONNX runtimes cannot return complex tensors: return torch.view_as_real(y)",
}  # fmt: skip


# -- dims ----------------------------------------------------------------------------------------


def _dim_names(ep, module, args: tuple, kwargs: dict | None, dynamic_shapes) -> dict[str, str]:
    """torch's shape symbols (``s0``) → the names the user gave their ``Dim``s, wherever the tensor
    sits in the inputs: ``*args``, ``**kwargs``, nested lists and dicts, a ``transformers`` cache.
    The specs are paired with the example tensors as ``torch.export`` pairs them, then each tensor
    with its placeholder."""
    if dynamic_shapes is None:
        return {}
    import torch.utils._pytree as pytree
    from torch.export.dynamic_shapes import _combine_args, _tree_map_with_path

    combined = _combine_args(module, args, kwargs)
    if not isinstance(dynamic_shapes, dict):
        combined = type(dynamic_shapes)(combined.values())
    spec_of: dict[int, Any] = {}
    _tree_map_with_path(lambda _path, t, spec: spec_of.setdefault(id(t), spec) if hasattr(t, "shape") else None,
                        combined, dynamic_shapes, tree_name="inputs")  # fmt: skip
    user = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    names: dict[str, str] = {}
    for pname, leaf in zip(user, pytree.tree_leaves((args, kwargs or {})), strict=False):
        val, spec = placeholders[pname].meta.get("val"), spec_of.get(id(leaf))
        if not isinstance(spec, (dict, list, tuple)) or not hasattr(val, "shape"):
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for axis, dim in items:
            if dim is None or not hasattr(dim, "__name__") or not isinstance(axis, int) or axis >= len(val.shape):
                continue
            expr = getattr(getattr(val.shape[axis], "node", None), "expr", None)
            if expr is None:
                continue
            root = getattr(dim, "root", None)
            if getattr(expr, "is_Symbol", False) and root is None:
                names[str(expr)] = dim.__name__
            elif root is not None and len(expr.free_symbols) == 1:
                names[str(next(iter(expr.free_symbols)))] = root.__name__
    return names


def dim_of(d, names: dict[str, str]):
    """A torch size (int or SymInt) as an IR dim: an int, a named dim or a dim expression."""
    if isinstance(d, int):
        return d
    expr = getattr(getattr(d, "node", None), "expr", None)
    if expr is None:
        return None
    if expr.is_number:
        return int(expr)
    text = str(expr).replace(" ", "")
    if not is_dim_expr(text):
        return None
    text = canonical(text)
    return rename(text, names) if names else text


# -- the import ----------------------------------------------------------------------------------

_DTYPES: dict | None = None


def to_dtype(torch_dtype) -> DataType:
    global _DTYPES
    if _DTYPES is None:
        torch = _torch()
        _DTYPES = {torch.float32: DataType.FLOAT, torch.float64: DataType.DOUBLE, torch.float16: DataType.FLOAT16,
                   torch.bfloat16: DataType.BFLOAT16, torch.int8: DataType.INT8, torch.int16: DataType.INT16,
                   torch.int32: DataType.INT32, torch.int64: DataType.INT64, torch.uint8: DataType.UINT8,
                   torch.bool: DataType.BOOL, torch.complex64: DataType.COMPLEX64,
                   torch.complex128: DataType.COMPLEX128, torch.uint16: DataType.UINT16,
                   torch.uint32: DataType.UINT32, torch.uint64: DataType.UINT64,
                   torch.float8_e4m3fn: DataType.FLOAT8E4M3FN, torch.float8_e5m2: DataType.FLOAT8E5M2}  # fmt: skip
    if torch_dtype not in _DTYPES:
        raise NotMapped(f"dtype {torch_dtype}")
    return _DTYPES[torch_dtype]


def tensor_array(t) -> np.ndarray:
    """A torch tensor's data as numpy, sharing its memory where numpy has the dtype."""
    torch = _torch()
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        import ml_dtypes

        kind = ml_dtypes.float8_e4m3fn if t.dtype == torch.float8_e4m3fn else ml_dtypes.float8_e5m2
        return t.view(torch.uint8).numpy().view(kind)
    return t.numpy()


class TorchContext(Emitter):
    """What an ATen converter gets as its first argument: an :class:`Emitter` plus the FX node
    being converted (``cx.fx``) and its output's type (``cx.out_dtype``, ``cx.out_shape``)."""

    def __init__(self, graph: Graph, builder: Builder, importer: _Importer):
        super().__init__(graph, builder)
        self.importer = importer
        self.fx = None

    @property
    def val(self):
        return self.fx.meta.get("val")

    def used_outputs(self) -> set[int]:
        """Which outputs of a multi-output FX node are read (through ``getitem``)."""
        import operator as op

        used = set()
        for user in self.fx.users:
            if user.target is op.getitem and isinstance(user.args[1], int):
                used.add(user.args[1])
            else:
                return set(range(len(self.val))) if isinstance(self.val, (list, tuple)) else {0}
        return used

    def meta_type(self, val) -> TensorType | None:
        if not hasattr(val, "shape") or not hasattr(val, "dtype"):
            return None
        return TensorType(to_dtype(val.dtype), tuple(dim_of(d, self.importer.dim_names) for d in val.shape))

    @property
    def out_dtype(self) -> DataType:
        val = self.val
        if isinstance(val, (list, tuple)):
            val = val[0]
        return to_dtype(val.dtype)

    @property
    def out_shape(self) -> tuple:
        val = self.val
        if isinstance(val, (list, tuple)):
            val = val[0]
        return tuple(dim_of(d, self.importer.dim_names) for d in val.shape)

    @property
    def out_rank(self) -> int:
        return len(self.out_shape)

    def dtype(self, v: Value) -> DataType:
        return v.type.dtype

    def rank(self, v: Value) -> int:
        return len(v.type.shape)

    def shape(self, v: Value) -> tuple:
        return v.type.shape

    def tensor(self, x, dtype: DataType | int | None = None) -> Value:
        """``x`` (a Value or a Python number) as a tensor of ``dtype`` (default: the output's)."""
        dtype = self.out_dtype if dtype is None else dtype
        if isinstance(x, Value):
            return self.cast(x, dtype)
        from ...core_ir.dtypes import to_numpy

        return self.const(np.asarray(x).astype(to_numpy(dtype)))

    def emit_typed(self, op_type: str, *inputs, **attrs) -> Value:
        """Like :meth:`emit`, the result typed with the FX node's output type."""
        n = self.node_typed(op_type, inputs, attrs)
        return n.outputs[0]

    def node_typed(self, op_type: str, inputs, attrs=None, *, outputs: int = 1, domain: str = "") -> Node:
        val = self.val
        vals = list(val) if isinstance(val, (list, tuple)) else [val]
        types = [self.meta_type(v) for v in vals[:outputs]] + [None] * max(0, outputs - len(vals))
        return self.node(op_type, inputs, attrs, outputs=outputs, types=types, domain=domain)

    def subgraph(self, gm, bindings: Sequence[Value], hint: str) -> tuple[Graph, list[Value]]:
        """Convert FX graph module ``gm`` into a new Graph whose placeholders read ``bindings``."""
        return self.importer.subgraph(gm, bindings, hint)


def _aliases(target) -> bool:
    """The op's result may share memory with an operand (a view: ``view``, ``transpose``, ...)."""
    schema = getattr(target, "_schema", None)
    alias = schema.returns[0].alias_info if schema and schema.returns else None
    return alias is not None and not alias.is_write


def _updates_first_argument(node) -> bool:
    """An in-place op (``add_``, ...): it writes its first operand."""
    schema = getattr(node.target, "_schema", None)
    if not schema or not schema.arguments:
        return False
    alias = schema.arguments[0].alias_info
    return bool(alias is not None and alias.is_write)


def _check_in_place(node, user_inputs: set[str]) -> None:
    """An in-place update imports as the value it computes (later readers read the result) when
    nothing else can see the old tensor change: the tensor is an intermediate, neither a view nor
    viewed by another op; or it is a graph input (or a view of one, as ``.to(device)`` gives) whose
    final value the program returns and which nothing reads after the update (a static key/value
    cache written at its filled length): the caller sees the update as that output."""
    if op_name(node.target) in _VALUE_PRESERVING:
        return
    target = node.args[0] if node.args else None
    chain = [target]
    while getattr(chain[-1], "op", None) == "call_function" and _aliases(chain[-1].target) and chain[-1].args:
        chain.append(chain[-1].args[0])
    root = chain[-1]
    if getattr(root, "op", None) == "placeholder" and root.name in user_inputs:
        if not _returned(node):
            raise NotMapped(f"an in-place update of input {root.name!r} that the program does not return (the "
                            "caller would never see it); return the updated tensor")  # fmt: skip
        order = {n: i for i, n in enumerate(node.graph.nodes)}
        if any(order[u] > order[node] for t in chain for u in t.users if u is not node and u not in chain):
            raise NotMapped(f"input {root.name!r} is read after an in-place update through another view of it")
        return
    if getattr(target, "op", None) != "call_function":
        raise NotMapped("an in-place update of an input, a parameter or a buffer")
    if _aliases(target.target) or any(u is not node and _aliases(u.target) for u in target.users):
        raise NotMapped("an in-place update of a tensor that shares memory with another")


_VALUE_PRESERVING = {"aten.detach_.default"}
"""In-place ops that change no value (``detach_`` only drops autograd history): always identities."""


def _returned(node) -> bool:
    """The tensor ``node`` updates in place ends up, after any further in-place updates, among the
    program's outputs."""
    seen = set()
    while node not in seen:
        seen.add(node)
        if any(u.op == "output" for u in node.users):
            return True
        later = [u for u in node.users if u.op == "call_function" and u.args and u.args[0] is node
                 and _updates_first_argument(u)]  # fmt: skip
        if not later:
            return False
        node = later[0]
    return False


class _Importer:
    def __init__(self, ep, table, dim_names: dict[str, str], keep_unmapped: bool):
        self.ep, self.table, self.dim_names, self.keep_unmapped = ep, table, dim_names, keep_unmapped
        self.graph = Graph(name=type(ep).__name__, opset_imports={"": OPSET})
        self.opset = OPSET
        self.names = NameGenerator(self.graph)
        self.user_inputs = {s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"}

    def require_opset(self, version: int) -> None:
        """Import at ONNX opset ``version`` at least (an op that first appears there was used)."""
        self.opset = max(self.opset, version)
        self.graph.opset_imports[""] = self.opset

    def run(self) -> Model:
        ep, g = self.ep, self.graph
        sig = ep.graph_signature
        self.names.reserve(n.name for n in ep.graph.nodes)
        self.names.reserve(s.target for s in sig.input_specs if s.target)
        env: dict[Any, Any] = {}
        for spec in sig.input_specs:
            node = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == spec.arg.name)
            kind = spec.kind.name
            if kind == "USER_INPUT":
                val = node.meta.get("val")
                if hasattr(val, "shape"):
                    cx = TorchContext(g, Builder(g, opset=OPSET, names=self.names), self)
                    env[node] = g.append_input(Value(node.name, cx.meta_type(val)))
                elif isinstance(val, (int, float, bool)) or val is None:
                    env[node] = val  # specialized to the example's value by torch.export
                else:
                    raise FrontendError(f"input {node.name!r} is a {type(val).__name__}; only tensors and "
                                        "constant numbers can be graph inputs")  # fmt: skip
            elif kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
                tensor = ep.state_dict.get(spec.target) if kind != "CONSTANT_TENSOR" else None
                if tensor is None:
                    tensor = ep.constants.get(spec.target)
                if tensor is None or not hasattr(tensor, "dtype"):
                    raise FrontendError(f"{kind.lower()} {spec.target!r} has no tensor in the exported program")
                dtype = to_dtype(tensor.dtype)
                if tensor.is_complex():  # stored as (real, imaginary) pairs, see torch_complex
                    tensor = _torch().view_as_real(tensor.detach().cpu().resolve_conj())
                    dtype = to_dtype(tensor.dtype)
                arr = tensor_array(tensor)
                v = Value(spec.target, TensorType(dtype, tuple(arr.shape)), NumpyTensor(arr, dtype))
                env[node] = g.add_initializer(v)
            elif kind == "TOKEN":  # orders side effects; the only ones imported are dropped checks
                env[node] = EFFECT_TOKEN
            else:
                raise FrontendError(f"exported input {spec.arg.name!r} of kind {kind} is not supported (a custom "
                                    "object); export a module without side effects")  # fmt: skip
        outputs = self.convert(ep.graph_module, g, env, top=True)
        user = [s for s in sig.output_specs if s.kind.name == "USER_OUTPUT"]
        mutations = [s for s in sig.output_specs if s.kind.name not in ("USER_OUTPUT", "TOKEN")]
        if mutations:
            warnings.warn(f"the module updates {len(mutations)} buffer(s) in place ({mutations[0].target}, ...); the "
                          "imported model computes its outputs only, without those updates", stacklevel=3)  # fmt: skip
        index = {s.arg.name: i for i, s in enumerate(sig.output_specs) if hasattr(s.arg, "name")}
        e = Emitter(g, Builder(g, opset=OPSET, names=self.names))
        finals = []
        for s in user:
            v = outputs[index[s.arg.name]] if s.arg.name in index else None
            finals.append(self._graph_output(e, v, s.arg.name, finals))
        self._name_outputs(finals)
        g.set_outputs(finals)
        return Model(g, opset_imports={"": self.opset, **({KEEP_DOMAIN: 1} if self.keep_unmapped else {})},
                     producer_name="irforge.from_torch")  # fmt: skip

    def _name_outputs(self, finals: list[Value]) -> None:
        """Outputs returned in a dict or a ``transformers`` model output take the path of their key
        (``logits``, ``cache_key_cache_0``); one whose path names an input (a cache taken and
        returned) is ``new_`` that input, which is what the next decoding step feeds back."""
        import torch.utils._pytree as pytree

        try:
            spec = self.ep.module_call_graph[0].signature.out_spec
            out = next(n for n in self.ep.graph.nodes if n.op == "output")
            user = {s.arg.name for s in self.ep.graph_signature.output_specs if s.kind.name == "USER_OUTPUT"}
            metas = [a.meta.get("val") if hasattr(a, "meta") else a for a in out.args[0]
                     if getattr(a, "name", None) in user]  # fmt: skip
            paths = [p for p, _ in pytree.tree_flatten_with_path(pytree.tree_unflatten(metas, spec))[0]]
        except Exception:  # an output structure torch cannot rebuild: the FX names stay
            return
        if len(paths) != len(finals):
            return
        inputs = {v.name for v in self.graph.inputs}
        taken = {v.name for v in self.graph.inputs} | {v.name for v in self.graph.initializers.values()}
        for v, path in zip(finals, paths, strict=True):
            if not any(isinstance(k, (pytree.MappingKey, pytree.GetAttrKey)) for k in path):
                continue
            name = re.sub(r"\W", "_", "_".join(str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))))
                                                for k in path))  # fmt: skip
            name = f"new_{name}" if name in inputs else name
            if name not in taken and not any(o.name == name for o in finals if o is not v):
                v.name = name
                taken.add(name)

    def _graph_output(self, e: Emitter, v, name: str, taken: list[Value]) -> Value:
        if not isinstance(v, Value):
            if isinstance(v, (int, float, bool)):
                return e.emit("Identity", e.const(np.asarray(v)))
            raise FrontendError(f"output {name!r} is a {type(v).__name__}; graph outputs must be tensors")
        if v.is_graph_input() or v.is_initializer() or v in taken or v.is_graph_output():
            out = e.emit("Identity", v)
            out.type = v.type
            return out
        return v

    def subgraph(self, gm, bindings: Sequence[Value], hint: str) -> tuple[Graph, list[Value]]:
        """Convert ``gm`` into a new graph (a branch body) whose placeholders read ``bindings``."""
        sub = Graph(name=hint)
        return sub, self.subgraph_into(gm, sub, bindings, hint + ".")

    def subgraph_into(self, gm, graph: Graph, bindings: Sequence[Value], prefix: str) -> list:
        """Convert ``gm`` into ``graph`` (which may already hold nodes) with its placeholders bound."""
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(bindings):
            raise FrontendError(f"{prefix.rstrip('.')}: {len(placeholders)} operands expected, {len(bindings)} given")
        env = dict(zip(placeholders, bindings, strict=True))
        return self.convert(gm, graph, env, top=False, prefix=prefix)

    def convert(self, gm, graph: Graph, env: dict, *, top: bool, prefix: str = "") -> list:
        cx = TorchContext(graph, Builder(graph, opset=OPSET, names=self.names), self)
        outputs: list = []
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "get_attr":
                env[node] = getattr(gm, node.target)
                continue
            if node.op == "output":
                outputs = list(_flatten(_map_args(node.args[0], env)))
                break
            if node.op != "call_function":
                raise FrontendError(f"node {node.name!r}: FX op {node.op!r} is not supported after export")
            env[node] = self._call(cx, node, env, top, prefix)
            if _updates_first_argument(node):  # later readers of the updated tensor read the result
                env[node.args[0]] = env[node]
        return outputs

    def _call(self, cx: TorchContext, node, env, top: bool, prefix: str):
        name = op_name(node.target)
        cx.fx = node
        cx.metadata = {FRAMEWORK_OP: name}
        loc = location(node)
        if loc:
            cx.metadata[SOURCE] = loc
        stack = node.meta.get("nn_module_stack")
        if stack:
            path = list(stack.values())[-1][0]
            if path:
                cx.metadata[MODULE] = re.sub(r"^L\['self'\]\.?|^L__self__\.?", "", str(path))
        args = _map_args(node.args, env)
        kwargs = {k: _map_args(v, env) for k, v in node.kwargs.items()}
        fn = _lookup(self.table, node)
        first_new = len(cx.b.created)
        try:
            if fn is None:
                raise NotMapped("no mapping")
            if _updates_first_argument(node):
                _check_in_place(node, self.user_inputs if top else set())
            result = fn(cx, *args, **kwargs)
        except NotMapped as e:
            if not self.keep_unmapped:
                raise UnsupportedOpsError("torch", [UnmappedOp(name, 1, loc, f"node {node.name!r}: {e}")]) from None
            del cx.b.created[first_new:]
            result = self._keep(cx, node, name, args, kwargs)
        except FrontendError:
            raise
        except Exception as e:  # the mapping's own failure: name the node, not torch.export
            raise FrontendError(f"converting node {node.name!r} ({name}{', ' + loc if loc else ''}) failed: "
                                f"{type(e).__name__}: {e}; import with keep_unmapped=True to keep the op "
                                "as it is, and please report it") from e  # fmt: skip
        created = cx.b.created[first_new:]
        self._name_results(cx, node, result, created, prefix)
        return result

    def _keep(self, cx: TorchContext, node, name: str, args, kwargs):
        """An op kept as a ``torch.aten`` node: tensor operands become inputs, the rest attributes."""
        inputs = [a for a in _flatten(args) if isinstance(a, Value)]
        attrs = {}
        for i, a in enumerate(args):
            if isinstance(a, (int, float, str)) and not isinstance(a, bool):
                attrs[f"arg{i}"] = a
            elif isinstance(a, (list, tuple)) and a and all(isinstance(x, int) for x in a):
                attrs[f"arg{i}"] = list(a)
        for k, a in kwargs.items():
            if isinstance(a, (int, float, str)) and not isinstance(a, bool):
                attrs[k] = a
        val = cx.val
        n_out = len(val) if isinstance(val, (list, tuple)) else 1
        op = name[len("aten."):] if name.startswith("aten.") else name
        n = cx.node_typed(op, inputs, attrs, outputs=n_out, domain=KEEP_DOMAIN)
        return tuple(n.outputs) if isinstance(val, (list, tuple)) else n.outputs[0]

    def _name_results(self, cx, node, result, created: list[Node], prefix: str) -> None:
        """Values made for an FX node carry its name (prefixed inside subgraphs) and its meta type."""
        made = {o for n in created for o in n.outputs if o is not None}
        if created:
            created[-1].name = prefix + node.name
        vals = node.meta.get("val")
        if isinstance(result, Value):
            pairs = [(result, vals, node.name)]
        elif isinstance(result, (list, tuple)):
            metas = list(vals) if isinstance(vals, (list, tuple)) else [None] * len(result)
            pairs = [(r, m, f"{node.name}.{i}") for i, (r, m) in enumerate(zip(result, metas, strict=False))]
        else:
            return
        for v, meta, name in pairs:
            if not isinstance(v, Value) or v not in made:
                continue
            if v.type is None or (isinstance(v.type, TensorType) and v.type.shape is None):
                t = cx.meta_type(meta)
                if t is not None:
                    v.type = t
            v.name = self.names.fresh(prefix + name) if prefix else name


def _map_args(a, env):
    import torch.fx

    if isinstance(a, torch.fx.Node):
        return env[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_map_args(x, env) for x in a) if not hasattr(a, "_fields") else [_map_args(x, env) for x in a]
    if isinstance(a, dict):
        return {k: _map_args(v, env) for k, v in a.items()}
    return a


def _flatten(a):
    if isinstance(a, (list, tuple)):
        for x in a:
            yield from _flatten(x)
    else:
        yield a


SYM_OPS = {"operator.add": operator.add, "operator.sub": operator.sub, "operator.mul": operator.mul,
           "operator.floordiv": operator.floordiv, "operator.mod": operator.mod}  # fmt: skip
