"""Whether a constant's bytes can be what its dtype and shape say, checked as runtimes check it
(onnx.checker, onnxruntime) and without decoding the data: an encoded ``TensorProto`` is read
at the protobuf wire level, so a gigabyte of weights costs a scan of its field headers."""

from __future__ import annotations

import numpy as np

from .dtypes import DataType, bit_width
from .tensors import NumpyTensor, ProtoTensor, TensorData
from .wire import WireError, _varint_tail

INT64_MAX = 2**63 - 1

# TensorProto's typed data fields (field number -> how one entry is encoded on the wire)
_FIXED32, _FIXED64, _VARINT, _BYTES = "fixed32", "fixed64", "varint", "bytes"
_DATA_FIELDS = {4: _FIXED32, 5: _VARINT, 6: _BYTES, 7: _VARINT, 10: _FIXED64, 11: _VARINT}
_RAW_DATA, _DATA_LOCATION = 9, 14
_FIELD_NAMES = {4: "float_data", 5: "int32_data", 6: "string_data", 7: "int64_data", 9: "raw_data",
                10: "double_data", 11: "uint64_data"}  # fmt: skip


def shape_problem(shape: tuple[int, ...]) -> str | None:
    """A negative dim, or an element count past int64 (what no runtime can allocate or index)."""
    for d in shape:
        if d < 0:
            return f"has a negative dim {d} in its shape {list(shape)}"
    n = 1
    for d in shape:
        n *= d
    if n > INT64_MAX:
        return f"has shape {list(shape)}, whose {n:.3e} elements overflow int64"
    return None


def payload_problem(t: TensorData) -> str | None:
    """What is wrong with ``t`` (a sentence to put after its name), or None.  An encoded payload
    never changes, so its verdict is kept: the verifier runs after every pass."""
    if isinstance(t, ProtoTensor):
        if t._problem is False:
            t._problem = _encoded_problem(t)
        return t._problem
    if isinstance(t, NumpyTensor):
        return None  # an array's shape and data agree by construction
    return shape_problem(tuple(t.shape))  # external files: their length is checked on load


def _encoded_problem(t: ProtoTensor) -> str | None:
    problem = shape_problem(tuple(t.shape))
    if problem is not None:
        return problem
    n = 1
    for d in t.shape:
        n *= d
    try:
        counts, raw, external = _scan(t.encoded())
    except WireError as e:
        return f"is not a well-formed TensorProto ({e})"
    if external:
        return None
    if raw is not None:
        if t.dtype == DataType.STRING:
            return "is a string tensor with raw_data, which ONNX does not allow; strings go in string_data"
        want = (n * bit_width(t.dtype) + 7) // 8
        if raw != want:
            return f"has {raw} bytes of raw_data, but a {t.dtype.name}{list(t.shape)} tensor needs {want}"
        return None
    field, entries = max(counts.items(), key=lambda kv: kv[1]) if counts else (None, 0)
    want = _entries_needed(t.dtype, n)
    if entries != want:
        where = _FIELD_NAMES[field] if field is not None else "any data field"
        return f"has {entries} entries in {where}, but a {t.dtype.name}{list(t.shape)} tensor needs {want}"
    return None


def _entries_needed(dtype: DataType, n: int) -> int:
    if dtype in (DataType.COMPLEX64, DataType.COMPLEX128):
        return 2 * n
    bits = bit_width(dtype)
    return (n * bits + 7) // 8 if 0 < bits < 8 else n  # sub-byte types: one packed byte per entry


def _scan(buf: memoryview) -> tuple[dict[int, int], int | None, bool]:
    """Entries per typed data field, the length of raw_data (None when absent), and whether the
    data lives in an external file; field headers only."""
    counts: dict[int, int] = {}
    raw: int | None = None
    external = False
    pos, stop = 0, len(buf)
    while pos < stop:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            if field == _DATA_LOCATION:
                external = value == 1
            elif field in _DATA_FIELDS:
                counts[field] = counts.get(field, 0) + 1
        elif wire == 1:
            pos += 8
            if field in _DATA_FIELDS:
                counts[field] = counts.get(field, 0) + 1
        elif wire == 5:
            pos += 4
            if field in _DATA_FIELDS:
                counts[field] = counts.get(field, 0) + 1
        elif wire == 2:
            length, pos = _varint(buf, pos)
            end = pos + length
            kind = _DATA_FIELDS.get(field)
            if field == _RAW_DATA:
                raw = (raw or 0) + length
            elif kind == _BYTES:
                counts[field] = counts.get(field, 0) + 1
            elif kind == _FIXED32:
                counts[field] = counts.get(field, 0) + length // 4
            elif kind == _FIXED64:
                counts[field] = counts.get(field, 0) + length // 8
            elif kind == _VARINT:  # packed varints: one ends at each byte below 0x80
                ends = int(np.count_nonzero(np.frombuffer(buf[pos:end], np.uint8) < 0x80))
                counts[field] = counts.get(field, 0) + ends
            pos = end
        else:
            break  # groups (3, 4) are not in TensorProto; the decoder will say what is wrong
    return counts, raw, external


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    first = buf[pos]
    return (first, pos + 1) if first < 0x80 else _varint_tail(buf, pos + 1, len(buf), first)
