"""Complex tensors in the PyTorch frontend.

ONNX has complex dtypes but almost no op computes on them; its ``DFT`` works on real tensors whose
last axis holds (real, imaginary).  So a complex tensor of shape ``S`` is imported as a real one
of shape ``S + (2,)``: the layout of ``torch.view_as_real``, which makes ``view_as_real`` and
``view_as_complex`` free.  Complex parameters and buffers are stored in that layout too.

Only the converters in :data:`TABLE` know the layout, so an FX node that reads or makes a
complex tensor is looked up here and nowhere else: an op without an entry is reported as
unsupported "on complex numbers" rather than computed on the pairs as if they were reals.
Complex graph inputs and outputs are refused for the same reason (ONNX runtimes cannot feed
them); a module takes and returns ``view_as_real`` tensors instead.

The FFTs are ATen's three primitives (``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``), which every
``torch.fft`` function decomposes into.  Each transformed axis is one ``DFT`` node, applied in
pocketfft's order, and the normalization is one multiplication at the end.
"""

from __future__ import annotations

import math

import numpy as np

from ...core_ir.dtypes import DataType
from ...core_ir.types import TensorType
from ...core_ir.value import Value
from ..common import NotMapped
from ..lib import complex_pairs as pairs

TABLE: dict = {}
"""``aten.name.overload`` → converter for FX nodes that read or make a complex tensor."""



def complex_op(*names: str):
    def register(fn):
        for n in names:
            TABLE["aten." + n] = fn
        return fn

    return register


def is_complex(val) -> bool:
    """Whether an FX meta value (a fake tensor, or a list of them) holds a complex tensor."""
    if isinstance(val, (list, tuple)):
        return any(is_complex(v) for v in val)
    dtype = getattr(val, "dtype", None)
    return bool(getattr(dtype, "is_complex", False))


def touches_complex(node) -> bool:
    """Whether FX ``node`` makes a complex tensor or reads one."""
    if is_complex(node.meta.get("val")):
        return True
    return any(is_complex(a.meta.get("val")) for a in node.all_input_nodes)


def _reads_complex(cx, index: int) -> bool:
    arg = cx.fx.args[index]
    return hasattr(arg, "meta") and is_complex(arg.meta.get("val"))


def _pair_type(cx) -> TensorType:
    """The IR type of the node's complex output: its real part's dtype, its shape plus ``(2,)``."""
    return TensorType(pairs.part_dtype(cx.out_dtype), (*cx.out_shape, 2))


def _typed(cx, v: Value) -> Value:
    v.type = _pair_type(cx) if is_complex(cx.val) else TensorType(cx.out_dtype, cx.out_shape)
    return v


def _axis(dim: int, complex_rank: int) -> int:
    """A torch dim of a complex tensor as an axis of its pair tensor (the pair axis is last)."""
    return dim + complex_rank if dim < 0 else dim


def _from_real(cx, x: Value) -> Value:
    """Real tensor ``x`` as a pair tensor of the output's part dtype."""
    return pairs.from_real(cx, x, _pair_type(cx).dtype)


# -- copies, views, conversions ------------------------------------------------------------------


@complex_op("_to_copy.default", "clone.default", "alias.default", "lift_fresh_copy.default", "detach.default",
            "contiguous.default", "_to_dim_order_copy.default", "alias_copy.default", "resolve_conj.default",
            "view_as_real.default", "view_as_complex.default", "view_as_real_copy.default",
            "view_as_complex_copy.default")  # fmt: skip
def _copy(cx, x, *args, **kwargs):
    """Copies and dtype changes; ``view_as_real`` / ``view_as_complex`` change nothing (the layouts agree)."""
    name = str(cx.fx.target)
    if "view_as_" in name:
        return _typed(cx, cx.emit("Identity", x))
    was, now = _reads_complex(cx, 0), is_complex(cx.val)
    if was and now:
        return _typed(cx, cx.cast(cx.emit("Identity", x), _pair_type(cx).dtype))
    if now:
        return _typed(cx, _from_real(cx, x))
    return _typed(cx, cx.cast(pairs.part(cx, x, 0), cx.out_dtype))  # complex → real keeps the real part, as torch does


