"""What every Relax rule module shares: the table, the element types, small helpers."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import DataType, is_floating
from ....ops.checks import scan_problem
from ...table import RuleTable, dtype_of, static

DTYPES = frozenset({
    DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16, DataType.BOOL, DataType.INT8, DataType.INT16,
    DataType.INT32, DataType.INT64, DataType.UINT8, DataType.UINT16, DataType.UINT32, DataType.UINT64,
})  # fmt: skip
"""Element types the TVM backend takes."""

def _control_flow_problem(node) -> str | None:
    if node.op_type == "If":  # reached only where the condition is not known up front
        return "If whose condition is computed at run time (Relax here inlines a branch known at compile time)"
    if node.op_type == "Scan":
        return scan_problem(node)
    return None


RULES = RuleTable("tvm", "Relax", DTYPES, native=("Constant", "If", "Scan"), native_check=_control_flow_problem)
rule = RULES.rule


def _op():
    from tvm import relax

    return relax.op


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _ints(x, what: str) -> list[int]:
    return [int(v) for v in static(x, what).reshape(-1)]


def _s(ctx, value, like):
    return ctx.scalar(value, like)


def _moments(op, x, axes):
    mean = op.mean(x, axes, True)
    centered = op.subtract(x, mean)
    return mean, op.mean(op.multiply(centered, centered), axes, True)


EMPTY_REDUCTION = {"Sum": 0.0, "Mean": float("nan"), "Max": float("-inf"), "Min": float("inf"), "Prod": 1.0,
                   "L1": 0.0, "L2": 0.0, "SumSquare": 0.0, "LogSum": float("-inf"), "LogSumExp": float("-inf")}
"""What ONNX's reductions give over an empty set."""


def empty_reduction(ctx, node, x, axes: list[int], kind: str):
    """The result of reducing ``x`` over ``axes`` where one of them is empty: the reduction's
    identity (ONNX's empty-set values), in the reduced shape."""
    dims = ctx.shape(x)
    keep = bool(node.attr("keepdims", 1))
    shape = [1 if a in axes else d for a, d in enumerate(dims)] if keep else [d for a, d in enumerate(dims)
                                                                               if a not in axes]  # fmt: skip
    dtype = ctx.dtype(x)
    value = EMPTY_REDUCTION[kind]
    if not dtype.startswith(("float", "bfloat")):  # integers: the type's extremes for Max and Min
        info = np.iinfo(np.dtype(dtype))
        value = {float("-inf"): info.min, float("inf"): info.max}.get(value, value)
        value = 0 if value != value else value  # an integer mean of nothing: 0, not NaN
    return np.full(shape, value, dtype=dtype)  # known when the module is built


def _float_only(node) -> str | None:
    dtype = dtype_of(node, 0)
    return None if dtype is None or is_floating(dtype) else f"{node.op_type} of {_dtype_name(dtype)}"


def _dtype_name(dtype) -> str:
    from ....core_ir.dtypes import short_name

    return short_name(dtype)
