"""shape-inference: dtypes and shapes of every value, from ONNX's own inference.

ONNX's C++ inference knows every standard op's shape function, symbolic dims and (with data
propagation) shapes computed by Shape→Gather→Concat→Reshape chains; it runs once over the whole
model, subgraphs included, and what it finds is merged into the IR without ever forgetting a fact
the IR already had (a known dim is never replaced by a symbol, nor a symbol by an unknown).
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import onnx
import onnx.defs
import onnx.shape_inference

from ..core_ir.dtypes import is_floating
from ..core_ir.graph import Graph
from ..core_ir.model import Model
from ..core_ir.pattern import constant_value
from ..core_ir.serde import Serializer, type_from_proto, type_to_proto
from ..core_ir.tensors import is_tensor_data, nbytes
from ..core_ir.types import TensorType, Type
from ..core_ir.wire import encode_varint, tag
from .base import Pass, PassContext, PassError, PassResult
from .result_bounds import result_bound

_INLINE_LIMIT = 4096
"""Initializers up to this many bytes that data propagation can read go to ONNX with their data
(shape tensors, axes, scales); every other one only as a typed input, so a model's weights are
never copied for inference."""


@dataclass(frozen=True)
class ShapeInference(Pass):
    name = "shape-inference"
    summary = "infer dtypes and shapes (symbolic dims, data-dependent shape chains) with ONNX's inference"
    preserves = frozenset()
    recurse = False  # ONNX's inference walks the subgraphs itself

    data_prop: bool = True

    window: int = 200_000
    """Main graphs of more nodes are inferred a window of about this many nodes at a time (0:
    never): ONNX's inference takes some 1.6 KB per node, which on a million-node model would be
    more than the IR itself."""

    def __post_init__(self) -> None:
        if self.window < 0:
            raise ValueError(f"window must be 0 (never) or a node count, got {self.window}")

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        model = ctx.model if ctx.model is not None and ctx.model.graph is graph else None
        if model is None:
            model = Model(graph, opset_imports=ctx.opset_imports(graph))
        stats = {"values-typed": 0, "data-propagation-refused": 0}
        stats["values-typed"] += _type_constants(graph)
        if _all_static(graph):  # nothing left to learn: inference only keeps what is known
            return PassResult(stats["values-typed"] > 0, stats)
        # propagation needs values to start from (shapes, integer constants); without any it only
        # costs time (a third of ONNX's inference on a float-only graph)
        data_prop = self.data_prop and _has_data_sources(model) and _propagation_can_start(model)
        if data_prop and _makes_sizes_from_values(graph):
            # ONNX's data propagation allocates per element of every 1-D value its propagating
            # ops read, known data or not: Cast(Range(0, 10**10, 1)) exhausts the memory.  Types
            # first, without it; then propagation only if no such value is too long.
            stats["values-typed"] += self._run(model, graph, data_prop=False, screening=True)
            long = _long_vector(graph)
            if long is not None:
                stats["data-propagation-refused"] = 1
                warnings.warn(f"shape-inference: {long} is too long for ONNX's data propagation; shapes "
                              "computed from values are left unknown", stacklevel=2)  # fmt: skip
                return PassResult(stats["values-typed"] > 0, stats)
        stats["values-typed"] += self._run(model, graph, data_prop=data_prop)
        return PassResult(stats["values-typed"] > 0, stats)

    def _run(self, model: Model, graph: Graph, data_prop: bool, screening: bool = False) -> int:
        serializer = Serializer(value_info=True)
        header = serializer.model(model, with_graph=False)  # opsets, functions; reserves names
        nodes = list(graph)
        if self.window and len(nodes) > self.window * 1.25 and _windowable(model, nodes):
            return _Windows(self, graph, nodes, serializer, header, data_prop, screening).run()
        # the model goes to ONNX as bytes written node by node (no Python proto tree of it), and
        # weights as typed inputs: only what data propagation can read goes with its data
        encoded = b"".join(serializer.model_parts(model, typed_only=lambda v: not _data_helps(v), omit_unused=True))
        # a screening run (no propagation) invents names for dims that propagation will know:
        # those are not kept, or they would win over the real dims found next
        symbols = _forget_invented if screening else None
        return self._infer(encoded, graph, serializer, graph.all_graphs(), data_prop, symbols)

    def _infer(self, encoded: bytes, graph: Graph, serializer: Serializer, graphs, data_prop: bool,
               symbols=None, flat: bool = False) -> int:  # fmt: skip
        """Run ONNX's inference on ``encoded`` and merge what it found into the values of ``graphs``
        (``symbols`` renames the dims ONNX invents, when it runs on a window)."""
        try:
            inferred = onnx.ModelProto.FromString(
                onnx.shape_inference.C.infer_shapes(encoded, False, False, data_prop)
            )
        except Exception as e:  # ONNX raises bare RuntimeErrors
            raise PassError(f"shape-inference: ONNX's inference failed on graph {graph.name!r}: {e}") from e
        del encoded
        gp = inferred.graph
        if flat:  # a window: no subgraphs, and its inputs are what it was given
            found = {vi.name: vi.type for vi in (*gp.value_info, *gp.output)}
        else:
            found = dict(_inferred_types(gp))
        types = _TypeCache()
        updated = 0
        for g in graphs:
            for v in g.values() if isinstance(g, Graph) else g:
                tp = found.get(serializer.name(v))
                if tp is None:
                    continue
                found_type = types.read(tp)
                if symbols is not None:
                    found_type = symbols(found_type)
                merged = merge_types(v.type, found_type)
                if merged != v.type:
                    v.type = merged
                    updated += 1
        return updated


def _type_constants(graph: Graph) -> int:
    """Types the untyped results of ``Constant(value=...)`` from their tensors (what ONNX would
    infer, without a round trip through it); the number typed."""
    typed = 0
    for g in graph.all_graphs():
        for n in g:
            if n.op_type != "Constant" or n.domain or len(n.outputs) != 1 or n.outputs[0] is None:
                continue
            value = n.attributes.get("value")
            if n.outputs[0].type is None and len(n.attributes) == 1 and value is not None and value.ref is None \
                    and is_tensor_data(value.value):  # fmt: skip
                n.outputs[0].type = TensorType(value.value.dtype, tuple(value.value.shape))
                typed += 1
    return typed


def _all_static(graph: Graph) -> bool:
    """Whether every value, subgraphs' included, already has a tensor type of static shape."""
    return all(isinstance(v.type, TensorType) and v.type.is_static() for g in graph.all_graphs() for v in g.values())


