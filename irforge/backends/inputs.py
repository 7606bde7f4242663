"""What a compiled model checks of each call's inputs before any engine sees them.

Engines disagree on bad inputs: onnxruntime and TVM raise their own tracebacks, XLA and the
reference interpreter cast an int64 array to float32 or broadcast a 16x16 image into a 32x32
model and answer anyway.  Every :class:`~irforge.backends.Executable` therefore checks the call
against the model's declared interface first — names, count, element type (no silent casts),
rank, static dims, and symbolic dims bound to one size across all inputs — and refuses a
mismatch with one :class:`InputError` line naming the input, what it expected and what it got.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core_ir.dimexpr import evaluate, is_dim_expr, symbols
from ..core_ir.dtypes import DataType, from_numpy, short_name, to_numpy
from ..core_ir.errors import IrforgeError
from ..core_ir.model import Model
from ..core_ir.types import TensorType, format_shape


class InputError(IrforgeError, ValueError):
    """A call's inputs do not match the model's interface; the message names the input."""


@dataclass(frozen=True)
class InputSpec:
    """One graph input a caller feeds: its name and declared type (``None``: not declared)."""

    name: str
    type: Any = None

    def __str__(self) -> str:
        return f"%{self.name}: {self.type if self.type is not None else '?'}"


def input_specs(model: Model) -> list[InputSpec]:
    """The inputs a caller of ``model`` feeds (initializers are not fed), in order."""
    return [InputSpec(v.name, v.type) for v in model.graph.inputs if not v.is_initializer()]


def _given(a: np.ndarray) -> str:
    try:
        name = short_name(from_numpy(a.dtype))
    except (KeyError, TypeError, ValueError):
        name = str(a.dtype)
    return f"{name}{format_shape(a.shape)}"


def _dtype_matches(given: np.dtype, want: DataType) -> bool:
    if want == DataType.STRING:
        return given.kind in "USO"
    return given == to_numpy(want)


def _as_array(value: Any, spec: InputSpec, backend: str, cast: bool) -> np.ndarray:
    """``value`` as an array of the declared element type.  A Python number or list has no type
    of its own and takes the declared one where numpy can do it without changing kind; an array
    of another type is refused unless ``cast`` asks for the conversion."""
    t = spec.type
    typed = hasattr(value, "dtype")
    a = np.asarray(value)
    if not isinstance(t, TensorType) or _dtype_matches(a.dtype, t.dtype):
        return a
    want = np.dtype(object) if t.dtype == DataType.STRING else to_numpy(t.dtype)
    if cast or (not typed and np.can_cast(a.dtype, want, casting="same_kind")):
        return a.astype(want)
    raise InputError(f"{backend}: input %{spec.name} expects {t}, given {_given(a)}: the element types differ "
                     f"(convert it with .astype(np.{want.name}), or call with cast=True)")  # fmt: skip


def check_inputs(
    specs: Sequence[InputSpec], values: Sequence[Any], backend: str, cast: bool = False
) -> list[np.ndarray]:
    """``values`` (one per spec, in order) as arrays, each checked against its spec."""
    arrays = [_as_array(v, s, backend, cast) for v, s in zip(values, specs, strict=True)]
    sizes: dict[str, tuple[int, str]] = {}  # symbolic dim -> (size, the input that fixed it)
    derived: list[tuple[InputSpec, np.ndarray, int, str]] = []
    for spec, a in zip(specs, arrays, strict=True):
        shape = getattr(spec.type, "shape", None)
        if not isinstance(spec.type, TensorType) or shape is None:
            continue
        if a.ndim != len(shape):
            raise InputError(f"{backend}: input %{spec.name} expects {spec.type} (rank {len(shape)}), "
                             f"given {_given(a)} (rank {a.ndim})")  # fmt: skip
        for axis, (want, got) in enumerate(zip(shape, a.shape, strict=True)):
            if isinstance(want, int):
                if want != got:
                    raise InputError(f"{backend}: input %{spec.name} expects {spec.type}, given {_given(a)}: "
                                     f"dim {axis} must be {want}")  # fmt: skip
            elif isinstance(want, str) and want.isidentifier():
                bound = sizes.setdefault(want, (got, spec.name))
                if bound[0] != got:
                    raise InputError(f"{backend}: input %{spec.name} expects {spec.type}, given {_given(a)}: "
                                     f"dim {axis} is {want!r}, which %{bound[1]} gave as {bound[0]}")  # fmt: skip
            elif isinstance(want, str) and is_dim_expr(want):
                derived.append((spec, a, axis, want))
    for spec, a, axis, want in derived:  # e.g. 2*batch: checkable once its names are bound
        if all(n in sizes for n in symbols(want)):
            size = evaluate(want, {n: s for n, (s, _) in sizes.items()})
            if a.shape[axis] != size:
                raise InputError(f"{backend}: input %{spec.name} expects {spec.type}, given {_given(a)}: "
                                 f"dim {axis} is {want} = {size} for the sizes the other dims were given")  # fmt: skip
    return arrays


__all__ = ["InputError", "InputSpec", "check_inputs", "input_specs"]