@complex_op("_conj.default", "_conj_copy.default", "conj_physical.default")
def _conj(cx, x):
    return _typed(cx, pairs.conjugate(cx, x))


@complex_op("abs.default")
def _abs(cx, x):
    return _typed(cx, pairs.magnitude(cx, x))


@complex_op("slice.Tensor", "slice_copy.Tensor")
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    axis = _axis(dim, len(cx.out_shape))
    start = 0 if start is None else start
    end = 2**63 - 1 if end is None else end
    return _typed(cx, cx.emit("Slice", x, cx.int64s([start]), cx.int64s([end]),
                              cx.const(np.asarray([axis], np.int64)), cx.int64s([step])))  # fmt: skip


@complex_op("constant_pad_nd.default")
def _pad(cx, x, pad, value=0):
    if value != 0:
        raise NotMapped("padding a complex tensor with a value other than 0")
    rank = len(cx.out_shape) + 1
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):
        axis = rank - 2 - i
        begins[axis], ends[axis] = pad[2 * i], pad[2 * i + 1]
    return _typed(cx, cx.emit("Pad", x, cx.int64s(begins + ends)))


def _in_rank(cx, index: int = 0) -> int:
    """The torch rank of operand ``index`` (its pair tensor has one axis more)."""
    return len(cx.fx.args[index].meta["val"].shape)


def _ints(cx, items) -> Value:
    return cx.int64s([*items, 2])


@complex_op("permute.default", "permute_copy.default")
def _permute(cx, x, dims):
    rank = _in_rank(cx)
    return _typed(cx, cx.emit("Transpose", x, perm=[_axis(d, rank) for d in dims] + [rank]))