_PROPAGATING = frozenset({"Cast", "Add", "Sub", "Mul", "Concat", "Gather", "Slice", "Squeeze", "Unsqueeze", "Size"})
"""Ops whose data propagation in ONNX (1.23) builds a list as long as a 1-D input (measured)."""
_SIZE_FROM_VALUES = frozenset({
    "Range", "ConstantOfShape", "Tile", "Expand", "Pad", "OneHot", "Resize", "Upsample", "HannWindow",
    "HammingWindow", "BlackmanWindow", "MelWeightMatrix", "Reshape", "NonZero", "Compress", "Unique", "TopK",
    "CenterCropPad", "Col2Im", "DFT", "STFT",
})  # fmt: skip
"""Ops that can make a long 1-D value out of short inputs."""
_LONGEST_PROPAGATED = 1 << 20
"""Longest 1-D value handed to ONNX's data propagation (a list of a million dims, ~100 MB there)."""
_SHAPE_INPUT = {"Reshape": 1, "ConstantOfShape": 0, "Expand": 1}
_KEEPS_RANK = frozenset({"Tile", "Pad", "Resize", "Upsample", "CenterCropPad", "TopK"})


_DATA_SOURCES = frozenset({"Shape", "Size", "Constant", "Range", "Resize", "Upsample"})


def _has_data_sources(model: Model) -> bool:
    """Whether ONNX's data propagation has anything to propagate: an op that makes known values
    from shapes or attributes, or a small integer initializer sent with its data."""
    graphs = [*model.graph.all_graphs(), *(g for fn in model.functions.values() for g in fn.graph.all_graphs())]
    for g in graphs:
        for v in g._initializers.values():
            c = v.const_value
            if c is not None and not is_floating(c.dtype) and nbytes(c) <= _INLINE_LIMIT:
                return True
        if any(n.op_type in _DATA_SOURCES for n in g):
            return True
    return False


