"""Conversion between the IR and ONNX protobuf messages.

ONNX is the IR's op vocabulary, so this lives in the core: the interpreter needs it to hand
nodes to ONNX's reference kernels, the ONNX frontend and exporter wrap it with file handling.
Loading is lazy about payloads (``ProtoTensor`` / ``ExternalTensor``), and saving reuses a
loaded ``TensorProto`` instead of re-encoding it.  A model read from bytes is decoded in batches
(see :mod:`.wire`), so the decoded protobuf never sits whole next to the IR.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from sys import intern

import numpy as np
import onnx
import onnx.numpy_helper

from .attributes import Attr, AttrKind, SparseTensor
from .dtypes import DataType
from .errors import ExportError, LoadError
from .gcpause import paused_gc
from .graph import Graph
from .model import Function, Model
from .node import Node
from .tensors import ExternalTensor, ProtoTensor, TensorData
from .types import MapType, OptionalType, SequenceType, SparseTensorType, TensorType, Type
from .value import Value
from .wire import Split, WireError, encode_varint, split, tag

_EXTERNAL_KEYS = frozenset({"location", "offset", "length", "checksum", "basepath"})
"""The keys of a ``TensorProto.external_data`` entry the ONNX spec defines; any other is refused."""
_EXTERNAL = onnx.TensorProto.EXTERNAL
_DTYPES = {int(d): d for d in DataType}
_ATTR_KINDS = {int(k): k for k in AttrKind}
"""Enum members by number: a dict lookup, where calling the enum costs a microsecond per value."""
_EAGER_ELEMENTS = 16
"""Attribute tensors of up to this many elements are decoded while their message is at hand
(fill values, small constants): decoding them later would parse the message a second time."""


def _dtype(number: int) -> DataType:
    d = _DTYPES.get(number)
    if d is None:
        try:
            d = DataType(number)
        except ValueError:
            raise LoadError(f"data type {number} is not one ONNX defines; the file is damaged, or written by a "
                            "newer onnx than the one installed") from None  # fmt: skip
    return d


# ----------------------------------------------------------------------------------------------
# proto -> IR
# ----------------------------------------------------------------------------------------------


def type_from_proto(tp: onnx.TypeProto) -> Type | None:
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        t = tp.tensor_type
        if t.elem_type == 0:
            return None
        return TensorType(_dtype(t.elem_type), _shape(t) if t.HasField("shape") else None)
    if which == "sparse_tensor_type":
        t = tp.sparse_tensor_type
        return SparseTensorType(_dtype(t.elem_type), _shape(t) if t.HasField("shape") else None)
    if which == "sequence_type":
        return SequenceType(type_from_proto(tp.sequence_type.elem_type))
    if which == "optional_type":
        return OptionalType(type_from_proto(tp.optional_type.elem_type))
    if which == "map_type":
        return MapType(DataType(tp.map_type.key_type), type_from_proto(tp.map_type.value_type))
    return None


def _shape(t) -> tuple:
    dims = []
    for d in t.shape.dim:
        which = d.WhichOneof("value")
        dims.append(d.dim_value if which == "dim_value" else d.dim_param if which == "dim_param" else None)
    return tuple(dims)


class Deserializer:
    """Reads one model; ``base_dir`` anchors external data (``None``: external data refused)."""

    def __init__(self, base_dir: str | None, source: str = "model"):
        self.base_dir, self.source = base_dir, source
        self._types: dict[tuple, TensorType] = {}
        self._shapes: dict[tuple, tuple] = {}

    def tensor_type(self, dtype: DataType, shape: tuple) -> TensorType:
        """Types are immutable: equal ones are shared, which matters on million-node graphs."""
        key = (dtype, shape)
        t = self._types.get(key)
        if t is None:
            t = self._types[key] = TensorType(dtype, shape)
        return t

    def tensor(self, tp: onnx.TensorProto, owner: str, encoded: tuple[bytes, int, int] | None = None) -> TensorData:
        """``encoded`` is where ``tp`` sits in the model's bytes, when it was decoded from them."""
        if tp.data_location == _EXTERNAL:
            if self.base_dir is None:
                raise LoadError(
                    f"{self.source}: {owner} stores its data in an external file, but the model was "
                    "given as bytes; load it from its path so the data file can be found"
                )
            info = {e.key: e.value for e in tp.external_data}
            unknown = sorted(set(info) - _EXTERNAL_KEYS)
            if unknown:
                raise LoadError(
                    f"{self.source}: {owner} has external data keys the ONNX spec does not define "
                    f"({', '.join(map(repr, unknown))}); it allows {', '.join(sorted(_EXTERNAL_KEYS))}"
                )
            if "location" not in info:
                raise LoadError(f"{self.source}: {owner} has external data without a location")
            try:
                offset = int(info.get("offset", 0))
                length = int(info["length"]) if "length" in info else None
            except ValueError:
                raise LoadError(f"{self.source}: {owner} has a malformed external data offset/length") from None
            try:
                dtype = _dtype(tp.data_type)
            except ValueError:
                raise LoadError(f"{self.source}: {owner} has unknown element type {tp.data_type}") from None
            return ExternalTensor(self.base_dir, info["location"], offset, length, dtype,
                                  tuple(tp.dims), owner=f"{self.source}: {owner}")  # fmt: skip
        dtype = _DTYPES.get(tp.data_type)
        if dtype is None:
            raise LoadError(f"{self.source}: {owner} has unknown element type {tp.data_type}")
        shape = tuple(tp.dims)
        shape = self._shapes.setdefault(shape, shape)
        if encoded is not None:
            return ProtoTensor(*encoded, dtype, shape)
        data = tp.SerializeToString()
        tensor = ProtoTensor(data, 0, len(data), dtype, shape)
        if len(shape) <= 1 and (not shape or shape[0] <= _EAGER_ELEMENTS):
            with contextlib.suppress(Exception):  # malformed: its reader reports it, as for any tensor
                tensor.numpy()
        return tensor

    def sparse(self, sp: onnx.SparseTensorProto, owner: str) -> SparseTensor:
        return SparseTensor(self.tensor(sp.values, owner), self.tensor(sp.indices, owner), sp.dims)

    def attribute(self, ap: onnx.AttributeProto, scope: dict, owner: str) -> Attr:
        kind = (_ATTR_KINDS.get(ap.type) or AttrKind(ap.type)) if ap.type else _guess_kind(ap)
        if ap.ref_attr_name:
            return Attr(ap.name, kind, None, ref=ap.ref_attr_name, doc_string=ap.doc_string)
        k = AttrKind
        if kind == k.INTS:
            v = tuple(ap.ints)
        elif kind == k.FLOAT:
            v = ap.f
        elif kind == k.INT:
            v = ap.i
        elif kind == k.STRING:
            v = ap.s.decode("utf-8", "surrogateescape")
        elif kind == k.TENSOR:
            v = self.tensor(ap.t, f"attribute {ap.name} of {owner}")
        elif kind == k.GRAPH:
            v = self.graph(ap.g, scope)
        elif kind == k.SPARSE_TENSOR:
            v = self.sparse(ap.sparse_tensor, owner)
        elif kind == k.TYPE_PROTO:
            v = type_from_proto(ap.tp)
        elif kind == k.FLOATS:
            v = tuple(ap.floats)
        elif kind == k.STRINGS:
            v = tuple(s.decode("utf-8", "surrogateescape") for s in ap.strings)
        elif kind == k.TENSORS:
            v = tuple(self.tensor(t, owner) for t in ap.tensors)
        elif kind == k.GRAPHS:
            v = tuple(self.graph(g, scope) for g in ap.graphs)
        elif kind == k.SPARSE_TENSORS:
            v = tuple(self.sparse(s, owner) for s in ap.sparse_tensors)
        elif kind == k.TYPE_PROTOS:
            v = tuple(type_from_proto(t) for t in ap.type_protos)
        else:
            raise LoadError(f"{self.source}: attribute {ap.name} of {owner} has unknown kind {ap.type}")
        return Attr(ap.name, kind, v, doc_string=ap.doc_string)

    def graph(
        self,
        gp: onnx.GraphProto,
        parent_scope: dict | None = None,
        inputs: list[str] | None = None,
        batches: _Batches | None = None,
    ) -> Graph:
        """``inputs`` given (function bodies): plain input names instead of ValueInfoProtos.
        ``batches`` given: ``gp`` lacks its nodes, initializers and value infos, which come from it."""
        batches = batches or _Batches(gp)
        scope: dict[str, Value] = {}
        chain = _ChainScope(scope, parent_scope)
        g = Graph(name=gp.name)
        g.doc_string = gp.doc_string
        g.metadata = {p.key: p.value for p in gp.metadata_props}
        for vi in gp.input:
            v = _value_from_info(vi)
            if vi.name in scope:
                raise LoadError(f"{self.source}: graph {gp.name!r} lists input {vi.name!r} twice")
            scope[vi.name] = v
            g.append_input(v)
        for name in inputs or ():
            v = Value(name)
            scope[name] = v
            g.append_input(v)
        for tp, encoded in batches.initializers():
            payload = self.tensor(tp, f"initializer {tp.name!r}", encoded)
            self._add_initializer(g, scope, tp.name, payload)
        for sp in gp.sparse_initializer:
            self._add_initializer(g, scope, sp.values.name, self.sparse(sp, f"sparse initializer {sp.values.name!r}"))
        pending: dict[str, Value] = {}
        append = g.append
        for np_ in batches.nodes():
            ins = []
            for name in np_.input:
                if not name:
                    ins.append(None)
                    continue
                v = scope.get(name) or chain.outer(name) or pending.get(name)
                if v is None:
                    v = pending[name] = Value(name)
                ins.append(v)
            outs = []
            for name in np_.output:
                if not name:
                    outs.append(None)
                    continue
                # a name defined twice is kept as two values: the verifier reports it
                v = pending.pop(name, None) or Value(name)
                scope[name] = v
                outs.append(v)
            node = Node(intern(np_.op_type), ins, domain=intern(_norm_domain(np_.domain)), outputs=outs,
                        name=np_.name, overload=np_.overload)  # fmt: skip
            if np_.attribute:
                owner = f"node {np_.name or np_.op_type!r}"
                node._attrs = {ap.name: self.attribute(ap, chain.as_dict(), owner) for ap in np_.attribute}
            if np_.doc_string:
                node.doc_string = np_.doc_string
            if np_.metadata_props:
                node.metadata = {p.key: p.value for p in np_.metadata_props}
            append(node)
        # names still pending are defined nowhere: they stay dangling values, which the
        # verifier reports together with every other problem
        for vi in batches.value_infos():
            v = scope.get(vi.name)
            if v is not None and v.type is None:
                v.type = type_from_proto(vi.type)
                v.doc_string = vi.doc_string
        outs = []
        for vi in gp.output:
            v = scope.get(vi.name) or chain.outer(vi.name) or pending.get(vi.name)
            if v is None:
                v = Value(vi.name)  # defined nowhere: the verifier reports it
            t = type_from_proto(vi.type)
            if t is not None and v.type is None:
                v.type = t
            elif t is not None and v.type != t and v.producer() is not None:
                v.type = t  # the declared output type is the interface; it wins over value_info
            if vi.doc_string:
                v.doc_string = vi.doc_string
            if vi.metadata_props:
                v.metadata = {p.key: p.value for p in vi.metadata_props}
            outs.append(v)
        g.set_outputs(outs)
        return g

    def _add_initializer(self, g: Graph, scope: dict, name: str, payload: TensorData) -> None:
        v = scope.get(name)
        if v is None:
            v = Value(name, self.tensor_type(payload.dtype, tuple(payload.shape)))
            scope[name] = v
        elif v.const_value is not None:
            raise LoadError(f"{self.source}: graph {g.name!r} has two initializers named {name!r}")
        v.const_value = payload
        g.add_initializer(v)

    def function(self, fp: onnx.FunctionProto) -> Function:
        gp = onnx.GraphProto(name=fp.name, node=fp.node, doc_string=fp.doc_string)
        gp.output.extend(onnx.ValueInfoProto(name=o) for o in fp.output)
        gp.value_info.extend(fp.value_info)
        g = self.graph(gp, None, inputs=list(fp.input))
        g.opset_imports = {_norm_domain(o.domain): o.version for o in fp.opset_import}
        fn = Function(_norm_domain(fp.domain), fp.name, g, list(fp.attribute), overload=fp.overload,
                      doc_string=fp.doc_string)  # fmt: skip
        fn.metadata = {p.key: p.value for p in fp.metadata_props}
        for ap in fp.attribute_proto:
            fn.attributes.append(ap.name)
            fn.attribute_defaults[ap.name] = self.attribute(ap, {}, f"function {fp.name}")
        return fn

    def model(self, mp: onnx.ModelProto, graph: tuple[onnx.GraphProto, _Batches] | None = None) -> Model:
        """``graph`` given: ``mp`` lacks its graph, which comes in batches from there."""
        if graph is None:
            if not mp.HasField("graph"):
                raise LoadError(f"{self.source}: the model has no graph")
            m = Model(self.graph(mp.graph))
        else:
            m = Model(self.graph(graph[0], batches=graph[1]))
        m.opset_imports = {_norm_domain(o.domain): o.version for o in mp.opset_import}
        m.ir_version, m.producer_name, m.producer_version = mp.ir_version, mp.producer_name, mp.producer_version
        m.domain, m.model_version, m.doc_string = mp.domain, mp.model_version, mp.doc_string
        m.metadata = {p.key: p.value for p in mp.metadata_props}
        for fp in mp.functions:
            m.add_function(self.function(fp))
        return m


