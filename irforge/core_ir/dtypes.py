"""Element types: every ONNX tensor dtype, with its short printed name and numpy equivalent.

The enum values equal ``onnx.TensorProto.DataType`` so conversion to and from ONNX is free.
"""

from __future__ import annotations

import contextlib
import enum
import functools

import numpy as np
import onnx
import onnx.helper

_SHORT_NAMES = {
    "FLOAT": "f32", "DOUBLE": "f64", "FLOAT16": "f16", "BFLOAT16": "bf16",
    "INT8": "i8", "INT16": "i16", "INT32": "i32", "INT64": "i64",
    "UINT8": "u8", "UINT16": "u16", "UINT32": "u32", "UINT64": "u64",
    "INT4": "i4", "UINT4": "u4", "INT2": "i2", "UINT2": "u2",
    "BOOL": "bool", "STRING": "str", "COMPLEX64": "c64", "COMPLEX128": "c128",
}  # fmt: skip

DataType = enum.IntEnum(  # type: ignore[misc]
    "DataType",
    {name: value for name, value in onnx.TensorProto.DataType.items() if name != "UNDEFINED"},
)
DataType.__doc__ = "An ONNX tensor element type (values equal onnx.TensorProto.DataType)."

TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
    "float32": (1e-4, 1e-6),
    "float64": (1e-9, 1e-12),
    "complex64": (1e-4, 1e-5),
    "complex128": (1e-9, 1e-12),
}
"""dtype name → (rtol, atol) for comparing a result before and after a rewrite; other dtypes
(integers, bool, strings) must match exactly."""

_SHORT: dict[int, str] = {}
_BY_SHORT: dict[str, DataType] = {}
for _dt in DataType:
    _short = _SHORT_NAMES.get(_dt.name, _dt.name.lower())
    _SHORT[_dt.value] = _short
    _BY_SHORT[_short] = _dt

_NP: dict[int, np.dtype] = {}
for _dt in DataType:
    with contextlib.suppress(KeyError, TypeError, ValueError):  # a dtype numpy cannot represent
        _NP[_dt.value] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(_dt.value))

_FROM_NP: dict[np.dtype, DataType] = {}
for _code, _npd in _NP.items():
    if _code != DataType.STRING:
        _FROM_NP.setdefault(_npd, DataType(_code))

_SUBBYTE_BITS = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2}
_SIXBIT = {"FLOAT6E2M3", "FLOAT6E3M2"}


def short_name(dtype: int) -> str:
    """The name the text format uses, e.g. ``f32``, ``bf16``, ``f8e4m3fn``."""
    return _SHORT[int(dtype)]


def from_short_name(name: str) -> DataType | None:
    """Inverse of :func:`short_name`; ``None`` if the name is not a dtype."""
    return _BY_SHORT.get(name)


def to_numpy(dtype: int) -> np.dtype:
    """The numpy dtype used for payloads of this element type (``object`` for strings)."""
    try:
        return _NP[int(dtype)]
    except KeyError:
        from .errors import IrforgeError

        raise IrforgeError(f"element type {DataType(dtype).name} has no numpy equivalent") from None


def from_numpy(dtype: np.dtype) -> DataType:
    """The element type of a numpy dtype (strings and bytes map to ``STRING``)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return DataType.STRING
    try:
        return _FROM_NP[dtype]
    except KeyError:
        from .errors import IrforgeError

        raise IrforgeError(f"numpy dtype {dtype} has no ONNX element type") from None


@functools.cache
def bit_width(dtype: int) -> int:
    """Bits per element as stored by ONNX (sub-byte types are packed); 0 for strings."""
    name = DataType(dtype).name
    if name in _SUBBYTE_BITS:
        return _SUBBYTE_BITS[name]
    if name in _SIXBIT:
        return 6
    if dtype == DataType.STRING:
        return 0
    return to_numpy(dtype).itemsize * 8


COMPUTE_FLOATS = frozenset({DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16, DataType.BFLOAT16})
"""The float types kernels compute in (the 8-, 6- and 4-bit floats are storage formats): what a
fusion or fold that rewrites arithmetic accepts."""


def is_floating(dtype: int) -> bool:
    return dtype in _FLOATING


_FLOATING = frozenset(int(d) for d in DataType if d.name.startswith(("FLOAT", "BFLOAT")) or d.name == "DOUBLE")