@functools.cache
def _propagating_ops() -> frozenset[str]:
    """The standard ops with a data propagation function, from the installed onnx's schemas."""
    return frozenset(s.name for s in onnx.defs.get_all_schemas_with_history()
                     if not s.domain and s.has_data_propagation_function)  # fmt: skip


_PROPAGATES_FIRST_INPUT = frozenset({"Cast", "Squeeze", "Unsqueeze", "Slice", "Gather"})
"""Propagating ops whose known result comes from their first input's values (the rest are axes,
indices, bounds: read as constants without propagation)."""


def _propagation_can_start(model: Model) -> bool:
    """Whether data propagation can know any value ONNX's plain inference does not: it carries
    integer values (shapes, sizes) only, from ``Shape``/``Size`` or integer constants through the
    propagating ops.  A graph whose propagating ops all read floats (the per-channel ``Unsqueeze``
    of a CNN's weights) gains nothing from it, and it costs two thirds of the inference there;
    constants are read without it."""
    ops = _propagating_ops()
    graphs = [*model.graph.all_graphs(), *(g for fn in model.functions.values() for g in fn.graph.all_graphs())]
    for g in graphs:
        for n in g:
            if n.domain or n.op_type not in ops:
                continue
            if n.op_type in ("Shape", "Size"):
                return True
            read = n.inputs[:1] if n.op_type in _PROPAGATES_FIRST_INPUT else n.inputs
            if any(v is not None and not _floating(v) for v in read):
                return True
    return False


def _floating(v) -> bool:
    """``v`` holds floats: its type says so, or (before inference) its producer's attribute does."""
    t = v.type
    if isinstance(t, TensorType):
        return is_floating(t.dtype)
    p = v.producer()
    if p is None or p.domain or p.op_type not in ("ConstantOfShape", "Constant"):
        return False
    value = p.attributes.get("value")
    if value is None:
        return p.op_type == "ConstantOfShape"  # its default fill is a float 0
    return value.ref is None and is_tensor_data(value.value) and is_floating(value.value.dtype)


def _makes_sizes_from_values(graph: Graph) -> bool:
    """Whether some value may turn out too long for data propagation only once types are known."""
    risky = (n for n in graph.all_nodes() if not n.domain and n.op_type in _SIZE_FROM_VALUES)
    return any(_may_be_long_vector(n) for n in risky) or _long_vector(graph) is not None


def _rank(v) -> int | None:
    t = v.type if v is not None else None
    return len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None


def _may_be_long_vector(n) -> bool:
    """Whether ``n`` may produce a 1-D result too long for data propagation: its rank is read off
    its inputs' types (a Reshape to a 4-element shape makes no vector), Range's length off its
    constant inputs."""
    op = n.op_type
    if op == "Range":
        args = [constant_value(v) for v in n.inputs]
        bound = None if any(a is None for a in args) else result_bound(op, args, {})
        return bound is None or bound > _LONGEST_PROPAGATED
    if op in _SHAPE_INPUT:
        shape = n.inputs[_SHAPE_INPUT[op]] if len(n.inputs) > _SHAPE_INPUT[op] else None
        dims = constant_value(shape)
        if dims is not None and dims.ndim == 1 and op != "Expand":  # the result's shape is in plain view
            return dims.size <= 1 and (dims.size == 0 or abs(int(dims[0])) > _LONGEST_PROPAGATED or dims[0] < 0)
        t = shape.type if shape is not None else None
        length = t.shape[0] if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == 1 else None
        if not isinstance(length, int):
            return True
        return length <= 1 and (op != "Expand" or (_rank(n.inputs[0]) or 0) <= 1)
    if op in _KEEPS_RANK:
        rank = _rank(n.inputs[0]) if n.inputs else None
        return rank is None or rank <= 1
    return True


def _long_vector(graph: Graph) -> str | None:
    """A 1-D value longer than ONNX's data propagation can afford, read by a propagating op."""
    for n in graph.all_nodes():
        if n.op_type in _PROPAGATING and not n.domain:
            for v in n.inputs:
                t = v.type if v is not None else None
                if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == 1:
                    d = t.shape[0]
                    if isinstance(d, int) and d > _LONGEST_PROPAGATED:
                        return f"%{v.name} ({d} elements, read by {n.describe()})"
    return None