class _Batches:
    """The repeated fields of a graph, one decoded batch at a time.

    Over a whole ``GraphProto`` it just iterates its fields.  Over a :class:`~.wire.Split` of the
    encoded graph it decodes a few thousand entries at a time, so only one batch of protobuf
    objects is alive at once, and initializers remember where their bytes are."""

    def __init__(self, gp: onnx.GraphProto, buf: bytes | None = None, parts: Split | None = None):
        self.gp, self.buf, self.parts = gp, buf, parts

    def _decoded(self, field_number: int, field_name: str):
        view = memoryview(self.buf)
        for start, stop in self.parts.runs[field_number]:
            try:
                batch = onnx.GraphProto.FromString(view[start:stop])
            except Exception as e:  # DecodeError, or RuntimeError from upb
                raise WireError(f"a {field_name} entry does not decode ({e})") from None
            yield from getattr(batch, field_name)

    def nodes(self):
        return self.gp.node if self.parts is None else self._decoded(1, "node")

    def value_infos(self):
        return self.gp.value_info if self.parts is None else self._decoded(13, "value_info")

    def initializers(self):
        if self.parts is None:
            return ((tp, None) for tp in self.gp.initializer)
        spans, buf = self.parts.spans[5], self.buf
        return ((tp, (buf, spans[2 * i], spans[2 * i + 1])) for i, tp in enumerate(self._decoded(5, "initializer")))


