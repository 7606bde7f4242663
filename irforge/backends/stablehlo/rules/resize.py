"""Resize, as per-axis weights read off ONNX's reference kernel (:mod:`irforge.ops.geometry`)."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import is_floating, short_name
from ....ops.geometry import resize_axes, resize_check, resize_weights
from ...table import NotStatic, dtype_of, static
from .common import _jnp, rule
from .nn import _precision

# --- Resize -----------------------------------------------------------------------------------


def _resize_check(node):
    why = resize_check(node)
    dtype = dtype_of(node, 0)
    if why is None and dtype is not None and not is_floating(dtype) and node.attr("mode", "nearest") != "nearest":
        why = f"{node.attr('mode')} interpolation of {short_name(dtype)} data"
    return why


@rule("Resize", check=_resize_check)
def _resize(ctx, node, args):
    """Resize is separable: along each resized axis the output is ``W @ x + b`` for a matrix ``W``
    and a bias ``b`` (``extrapolation_value`` outside a ``tf_crop_and_resize`` box).  ``W`` and
    ``b`` are read off ONNX's reference kernel, run on the identity and on zeros of that axis, so
    every mode and coordinate transformation means exactly what ONNX says."""
    jnp = _jnp()
    x = args[0]
    roi = static(args[1], "Resize's roi") if len(args) > 1 and args[1] is not None and args[1].size else None
    scales = static(args[2], "Resize's scales") if len(args) > 2 and args[2] is not None and args[2].size else None
    sizes = static(args[3], "Resize's sizes") if len(args) > 3 and args[3] is not None and args[3].size else None
    out = x
    for a, n, _m, given, box in resize_axes(node, x.shape, roi, scales, sizes):
        weights, bias = resize_weights(node, n, given, box, roi.dtype if roi is not None else np.float32)
        onehot = np.all((weights == 0) | (weights == 1)) and np.all(weights.sum(0) == 1) and not bias.any()
        moved = jnp.moveaxis(out, a, -1)
        if onehot:  # nearest: a gather, exact for every dtype
            moved = jnp.take(moved, np.argmax(weights, axis=0), axis=-1)
        elif jnp.issubdtype(out.dtype, jnp.floating):
            moved = jnp.matmul(moved, weights.astype(out.dtype), precision=_precision()) + bias.astype(out.dtype)
        else:
            raise NotStatic(f"{node.attr('mode', 'nearest')} interpolation of {out.dtype} data is not lowered")
        out = jnp.moveaxis(moved, -1, a)
    return [out]