def _windowable(model: Model, nodes: list) -> bool:
    """Windows need a flat main graph in topological order and nothing called from elsewhere."""
    if model.functions or any(n._attrs and n.subgraphs() for n in nodes):
        return False
    seen = set()
    for n in nodes:
        for v in n.inputs:
            p = v.producer() if v is not None else None
            if p is not None and p not in seen:
                return False
        seen.add(n)
    return True


class _Windows:
    """Inference a window at a time, in node order.  A window ends at a cut that only
    floating-point values cross: ONNX's data propagation carries integer values (shapes, sizes,
    indices) from node to node, and a cut through such a chain would lose what it knows; float
    values carry only their types, which the next window gets as typed inputs."""

    def __init__(self, pass_: ShapeInference, graph: Graph, nodes: list, serializer: Serializer, header,
                 data_prop: bool, screening: bool) -> None:  # fmt: skip
        self.pass_, self.graph, self.nodes, self.serializer = pass_, graph, nodes, serializer
        self.data_prop, self.screening = data_prop, screening
        self.type_bytes: dict = {}
        self.header = header.SerializeToString()
        self.next_symbol = 0
        self._taken: set[str] | None = None
        self.pos = {n: i for i, n in enumerate(nodes)}

    @property
    def taken(self) -> set[str]:
        """Dim names in use, gathered the first time ONNX invents one."""
        if self._taken is None:
            self._taken = {d for v in self.graph.values() if isinstance(v.type, TensorType) and v.type.shape
                           for d in v.type.shape if isinstance(d, str)}  # fmt: skip
        return self._taken

    def last(self, o) -> int:
        """The position of the last node reading ``o`` (the graph's end for a graph output); asked
        only of the non-float values a cut must not cross, which are few."""
        if o.is_graph_output():
            return len(self.nodes)
        return max((self.pos[u] for u, _ in o.uses()), default=-1)

    def run(self) -> int:
        size, n, start, updated = self.pass_.window, len(self.nodes), 0, 0
        while start < n:
            # a window runs a little past its size, to find a cut: that part is inferred twice
            stop = n if n - start <= size * 1.25 else start + size + size // 16
            updated += self.infer(start, stop)
            if stop == n:
                break
            cut = self.cut(start, stop)
            if cut is None:  # integers cross every cut in reach: the rest goes in one piece
                updated += self.infer(start, n)
                break
            start = cut
        return updated

    def cut(self, start: int, stop: int) -> int | None:
        """The first position from ``start + window`` on that no non-float node output crosses."""
        crossing, ending = 0, {}
        for i in range(start, stop):
            crossing -= ending.pop(i, 0)
            for o in self.nodes[i].outputs:
                if o is not None and not _floating(o) and (last := self.last(o)) > i:
                    crossing += 1
                    ending[last] = ending.get(last, 0) + 1
            if i + 1 - start >= self.pass_.window and crossing == 0:
                return i + 1
        return None

    def infer(self, start: int, stop: int) -> int:
        window = self.nodes[start:stop]
        inside = {o for n in window for o in n.outputs if o is not None}
        ser, out = self.serializer, bytearray()
        inputs: dict = {}
        for n in window:
            for v in n.inputs:
                if v is not None and v not in inside and v not in inputs:
                    inputs[v] = None
        for v in inputs:
            constant = v.is_initializer() and not v.is_graph_input()
            if constant and _data_helps(v):
                tp = onnx.TensorProto()
                ser.write_tensor(v.const_value, ser.name(v), tp)
                out += _field(5, tp.SerializeToString())
            else:
                c = v.const_value if constant else None
                t = TensorType(c.dtype, tuple(c.shape)) if c is not None else v.type
                out += _field(11, self.typed_value(ser.name(v), t))
        for n in window:
            out += _field(1, ser.node_bytes(n))
            for o in n.outputs:
                if o is not None and o.type is not None:
                    out += _field(13, self.typed_value(ser.name(o), o.type))
        out += onnx.GraphProto(name=self.graph.name).SerializeToString()
        encoded = self.header + _field(7, bytes(out))
        del out
        symbols = _forget_invented if self.screening else self.rename_symbols()
        return self.pass_._infer(encoded, self.graph, self.serializer, [list(inside)], self.data_prop, symbols,
                                 flat=True)  # fmt: skip

    def typed_value(self, name: str, t) -> bytes:
        """An encoded ``ValueInfoProto``: the name and the type (each distinct type encoded once)."""
        encoded = self.type_bytes.get(t)
        if encoded is None:
            tp = onnx.TypeProto()
            if t is not None:
                type_to_proto(t, tp)
            encoded = self.type_bytes[t] = tp.SerializeToString()
        return _field(1, name.encode("utf-8")) + _field(2, encoded)

    def rename_symbols(self):
        """ONNX names the dims it cannot know ``unk__0``, ``unk__1``, ... afresh in every run; across
        windows those would claim that unrelated dims are equal, so each window's get new names."""
        fresh: dict[str, str] = {}

        def dim(d):
            if isinstance(d, str) and _INVENTED.fullmatch(d):
                if d not in fresh:
                    while f"unk__{self.next_symbol}" in self.taken:
                        self.next_symbol += 1
                    fresh[d] = f"unk__{self.next_symbol}"
                    self.taken.add(fresh[d])
                return fresh[d]
            return d

        renamed: dict = {}

        def rename(t):
            if t not in renamed:  # types are shared objects: each distinct one renamed once
                if isinstance(t, TensorType) and t.shape is not None and any(isinstance(d, str) for d in t.shape):
                    renamed[t] = TensorType(t.dtype, tuple(dim(d) for d in t.shape))
                else:
                    renamed[t] = t
            return renamed[t]

        return rename