_MODEL_GRAPH = 7
_GRAPH_BATCHED = frozenset({1, 5, 13})  # node, initializer, value_info


def model_from_bytes(data: bytes, base_dir: str | None = None, source: str = "model", check=None) -> Model:
    """Decode a serialized ``ModelProto`` batch by batch (peak memory: the bytes plus the IR).

    ``check(shell)`` sees the model's own fields (opset imports, ...) before the graph is read.
    Raises :class:`WireError` when the bytes are not a well-formed message."""
    top = split(data, 0, len(data), frozenset({_MODEL_GRAPH}))
    try:
        shell = onnx.ModelProto.FromString(bytes(top.rest))
    except Exception as e:
        raise WireError(f"the model's fields do not decode ({e})") from None
    spans = top.spans[_MODEL_GRAPH]
    if check is not None:
        check(shell, len(spans) > 0)
    if len(spans) != 2:  # no graph, or a graph given in several pieces (merged by protobuf)
        if len(spans) > 2:
            shell = onnx.ModelProto.FromString(data)
        return model_from_proto(shell, base_dir, source)
    parts = split(data, spans[0], spans[1], _GRAPH_BATCHED)
    try:
        graph_shell = onnx.GraphProto.FromString(bytes(parts.rest))
    except Exception as e:
        raise WireError(f"the graph's fields do not decode ({e})") from None
    with paused_gc():
        return Deserializer(base_dir, source).model(shell, (graph_shell, _Batches(graph_shell, data, parts)))


