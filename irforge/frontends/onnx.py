"""ONNX frontend: model files, bytes or ``ModelProto`` into the IR.

External data is mapped lazily and confined to the model's folder; models below the supported
opset range are upgraded with ONNX's version converter; the caller's proto is never modified.
"""

from __future__ import annotations

import os

import onnx
import onnx.version_converter
from google.protobuf.message import DecodeError

from ..core_ir.errors import LoadError
from ..core_ir.model import Model
from ..core_ir.serde import model_from_proto

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
        return from_proto(_parse(bytes(source), "<bytes>"), None, "<bytes>", upgrade=upgrade)
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
    return from_proto(_parse(data, path), base_dir, path, upgrade=upgrade)


def _parse(data: bytes, source: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    if not data:
        raise LoadError(f"{source}: the file is empty")
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise LoadError(f"{source}: not a valid ONNX model (protobuf decoding failed: {e}); "
                        "the file may be truncated or not an ONNX file") from None  # fmt: skip
    if not proto.HasField("graph") and not proto.opset_import:
        raise LoadError(f"{source}: not an ONNX model (no graph and no opset imports)")
    return proto


def from_proto(
    proto: onnx.ModelProto, base_dir: str | None, source: str = "<ModelProto>", *, upgrade: bool = True
) -> Model:
    """Convert a proto this module owns (it may be upgraded in place) into a :class:`Model`."""
    version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if version is not None and version > max_opset():
        raise LoadError(f"{source}: opset {version} is newer than this onnx package supports "
                        f"({max_opset()}); upgrade onnx")  # fmt: skip
    if upgrade and version is not None and version < MIN_OPSET:
        proto = _upgrade(proto, version, source)
    return model_from_proto(proto, base_dir, source)


def _upgrade(proto: onnx.ModelProto, version: int, source: str) -> onnx.ModelProto:
    try:
        upgraded = onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # the converter raises bare RuntimeErrors/ValueErrors
        raise LoadError(f"{source}: cannot convert opset {version} to {MIN_OPSET}: {e}; "
                        "re-export the model at a newer opset or load with upgrade=False") from None  # fmt: skip
    if upgraded.ir_version < proto.ir_version:
        upgraded.ir_version = proto.ir_version
    return upgraded
