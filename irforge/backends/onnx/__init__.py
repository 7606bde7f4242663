"""ONNX exporter: the IR back to a valid ONNX model, with external data when it must be."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnx

from ...core_ir.dtypes import DataType
from ...core_ir.errors import ExportError
from ...core_ir.model import Model
from ...core_ir.serde import Serializer, tensor_to_proto
from ...core_ir.tensors import ExternalTensor, ProtoTensor, TensorData, nbytes

PROTO_LIMIT = 2**31 - 1
"""Protobuf cannot serialize a message of 2 GiB or more: larger models need external data."""


def to_proto(model: Model) -> onnx.ModelProto:
    """An in-memory ``ModelProto`` with all data inline (for models under 2 GiB)."""
    mp = Serializer().model(model)
    if mp.ByteSize() > PROTO_LIMIT:
        raise ExportError("the model is over 2 GiB; save it to a file with external data instead")
    return mp


def to_bytes(model: Model) -> bytes:
    return to_proto(model).SerializeToString()


class _ExternalWriter:
    """Appends large tensors to one data file beside the model, aligned for memory mapping."""

    ALIGN = 4096

    def __init__(self, folder: str, location: str, threshold: int):
        self.path = os.path.join(folder, location)
        self.location, self.threshold = location, threshold
        self.file: Any = None
        self.offset = 0

    def __call__(self, t: TensorData, name: str, out: onnx.TensorProto) -> None:
        if t.dtype == DataType.STRING or nbytes(t) < self.threshold:
            tensor_to_proto(t, name, out)
            return
        raw = _raw_bytes(t)
        if self.file is None:
            self.file = open(self.path, "wb")  # noqa: SIM115 - closed in finish()
        pad = (-self.offset) % self.ALIGN
        if pad:
            self.file.write(b"\0" * pad)
            self.offset += pad
        self.file.write(raw)
        out.name = name
        out.data_type = int(t.dtype)
        out.dims.extend(t.shape)
        out.data_location = onnx.TensorProto.EXTERNAL
        for k, v in (("location", self.location), ("offset", str(self.offset)), ("length", str(len(raw)))):
            out.external_data.add(key=k, value=v)
        self.offset += len(raw)

    def finish(self) -> None:
        if self.file is not None:
            self.file.close()


def _raw_bytes(t: TensorData):
    if isinstance(t, ExternalTensor):
        return t.raw_bytes()
    if isinstance(t, ProtoTensor):
        proto = t.proto
        if proto.HasField("raw_data"):
            return proto.raw_data
    array = t.numpy()
    if array.dtype.itemsize * 8 == _bits(t.dtype):
        return np.ascontiguousarray(array).data
    tmp = onnx.TensorProto()
    tensor_to_proto(t, "", tmp)  # packs sub-byte types
    return tmp.raw_data


def _bits(dtype: int) -> int:
    from ...core_ir.dtypes import bit_width

    return bit_width(dtype)


def save(
    model: Model,
    path: str | os.PathLike,
    *,
    external_data: bool | None = None,
    location: str | None = None,
    size_threshold: int = 1024,
) -> None:
    """Write ``model`` to ``path``.

    ``external_data=None`` (default) writes one self-contained file unless the model would be
    over 2 GiB, in which case tensors of ``size_threshold`` bytes or more go to ``location``
    (default ``<file name>.data``) in the same folder.  Loaded external tensors are read and
    rewritten, so saving over the model's own data file is refused.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ExportError(f"{path}: folder {folder} does not exist")
    location = location or os.path.basename(path) + ".data"
    if external_data is None:
        external_data = _estimate_size(model) > PROTO_LIMIT - 64 * 2**20
    if external_data:
        target = os.path.realpath(os.path.join(folder, location))
        for v in _all_initializers(model):
            if isinstance(v, ExternalTensor) and os.path.realpath(v.path) == target:
                raise ExportError(f"{path}: would overwrite {location}, which the model still reads "
                                  "its weights from; save under another name")  # fmt: skip
        writer = _ExternalWriter(folder, location, size_threshold)
        try:
            parts = Serializer(writer).model_parts(model)
        finally:
            writer.finish()
    else:
        parts = Serializer().model_parts(model)
    if sum(len(p) for p in parts) > PROTO_LIMIT:
        raise ExportError(f"{path}: the model is over 2 GiB even with external data; lower size_threshold")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.writelines(parts)
    os.replace(tmp, path)


def _all_initializers(model: Model):
    for g in model.graph.all_graphs():
        for v in g._initializers.values():
            yield v.const_value


def _estimate_size(model: Model) -> int:
    total = 0
    for t in _all_initializers(model):
        try:
            total += nbytes(t)
        except Exception:  # sparse or exotic payloads: counted by their dense size below
            total += int(np.asarray(t.numpy()).nbytes)
    for n in model.graph.all_nodes():
        for a in n.attributes.values():
            if hasattr(a.value, "numpy") and hasattr(a.value, "dtype"):
                total += int(a.value.numpy().nbytes)
    return total