class _ChainScope:
    """Lookup through enclosing graphs' scopes, for subgraphs reading outer values."""

    def __init__(self, local: dict, parent: dict | None):
        self.local, self.parent = local, parent

    def outer(self, name: str) -> Value | None:
        return None if self.parent is None else self.parent.get(name)

    def as_dict(self) -> dict:
        if self.parent is None:
            return self.local
        return _Merged(self.local, self.parent)


class _Merged(dict):
    def __init__(self, local: dict, parent: dict):
        super().__init__()
        self.local, self.parent = local, parent

    def get(self, name, default=None):
        v = self.local.get(name)
        return v if v is not None else self.parent.get(name, default)


def _norm_domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


def _value_from_info(vi: onnx.ValueInfoProto) -> Value:
    v = Value(vi.name, type_from_proto(vi.type))
    v.doc_string = vi.doc_string
    if vi.metadata_props:
        v.metadata = {p.key: p.value for p in vi.metadata_props}
    return v


def _guess_kind(ap: onnx.AttributeProto) -> AttrKind:
    """Very old models leave ``AttributeProto.type`` unset; infer it from the filled field."""
    for field, kind in (("floats", AttrKind.FLOATS), ("ints", AttrKind.INTS), ("strings", AttrKind.STRINGS),
                        ("tensors", AttrKind.TENSORS), ("graphs", AttrKind.GRAPHS)):  # fmt: skip
        if len(getattr(ap, field)):
            return kind
    for field, kind in (("t", AttrKind.TENSOR), ("g", AttrKind.GRAPH)):
        if ap.HasField(field):
            return kind
    if ap.HasField("s"):
        return AttrKind.STRING
    if ap.HasField("f"):
        return AttrKind.FLOAT
    return AttrKind.INT


