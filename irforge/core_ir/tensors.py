"""Constant payloads: tensors held in memory, in an ONNX proto, or in an external file.

Payloads are immutable and decoded lazily, so loading a model with gigabytes of weights costs
nothing until a pass or the interpreter reads a value, and saving it again can reuse the bytes
as they were read.
"""

from __future__ import annotations

import mmap
import os
import re
import stat
import sys
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np
import onnx
import onnx.numpy_helper

from .dtypes import DataType, bit_width, from_numpy, to_numpy
from .errors import ExternalDataError, LoadError


@runtime_checkable
class TensorData(Protocol):
    """What every payload offers: its element type, static shape and a numpy view."""

    @property
    def dtype(self) -> DataType: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    def numpy(self) -> np.ndarray: ...


def is_tensor_data(t: object) -> bool:
    """``isinstance(t, TensorData)`` without the cost of a runtime protocol check (tens of
    microseconds each, paid per constant by the passes)."""
    return t is not None and hasattr(t, "numpy") and hasattr(t, "shape") and hasattr(t, "dtype")


def peek(t: TensorData) -> np.ndarray:
    """``t.numpy()``, without caching a decoded copy where the payload would keep one."""
    return t.peek() if isinstance(t, ProtoTensor) else t.numpy()


def num_elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def filled_view(fill: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """A read-only array of shape ``dims`` whose every element is ``fill``'s one element, in no
    more memory than that element (what ``np.broadcast_to`` gives, at a quarter of its cost:
    folding makes one per placeholder weight)."""
    if fill.dtype == object or not fill.flags.c_contiguous:
        return np.broadcast_to(fill.reshape(()), dims)
    view = np.ndarray(dims, fill.dtype, fill, 0, (0,) * len(dims))
    view.flags.writeable = False
    return view


def nbytes(t: TensorData) -> int:
    """Size of the payload as ONNX stores it (sub-byte types packed); strings count their bytes."""
    if t.dtype == DataType.STRING:
        return int(sum(len(s) for s in t.numpy().ravel()))
    return (num_elements(t.shape) * bit_width(t.dtype) + 7) // 8


class NumpyTensor:
    """A payload that lives in a numpy array (made by passes, the builder or the parser)."""

    __slots__ = ("_array", "_dtype")

    def __init__(self, array: np.ndarray, dtype: DataType | None = None):
        array = np.asarray(array)
        if dtype is None:
            dtype = from_numpy(array.dtype)
        if dtype == DataType.STRING and array.dtype != object:
            array = np.vectorize(_to_bytes, otypes=[object])(array) if array.size else array.astype(object)
        self._array = array
        self._dtype = DataType(dtype)
        self._array.flags.writeable = False

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape  # numpy's dims are already Python ints

    def numpy(self) -> np.ndarray:
        return self._array

    def __repr__(self) -> str:
        return f"NumpyTensor({self._dtype.name}, {self.shape})"


def _to_bytes(s: object) -> bytes:
    return s if isinstance(s, bytes) else str(s).encode("utf-8")


_RAW_DTYPES = {
    int(k): np.dtype(v) for k, v in {
        DataType.FLOAT: np.float32, DataType.DOUBLE: np.float64, DataType.FLOAT16: np.float16,
        DataType.INT8: np.int8, DataType.INT16: np.int16, DataType.INT32: np.int32, DataType.INT64: np.int64,
        DataType.UINT8: np.uint8, DataType.UINT16: np.uint16, DataType.UINT32: np.uint32,
        DataType.UINT64: np.uint64, DataType.BOOL: np.bool_,
    }.items()
}  # fmt: skip
"""Element types whose little-endian ``raw_data`` numpy reads as it is."""


def _decode(proto: onnx.TensorProto, dtype: DataType, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """The tensor's values.  Raw little-endian data of a plain numeric type is read in place (a
    view of the proto's bytes, the common case for weights); everything else goes through ONNX's
    own converter.  ``shape`` is the proto's dims when the caller knows them already."""
    if proto.data_location != _EXTERNAL:
        if shape is None:
            shape = tuple(proto.dims)
        if proto.HasField("raw_data"):
            np_dtype = _RAW_DTYPES.get(dtype)
            if np_dtype is not None and _LITTLE_ENDIAN:
                raw = proto.raw_data
                if len(raw) == num_elements(shape) * np_dtype.itemsize:
                    return np.frombuffer(raw, dtype=np_dtype).reshape(shape)
        else:
            field = _TYPED_FIELDS.get(dtype)
            if field is not None:
                values = getattr(proto, field[0])
                if len(values) == num_elements(shape):  # shape constants, mostly: tiny and many
                    return np.fromiter(values, dtype=field[1], count=len(values)).reshape(shape)
    return onnx.numpy_helper.to_array(proto)


_EXTERNAL = onnx.TensorProto.EXTERNAL
_LITTLE_ENDIAN = sys.byteorder == "little"


_TYPED_FIELDS = {
    DataType.FLOAT: ("float_data", np.float32), DataType.DOUBLE: ("double_data", np.float64),
    DataType.INT32: ("int32_data", np.int32), DataType.INT64: ("int64_data", np.int64),
    DataType.UINT64: ("uint64_data", np.uint64),
}  # fmt: skip
"""Element types stored as themselves in a typed field of ``TensorProto`` (others are packed)."""


class ProtoTensor:
    """A payload still encoded as a ``TensorProto`` (usually a slice of the model file's bytes),
    decoded on first use.  Holding bytes rather than a decoded message lets the loader free each
    batch of decoded protos, and lets the exporter write an unchanged tensor back verbatim."""

    __slots__ = ("_array", "_buf", "_problem", "_start", "_stop", "dtype", "shape")

    def __init__(self, buf: bytes, start: int, stop: int, dtype: DataType, shape: tuple[int, ...]):
        self._buf, self._start, self._stop = buf, start, stop
        self.dtype, self.shape = dtype, shape
        self._array: np.ndarray | None = None
        self._problem: str | bool | None = False  # payload_check's verdict, once found (False: not yet)

    @classmethod
    def from_proto(cls, proto: onnx.TensorProto) -> ProtoTensor:
        data = proto.SerializeToString()
        return cls(data, 0, len(data), DataType(proto.data_type), tuple(proto.dims))

    def encoded(self) -> memoryview:
        """The serialized ``TensorProto`` (its name is the one it was loaded with)."""
        return memoryview(self._buf)[self._start : self._stop]

    @property
    def proto(self) -> onnx.TensorProto:
        """A freshly decoded copy: changing it does not change this payload."""
        return onnx.TensorProto.FromString(self.encoded())

    def peek(self) -> np.ndarray:
        """The values without keeping them decoded: one-pass readers (the printer) of a million
        small tensors would otherwise double the model's memory."""
        return self._array if self._array is not None else self._decoded()

    def numpy(self) -> np.ndarray:
        if self._array is None:
            array = self._decoded()
            array.flags.writeable = False
            self._array = array
        return self._array

    def _decoded(self) -> np.ndarray:
        try:
            return _decode(self.proto, self.dtype, self.shape)
        except (ValueError, TypeError) as e:  # data that does not fit its shape: say which, and how
            from .payload_check import payload_problem

            name = self.proto.name or "a constant"
            problem = payload_problem(self) or f"does not decode ({e})"
            raise LoadError(f"tensor {name!r} {problem}; `irforge verify` lists every such constant") from None

    def __repr__(self) -> str:
        return f"ProtoTensor({self.dtype.name}, {self.shape})"


class ExternalTensor:
    """A payload in a file beside the model, memory-mapped on first use and never copied eagerly.

    ``location`` is the path as written in the model (relative to the model's folder); the
    constructor refuses any location that escapes that folder, so a hostile model cannot read
    arbitrary files.
    """

    __slots__ = ("__dict__", "base_dir", "length", "location", "offset")

    def __init__(
        self,
        base_dir: str,
        location: str,
        offset: int,
        length: int | None,
        dtype: DataType,
        shape: tuple[int, ...],
        owner: str = "tensor",
    ):
        self.base_dir, self.location, self.offset, self.length = base_dir, location, offset, length
        self._dtype, self._shape = DataType(dtype), tuple(shape)
        self.path = resolve_external_path(base_dir, location, owner)
        expected = (num_elements(self._shape) * bit_width(self._dtype) + 7) // 8
        size = os.path.getsize(self.path)
        if length is None:
            self.length = expected
        if self._dtype != DataType.STRING and self.length != expected:
            raise ExternalDataError(
                f"{owner}: external data {location!r} has length {self.length} but a "
                f"{self._dtype.name}{list(self._shape)} tensor needs {expected} bytes"
            )
        if offset < 0 or offset + self.length > size:
            raise ExternalDataError(
                f"{owner}: external data {location!r} asks for bytes {offset}..{offset + self.length}"
                f" but the file has only {size} bytes; the data file is truncated or not this model's"
            )

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    def raw_bytes(self) -> memoryview:
        if self.length == 0:
            return memoryview(b"")
        return memoryview(self._mmap)[self.offset : self.offset + self.length]

    @cached_property
    def _mmap(self) -> mmap.mmap:
        with open(self.path, "rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    @cached_property
    def _array(self) -> np.ndarray:
        if bit_width(self._dtype) % 8 == 0 and self._dtype != DataType.STRING:
            array = np.frombuffer(self.raw_bytes(), dtype=to_numpy(self._dtype))
            return array.reshape(self._shape)
        proto = onnx.TensorProto(data_type=self._dtype, dims=self._shape)
        proto.raw_data = bytes(self.raw_bytes())
        array = onnx.numpy_helper.to_array(proto)
        array.flags.writeable = False
        return array

    def numpy(self) -> np.ndarray:
        return self._array

    def __repr__(self) -> str:
        return f"ExternalTensor({self._dtype.name}, {self._shape}, {self.location!r})"


_DRIVE = re.compile(r"^[A-Za-z]:")


def resolve_external_path(base_dir: str, location: str, owner: str = "tensor") -> str:
    """The real path of an external-data file, refusing anything outside ``base_dir``."""
    if not location:
        raise ExternalDataError(f"{owner}: external data has an empty location")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or _DRIVE.match(location):
        raise ExternalDataError(
            f"{owner}: external data location {location!r} is absolute; ONNX requires a path "
            "relative to the model's folder"
        )
    parts = location.replace("\\", "/").split("/")
    if ".." in parts:
        raise ExternalDataError(f"{owner}: external data location {location!r} leaves the model's folder ('..')")
    base = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(base, *parts))
    if os.path.commonpath([base, path]) != base:
        raise ExternalDataError(
            f"{owner}: external data location {location!r} resolves to {path}, outside the "
            f"model's folder {base} (a symbolic link points out of it)"
        )
    try:
        info = os.stat(path)
    except OSError:
        raise ExternalDataError(
            f"{owner}: external data file {location!r} not found in {base}; copy it next to the model"
        ) from None
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the reader forever; a device never ends
        raise ExternalDataError(f"{owner}: external data {location!r} is not a regular file (a FIFO, device or "
                                "socket); external data must be a plain file in the model's folder")  # fmt: skip
    if info.st_nlink > 1:
        raise ExternalDataError(f"{owner}: external data file {location!r} has {info.st_nlink} hard links, so "
                                "it may be a file from outside the model's folder; copy the data, do not link it")
    return path


def tensors_equal(a: TensorData, b: TensorData) -> bool:
    """Bitwise-meaningful equality: same dtype, shape and values (NaNs at the same places)."""
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return False
    x, y = a.numpy(), b.numpy()
    if x.dtype == object or y.dtype == object:
        return [_to_bytes(v) for v in x.ravel()] == [_to_bytes(v) for v in y.ravel()]
    return x.tobytes() == y.tobytes()