@complex_op("transpose.int", "transpose_copy.int")
def _transpose(cx, x, dim0, dim1):
    rank = _in_rank(cx)
    perm = list(range(rank + 1))
    a, b = _axis(dim0, rank), _axis(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return _typed(cx, cx.emit("Transpose", x, perm=perm))


@complex_op("view.default", "reshape.default", "_unsafe_view.default", "view_copy.default")
def _reshape(cx, x, shape):
    return _typed(cx, cx.emit("Reshape", x, _ints(cx, shape)))


@complex_op("unsqueeze.default", "unsqueeze_copy.default")
def _unsqueeze(cx, x, dim):
    axis = _axis(dim, len(cx.out_shape))
    return _typed(cx, cx.emit("Unsqueeze", x, cx.const(np.asarray([axis], np.int64))))


@complex_op("squeeze.dim", "squeeze.dims", "squeeze.default", "squeeze_copy.dim", "squeeze_copy.dims")
def _squeeze(cx, x, dims=None):
    shape, rank = cx.fx.args[0].meta["val"].shape, _in_rank(cx)
    dims = range(rank) if dims is None else [dims] if isinstance(dims, int) else dims
    axes = [a for a in (_axis(d, rank) for d in dims) if shape[a] == 1]
    if not axes:
        return _typed(cx, cx.emit("Identity", x))
    return _typed(cx, cx.emit("Squeeze", x, cx.const(np.asarray(axes, np.int64))))


@complex_op("select.int", "select_copy.int")
def _select(cx, x, dim, index):
    idx = cx.const(np.asarray(index, np.int64)) if isinstance(index, int) else cx.cast(index, DataType.INT64)
    return _typed(cx, cx.emit("Gather", x, idx, axis=_axis(dim, _in_rank(cx))))


@complex_op("expand.default", "expand_copy.default")
def _expand(cx, x, size, **kwargs):
    if not all(isinstance(d, int) for d in cx.out_shape):
        raise NotMapped("expanding a complex tensor to a symbolic size")
    return _typed(cx, cx.emit("Expand", x, _ints(cx, cx.out_shape)))


@complex_op("cat.default")
def _cat(cx, tensors, dim=0):
    parts = []
    for t, fx in zip(tensors, cx.fx.args[0], strict=True):
        parts.append(cx.cast(t, _pair_type(cx).dtype) if is_complex(fx.meta.get("val")) else _from_real(cx, t))
    return _typed(cx, cx.emit("Concat", *parts, axis=_axis(dim, len(cx.out_shape))))


@complex_op("flip.default")
def _flip(cx, x, dims):
    rank = _in_rank(cx)
    for d in dims:
        axis = _axis(d, rank)
        x = cx.emit("Slice", x, cx.int64s([-1]), cx.int64s([-(2**63)]), cx.int64s([axis]), cx.int64s([-1]))
    return _typed(cx, cx.emit("Identity", x))


# -- arithmetic ----------------------------------------------------------------------------------


def _operand(cx, index: int, v):
    """Operand ``index`` of an arithmetic node as a pair tensor of the output's part dtype."""
    part = _pair_type(cx).dtype
    if _reads_complex(cx, index):
        return cx.cast(v, part)
    if isinstance(v, complex):
        return cx.const(np.asarray([v.real, v.imag]), part)
    if isinstance(v, (int, float, bool)):
        return cx.const(np.asarray([v, 0]), part)
    return _from_real(cx, v)


@complex_op("add.Tensor", "sub.Tensor")
def _add(cx, a, b, alpha=1):
    if alpha != 1:
        raise NotMapped("complex add/sub with alpha")
    op = "Add" if "add" in str(cx.fx.target) else "Sub"
    return _typed(cx, cx.emit(op, _operand(cx, 0, a), _operand(cx, 1, b)))


@complex_op("mul.Tensor")
def _mul(cx, a, b):
    complex_a = _reads_complex(cx, 0) or isinstance(a, complex)
    complex_b = _reads_complex(cx, 1) or isinstance(b, complex)
    if not (complex_a and complex_b):  # by a real: both parts scaled
        z, r = (a, b) if complex_a else (b, a)
        part = _pair_type(cx).dtype
        if isinstance(r, Value):
            r = cx.emit("Unsqueeze", cx.cast(r, part), cx.const(np.asarray([-1], np.int64)))
        else:
            r = cx.const(np.asarray(r), part)
        return _typed(cx, cx.emit("Mul", cx.cast(z, part), r))
    return _typed(cx, pairs.multiply(cx, _operand(cx, 0, a), _operand(cx, 1, b)))


# -- FFT -----------------------------------------------------------------------------------------


def _normalize(cx, y: Value, normalization: int, n: int) -> Value:
    """ATen's ``fft_norm_mode``: 0 none, 1 by ``1/sqrt(n)``, 2 by ``1/n`` (``n`` the signal size)."""
    if normalization == 0:
        return y
    if normalization not in (1, 2):
        raise NotMapped(f"FFT normalization mode {normalization}")
    scale = 1 / math.sqrt(n) if normalization == 1 else 1 / n
    return cx.emit("Mul", y, cx.const(np.asarray(scale), cx.dtype(y)))


@complex_op("_fft_c2c.default")
def _fft_c2c(cx, x, dim, normalization, forward):
    rank = len(cx.out_shape)
    size = 1
    for d in dim:
        axis = _axis(d, rank)
        size *= pairs.static_size(cx, x, axis)
        x = pairs.dft(cx, x, axis, inverse=not forward)
    return _typed(cx, _normalize(cx, x, normalization, size))


@complex_op("_fft_r2c.default")
def _fft_r2c(cx, x, dim, normalization, onesided):
    rank = len(cx.out_shape)
    axes = [_axis(d, rank) for d in dim]
    size = math.prod(pairs.static_size(cx, x, a) for a in axes)
    if onesided:
        y = pairs.real_to_complex(cx, x, axes, _pair_type(cx).dtype)
    else:
        y = pairs.from_real(cx, x, _pair_type(cx).dtype)
        for axis in axes:
            y = pairs.dft(cx, y, axis)
    return _typed(cx, _normalize(cx, y, normalization, size))


@complex_op("_fft_c2r.default")
def _fft_c2r(cx, x, dim, normalization, last_dim_size):
    """Inverse transforms over ``dim``, the last from its half spectrum (:func:`pairs.complex_to_real`)."""
    rank = len(cx.out_shape)
    axes = [_axis(d, rank) for d in dim]
    size = int(last_dim_size) * math.prod(pairs.static_size(cx, x, a) for a in axes[:-1])
    y = pairs.complex_to_real(cx, x, axes, int(last_dim_size), scaled=False)
    return _typed(cx, _normalize(cx, y, normalization, size))