# ----------------------------------------------------------------------------------------------
# IR -> proto
# ----------------------------------------------------------------------------------------------

TensorWriter = Callable[[TensorData, str, onnx.TensorProto], None]


def type_to_proto(t: Type | None, tp: onnx.TypeProto) -> None:
    if t is None:
        return
    if isinstance(t, TensorType | SparseTensorType):
        tt = tp.tensor_type if isinstance(t, TensorType) else tp.sparse_tensor_type
        tt.elem_type = int(t.dtype)
        if t.shape is not None:
            shape = tt.shape
            shape.SetInParent()
            for d in t.shape:
                dim = shape.dim.add()
                if isinstance(d, int):
                    dim.dim_value = d
                elif d is not None:
                    dim.dim_param = d
    elif isinstance(t, SequenceType):
        tp.sequence_type.SetInParent()
        type_to_proto(t.elem, tp.sequence_type.elem_type)
    elif isinstance(t, OptionalType):
        tp.optional_type.SetInParent()
        type_to_proto(t.elem, tp.optional_type.elem_type)
    elif isinstance(t, MapType):
        tp.map_type.key_type = int(t.key)
        type_to_proto(t.value, tp.map_type.value_type)


def tensor_to_proto(t: TensorData, name: str, out: onnx.TensorProto) -> None:
    """Write ``t`` inline into ``out`` (re-using the loaded proto when there is one)."""
    if isinstance(t, ProtoTensor):
        out.ParseFromString(t.encoded())
        out.name = name
        return
    if isinstance(t, SparseTensor):
        raise ExportError(f"tensor {name!r}: a sparse tensor cannot be written as a dense proto")
    array = t.numpy()
    if t.dtype == DataType.STRING:
        out.CopyFrom(onnx.numpy_helper.from_array(np.asarray(array, dtype=object), name))
        return
    out.CopyFrom(onnx.numpy_helper.from_array(np.asarray(array, order="C"), name))
    if out.data_type != t.dtype:
        raise ExportError(f"tensor {name!r}: numpy dtype {array.dtype} does not encode {_dtype(t.dtype).name}")


