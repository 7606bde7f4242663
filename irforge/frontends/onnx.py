"""ONNX frontend: model files, bytes or ``ModelProto`` into the IR.

External data is mapped lazily and confined to the model's folder; models below the supported
opset range are upgraded on the IR where every step is a known-safe one (``onnx_upgrade``), and
with ONNX's version converter otherwise; the caller's proto is never modified.
"""

from __future__ import annotations

import os

import onnx
import onnx.version_converter
from google.protobuf.message import DecodeError

from ..core_ir.errors import LoadError
from ..core_ir.model import Model
from ..core_ir.serde import model_from_bytes, model_from_proto
from ..core_ir.wire import WireError
from .onnx_upgrade import upgrade as upgrade_in_ir

MIN_OPSET = 13
"""Models of the ONNX domain below this opset are converted up to it on import."""

Source = str | os.PathLike | bytes | onnx.ModelProto


def max_opset() -> int:
    return onnx.defs.onnx_opset_version()


def load(source: Source, *, upgrade: bool = True) -> Model:
    """Read a model from a path, serialized bytes or a ``ModelProto``.

    Raises :class:`LoadError` (or :class:`ExternalDataError`) naming the file and what is wrong.
    """
    if isinstance(source, onnx.ModelProto):
        proto = onnx.ModelProto()
        proto.CopyFrom(source)  # the caller's proto stays untouched and unshared
        return from_proto(proto, None, "<ModelProto>", upgrade=upgrade)
    if isinstance(source, bytes | bytearray | memoryview):
        return from_bytes(bytes(source), None, "<bytes>", upgrade=upgrade)
    path = os.fspath(source)
    if not os.path.exists(path):
        raise LoadError(f"{path}: no such file")
    if os.path.isdir(path):
        raise LoadError(f"{path}: is a folder, not an ONNX model file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise LoadError(f"{path}: cannot read: {e.strerror}") from None
    base_dir = os.path.dirname(os.path.abspath(path))
    return from_bytes(data, base_dir, path, upgrade=upgrade)


def from_bytes(data: bytes, base_dir: str | None, source: str = "<bytes>", *, upgrade: bool = True) -> Model:
    """Decode a serialized model in batches; old opsets take the whole-proto path to be converted."""
    if not data:
        raise LoadError(f"{source}: the file is empty")

    def check(shell: onnx.ModelProto, has_graph: bool) -> None:
        if not has_graph and not shell.opset_import:
            raise LoadError(f"{source}: not an ONNX model (no graph and no opset imports)")
        _check_not_newer(_onnx_opset(shell), source)

    try:
        model = model_from_bytes(data, base_dir, source, check)
    except (WireError, DecodeError) as e:
        raise _not_onnx(source, e) from None
    except (TypeError, AttributeError):  # protobuf hands a string field that is not UTF-8 over as bytes
        where = _not_utf8(data)
        if where is None:
            raise
        raise LoadError(f"{source}: {where} is not UTF-8 text, as ONNX strings must be; the file is damaged") from None
    if not _names_are_text(model):
        raise LoadError(f"{source}: {_not_utf8(data) or 'a name'} is not UTF-8 text, as ONNX strings must be; "
                        "the file is damaged")  # fmt: skip
    if _needs_upgrade(model, upgrade) and not upgrade_in_ir(model, MIN_OPSET):
        proto = _parse(data, source)  # a step the IR upgrade does not take: ONNX's converter does all
        return model_from_proto(_upgrade(proto, _onnx_opset(proto), source), base_dir, source)
    return model


def _names_are_text(model: Model) -> bool:
    """Every string the IR took from the file is a str: protobuf hands a proto2 string field
    that is not UTF-8 over as bytes, which would fail far from here (printing, hashing, saving).
    One pass over names and small fields; the loader's hot loop stays as it is."""

    def text(*items) -> bool:
        for item in items:
            if item.__class__ is bytes:
                return False
            if item.__class__ is dict and not all(k.__class__ is str and v.__class__ is not bytes
                                                  for k, v in item.items()):  # fmt: skip
                return False
        return True

    if not text(model.producer_name, model.producer_version, model.domain, model.doc_string, model.metadata,
                dict.fromkeys(model.opset_imports)):  # fmt: skip
        return False
    graphs = list(model.graph.all_graphs())
    for fn in model.functions.values():
        if not text(fn.domain, fn.name, fn.overload, fn.doc_string, fn.metadata, *fn.attributes):
            return False
        graphs += fn.graph.all_graphs()
    for g in graphs:
        if not text(g.name, g.doc_string, g.metadata) or any(v.name.__class__ is bytes for v in g.inputs):
            return False
        if any(v.name.__class__ is bytes for v in g.outputs) or any(k.__class__ is bytes for k in g.initializers):
            return False
        for n in g:  # op_type and domain were interned on load, which takes str only
            if n._name.__class__ is bytes or n._doc_string.__class__ is bytes or n._overload.__class__ is bytes:
                return False
            if (n._metadata and not text(n._metadata)) or (n._attrs and not text(dict.fromkeys(n._attrs))):
                return False
            for v in n._inputs:  # outputs are read as inputs, or are graph outputs; a name nothing
                if v is not None and v.name.__class__ is bytes:  # defines is a value of its own
                    return False
            for v in n._outputs:
                if v is not None and v.name.__class__ is bytes:
                    return False
    return True


def _not_utf8(data: bytes) -> str | None:
    """The path of the first string field that is not UTF-8 (``graph.node[3].name``), found by
    decoding the whole message: paid only when a load has already gone wrong."""
    try:
        root = onnx.ModelProto.FromString(data)
    except Exception:
        return None
    stack = [("model", root)]
    while stack:
        path, message = stack.pop()
        for field, value in message.ListFields():
            repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == 3
            items = value if repeated else [value]
            for i, item in enumerate(items):
                where = f"{path}.{field.name}" + (f"[{i}]" if repeated else "")
                if field.type == field.TYPE_STRING and isinstance(item, bytes):
                    return where
                if field.type == field.TYPE_MESSAGE:
                    stack.append((where, item))
    return None


def _needs_upgrade(model: Model, upgrade: bool) -> bool:
    version = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    return upgrade and version is not None and version < MIN_OPSET


def _not_onnx(source: str, e: Exception) -> LoadError:
    if "MaxDepth" in str(e):
        return LoadError(f"{source}: messages nest deeper than protobuf's decoding limit of 100 levels (each "
                         "If/Loop/Scan body takes three: its attribute, graph and node); the model cannot be "
                         "read by onnx or onnxruntime either")  # fmt: skip
    return LoadError(f"{source}: not a valid ONNX model (protobuf decoding failed: {e}); "
                     "the file may be truncated or not an ONNX file")  # fmt: skip


def _parse(data: bytes, source: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise _not_onnx(source, e) from None
    return proto


def _onnx_opset(proto: onnx.ModelProto) -> int | None:
    return next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)


def _check_not_newer(version: int | None, source: str) -> None:
    if version is not None and version > max_opset():
        raise LoadError(f"{source}: opset {version} is newer than this onnx package supports "
                        f"({max_opset()}); upgrade onnx")  # fmt: skip


def from_proto(
    proto: onnx.ModelProto, base_dir: str | None, source: str = "<ModelProto>", *, upgrade: bool = True
) -> Model:
    """Convert a proto this module owns (it may be upgraded in place) into a :class:`Model`."""
    version = _onnx_opset(proto)
    _check_not_newer(version, source)
    if not upgrade or version is None or version >= MIN_OPSET:
        return model_from_proto(proto, base_dir, source)
    model = model_from_proto(proto, base_dir, source)
    if upgrade_in_ir(model, MIN_OPSET):
        return model
    return model_from_proto(_upgrade(proto, version, source), base_dir, source)


def _scans(graph: onnx.GraphProto):
    for node in graph.node:
        if node.op_type == "Scan" and node.domain in ("", "ai.onnx"):
            yield node
        for a in node.attribute:
            for g in (a.g, *a.graphs) if a.HasField("g") else a.graphs:
                yield from _scans(g)


def _upgrade(proto: onnx.ModelProto, version: int, source: str) -> onnx.ModelProto:
    if version < 9 and next(_scans(proto.graph), None) is not None:
        raise LoadError(f"{source}: a Scan of opset {version} scans a batch axis that Scan of opset 9 on has "
                        "no place for; re-export the model at opset 9 or later, or load with upgrade=False")
    try:
        upgraded = onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # the converter raises bare RuntimeErrors/ValueErrors
        raise LoadError(f"{source}: cannot convert opset {version} to {MIN_OPSET}: {e}; "
                        "re-export the model at a newer opset or load with upgrade=False") from None  # fmt: skip
    if upgraded.ir_version < proto.ir_version:
        upgraded.ir_version = proto.ir_version
    return upgraded
