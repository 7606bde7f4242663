"""Just enough of the protobuf wire format to take a large message apart without decoding it.

A million-node ``GraphProto`` decoded in one piece lives in one protobuf arena next to the IR
built from it, which doubles peak memory.  Splitting the encoded bytes into runs of repeated
fields lets the loader decode a few thousand nodes at a time and drop each batch, and lets
tensors point into the file's bytes instead of holding a decoded message.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message (truncated, or not protobuf at all)."""


def encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field_number: int) -> bytes:
    """The key of a length-delimited field (wire type 2)."""
    return encode_varint(field_number << 3 | 2)


@dataclass
class Split:
    """One message's fields: ``runs[f]`` are byte ranges holding only whole entries of field ``f``
    (each short enough to decode as one batch), ``spans[f]`` the payload ranges of each entry as a
    flat ``[start, stop, start, stop, ...]`` array, and ``rest`` every other field, re-encoded in order."""

    runs: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    spans: dict[int, array] = field(default_factory=dict)
    rest: bytearray = field(default_factory=bytearray)


def split(buf: bytes, start: int, stop: int, fields: frozenset[int], batch: int = 4096) -> Split:
    """Split the message in ``buf[start:stop]``, pulling out the length-delimited ``fields``."""
    out = Split({f: [] for f in fields}, {f: array("q") for f in fields})
    pos = start
    run_field, run_start, run_count = -1, 0, 0
    while pos < stop:
        key_start = pos
        b = buf[pos]
        pos += 1
        if b < 0x80:
            key = b
        else:
            key, pos = _varint_tail(buf, pos, stop, b)
        number, wire_type = key >> 3, key & 7
        if wire_type == 2:
            b = buf[pos] if pos < stop else _truncated()
            pos += 1
            if b < 0x80:
                length = b
            else:
                length, pos = _varint_tail(buf, pos, stop, b)
            value_start, pos = pos, pos + length
        elif wire_type == 0:
            value_start = pos
            while True:
                if pos >= stop:
                    _truncated()
                pos += 1
                if buf[pos - 1] < 0x80:
                    break
        elif wire_type == 1:
            value_start, pos = pos, pos + 8
        elif wire_type == 5:
            value_start, pos = pos, pos + 4
        else:
            raise WireError(f"unsupported wire type {wire_type} (field {number})")
        if pos > stop or number == 0:
            _truncated()
        if number in fields and wire_type == 2:
            spans = out.spans[number]
            spans.append(value_start)
            spans.append(pos)
            if number == run_field and run_count < batch:
                run_count += 1
            else:
                if run_field != -1:
                    out.runs[run_field].append((run_start, key_start))
                run_field, run_start, run_count = number, key_start, 1
        else:
            if run_field != -1:
                out.runs[run_field].append((run_start, key_start))
                run_field = -1
            out.rest += buf[key_start:pos]
    if run_field != -1:
        out.runs[run_field].append((run_start, stop))
    return out


def _varint_tail(buf: bytes, pos: int, stop: int, first: int) -> tuple[int, int]:
    value, shift = first & 0x7F, 7
    while True:
        if pos >= stop or shift > 63:
            _truncated()
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _truncated():
    raise WireError("the message ends in the middle of a field")
