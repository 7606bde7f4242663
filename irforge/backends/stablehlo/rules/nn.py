"""Softmax, products, convolutions, pools and normalizations."""

from __future__ import annotations

from ....ops.geometry import ceil_pads, conv_transpose, pool_counts, window
from ...table import Lowering, Rule
from .common import RULES, _axis, _jnp, _np_dtype, rule
from .elementwise import _c
from .shape import _static_shape

# --- neural-network ops -----------------------------------------------------------------------


def _softmax_family(kind: str) -> Rule:
    def fn(ctx, node, args):
        import jax

        jnp, x = _jnp(), args[0]
        axis = node.attr("axis", -1)
        if kind == "Softmax":
            return [jax.nn.softmax(x, axis=axis)]
        if kind == "LogSoftmax":
            return [jax.nn.log_softmax(x, axis=axis)]
        i = jnp.argmax(x, axis=axis, keepdims=True)
        return [(jnp.arange(x.shape[axis]).reshape([-1 if a == _axis(axis, x.ndim) else 1 for a in range(x.ndim)])
                 == i).astype(x.dtype)]  # fmt: skip

    return fn


for _op in ("Softmax", "LogSoftmax", "Hardmax"):
    RULES[_op] = Lowering(_softmax_family(_op))


def _precision():
    from jax import lax

    return lax.Precision.HIGHEST


@rule("MatMul")
def _matmul(ctx, node, args):
    return [_jnp().matmul(args[0], args[1], precision=_precision())]


@rule("Gemm")
def _gemm(ctx, node, args):
    jnp = _jnp()
    a, b = args[0], args[1]
    if node.attr("transA", 0):
        a = a.T
    if node.attr("transB", 0):
        b = b.T
    y = jnp.matmul(a, b, precision=_precision())
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        y = y * _c(y, alpha)
    if len(args) > 2 and args[2] is not None:
        y = y + (args[2] * _c(y, beta) if beta != 1.0 else args[2])
    return [y]


def _spatial(node, x, kernel: list[int]) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """Strides, explicit (low, high) pads and dilations of a Conv/pool, with ``auto_pad`` resolved."""
    return window(node, x.shape[2:], kernel)


@rule("Conv")
def _conv(ctx, node, args):
    from jax import lax

    x, w = args[0], args[1]
    kernel = list(node.attr("kernel_shape") or w.shape[2:])
    strides, pads, dilations = _spatial(node, x, kernel)
    n = len(kernel)
    group = node.attr("group", 1)
    if _depthwise(x, w, group, kernel):
        y = _depthwise_taps(x, w, strides, pads, dilations, kernel)
    else:
        spec = ("NC" + "DHW"[-n:] if n <= 3 else None, "OI" + "DHW"[-n:], "NC" + "DHW"[-n:])
        y = lax.conv_general_dilated(x, w, strides, pads, rhs_dilation=dilations, dimension_numbers=spec,
                                     feature_group_count=group, precision=_precision())  # fmt: skip
    if len(args) > 2 and args[2] is not None:
        y = y + args[2].reshape(-1, *([1] * n))
    return [y]


def _depthwise(x, w, group: int, kernel: list[int]) -> bool:
    """A depthwise 2-D conv with a small kernel: XLA's CPU convolution is slow on these."""
    return (len(kernel) == 2 and group > 1 and w.shape[0] == group and w.shape[1] == 1
            and _static_shape(x) and x.shape[1] == group and kernel[0] * kernel[1] <= 25)  # fmt: skip


def _depthwise_taps(x, w, strides, pads, dilations, kernel):
    """The depthwise conv as a sum over kernel taps of strided slices times per-channel weights:
    element-wise work XLA fuses into one loop."""
    from jax import lax

    jnp = _jnp()
    xp = jnp.pad(x, ((0, 0), (0, 0), *pads))
    n, c, h, wd = xp.shape
    out_h = (h - (kernel[0] - 1) * dilations[0] - 1) // strides[0] + 1
    out_w = (wd - (kernel[1] - 1) * dilations[1] - 1) // strides[1] + 1
    y = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            r0, c0 = i * dilations[0], j * dilations[1]
            end = (n, c, r0 + (out_h - 1) * strides[0] + 1, c0 + (out_w - 1) * strides[1] + 1)
            tap = lax.slice(xp, (0, 0, r0, c0), end, (1, 1, strides[0], strides[1]))
            term = tap * w[:, 0, i, j].reshape(1, c, 1, 1)
            y = term if y is None else y + term
    return y


def _conv_check(node):
    ks = node.attr("kernel_shape")
    if ks is not None and len(ks) > 3:
        return "more than 3 spatial dims"
    return None


