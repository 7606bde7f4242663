"""The arithmetic of windows, pads, slices and resizes, as ONNX defines it, for every backend.

A backend spells a Conv, a pool, a Slice or a Resize in its own ops, but the numbers those ops
are given (explicit pads after ``auto_pad``, a transposed convolution's pads and output shape,
clamped slice bounds, interpolation weights) mean the same on every backend: they are computed
here once, from the node and the static shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..core_ir.node import Node


def clamp_slice(start: int, end: int, step: int, dim: int) -> tuple[int, int | None, int]:
    """ONNX's clamping of Slice bounds, as Python slice arguments."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return start, end, step
    start, end = min(max(start, -1), dim - 1), min(max(end, -1), dim - 1)
    return start, (None if end < 0 else end), step


Pads = list[tuple[int, int]]


def window(node: Node, spatial: Sequence[int], kernel: Sequence[int]) -> tuple[list[int], Pads, list[int]]:
    """Strides, explicit ``(low, high)`` pads and dilations of a Conv or pool over spatial dims
    ``spatial``, with ``auto_pad`` resolved."""
    n = len(kernel)
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for i in range(n):
            size = spatial[i]
            out = -(-size // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size, 0)
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads.append((lo, total - lo))
    elif auto == "VALID":
        pads = [(0, 0)] * n
    else:
        p = list(node.attr("pads") or [0] * (2 * n))
        pads = [(p[i], p[i + n]) for i in range(n)]
    return strides, pads, dilations


def ceil_pads(spatial: Sequence[int], pads: Pads, kernel: Sequence[int], strides: Sequence[int],
              dilations: Sequence[int]) -> Pads:
    """``pads`` with the high side grown so that a ``ceil_mode`` pool's last, partial window fits;
    a window that would start past the input and its low pad is dropped, as ONNX's reference does."""
    out_pads = []
    for i, size in enumerate(spatial):
        lo, hi = pads[i]
        padded = size + lo + hi
        eff = (kernel[i] - 1) * dilations[i] + 1
        out = -(-(padded - eff) // strides[i]) + 1
        if (out - 1) * strides[i] >= size + lo:
            out -= 1  # the last window must start inside the input or the low pad
        need = (out - 1) * strides[i] + eff - padded
        out_pads.append((lo, hi + max(need, 0)))
    return out_pads


def pool_counts(spatial: Sequence[int], declared: Pads, pads: Pads, kernel: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int], count_include_pad: bool) -> np.ndarray:
    """How many elements each AveragePool window divides by: the input's, plus the declared pads'
    with ``count_include_pad``, never the extra high pad of ``ceil_mode`` (``pads`` is the
    declared pads with that extra).  Known before anything runs, one factor a spatial dim."""
    total = np.ones((), np.int64)
    for i, size in enumerate(spatial):
        lo, hi = pads[i]
        eff = (kernel[i] - 1) * dilations[i] + 1
        out = (size + lo + hi - eff) // strides[i] + 1
        first, last = (0, size + declared[i][0] + declared[i][1]) if count_include_pad else (lo, lo + size)
        taps = np.arange(out)[:, None] * strides[i] + np.arange(kernel[i])[None, :] * dilations[i]
        counts = ((taps >= first) & (taps < last)).sum(axis=1)
        total = np.multiply.outer(total, counts)
    return total


def flat_pads(pads: Sequence[tuple[int, int]]) -> list[int]:
    """``(low, high)`` pairs as ONNX's flat list: every low first, then every high."""
    return [p[0] for p in pads] + [p[1] for p in pads]


def conv_transpose(node: Node, spatial: Sequence[int], kernel: Sequence[int]):
    """A ConvTranspose as the convolution every backend can run: a stride-1 convolution over the
    input dilated by the strides, with the kernel flipped and its channel axes swapped.

    Returns ``(strides, dilations, pads)``: ``strides`` dilate the input, ``dilations`` the
    kernel, and ``pads`` are the ``(low, high)`` pads of that convolution (negative where the
    transposed conv crops), with ``pads``, ``output_padding``, ``output_shape`` and ``auto_pad``
    resolved as ONNX says.
    """
    n = len(kernel)
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    out_pad = list(node.attr("output_padding") or [0] * n)
    auto = node.attr("auto_pad", "NOTSET")
    p = list(node.attr("pads") or [0] * (2 * n))
    want = node.attr("output_shape")
    if auto in ("SAME_UPPER", "SAME_LOWER") and want is None:
        want = [spatial[i] * strides[i] for i in range(n)]
    elif auto == "VALID":
        p = [0] * (2 * n)
    if want is not None:
        want = list(want)[-n:]
        total = [strides[i] * (spatial[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - want[i]
                 for i in range(n)]  # fmt: skip
        if auto == "SAME_UPPER":
            p = [t // 2 for t in total] + [t - t // 2 for t in total]
        else:  # SAME_LOWER and an explicit output_shape: the extra pad goes first
            p = [t - t // 2 for t in total] + [t // 2 for t in total]
    pads = [((kernel[i] - 1) * dilations[i] - p[i], (kernel[i] - 1) * dilations[i] - p[i + n] + out_pad[i])
            for i in range(n)]  # fmt: skip
    return strides, dilations, pads


def resize_check(node: Node) -> str | None:
    """Why a Resize cannot be lowered as per-axis weights, or ``None``."""
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        return f"keep_aspect_ratio_policy {node.attr('keep_aspect_ratio_policy')!r}"
    return None


_RESIZE_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}


def resize_weights(node: Node, n: int, given: tuple[str, np.ndarray], box, roi_dtype) -> tuple[np.ndarray, np.ndarray]:
    """Resize is separable: along each resized axis of length ``n`` the output is ``x @ W + b``.
    ``(W, b)`` are read off ONNX's reference kernel run on the identity and on zeros, so every mode
    and coordinate transformation means exactly what ONNX says; ``W`` has shape ``(n, m)``."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    attrs = {k: a.value for k, a in node.attributes.items() if k not in ("axes", "keep_aspect_ratio_policy")}
    key = (tuple(sorted((k, repr(v)) for k, v in attrs.items())), n, given[0], given[1].tobytes(),
           None if box is None else tuple(float(b) for b in box))  # fmt: skip
    if key in _RESIZE_CACHE:
        return _RESIZE_CACHE[key]
    roi = np.zeros(0, roi_dtype) if box is None else np.array([0, box[0], 1, box[1]], dtype=roi_dtype)
    inputs = ["x", "roi", "scales" if given[0] == "scales" else "", "sizes" if given[0] == "sizes" else ""]
    resize = helper.make_node("Resize", inputs, ["y"], **attrs)
    graph = helper.make_graph(
        [resize], "resize",
        [helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [n, n])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, None)],
        initializer=[onnx.numpy_helper.from_array(roi, "roi"), onnx.numpy_helper.from_array(given[1], given[0])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", max(onnx.defs.onnx_opset_version(), 19))])
    ref = ReferenceEvaluator(model)
    (zero,) = ref.run(None, {"x": np.zeros((n, n))})
    (unit,) = ref.run(None, {"x": np.eye(n)})
    weights, bias = unit - zero, zero[0]
    _RESIZE_CACHE[key] = (weights, bias)
    return weights, bias


def resize_axes(node: Node, shape: Sequence[int], roi, scales, sizes):
    """Each axis a Resize changes: ``(axis, n, m, given, box)`` with ``given`` the scales or sizes
    pair :func:`resize_weights` takes; axes it leaves as they are are skipped."""
    r = len(shape)
    axes = [a + r if a < 0 else a for a in (node.attr("axes") or range(r))]
    out = []
    for i, a in enumerate(axes):
        n = shape[a]
        box = None if roi is None else (roi[i], roi[len(axes) + i])
        if sizes is not None:
            m, given = int(sizes[i]), ("sizes", np.array([n, int(sizes[i])], np.int64))
        else:
            s = float(np.float32(scales[i]))
            m, given = int(s * n), ("scales", np.array([1.0, scales[i]], np.float32))
        if m == n and (given[0] == "sizes" or given[1][1] == 1) and (box is None or tuple(box) == (0, 1)):
            continue
        out.append((a, n, m, given, box))
    return out


__all__ = ["clamp_slice", "conv_transpose", "flat_pads", "resize_axes", "resize_check", "resize_weights", "window"]
