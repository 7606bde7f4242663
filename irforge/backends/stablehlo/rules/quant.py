"""QuantizeLinear and DequantizeLinear on integer and float8 types."""

from __future__ import annotations

import numpy as np

from ...table import NotStatic
from .common import _axis, _jnp, _np_dtype, rule

# --- quantization (integer types) ---------------------------------------------------------------

_QUANT_RANGES = {np.dtype(t): (np.iinfo(t).min, np.iinfo(t).max)
                 for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32)}  # fmt: skip
_QUANT_ONNX = {3: np.int8, 2: np.uint8, 5: np.int16, 4: np.uint16, 6: np.int32}
_FLOAT8 = frozenset({17, 18, 19, 20})
"""ONNX's float8 types (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), which XLA has too."""


def _per_axis(value, x, node):
    """A scale or zero point broadcastable to ``x``: per tensor, per axis or per block."""
    jnp = _jnp()
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    axis = _axis(node.attr("axis", 1), x.ndim)
    block = node.attr("block_size", 0)
    if not block:
        return value.reshape([value.size if i == axis else 1 for i in range(x.ndim)])
    return jnp.repeat(value, block, axis=axis, total_repeat_length=value.shape[axis] * block)[
        tuple(slice(0, x.shape[axis]) if i == axis else slice(None) for i in range(x.ndim))
    ]


def _quant_check(node):
    if node.attr("precision") is not None:
        return "QuantizeLinear with a precision attribute"
    to = node.attr("output_dtype")
    if to and to not in _QUANT_ONNX and to not in _FLOAT8:
        return f"quantization to ONNX dtype {to}"
    return None


@rule("QuantizeLinear", check=_quant_check)
def _quantize(ctx, node, args):
    jnp = _jnp()
    x, scale = args[0], args[1]
    zp = args[2] if len(args) > 2 else None
    if zp is not None:
        dtype = np.dtype(zp.dtype)
    else:
        dtype = np.dtype(_QUANT_ONNX.get(node.attr("output_dtype") or 2, np.uint8))
    if dtype not in _QUANT_RANGES:
        if node.attr("output_dtype") not in _FLOAT8 and (zp is None or _onnx_dtype(dtype) not in _FLOAT8):
            raise NotStatic(f"quantization to {dtype} is not lowered")
        return [_to_float8(x / _per_axis(scale, x, node), dtype, bool(node.attr("saturate", 1)))]
    q = jnp.round(x / _per_axis(scale, x, node)).astype(np.int32)  # round half to even, as np.rint
    if zp is not None:
        q = q + _per_axis(zp, x, node).astype(np.int32)
    lo, hi = _QUANT_RANGES[dtype]
    return [jnp.clip(q, lo, hi).astype(dtype)]


def _dequant_check(node):
    to = node.attr("output_dtype")
    return None if not to or to in (1, 10, 16) else f"dequantization to ONNX dtype {to}"


@rule("DequantizeLinear", check=_dequant_check)
def _dequantize(ctx, node, args):
    x, scale = args[0], args[1]
    zp = args[2] if len(args) > 2 else None
    float8 = _onnx_dtype(x.dtype) in _FLOAT8
    if np.dtype(x.dtype) not in _QUANT_RANGES and not float8:
        raise NotStatic(f"dequantization of {x.dtype} is not lowered")
    dx = x.astype(np.float32)
    if zp is not None and not float8:  # a float8 zero point is 0 by definition
        dx = dx - _per_axis(zp, x, node).astype(np.float32)
    y = dx * _per_axis(scale, x, node)
    to = node.attr("output_dtype")
    return [y.astype(_np_dtype(to) if to else scale.dtype)]


def _onnx_dtype(dtype) -> int | None:
    from ....core_ir.dtypes import from_numpy

    try:
        return int(from_numpy(np.dtype(dtype)))
    except (KeyError, TypeError, ValueError):
        return None


def _to_float8(x, dtype, saturate: bool):
    """``x`` rounded to the nearest float8 (ties to even); with ``saturate``, values past the
    type's largest finite one (infinities too) become it, as ``onnx.numpy_helper.saturate_cast``
    does; NaN stays NaN."""
    jnp = _jnp()
    if saturate:
        top = float(jnp.finfo(dtype).max)
        x = jnp.where(jnp.isnan(x), x, jnp.clip(x, -top, top))
    return x.astype(dtype)
