"""Symbolic sizes and bookkeeping: sym_size, SymInt arithmetic, runtime asserts."""

from __future__ import annotations

import math
import operator

import numpy as np

from ....core_ir.dtypes import DataType
from ....core_ir.value import Value
from ...common import NotMapped
from .common import _axis, _dim_size, aten


@aten("sym_size.int")
def _sym_size(cx, x, dim):
    d = cx.shape(x)[_axis(dim, cx.rank(x))]
    if isinstance(d, int):
        return cx.const(np.asarray(d, np.int64))
    return cx.emit("Reshape", _dim_size(cx, x, _axis(dim, cx.rank(x))), cx.const(np.asarray([], np.int64)))


@aten("sym_stride.int")
def _sym_stride(cx, x, dim):
    """The stride of a contiguous tensor (what ``torch.export`` traces): the product of the later sizes."""
    axis = _axis(dim, cx.rank(x))
    later = cx.shape(x)[axis + 1:]
    if all(isinstance(d, int) for d in later):
        return cx.const(np.asarray(math.prod(later), np.int64))
    return cx.emit("ReduceProd", cx.emit("Shape", x, start=axis + 1), keepdims=0)


@aten("sym_is_contiguous.default")
def _sym_is_contiguous(cx, x, memory_format=None):
    """True: IR tensors have no strides, and ``torch.export`` traces contiguous inputs."""
    return cx.const(np.asarray(True))


@aten("sym_numel.default")
def _sym_numel(cx, x):
    return cx.emit("Size", x)


def _sym_binary(fn, onnx_op):
    def convert(cx, a, b):
        if not isinstance(a, Value) and not isinstance(b, Value):
            return fn(a, b)
        a = a if isinstance(a, Value) else cx.const(np.asarray(a, np.int64))
        b = b if isinstance(b, Value) else cx.const(np.asarray(b, np.int64))
        if onnx_op == "FloorDiv":
            q = cx.emit("Div", a, b)
            return _floor_adjust_int(cx, a, b, q)
        return cx.emit(onnx_op, a, b, **({"fmod": 0} if onnx_op == "Mod" else {}))

    return convert


def _floor_adjust_int(cx, a, b, q):
    r = cx.emit("Mod", a, b, fmod=1)
    zero = cx.const(np.asarray(0, np.int64))
    adjust = cx.emit("And", cx.emit("Not", cx.emit("Equal", r, zero)),
                     cx.emit("Xor", cx.emit("Less", a, zero), cx.emit("Less", b, zero)))  # fmt: skip
    return cx.emit("Sub", q, cx.emit("Cast", adjust, to=int(DataType.INT64)))


aten("operator.add")(_sym_binary(operator.add, "Add"))


aten("operator.sub")(_sym_binary(operator.sub, "Sub"))


aten("operator.mul")(_sym_binary(operator.mul, "Mul"))


aten("operator.floordiv")(_sym_binary(operator.floordiv, "FloorDiv"))


aten("operator.mod")(_sym_binary(operator.mod, "Mod"))


@aten("operator.getitem")
def _getitem(cx, seq, i):
    return seq[i]


@aten("_local_scalar_dense.default")
def _item(cx, x):
    """``t.item()``: a 0-d tensor (the size or index it becomes is data)."""
    return cx.emit("Reshape", x, cx.const(np.asarray([], np.int64)))


_CHECKS = frozenset({"aten._assert_scalar.default", "aten._assert_async.msg"})


@aten("sym_storage_offset.default")
def _storage_offset(cx, x):
    """A view's storage offset, which an export reads only to assert it is not negative: the
    check is dropped like every other, so the value is never needed.  Any other use is refused."""
    import operator

    from .. import op_name

    for user in cx.fx.users:
        checks = {op_name(u.target) for u in user.users}
        if user.target is not operator.ge or user.args[1] != 0 or not checks <= _CHECKS:
            raise NotMapped("a storage offset read for more than a non-negativity check")
    return cx.const(np.asarray(0, np.int64))


@aten("aten._assert_scalar.default", "aten.sym_constrain_range_for_size.default", "aten._assert_async.msg",
      "aten.sym_constrain_range.default", "aten._assert_tensor_metadata.default")  # fmt: skip
def _assertion(cx, *args, **kwargs):
    return None


def _sym_compare(fn, onnx_op):
    def convert(cx, a, b):
        if not isinstance(a, Value) and not isinstance(b, Value):
            return fn(a, b)
        a = a if isinstance(a, Value) else cx.const(np.asarray(a, np.int64))
        b = b if isinstance(b, Value) else cx.const(np.asarray(b, np.int64))
        return cx.emit(onnx_op, cx.cast(a, DataType.INT64), cx.cast(b, DataType.INT64))

    return convert


for _name, _fn, _op in (("ge", operator.ge, "GreaterOrEqual"), ("gt", operator.gt, "Greater"),
                        ("le", operator.le, "LessOrEqual"), ("lt", operator.lt, "Less"), ("eq", operator.eq, "Equal")):
    aten(f"operator.{_name}")(_sym_compare(_fn, _op))
