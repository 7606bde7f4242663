"""The uses of each op Relax cannot take, refused before anything is lowered."""

from __future__ import annotations

from ....core_ir.dtypes import DataType, is_floating
from ....ops.checks import dropout_draws
from ....ops.geometry import resize_check
from ...table import constant_input, dtype_of, given, outputs_used, shape_of
from .common import RULES, _dtype_name

# --- the uses Relax cannot take, refused before anything is lowered ---------------------------------


def _static_dims(node, index: int) -> list | None:
    shape = shape_of(node, index)
    return None if shape is None else list(shape)


def _reduce_check(node) -> str | None:
    dtype = dtype_of(node, 0)
    if dtype == DataType.BOOL:
        return "a reduction of booleans"
    if node.op_type in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp") and (
            dtype is not None and not is_floating(dtype)):  # fmt: skip
        return f"{node.op_type} of {_dtype_name(dtype)}"
    return None


def _layer_norm_check(node) -> str | None:
    if outputs_used(node) > 1:
        return "LayerNormalization with a stash type other than float32" if node.attr("stash_type", 1) != 1 else None
    dims = _static_dims(node, 0)
    if dims is None:
        return None
    axis = node.attr("axis", -1)
    n_axes = len(dims) - (axis + len(dims) if axis < 0 else axis)
    for i in (1, 2):
        shape = _static_dims(node, i) if given(node, i) else None
        if shape is not None and len(shape) != n_axes:
            return "LayerNormalization whose scale or bias broadcasts"
    return None


def _batch_norm_check(node) -> str | None:
    if node.attr("training_mode", 0) or outputs_used(node) > 1:
        return "BatchNormalization in training mode"
    if any(constant_input(node, i) is None for i in range(1, 5)):
        return "BatchNormalization whose statistics are computed at run time"
    return None


def _spatial_rank(node) -> int | None:
    kernel = node.attr("kernel_shape")
    if kernel is not None:
        return len(kernel)
    w = _static_dims(node, 1)
    return None if w is None else len(w) - 2


def _conv_check(node) -> str | None:
    n = _spatial_rank(node)
    return f"{node.op_type} with {n} spatial dims" if n is not None and n not in (1, 2, 3) else None


def _pool_check(node) -> str | None:
    kernel = node.attr("kernel_shape") or ()
    if len(kernel) not in (1, 2, 3):
        return f"{node.op_type} over {len(kernel)} spatial dims"
    if node.op_type == "MaxPool" and outputs_used(node) > 1:
        return "MaxPool's Indices output"
    return None


def _topk_check(node) -> str | None:
    return "TopK of uint64" if dtype_of(node, 0) == DataType.UINT64 else None


def _rms_norm_check(node) -> str | None:
    if node.attr("stash_type", 1) != 1 or dtype_of(node, 0) not in (None, DataType.FLOAT):
        return "RMSNormalization other than float32"
    return None


def _resize_check(node) -> str | None:
    why = resize_check(node)
    dtype = dtype_of(node, 0)
    if why is None and dtype is not None and not is_floating(dtype):
        why = "Resize of non-float data"
    return why


def _grid_sample_check(node) -> str | None:
    dims, mode = _static_dims(node, 0), node.attr("mode", "linear")
    n = None if dims is None else len(dims) - 2
    cubic = mode in ("cubic", "bicubic")
    if mode not in ("linear", "bilinear", "nearest", "cubic", "bicubic") or n not in (None, 2, 3) or (n == 3 and cubic):
        return f"GridSample over {n} spatial dims with mode {mode!r}"
    return None


CHECKS = {
    "Dropout": dropout_draws,
    **{f"Reduce{k}": _reduce_check for k in ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "SumSquare",
                                             "LogSum", "LogSumExp")},
    "LayerNormalization": _layer_norm_check, "BatchNormalization": _batch_norm_check,
    "Conv": _conv_check, "ConvTranspose": _conv_check, "MaxPool": _pool_check, "AveragePool": _pool_check,
    "TopK": _topk_check, "GridSample": _grid_sample_check, "RMSNormalization": _rms_norm_check, "Resize": _resize_check,
}  # fmt: skip


def attach() -> None:
    """Give each rule its check (called once every family module has registered its rules)."""
    for op_type, check in CHECKS.items():
        RULES.set_check(op_type, check)
