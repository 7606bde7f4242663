"""Tensor creation: full, zeros, empty, arange."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import to_numpy
from ....core_ir.value import Value
from .common import aten


@aten("full.default", "new_full.default")
def _full(cx, *args, dtype=None, layout=None, device=None, pin_memory=None, **kw):
    size, value = (args[0], args[1]) if len(args) == 2 else (args[1], args[2])
    return cx.emit_typed("Expand", cx.tensor(value), cx.int64s(list(size)))


@aten("full_like.default")
def _full_like(cx, x, value, **kw):
    return cx.emit_typed("Expand", cx.tensor(value), cx.emit("Shape", x))


@aten("zeros_like.default", "ones_like.default", "empty_like.default")
def _zeros_like(cx, x, **kw):
    value = 1 if "ones" in str(cx.fx.target) else 0
    return cx.emit_typed("Expand", cx.tensor(value), cx.emit("Shape", x))


@aten("empty.memory_format", "zeros.default", "ones.default", "new_zeros.default", "new_ones.default",
      "new_empty.default", "empty_strided.default", "new_empty_strided.default")  # fmt: skip
def _empty(cx, *args, **kw):
    size = args[1] if isinstance(args[0], Value) else args[0]
    value = 1 if "ones" in str(cx.fx.target) else 0
    return cx.emit_typed("Expand", cx.tensor(value), cx.int64s(list(size)))


@aten("fill.Scalar", "fill.Tensor")
def _fill(cx, x, value):
    return cx.emit_typed("Expand", cx.tensor(value), cx.emit("Shape", x))


@aten("scalar_tensor.default")
def _scalar_tensor(cx, value, **kw):
    return cx.emit_typed("Identity", cx.tensor(value))


@aten("arange.start_step", "arange.default", "arange.start")
def _arange(cx, *args, dtype=None, layout=None, device=None, pin_memory=None, **kw):
    start, end, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if all(not isinstance(a, Value) for a in (start, end, step)):
        import torch

        from .. import tensor_array

        arr = tensor_array(torch.arange(start, end, step, dtype=cx.val.dtype))
        return cx.emit_typed("Identity", cx.const(np.array(arr)))
    dt = cx.out_dtype
    return cx.emit_typed("Range", *(cx.emit("Reshape", cx.tensor(a, dt), cx.const(np.asarray([], np.int64)))
                                    if isinstance(a, Value) else cx.tensor(a, dt) for a in (start, end, step)))


@aten("empty_permuted.default")
def _empty_permuted(cx, size, physical_layout, **kw):
    dtype = to_numpy(cx.out_dtype)
    if not all(isinstance(s, int) for s in size):
        return cx.emit_typed("Expand", cx.const(np.zeros((), dtype)), cx.int64s(list(size)))
    return cx.emit_typed("Identity", cx.const(np.zeros(list(size), dtype)))