class Serializer:
    """Writes IR to protos.  ``write_tensor`` decides inline vs external data for initializers."""

    def __init__(self, write_tensor: TensorWriter = tensor_to_proto, value_info: bool = True):
        self.write_tensor = write_tensor
        self.emit_value_info = value_info
        self._names: dict[Value, str] = {}
        self._taken: set[str] = set()
        self._unscanned: list[Graph] = []
        self._counter = 0

    def name(self, v: Value) -> str:
        if v.name is not None:
            return v.name
        n = self._names.get(v)
        if n is None:
            for g in self._unscanned:
                self._taken.update(u.name for gg in g.all_graphs() for u in gg.values() if u.name)
            self._unscanned.clear()
            while True:
                self._counter += 1
                n = f"_irforge_{self._counter}"
                if n not in self._taken:
                    break
            self._names[v] = n
        return n

    def reserve(self, g: Graph) -> None:
        """Keep the names of ``g`` out of the fresh ones.  The name set is built only when the
        first unnamed value needs a name: a loaded model has none, and its set of a million
        names would cost more memory than the bytes being written."""
        self._unscanned.append(g)

    def attribute(self, a: Attr, ap: onnx.AttributeProto) -> None:
        ap.name = a.name
        ap.type = int(a.kind)
        if a.doc_string:
            ap.doc_string = a.doc_string
        if a.ref is not None:
            ap.ref_attr_name = a.ref
            return
        k, v = AttrKind(a.kind), a.value
        if k == AttrKind.FLOAT:
            ap.f = v
        elif k == AttrKind.INT:
            ap.i = v
        elif k == AttrKind.STRING:
            ap.s = v.encode("utf-8", "surrogateescape")
        elif k == AttrKind.TENSOR:
            tensor_to_proto(v, "", ap.t)
        elif k == AttrKind.GRAPH:
            self.graph(v, ap.g)
        elif k == AttrKind.SPARSE_TENSOR:
            self.sparse(v, ap.sparse_tensor)
        elif k == AttrKind.TYPE_PROTO:
            type_to_proto(v, ap.tp)
        elif k == AttrKind.FLOATS:
            ap.floats.extend(v)
        elif k == AttrKind.INTS:
            ap.ints.extend(v)
        elif k == AttrKind.STRINGS:
            ap.strings.extend(s.encode("utf-8", "surrogateescape") for s in v)
        elif k == AttrKind.TENSORS:
            for t in v:
                tensor_to_proto(t, "", ap.tensors.add())
        elif k == AttrKind.GRAPHS:
            for g in v:
                self.graph(g, ap.graphs.add())
        elif k == AttrKind.SPARSE_TENSORS:
            for s in v:
                self.sparse(s, ap.sparse_tensors.add())
        elif k == AttrKind.TYPE_PROTOS:
            for t in v:
                type_to_proto(t, ap.type_protos.add())

    def sparse(self, s: SparseTensor, sp: onnx.SparseTensorProto, name: str = "") -> None:
        tensor_to_proto(s.values, name, sp.values)
        tensor_to_proto(s.indices, "", sp.indices)
        sp.dims.extend(s.dims)

    def node(self, n: Node, np_: onnx.NodeProto) -> None:
        name = self.name
        np_.op_type = n.op_type
        np_.input.extend(["" if v is None else name(v) for v in n._inputs])
        np_.output.extend(["" if v is None else name(v) for v in n._outputs])
        if n.name:
            np_.name = n.name
        if n.domain:
            np_.domain = n.domain
        if n.overload:
            np_.overload = n.overload
        if n.doc_string:
            np_.doc_string = n.doc_string
        if n.metadata:
            for k, val in n.metadata.items():
                np_.metadata_props.add(key=k, value=val)
        if n._attrs:
            for a in n._attrs.values():
                self.attribute(a, np_.attribute.add())

    def node_bytes(self, n: Node) -> bytes:
        """The encoded ``NodeProto`` of ``n``.  A node without attributes, doc string or metadata
        (most of a large graph) is encoded directly, without building a protobuf message."""
        if n._attrs or n.doc_string or n.metadata:
            np_ = onnx.NodeProto()
            self.node(n, np_)
            return np_.SerializeToString()
        name = self.name
        out = bytearray()
        for key, values in ((b"\x0a", n._inputs), (b"\x12", n._outputs)):
            for v in values:
                _append_string(out, key, b"" if v is None else name(v).encode("utf-8"))
        if n.name:
            _append_string(out, b"\x1a", n.name.encode("utf-8"))
        _append_string(out, b"\x22", n.op_type.encode("utf-8"))
        if n.domain:
            _append_string(out, b"\x3a", n.domain.encode("utf-8"))
        if n.overload:
            _append_string(out, b"\x42", n.overload.encode("utf-8"))
        return bytes(out)

    def value_info(self, v: Value, vi: onnx.ValueInfoProto) -> None:
        vi.name = self.name(v)
        type_to_proto(v.type, vi.type)
        if v.doc_string:
            vi.doc_string = v.doc_string
        if v.metadata:
            for k, val in v.metadata.items():
                vi.metadata_props.add(key=k, value=val)

    def _graph_fields(self, g: Graph, gp: onnx.GraphProto) -> None:
        """Name, doc string, metadata and inputs: what both graph writers share."""
        gp.name = g.name
        if g.doc_string:
            gp.doc_string = g.doc_string
        for k, val in g.metadata.items():
            gp.metadata_props.add(key=k, value=val)
        for v in g._inputs:
            self.value_info(v, gp.input.add())

    def graph(self, g: Graph, gp: onnx.GraphProto, function: bool = False) -> None:
        self._graph_fields(g, gp)
        for name, v in g._initializers.items():
            if isinstance(v.const_value, SparseTensor):
                self.sparse(v.const_value, gp.sparse_initializer.add(), name)
            else:
                self.write_tensor(v.const_value, name, gp.initializer.add())
        node_add = gp.node.add
        for n in g:
            self.node(n, node_add())
        for v in g._outputs:
            self.value_info(v, gp.output.add())
        if self.emit_value_info and not function:
            for o in _typed_intermediates(g):
                self.value_info(o, gp.value_info.add())

    def function(self, fn: Function, fp: onnx.FunctionProto) -> None:
        g = fn.graph
        fp.name, fp.domain = fn.name, fn.domain
        if fn.overload:
            fp.overload = fn.overload
        if fn.doc_string:
            fp.doc_string = fn.doc_string
        fp.input.extend(self.name(v) for v in g._inputs)
        fp.output.extend(self.name(v) for v in g._outputs)
        for a in fn.attributes:
            if a in fn.attribute_defaults:
                self.attribute(fn.attribute_defaults[a], fp.attribute_proto.add())
            else:
                fp.attribute.append(a)
        for domain, version in g.opset_imports.items():
            fp.opset_import.add(domain=domain, version=version)
        for v in g._initializers.values():  # a FunctionProto has no initializers: Constant nodes
            cp = fp.node.add(op_type="Constant", output=[self.name(v)])
            attr = cp.attribute.add(name="value", type=onnx.AttributeProto.TENSOR)
            tensor_to_proto(v.const_value, self.name(v), attr.t)
        for n in g:
            self.node(n, fp.node.add())
        for k, val in fn.metadata.items():
            fp.metadata_props.add(key=k, value=val)

    def graph_bytes(
        self, g: Graph, typed_only: Callable[[Value], bool] | None = None, omit_unused: bool = False
    ) -> list[bytearray]:
        """The encoded ``GraphProto`` of ``g`` in chunks, built one node at a time: no whole-graph
        proto is ever alive next to the IR, and chunks never copy on growth (the peak is the IR
        plus the bytes).  Initializers for which ``typed_only`` is true are written as typed graph
        inputs without their data (what shape inference needs of a weight); ``omit_unused`` leaves
        out initializers nothing reads (what folding leaves behind until dead code goes)."""
        out = _Chunks()
        shell = onnx.GraphProto()
        self._graph_fields(g, shell)
        for v in g._outputs:
            self.value_info(v, shell.output.add())
        for name, v in g._initializers.items():
            if omit_unused and not v._uses and v not in g._input_set and not v.is_graph_output():
                continue
            if typed_only is not None and typed_only(v):
                if v not in g._input_set:
                    c = v.const_value
                    type_to_proto(TensorType(c.dtype, tuple(c.shape)), shell.input.add(name=name).type)
                continue
            if isinstance(v.const_value, SparseTensor):
                self.sparse(v.const_value, shell.sparse_initializer.add(), name)
            else:
                tp = onnx.TensorProto()
                self.write_tensor(v.const_value, name, tp)
                _append_field(out, _GRAPH_INITIALIZER, tp.SerializeToString())
        for n in g:
            _append_field(out, _GRAPH_NODE, self.node_bytes(n))
        if self.emit_value_info:
            for o in _typed_intermediates(g):
                vi = onnx.ValueInfoProto()
                self.value_info(o, vi)
                _append_field(out, _GRAPH_VALUE_INFO, vi.SerializeToString())
        out.extend(shell.SerializeToString())
        return out.done()

    def model_parts(
        self, m: Model, typed_only: Callable[[Value], bool] | None = None, omit_unused: bool = False
    ) -> list[bytes | bytearray]:
        """The serialized ``ModelProto`` as pieces to write one after the other: every field but
        the graph, then the graph field (``typed_only``, ``omit_unused`` as for :meth:`graph_bytes`)."""
        mp = self.model(m, with_graph=False)
        graph = self.graph_bytes(m.graph, typed_only, omit_unused)
        size = sum(len(c) for c in graph)
        return [mp.SerializeToString() + tag(_MODEL_GRAPH) + encode_varint(size), *graph]

    def model(self, m: Model, with_graph: bool = True) -> onnx.ModelProto:
        mp = onnx.ModelProto()
        mp.ir_version = _ir_version(m)
        for field in ("producer_name", "producer_version", "domain", "doc_string"):
            if getattr(m, field):
                setattr(mp, field, getattr(m, field))
        if m.model_version:
            mp.model_version = m.model_version
        for domain, version in m.opset_imports.items():
            mp.opset_import.add(domain=domain, version=version)
        for k, val in m.metadata.items():
            mp.metadata_props.add(key=k, value=val)
        self.reserve(m.graph)
        for fn in m.functions.values():
            self.reserve(fn.graph)
        if with_graph:
            self.graph(m.graph, mp.graph)
        for fn in m.functions.values():
            self.function(fn, mp.functions.add())
        return mp