RULES["Conv"] = Lowering(_conv, _conv_check)


@rule("ConvTranspose", check=lambda node: _conv_check(node))
def _conv_transpose(ctx, node, args):
    from jax import lax

    jnp = _jnp()
    x, w = args[0], args[1]
    n = x.ndim - 2
    group = node.attr("group", 1)
    kernel = list(node.attr("kernel_shape") or w.shape[2:])
    strides, dilations, pads = conv_transpose(node, x.shape[2:], kernel)
    # a transposed conv is a conv over the stride-dilated input with the flipped, swapped kernel
    cin, cout_g = w.shape[0], w.shape[1]
    wk = w.reshape(group, cin // group, cout_g, *w.shape[2:])
    wk = jnp.swapaxes(wk, 1, 2).reshape(group * cout_g, cin // group, *w.shape[2:])
    wk = jnp.flip(wk, axis=tuple(range(2, 2 + n)))
    spec = ("NC" + "DHW"[-n:], "OI" + "DHW"[-n:], "NC" + "DHW"[-n:])
    y = lax.conv_general_dilated(x, wk, [1] * n, pads, lhs_dilation=strides, rhs_dilation=dilations,
                                 dimension_numbers=spec, feature_group_count=group, precision=_precision())  # fmt: skip
    if len(args) > 2 and args[2] is not None:
        y = y + args[2].reshape(-1, *([1] * n))
    return [y]


def _pool_check(node):
    if node.attr("storage_order", 0):
        return "storage_order=1"
    return None


def _pool(kind: str) -> Rule:
    def fn(ctx, node, args):
        from jax import lax

        jnp, x = _jnp(), args[0]
        kernel = list(node.attr("kernel_shape"))
        strides, pads, dilations = _spatial(node, x, kernel)
        declared = pads
        if node.attr("ceil_mode", 0):
            pads = ceil_pads(x.shape[2:], pads, kernel, strides, dilations)
        window, wstrides = (1, 1, *kernel), (1, 1, *strides)
        wdil, wpads = (1, 1, *dilations), ((0, 0), (0, 0), *pads)
        if kind == "Max":
            init = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
            if len(node.outputs) > 1 and node.outputs[1] is not None:
                return _max_pool_with_indices(x, jnp.asarray(init, x.dtype), window, wstrides, wpads, wdil)
            y = lax.reduce_window(x, jnp.asarray(init, x.dtype), lax.max, window, wstrides, wpads, window_dilation=wdil)
            return [y]
        total = lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, window, wstrides, wpads, window_dilation=wdil)
        if kind == "Lp":
            pw = node.attr("p", 2)
            total = lax.reduce_window(jnp.abs(x) ** pw, jnp.zeros((), x.dtype), lax.add, window, wstrides, wpads,
                                      window_dilation=wdil)  # fmt: skip
            return [total ** (1.0 / pw)]
        count = pool_counts(x.shape[2:], declared, pads, kernel, strides, dilations,
                            bool(node.attr("count_include_pad", 0)))
        return [total / jnp.asarray(count, x.dtype)]

    return fn


def _max_pool_with_indices(x, init, window, strides, pads, dilations) -> list:
    """Each window's maximum and its position in the flattened input (ONNX's ``Indices``), as one
    reduction over (value, position) pairs ordered by value, NaN highest, then by the lower
    position: a total order, so the order XLA reduces in does not matter.  Padding holds the
    lowest value at a position past every real one, so it is never picked over an element."""
    from jax import lax

    jnp = _jnp()
    positions = jnp.arange(x.size, dtype=jnp.int64).reshape(x.shape)

    def pick(a, b):
        (av, ai), (bv, bi) = a, b
        a_nan, b_nan = jnp.isnan(av), jnp.isnan(bv)
        b_wins = (bv > av) | (b_nan & ~a_nan) | (((bv == av) | (a_nan & b_nan)) & (bi < ai))
        return jnp.where(b_wins, bv, av), jnp.where(b_wins, bi, ai)

    last = jnp.asarray(jnp.iinfo(jnp.int64).max, jnp.int64)
    y, where = lax.reduce_window((x, positions), (init, last), pick, window, strides, pads, window_dilation=dilations)
    return [y, where]


RULES["MaxPool"] = Lowering(_pool("Max"), _pool_check)
RULES["AveragePool"] = Lowering(_pool("Average"))
RULES["LpPool"] = Lowering(_pool("Lp"))


@rule("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(ctx, node, args):
    jnp, x = _jnp(), args[0]
    axes = tuple(range(2, x.ndim))
    if node.op_type == "GlobalAveragePool":
        return [jnp.mean(x, axis=axes, keepdims=True)]
    if node.op_type == "GlobalMaxPool":
        return [jnp.max(x, axis=axes, keepdims=True)]
    p = node.attr("p", 2)
    return [jnp.sum(jnp.abs(x) ** p, axis=axes, keepdims=True) ** (1.0 / p)]


def _bn_check(node):
    if node.attr("training_mode", 0) or len([o for o in node.outputs if o is not None]) > 1:
        return "training mode (running statistics outputs)"
    return None


@rule("BatchNormalization", check=_bn_check)
def _batch_norm(ctx, node, args):
    jnp = _jnp()
    x, scale, bias, mean, var = args
    shape = [-1] + [1] * (x.ndim - 2)
    inv = scale.reshape(shape) / jnp.sqrt(var.reshape(shape) + _c(var, node.attr("epsilon", 1e-5)))
    return [((x - mean.reshape(shape)) * inv + bias.reshape(shape)).astype(x.dtype)]


@rule("InstanceNormalization")
def _instance_norm(ctx, node, args):
    jnp = _jnp()
    x, scale, bias = args
    axes = tuple(range(2, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    shape = [-1] + [1] * (x.ndim - 2)
    y = (x - mean) / jnp.sqrt(var + _c(x, node.attr("epsilon", 1e-5)))
    return [y * scale.reshape(shape) + bias.reshape(shape)]


@rule("LayerNormalization")
def _layer_norm(ctx, node, args):
    jnp = _jnp()
    x, scale = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    axis = _axis(node.attr("axis", -1), x.ndim)
    stash = _np_dtype(node.attr("stash_type", 1))
    xs = x.astype(stash)
    axes = tuple(range(axis, x.ndim))
    mean = jnp.mean(xs, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(xs - mean), axis=axes, keepdims=True)
    inv = 1 / jnp.sqrt(var + jnp.asarray(node.attr("epsilon", 1e-5), stash))
    y = ((xs - mean) * inv).astype(x.dtype) * scale
    if bias is not None:
        y = y + bias
    return [y, mean, inv][: len(node.outputs)]


@rule("GroupNormalization")
def _group_norm(ctx, node, args):
    jnp = _jnp()
    x, scale, bias = args
    g = node.attr("num_groups")
    n, c = x.shape[:2]
    xs = x.astype(_np_dtype(node.attr("stash_type", 1)))
    xg = xs.reshape(n, g, -1)
    mean = jnp.mean(xg, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(xg - mean), axis=-1, keepdims=True)
    y = ((xg - mean) / jnp.sqrt(var + jnp.asarray(node.attr("epsilon", 1e-5), xs.dtype))).reshape(x.shape)
    shape = [1, c] + [1] * (x.ndim - 2)
    return [(y.astype(x.dtype) * scale.reshape(shape) + bias.reshape(shape))]


@rule("RMSNormalization")
def _rms_norm(ctx, node, args):
    jnp = _jnp()
    x, scale = args
    axis = _axis(node.attr("axis", -1), x.ndim)
    xs = x.astype(_np_dtype(node.attr("stash_type", 1)))
    ms = jnp.mean(jnp.square(xs), axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xs / jnp.sqrt(ms + jnp.asarray(node.attr("epsilon", 1e-5), xs.dtype))
    return [y.astype(x.dtype) * scale]


@rule("LpNormalization")
def _lp_norm(ctx, node, args):
    jnp, x = _jnp(), args[0]
    axis, p = node.attr("axis", -1), node.attr("p", 2)
    if p == 1:
        norm = jnp.sum(jnp.abs(x), axis=axis, keepdims=True)
    else:
        norm = jnp.sqrt(jnp.sum(x * x, axis=axis, keepdims=True))
    return [jnp.where(norm == 0, _c(x, 0), x / jnp.where(norm == 0, _c(x, 1), norm))]  # a zero vector stays zero


@rule("MeanVarianceNormalization")
def _mvn(ctx, node, args):
    jnp, x = _jnp(), args[0]
    axes = tuple(node.attr("axes") or (0, 2, 3))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x), axis=axes, keepdims=True) - mean * mean
    return [(x - mean) / (jnp.sqrt(var) + _c(x, 1e-9))]


@rule("LRN")
def _lrn(ctx, node, args):
    from jax import lax

    jnp, x = _jnp(), args[0]
    size = node.attr("size")
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = lax.reduce_window(x * x, jnp.zeros((), x.dtype), lax.add, (1, size) + (1,) * (x.ndim - 2),
                           (1,) * x.ndim, ((0, 0), (lo, hi)) + ((0, 0),) * (x.ndim - 2))  # fmt: skip
    return [x / (_c(x, bias) + _c(x, alpha / size) * sq) ** _c(x, beta)]