_INVENTED = re.compile(r"unk__\d+")


def _forget_invented(t):
    if isinstance(t, TensorType) and t.shape is not None and any(isinstance(d, str) for d in t.shape):
        return TensorType(t.dtype, tuple(None if isinstance(d, str) and _INVENTED.fullmatch(d) else d
                                         for d in t.shape))  # fmt: skip
    return t


def _field(number: int, payload: bytes) -> bytes:
    return tag(number) + encode_varint(len(payload)) + payload


_READS_FLOAT_DATA = frozenset({"Resize", "Upsample", "Range"})
"""Ops whose shape inference reads floating-point input values (scales, range bounds)."""


def _data_helps(v) -> bool:
    """Whether ONNX's data propagation could use this initializer's values: small integer tensors
    (shapes, axes, pads, sizes) and the small float inputs of the ops that read them."""
    c = v.const_value
    if c is None:
        return False
    if is_floating(c.dtype) and not any(n.op_type in _READS_FLOAT_DATA for n, _ in v.uses()):
        return False
    return nbytes(c) <= _INLINE_LIMIT


class _TypeCache:
    """Equal ``TypeProto``s (most values of a model share a handful of types) read once, and the
    resulting type objects shared."""

    def __init__(self) -> None:
        self._seen: dict[bytes, Type | None] = {}

    def read(self, tp: onnx.TypeProto) -> Type | None:
        key = tp.SerializeToString()
        if key not in self._seen:
            self._seen[key] = type_from_proto(tp)
        return self._seen[key]


def _inferred_types(gp: onnx.GraphProto) -> Iterator[tuple[str, onnx.TypeProto]]:
    for vi in (*gp.value_info, *gp.output, *gp.input):
        yield vi.name, vi.type
    for node in gp.node:
        for a in node.attribute:
            if a.HasField("g"):
                yield from _inferred_types(a.g)
            for sub in a.graphs:
                yield from _inferred_types(sub)


def merge_types(old: Type | None, new: Type | None) -> Type | None:
    """The more precise of two descriptions of one value; ``old`` wins every disagreement."""
    if new is None:
        return old
    if old is None:
        return new
    if not isinstance(old, TensorType) or not isinstance(new, TensorType) or old.dtype != new.dtype:
        return old
    if new.shape is None or (old.shape is not None and len(old.shape) != len(new.shape)):
        return old
    if old.shape is None:
        return new
    dims = tuple(_merge_dim(a, b) for a, b in zip(old.shape, new.shape, strict=True))
    return old if dims == old.shape else TensorType(old.dtype, dims)


def _merge_dim(old, new):
    if isinstance(old, int):
        return old
    if isinstance(new, int):
        return new
    return old if old is not None else new
