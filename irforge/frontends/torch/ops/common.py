"""The table every converter registers into, and the helpers shared by the families."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import is_floating
from ....core_ir.value import Value

TABLE: dict = {}


INT64_MAX = 2**63 - 1


_NAMESPACES = ("operator.", "torch.", "torch_nn.", "higher_order.", "aten.")


def aten(*names: str):
    def register(fn):
        for n in names:
            TABLE[n if n.startswith(_NAMESPACES) else "aten." + n] = fn
        return fn

    return register


def _axis(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _shape_of(cx, v: Value) -> Value:
    return cx.emit("Shape", v)


def _dim_size(cx, v: Value, axis: int) -> Value:
    """The size of ``v`` along ``axis`` as a 1-element int64 tensor."""
    d = cx.shape(v)[axis] if v.type is not None and v.type.shape is not None else None
    if isinstance(d, int):
        return cx.const(np.asarray([d], np.int64))
    return cx.emit("Shape", v, start=axis, end=axis + 1 if axis != -1 else None) if axis != -1 else cx.emit(
        "Shape", v, start=-1)


def _special(fn):
    def convert(cx, x):
        x = cx.tensor(x)
        if not is_floating(x.type.dtype):  # integer inputs promote to the default float
            x = cx.cast(x, cx.out_dtype)
        return cx.emit_typed("Identity", fn(cx, x))

    return convert
