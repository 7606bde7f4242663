"""GridSample, DFT and Col2Im."""

from __future__ import annotations

import math

from ....core_ir.kernels import GRID_MODES, grid_sample
from ...table import static
from .common import _jnp, rule
from .shape import _ints


def _grid_sample_check(node):
    mode = GRID_MODES.get(node.attr("mode", "linear"))
    if mode is None:
        return f"mode={node.attr('mode')!r}"
    if node.attr("padding_mode", "zeros") not in ("zeros", "border", "reflection"):
        return f"padding_mode={node.attr('padding_mode')!r}"
    return None


@rule("GridSample", check=_grid_sample_check)
def _grid_sample(ctx, node, args):
    return [grid_sample(*args, mode=node.attr("mode", "linear"), padding_mode=node.attr("padding_mode", "zeros"),
                        align_corners=node.attr("align_corners", 0), xp=_jnp())]


def _dft_check(node):
    if node.attr("axis") is None and (len(node.inputs) < 3 or node.inputs[2] is None):
        return "DFT without an axis (its default differs between opsets 17 and 20)"
    return None


@rule("DFT", check=_dft_check)
def _dft(ctx, node, args):
    """ONNX's DFT on (real, imaginary) pairs, or ``[..., 1]`` reals, as ``jnp.fft`` on complex numbers
    of the input's precision."""
    jnp = _jnp()
    x = args[0]
    axis = node.attr("axis")
    if len(args) > 2 and args[2] is not None:
        axis = int(static(args[2], "DFT's axis"))
    axis %= x.ndim
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if len(args) > 1 and args[1] is not None:
        n = int(static(args[1], "DFT's length"))
    else:
        n = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    signal = x[..., 0] if x.shape[-1] == 1 else x[..., 0] + 1j * x[..., 1]
    if inverse and onesided:
        return [jnp.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)]
    y = jnp.fft.ifft(signal, n=n, axis=axis) if inverse else jnp.fft.fft(signal, n=n, axis=axis)
    if onesided:
        y = jnp.take(y, jnp.arange(n // 2 + 1), axis=axis)
    return [jnp.stack([y.real, y.imag], axis=-1).astype(x.dtype)]


@rule("Col2Im")
def _col2im(ctx, node, args):
    """Each block position's column added into the padded image at its strided, dilated offsets."""
    import itertools

    jnp = _jnp()
    x = args[0]
    image, block = _ints(args[1], "Col2Im's image shape"), _ints(args[2], "Col2Im's block shape")
    nd = len(image)
    dilations = list(node.attr("dilations") or [1] * nd)
    pads = list(node.attr("pads") or [0] * (2 * nd))
    strides = list(node.attr("strides") or [1] * nd)
    padded_size = [image[i] + pads[i] + pads[i + nd] for i in range(nd)]
    grid = [(padded_size[i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    n, per_block = x.shape[0], x.shape[1]
    channels = per_block // math.prod(block)
    cols = x.reshape(n, channels, *block, *grid)
    out = jnp.zeros((n, channels, *padded_size), x.dtype)
    whole = (slice(None), slice(None))
    for offset in itertools.product(*(range(b) for b in block)):
        spots = tuple(slice(o * d, o * d + (g - 1) * s + 1, s)
                      for o, d, g, s in zip(offset, dilations, grid, strides, strict=True))  # fmt: skip
        out = out.at[(*whole, *spots)].add(cols[(*whole, *offset)])
    return [out[(*whole, *(slice(pads[i], pads[i] + image[i]) for i in range(nd)))]]