_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_VALUE_INFO = (tag(f) for f in (1, 5, 13))


def _typed_intermediates(g: Graph):
    """Node results with a known type that are not graph outputs: the graph's value infos."""
    outputs = set(g._outputs)
    for n in g:
        for o in n._outputs:
            if o is not None and o.type is not None and o not in outputs:
                yield o


class _Chunks:
    """An append-only byte buffer kept as ~1 MiB chunks, so growing it never copies what it holds."""

    SIZE = 1 << 20

    def __init__(self) -> None:
        self.chunks: list[bytearray] = []
        self.current = bytearray()

    def extend(self, data: bytes) -> None:
        self.current += data
        if len(self.current) >= self.SIZE:
            self.chunks.append(self.current)
            self.current = bytearray()

    def done(self) -> list[bytearray]:
        return [*self.chunks, self.current]


def _append_string(out: bytearray, key: bytes, data: bytes) -> None:
    out += key
    n = len(data)
    out += bytes((n,)) if n < 0x80 else encode_varint(n)
    out += data


def _append_field(out: _Chunks, key: bytes, payload: bytes) -> None:
    out.extend(key + encode_varint(len(payload)) + payload)


def _ir_version(m: Model) -> int:
    """The model's IR version, raised where its content needs more: the opsets it imports (after
    an upgrade on import) or initializers that are not graph inputs (IR 4 and later)."""
    opsets = [onnx.helper.make_opsetid(d, v) for d, v in m.opset_imports.items()]
    version = max(m.ir_version, onnx.helper.find_min_ir_version_for(opsets, ignore_unknown=True))
    if version < 4 and any(not v.is_graph_input() for v in m.graph.initializers.values()):
        version = 4
    return version


def model_to_proto(m: Model) -> onnx.ModelProto:
    """The whole model as one in-memory ``ModelProto`` with inline data (no file is written)."""
    return Serializer().model(m)


def model_from_proto(mp: onnx.ModelProto, base_dir: str | None = None, source: str = "model") -> Model:
    with paused_gc():
        return Deserializer(base_dir, source).model(mp)
