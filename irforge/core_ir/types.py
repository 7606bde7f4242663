"""Types of values: tensors (with symbolic shapes), sparse tensors, sequences, optionals and maps.

A dimension is an ``int`` (static), a ``str`` (symbolic, e.g. ``"batch"``) or ``None`` (unknown).
A shape is a tuple of dimensions, or ``None`` when even the rank is unknown.  Types are immutable
and compare by value, so passes can share them freely.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import DataType, short_name

Dim = int | str | None
Shape = tuple[Dim, ...] | None


@dataclass(frozen=True, slots=True)
class TensorType:
    """A dense tensor: element type and (possibly partial) shape."""

    dtype: DataType
    shape: Shape = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def is_static(self) -> bool:
        """True when every dimension is a known integer."""
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def __str__(self) -> str:
        return f"{short_name(self.dtype)}{format_shape(self.shape)}"


@dataclass(frozen=True, slots=True)
class SparseTensorType:
    dtype: DataType
    shape: Shape = None

    def __str__(self) -> str:
        return f"sparse<{short_name(self.dtype)}{format_shape(self.shape)}>"


@dataclass(frozen=True, slots=True)
class SequenceType:
    elem: Type | None

    def __str__(self) -> str:
        return f"seq<{format_type(self.elem)}>"


@dataclass(frozen=True, slots=True)
class OptionalType:
    elem: Type | None

    def __str__(self) -> str:
        return f"opt<{format_type(self.elem)}>"


@dataclass(frozen=True, slots=True)
class MapType:
    key: DataType
    value: Type | None

    def __str__(self) -> str:
        return f"map<{short_name(self.key)}, {format_type(self.value)}>"


Type = TensorType | SparseTensorType | SequenceType | OptionalType | MapType


def format_dim(d: Dim) -> str:
    if d is None:
        return "?"
    if isinstance(d, int):
        return str(d)
    if d.isidentifier():
        return d
    from .text_lexer import quote

    return quote(d)


def format_shape(shape: Shape) -> str:
    if shape is None:
        return "[*]"
    return "[" + ",".join(format_dim(d) for d in shape) + "]"


def format_type(t: Type | None) -> str:
    return "?" if t is None else str(t)
