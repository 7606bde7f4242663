"""How each ONNX op is spelled in Relax (``tvm.relax.op``).

A rule is ``fn(ctx, node, args) -> list of results``: ``args`` are Relax expressions, numpy
constants (values known at compile time) or ``None``; ``ctx.expr(x)`` turns a constant into a
``relax.const`` where an op needs an expression, ``ctx.shape(x)`` reads an expression's static
shape.  A rule refuses what it cannot express exactly by raising :class:`Refused`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...core_ir.node import Node
from ..stablehlo.rules import NotStatic, static

Rule = Callable[..., list]
RULES: dict[str, Rule] = {}


class Refused(NotStatic):
    """The op, with these attributes or dtypes, has no exact Relax spelling here."""


def rule(*ops: str):
    def register(fn: Rule) -> Rule:
        for op in ops:
            RULES[op] = fn
        return fn

    return register


def _op():
    from tvm import relax

    return relax.op


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _ints(x, what: str) -> list[int]:
    return [int(v) for v in static(x, what).reshape(-1)]


_UNARY = {
    "Relu": "nn.relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
    "Erf": "erf", "Abs": "abs", "Neg": "negative", "Floor": "floor", "Ceil": "ceil", "Sin": "sin", "Cos": "cos",
    "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh",
    "Acosh": "acosh", "Atanh": "atanh", "Not": "logical_not", "IsNaN": "isnan", "Sign": "sign", "Round": "round",
    "BitwiseNot": "bitwise_not",
}  # fmt: skip


def _resolve(path: str):
    obj = _op()
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


for _name, _path in _UNARY.items():
    RULES[_name] = lambda ctx, node, args, _path=_path: [_resolve(_path)(ctx.expr(args[0]))]


@rule("Identity", "Dropout")
def _identity(ctx, node, args):
    if node.op_type == "Dropout":
        if len(node.outputs) > 1 and node.outputs[1] is not None:
            raise Refused("Dropout's mask output")
        training = static(args[2], "Dropout's training_mode") if len(args) > 2 and args[2] is not None else None
        if training is not None and bool(training.reshape(-1)[0]):
            raise Refused("Dropout in training mode draws random numbers")
    return [ctx.expr(args[0])]


@rule("Reciprocal")
def _reciprocal(ctx, node, args):
    x = ctx.expr(args[0])
    return [_op().divide(ctx.scalar(1, x), x)]


_BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Equal": "equal", "Less": "less",
    "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal", "And": "logical_and",
    "Or": "logical_or", "Xor": "logical_xor", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
}  # fmt: skip

for _name, _path in _BINARY.items():
    RULES[_name] = lambda ctx, node, args, _path=_path: [_resolve(_path)(ctx.expr(args[0]), ctx.expr(args[1]))]


@rule("Pow")
def _pow(ctx, node, args):
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    if ctx.dtype(a) != ctx.dtype(b) or not ctx.dtype(a).startswith("float"):
        raise Refused("Pow of integers or of two different types")
    return [_op().power(a, b)]


@rule("Div")
def _div(ctx, node, args):
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    if not ctx.dtype(a).startswith(("float", "bfloat")):
        raise Refused("integer Div (ONNX truncates toward zero)")
    return [_op().divide(a, b)]


@rule("Max", "Min", "Sum", "Mean")
def _variadic(ctx, node, args):
    op = _op()
    step = {"Max": op.maximum, "Min": op.minimum, "Sum": op.add, "Mean": op.add}[node.op_type]
    out = ctx.expr(args[0])
    for a in args[1:]:
        out = step(out, ctx.expr(a))
    if node.op_type == "Mean":
        out = op.divide(out, ctx.scalar(len(args), out))
    return [out]


@rule("Where")
def _where(ctx, node, args):
    return [_op().where(*(ctx.expr(a) for a in args))]


@rule("Clip")
def _clip(ctx, node, args):
    op = _op()
    x = ctx.expr(args[0])
    if len(args) > 1 and args[1] is not None:
        x = op.maximum(x, ctx.expr(args[1]))
    if len(args) > 2 and args[2] is not None:
        x = op.minimum(x, ctx.expr(args[2]))
    return [x]


@rule("LeakyRelu")
def _leaky(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    return [op.where(op.greater_equal(x, ctx.scalar(0, x)), x, op.multiply(x, ctx.scalar(node.attr("alpha", 0.01), x)))]


@rule("Cast")
def _cast(ctx, node, args):
    from ...core_ir.dtypes import to_numpy

    x = ctx.expr(args[0])
    dtype = np.dtype(to_numpy(node.attr("to")))
    if dtype == np.bool_ or (ctx.dtype(x).startswith("float") and np.issubdtype(dtype, np.integer)):
        raise Refused("Cast to bool or from float to int (rounding differs)")
    return [_op().astype(x, str(dtype))]


# --- shapes -----------------------------------------------------------------------------------


@rule("Reshape")
def _reshape(ctx, node, args):
    x = ctx.expr(args[0])
    shape = _ints(args[1], "Reshape's shape")
    dims = ctx.shape(x)
    if node.attr("allowzero", 0) and 0 in shape:
        raise Refused("Reshape with allowzero")
    target = [dims[i] if d == 0 else d for i, d in enumerate(shape)]
    return [_op().reshape(x, target)]


@rule("Flatten")
def _flatten(ctx, node, args):
    x = ctx.expr(args[0])
    dims = ctx.shape(x)
    axis = _axis(node.attr("axis", 1), len(dims))
    lead = int(np.prod(dims[:axis])) if axis else 1
    return [_op().reshape(x, [lead, int(np.prod(dims[axis:]))])]


@rule("Transpose")
def _transpose(ctx, node, args):
    perm = node.attr("perm")
    return [_op().permute_dims(ctx.expr(args[0]), None if perm is None else list(perm))]


@rule("Concat")
def _concat(ctx, node, args):
    return [_op().concat([ctx.expr(a) for a in args if a is not None], axis=node.attr("axis"))]


@rule("Squeeze")
def _squeeze(ctx, node, args):
    x = ctx.expr(args[0])
    axes = _ints(args[1], "Squeeze's axes") if len(args) > 1 and args[1] is not None else node.attr("axes")
    return [_op().squeeze(x, None if axes is None else [_axis(a, len(ctx.shape(x))) for a in axes])]


@rule("Unsqueeze")
def _unsqueeze(ctx, node, args):
    x = ctx.expr(args[0])
    axes = _ints(args[1], "Unsqueeze's axes") if len(args) > 1 and args[1] is not None else list(node.attr("axes"))
    rank = len(ctx.shape(x)) + len(axes)
    for a in sorted(_axis(a, rank) for a in axes):
        x = _op().expand_dims(x, a)
    return [x]


@rule("Gather")
def _gather(ctx, node, args):
    x = ctx.expr(args[0])
    axis = _axis(node.attr("axis", 0), len(ctx.shape(x)))
    op, idx = _op(), args[1]
    if isinstance(idx, np.ndarray):
        idx = ctx.expr(np.where(idx < 0, idx + ctx.shape(x)[axis], idx).astype(np.int64))
    else:  # negative indices count from the end
        dim = _s(ctx, ctx.shape(x)[axis], idx)
        idx = op.where(op.less(idx, _s(ctx, 0, idx)), op.add(idx, dim), idx)
    return [op.take(x, idx, axis=axis, mode="clip")]  # out of range clips, as XLA does, never reads past


@rule("Slice")
def _slice(ctx, node, args):
    from ..stablehlo.rules import _clamp_slice

    x = ctx.expr(args[0])
    dims = ctx.shape(x)
    starts, ends = _ints(args[1], "Slice's starts"), _ints(args[2], "Slice's ends")
    axes = _ints(args[3], "Slice's axes") if len(args) > 3 and args[3] is not None else list(range(len(starts)))
    steps = _ints(args[4], "Slice's steps") if len(args) > 4 and args[4] is not None else [1] * len(starts)
    if any(s < 0 for s in steps):
        raise Refused("Slice with negative steps")
    b, e, ax = [], [], []
    for s, en, a, st in zip(starts, ends, axes, steps, strict=True):
        a = _axis(a, len(dims))
        lo, hi, _ = _clamp_slice(s, en, st, dims[a])
        b.append(lo)
        e.append(hi)
        ax.append(a)
    return [_op().strided_slice(x, ax, b, e, steps, assume_inbound=True)]


@rule("Split")
def _split(ctx, node, args):
    x = ctx.expr(args[0])
    dims = ctx.shape(x)
    axis = _axis(node.attr("axis", 0), len(dims))
    sizes = _ints(args[1], "Split's sizes") if len(args) > 1 and args[1] is not None else node.attr("split")
    n = len(node.outputs)
    if sizes is None:
        if node.attr("num_outputs") is not None:
            chunk = -(-dims[axis] // n)
            sizes = [min(chunk, dims[axis] - i * chunk) for i in range(n)]
        else:
            sizes = [dims[axis] // n] * n
    if any(int(v) <= 0 for v in sizes):
        raise Refused("Split into empty parts")
    bounds = np.cumsum(sizes)[:-1].tolist()
    parts = ctx.emit(_op().split(x, bounds, axis=axis))
    from tvm import relax

    return [relax.TupleGetItem(parts, i) for i in range(n)]


@rule("Expand")
def _expand(ctx, node, args):
    x = ctx.expr(args[0])
    target = np.broadcast_shapes(tuple(ctx.shape(x)), tuple(_ints(args[1], "Expand's shape")))
    return [_op().broadcast_to(x, list(target))]


@rule("Shape")
def _shape(ctx, node, args):
    dims = ctx.shape(ctx.expr(args[0]))
    return [np.array(dims, np.int64)[node.attr("start", 0) : node.attr("end", None)]]


@rule("Pad")
def _pad(ctx, node, args):
    x = ctx.expr(args[0])
    if node.attr("mode", "constant") != "constant":
        raise Refused(f"Pad mode {node.attr('mode')!r}")
    pads = _ints(args[1], "Pad's pads")
    rank = len(ctx.shape(x))
    if (len(args) > 3 and args[3] is not None) or any(p < 0 for p in pads):
        raise Refused("Pad with axes or negative pads")
    value = float(static(args[2], "Pad's value").reshape(-1)[0]) if len(args) > 2 and args[2] is not None else 0.0
    width = [v for i in range(rank) for v in (pads[i], pads[i + rank])]
    return [_op().nn.pad(x, width, pad_value=value)]


# --- reductions and normalization ---------------------------------------------------------------


def _reduction_axes(ctx, node, args, x) -> list[int] | None:
    """The axes a Reduce* node reduces (an input from opset 18, an attribute before); None for
    ``noop_with_empty_axes`` with no axes."""
    rank = len(ctx.shape(x))
    axes = _ints(args[1], "the reduction's axes") if len(args) > 1 and args[1] is not None else node.attr("axes")
    if not axes:
        return None if node.attr("noop_with_empty_axes", 0) else list(range(rank))
    return [_axis(a, rank) for a in axes]


def _reduce(kind: str) -> Rule:
    def fn(ctx, node, args):
        op, x = _op(), ctx.expr(args[0])
        axes = _reduction_axes(ctx, node, args, x)
        if axes is None:
            return [x]
        if ctx.dtype(x) == "bool" or any(ctx.shape(x)[a] == 0 for a in axes):
            raise Refused("a reduction of booleans or over an empty axis")
        keep = bool(node.attr("keepdims", 1))
        return [{"Sum": op.sum, "Mean": op.mean, "Max": op.max, "Min": op.min, "Prod": op.prod}[kind](x, axes, keep)]

    return fn


for _kind in ("Sum", "Mean", "Max", "Min", "Prod"):
    RULES[f"Reduce{_kind}"] = _reduce(_kind)


@rule("Softmax", "LogSoftmax")
def _softmax(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(node.attr("axis", -1), len(ctx.shape(x)))
    if node.op_type == "LogSoftmax":
        return [op.nn.log_softmax(x, axis=axis)]
    if ctx.dtype(x) == "float16":
        raise Refused("float16 Softmax (TVM rounds it differently from the reference)")
    # as ONNX's reference computes it: a row that is all -inf (fully masked attention) gives 0s
    top = op.max(x, [axis], True)
    safe = op.where(op.isinf(top), op.zeros_like(top), top)
    e = op.exp(op.subtract(x, safe))
    total = op.sum(e, [axis], True)
    total = op.where(op.equal(total, _s(ctx, 0, x)), op.ones_like(total), total)
    return [op.divide(e, total)]


@rule("LayerNormalization")
def _layer_norm(ctx, node, args):
    if len([o for o in node.outputs if o is not None]) > 1:
        return _layer_norm_with_statistics(ctx, node, args)
    x = ctx.expr(args[0])
    rank = len(ctx.shape(x))
    axes = list(range(_axis(node.attr("axis", -1), rank), rank))
    beta = args[2] if len(args) > 2 and args[2] is not None else np.zeros(1, np.float32)
    gamma, beta = ctx.expr(args[1]), ctx.expr(beta)
    if len(ctx.shape(gamma)) != len(axes) or len(ctx.shape(beta)) != len(axes):
        raise Refused("LayerNormalization whose scale or bias broadcasts")
    return [_op().nn.layer_norm(x, gamma, beta, axes, epsilon=node.attr("epsilon", 1e-5))]


def _layer_norm_with_statistics(ctx, node, args):
    """LayerNormalization with its Mean and InvStdDev outputs, in the stash type (float32)."""
    op, x = _op(), ctx.expr(args[0])
    if node.attr("stash_type", 1) != 1:
        raise Refused("LayerNormalization with a stash type other than float32")
    rank = len(ctx.shape(x))
    axes = list(range(_axis(node.attr("axis", -1), rank), rank))
    xs = op.astype(x, "float32")
    mean, var = _moments(op, xs, axes)
    inv = op.divide(ctx.expr(np.array(1, np.float32)),
                    op.sqrt(op.add(var, ctx.expr(np.array(node.attr("epsilon", 1e-5), np.float32)))))  # fmt: skip
    y = op.multiply(op.astype(op.multiply(op.subtract(xs, mean), inv), ctx.dtype(x)), ctx.expr(args[1]))
    if len(args) > 2 and args[2] is not None:
        y = op.add(y, ctx.expr(args[2]))
    return [y, mean, inv][: len(node.outputs)]


@rule("BatchNormalization")
def _batch_norm(ctx, node, args):
    if node.attr("training_mode", 0) or len([o for o in node.outputs if o is not None]) > 1:
        raise Refused("BatchNormalization in training mode")
    x = ctx.expr(args[0])
    consts = [static(a, "BatchNormalization's statistics") for a in args[1:]]
    scale, bias, mean, var = (c.astype(np.float64) for c in consts)
    inv = scale / np.sqrt(var + node.attr("epsilon", 1e-5))
    shape = [-1] + [1] * (len(ctx.shape(x)) - 2)
    dtype = consts[0].dtype
    mul = ctx.expr(inv.astype(dtype).reshape(shape))
    add = ctx.expr((bias - mean * inv).astype(dtype).reshape(shape))
    return [_op().add(_op().multiply(x, mul), add)]


# --- linear algebra, convolution, pooling -------------------------------------------------------


@rule("MatMul")
def _matmul(ctx, node, args):
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    if ctx.dtype(a) == "float16":  # accumulate in float32, as the other engines do
        return [op.astype(op.matmul(a, b, out_dtype="float32"), "float16")]
    return [op.matmul(a, b)]


@rule("Gemm")
def _gemm(ctx, node, args):
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    if node.attr("transA", 0):
        a = op.permute_dims(a)
    if node.attr("transB", 0):
        b = op.permute_dims(b)
    y = op.matmul(a, b)
    if node.attr("alpha", 1.0) != 1.0:
        y = op.multiply(y, ctx.scalar(node.attr("alpha"), y))
    if len(args) > 2 and args[2] is not None:
        c = ctx.expr(args[2])
        if node.attr("beta", 1.0) != 1.0:
            c = op.multiply(c, ctx.scalar(node.attr("beta"), c))
        y = op.add(y, c)
    return [y]


def _pads(node, x_dims, kernel, strides, dilations):
    from ..stablehlo.rules import _spatial

    class _Shape:
        shape = x_dims

    _, pads, _ = _spatial(node, _Shape, kernel)
    return [p[0] for p in pads] + [p[1] for p in pads]


@rule("Conv")
def _conv(ctx, node, args):
    op = _op()
    x, w = ctx.expr(args[0]), ctx.expr(args[1])
    wdims = ctx.shape(w)
    kernel = list(node.attr("kernel_shape") or wdims[2:])
    n = len(kernel)
    if n not in (1, 2, 3):
        raise Refused(f"Conv with {n} spatial dims")
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    pads = _pads(node, ctx.shape(x), kernel, strides, dilations)
    conv = {1: op.nn.conv1d, 2: op.nn.conv2d, 3: op.nn.conv3d}[n]
    layouts = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}[n]
    half = ctx.dtype(x) == "float16"  # accumulate in float32, as the other engines do
    y = conv(x, w, strides=strides, padding=pads, dilation=dilations, groups=node.attr("group", 1),
             data_layout=layouts[0], kernel_layout=layouts[1], out_dtype="float32" if half else None)  # fmt: skip
    if half:
        y = op.astype(y, "float16")
    if len(args) > 2 and args[2] is not None:
        y = op.add(y, op.reshape(ctx.expr(args[2]), [1, -1] + [1] * n))
    return [y]


@rule("MaxPool", "AveragePool")
def _pool(ctx, node, args):
    op = _op()
    x = ctx.expr(args[0])
    kernel = list(node.attr("kernel_shape"))
    if len(kernel) != 2:
        raise Refused(f"{node.op_type} over {len(kernel)} spatial dims")
    if len(node.outputs) > 1 and node.outputs[1] is not None:
        raise Refused("MaxPool's Indices output")
    strides = list(node.attr("strides") or [1, 1])
    dilations = list(node.attr("dilations") or [1, 1])
    pads = _pads(node, ctx.shape(x), kernel, strides, dilations)
    ceil = bool(node.attr("ceil_mode", 0))
    if node.op_type == "MaxPool":
        return [op.nn.max_pool2d(x, kernel, strides, pads, dilations, ceil_mode=ceil)]
    if ceil:
        raise Refused("AveragePool with ceil_mode")
    return [op.nn.avg_pool2d(x, kernel, strides, pads, dilations, ceil_mode=False,
                             count_include_pad=bool(node.attr("count_include_pad", 0)))]  # fmt: skip


@rule("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx, node, args):
    x = ctx.expr(args[0])
    axes = list(range(2, len(ctx.shape(x))))
    f = _op().mean if node.op_type == "GlobalAveragePool" else _op().max
    return [f(x, axes, True)]


def supported() -> set[str]:
    return set(RULES) | {"Constant"}


def describe(node: Node) -> str:
    return node.op_type


# --- compositions: ops Relax has no single op for, spelled with the ones it has ------------------


def _s(ctx, value, like):
    return ctx.scalar(value, like)


def _composed(fn: Callable) -> Rule:
    """A rule whose one input is an element-wise float tensor."""

    def rule_(ctx, node, args):
        x = ctx.expr(args[0])
        if not ctx.dtype(x).startswith("float"):
            raise Refused(f"{node.op_type} of {ctx.dtype(x)}")
        return [fn(_op(), ctx, node, x)]

    return rule_


def _softplus(op, ctx, x):
    """log(1 + exp(x)) without losing the small values: max(x, 0) + log1p(exp(-|x|)), with
    log1p(e) taken as e - e²/2 where ``1 + e`` would round."""
    e = op.exp(op.negative(op.abs(x)))
    small = op.subtract(e, op.multiply(op.multiply(e, e), _s(ctx, 0.5, x)))
    log1p = op.where(op.less(e, _s(ctx, 1e-4, x)), small, op.log(op.add(e, _s(ctx, 1, x))))
    return op.add(op.maximum(x, op.zeros_like(x)), log1p)


RULES.update({
    "Softsign": _composed(lambda op, c, n, x: op.divide(x, op.add(_s(c, 1, x), op.abs(x)))),
    "Softplus": _composed(lambda op, c, n, x: _softplus(op, c, x)),
    "HardSigmoid": _composed(lambda op, c, n, x: op.clip(op.add(op.multiply(x, _s(c, n.attr("alpha", 0.2), x)),
                                                                _s(c, n.attr("beta", 0.5), x)), 0, 1)),
    "HardSwish": _composed(lambda op, c, n, x: op.multiply(x, op.clip(op.add(op.divide(x, _s(c, 6, x)),
                                                                             _s(c, 0.5, x)), 0, 1))),
    "Elu": _composed(lambda op, c, n, x: op.where(op.greater(x, _s(c, 0, x)), x, op.multiply(
        _s(c, n.attr("alpha", 1.0), x), op.subtract(op.exp(x), _s(c, 1, x))))),
    "Selu": _composed(lambda op, c, n, x: op.multiply(_s(c, n.attr("gamma", 1.05070102214813232421875), x), op.where(
        op.greater(x, _s(c, 0, x)), x, op.multiply(_s(c, n.attr("alpha", 1.67326319217681884765625), x),
                                                   op.subtract(op.exp(x), _s(c, 1, x)))))),
    "Celu": _composed(lambda op, c, n, x: op.add(op.maximum(x, _s(c, 0, x)), op.minimum(_s(c, 0, x), op.multiply(
        _s(c, n.attr("alpha", 1.0), x), op.subtract(op.exp(op.divide(x, _s(c, n.attr("alpha", 1.0), x))),
                                                    _s(c, 1, x)))))),
    "ThresholdedRelu": _composed(lambda op, c, n, x: op.where(op.greater(x, _s(c, n.attr("alpha", 1.0), x)), x,
                                                              op.zeros_like(x))),
    "Mish": _composed(lambda op, c, n, x: op.multiply(x, op.tanh(_softplus(op, c, x)))),
    "Gelu": _composed(lambda op, c, n, x: op.nn.gelu_tanh(x) if n.attr("approximate", "none") == "tanh"
                      else op.nn.gelu(x)),
    "Shrink": _composed(lambda op, c, n, x: op.where(
        op.less(x, _s(c, -n.attr("lambd", 0.5), x)), op.add(x, _s(c, n.attr("bias", 0.0), x)),
        op.where(op.greater(x, _s(c, n.attr("lambd", 0.5), x)), op.subtract(x, _s(c, n.attr("bias", 0.0), x)),
                 op.zeros_like(x)))),
})  # fmt: skip


@rule("IsInf")
def _isinf(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    out = op.isinf(x)
    if not node.attr("detect_positive", 1):
        out = op.logical_and(out, op.less(x, _s(ctx, 0, x)))
    if not node.attr("detect_negative", 1):
        out = op.logical_and(out, op.greater(x, _s(ctx, 0, x)))
    return [out]


@rule("PRelu")
def _prelu(ctx, node, args):
    op = _op()
    x, slope = ctx.expr(args[0]), ctx.expr(args[1])
    return [op.where(op.less(x, _s(ctx, 0, x)), op.multiply(x, slope), x)]


@rule("Mod")
def _mod(ctx, node, args):
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    floating = ctx.dtype(a).startswith("float")
    if node.attr("fmod", 0):
        if not floating:
            raise Refused("integer Mod with fmod=1")
        return [op.subtract(a, op.multiply(op.trunc(op.divide(a, b)), b))]
    if floating:
        raise Refused("floating Mod needs fmod=1")
    return [op.floor_mod(a, b)]


@rule("BitShift")
def _bitshift(ctx, node, args):
    """Shifts by the width or more (or by a negative amount) give what ONNX's reference does: 0,
    or -1 for a right shift of a negative signed number; C leaves them undefined."""
    op = _op()
    a, b = ctx.expr(args[0]), ctx.expr(args[1])
    bits = np.dtype(ctx.dtype(a)).itemsize * 8
    out_of_range = op.logical_or(op.greater_equal(b, _s(ctx, bits, b)), op.less(b, _s(ctx, 0, b)))
    safe = op.where(out_of_range, op.zeros_like(b), b)
    if node.attr("direction") == "LEFT":
        return [op.where(out_of_range, op.zeros_like(a), op.left_shift(a, safe))]
    fill = op.zeros_like(a)
    if np.issubdtype(np.dtype(ctx.dtype(a)), np.signedinteger):
        fill = op.where(op.less(a, _s(ctx, 0, a)), op.subtract(op.zeros_like(a), op.ones_like(a)), fill)
    return [op.where(out_of_range, fill, op.right_shift(a, safe))]


@rule("CastLike")
def _cast_like(ctx, node, args):
    target = ctx.dtype(ctx.expr(args[1]))
    from ...core_ir.dtypes import from_numpy

    fake = type("N", (), {"attr": lambda self, k, d=None: int(from_numpy(np.dtype(target))) if k == "to" else d})()
    return _cast(ctx, fake, args[:1])


@rule("GatherElements")
def _gather_elements(ctx, node, args):
    op = _op()
    x, idx = ctx.expr(args[0]), ctx.expr(args[1])
    axis = _axis(node.attr("axis", 0), len(ctx.shape(x)))
    dim = _s(ctx, ctx.shape(x)[axis], idx)
    idx = op.where(op.less(idx, _s(ctx, 0, idx)), op.add(idx, dim), idx)
    return [op.gather_elements(x, idx, axis)]


@rule("GatherND")
def _gather_nd(ctx, node, args):
    op = _op()
    x, idx = ctx.expr(args[0]), ctx.expr(args[1])
    if isinstance(args[1], np.ndarray) and (args[1] < 0).any():
        raise Refused("GatherND with negative indices")
    if not isinstance(args[1], np.ndarray):
        raise Refused("GatherND with run-time indices (negative ones would need wrapping)")
    return [op.gather_nd(x, idx, node.attr("batch_dims", 0))]


@rule("Tile")
def _tile(ctx, node, args):
    return [_op().tile(ctx.expr(args[0]), _ints(args[1], "Tile's repeats"))]


@rule("Trilu")
def _trilu(ctx, node, args):
    op = _op()
    k = int(static(args[1], "Trilu's k").reshape(-1)[0]) if len(args) > 1 and args[1] is not None else 0
    x = ctx.expr(args[0])
    return [op.triu(x, k) if node.attr("upper", 1) else op.tril(x, k)]


@rule("ArgMax", "ArgMin")
def _arg(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(node.attr("axis", 0), len(ctx.shape(x)))
    f = op.argmax if node.op_type == "ArgMax" else op.argmin
    keep = bool(node.attr("keepdims", 1))
    if node.attr("select_last_index", 0):  # the first from the end is the last
        i = op.astype(f(op.flip(x, axis), axis, keep), "int64")
        return [op.subtract(ctx.expr(np.array(ctx.shape(x)[axis] - 1, np.int64)), i)]
    return [op.astype(f(x, axis, keep), "int64")]


@rule("CumSum")
def _cumsum(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(int(static(args[1], "CumSum's axis").reshape(-1)[0]), len(ctx.shape(x)))
    if node.attr("reverse", 0):
        x = op.flip(x, axis)
    y = op.cumsum(x, axis, ctx.dtype(x), bool(node.attr("exclusive", 0)))
    return [op.flip(y, axis) if node.attr("reverse", 0) else y]


def _reduce_composed(kind: str) -> Rule:
    def fn(ctx, node, args):
        op, x = _op(), ctx.expr(args[0])
        axes = _reduction_axes(ctx, node, args, x)
        if axes is None:
            return [x]
        if not ctx.dtype(x).startswith("float") or any(ctx.shape(x)[a] == 0 for a in axes):
            raise Refused(f"Reduce{kind} of {ctx.dtype(x)} or over an empty axis")
        keep = bool(node.attr("keepdims", 1))
        if kind == "L1":
            return [op.sum(op.abs(x), axes, keep)]
        if kind == "L2":
            return [op.sqrt(op.sum(op.multiply(x, x), axes, keep))]
        if kind == "SumSquare":
            return [op.sum(op.multiply(x, x), axes, keep)]
        if kind == "LogSum":
            return [op.log(op.sum(x, axes, keep))]
        top = op.max(x, axes, True)
        safe = op.where(op.isinf(top), op.zeros_like(top), top)
        lse = op.add(op.log(op.sum(op.exp(op.subtract(x, safe)), axes, True)), safe)
        return [lse if keep else op.squeeze(lse, axes)]

    return fn


for _kind in ("L1", "L2", "SumSquare", "LogSum", "LogSumExp"):
    RULES[f"Reduce{_kind}"] = _reduce_composed(_kind)


@rule("Einsum")
def _einsum(ctx, node, args):
    return [_op().einsum([ctx.expr(a) for a in args], node.attr("equation").replace(" ", ""))]


@rule("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    b = node.attr("blocksize")
    n, c, h, w = ctx.shape(x)
    if node.op_type == "DepthToSpace":
        if node.attr("mode", "DCR") == "DCR":
            y = op.permute_dims(op.reshape(x, [n, b, b, c // (b * b), h, w]), [0, 3, 4, 1, 5, 2])
        else:
            y = op.permute_dims(op.reshape(x, [n, c // (b * b), b, b, h, w]), [0, 1, 4, 2, 5, 3])
        return [op.reshape(y, [n, c // (b * b), h * b, w * b])]
    y = op.reshape(x, [n, c, h // b, b, w // b, b])
    perm = [0, 1, 3, 5, 2, 4] if node.attr("mode", "DCR") == "CRD" else [0, 3, 5, 1, 2, 4]
    return [op.reshape(op.permute_dims(y, perm), [n, c * b * b, h // b, w // b])]


def _moments(op, x, axes):
    mean = op.mean(x, axes, True)
    centered = op.subtract(x, mean)
    return mean, op.mean(op.multiply(centered, centered), axes, True)


@rule("InstanceNormalization")
def _instance_norm(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    rank = len(ctx.shape(x))
    mean, var = _moments(op, x, list(range(2, rank)))
    y = op.divide(op.subtract(x, mean), op.sqrt(op.add(var, _s(ctx, node.attr("epsilon", 1e-5), x))))
    shape = [1, -1] + [1] * (rank - 2)
    return [op.add(op.multiply(y, op.reshape(ctx.expr(args[1]), shape)), op.reshape(ctx.expr(args[2]), shape))]


@rule("RMSNormalization")
def _rms_norm(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    if node.attr("stash_type", 1) != 1 or ctx.dtype(x) != "float32":
        raise Refused("RMSNormalization other than float32")
    rank = len(ctx.shape(x))
    axes = list(range(_axis(node.attr("axis", -1), rank), rank))
    ms = op.mean(op.multiply(x, x), axes, True)
    y = op.divide(x, op.sqrt(op.add(ms, _s(ctx, node.attr("epsilon", 1e-5), x))))
    return [op.multiply(y, ctx.expr(args[1]))]


@rule("LpNormalization")
def _lp_norm(ctx, node, args):
    op, x = _op(), ctx.expr(args[0])
    axis = _axis(node.attr("axis", -1), len(ctx.shape(x)))
    p = node.attr("p", 2)
    norm = op.sum(op.abs(x), [axis], True) if p == 1 else op.sqrt(op.sum(op.multiply(x, x), [axis], True))
    zero = op.equal(norm, _s(ctx, 0, x))
    return [op.where(zero, op.zeros_like(x), op.divide(x, op.where(zero, op.ones_like(norm), norm)))]


@rule("Resize")
def _resize(ctx, node, args):
    """As the StableHLO rule: per axis ``W @ x + b`` read off ONNX's reference kernel."""
    from ..stablehlo.rules import _resize_check, _resize_weights

    op, x = _op(), ctx.expr(args[0])
    why = _resize_check(node)
    if why:
        raise Refused(why)
    if not ctx.dtype(x).startswith("float"):
        raise Refused("Resize of non-float data")
    roi = static(args[1], "Resize's roi") if len(args) > 1 and args[1] is not None and args[1].size else None
    scales = static(args[2], "Resize's scales") if len(args) > 2 and args[2] is not None and args[2].size else None
    sizes = static(args[3], "Resize's sizes") if len(args) > 3 and args[3] is not None and args[3].size else None
    dims = ctx.shape(x)
    rank = len(dims)
    axes = [_axis(a, rank) for a in (node.attr("axes") or range(rank))]
    out = x
    for i, a in enumerate(axes):
        n = dims[a]
        box = None if roi is None else (roi[i], roi[len(axes) + i])
        if sizes is not None:
            m, given = int(sizes[i]), ("sizes", np.array([n, int(sizes[i])], np.int64))
        else:
            m, given = int(float(np.float32(scales[i])) * n), ("scales", np.array([1.0, scales[i]], np.float32))
        if m == n and (given[0] == "sizes" or given[1][1] == 1) and (box is None or tuple(box) == (0, 1)):
            continue
        weights, bias = _resize_weights(node, n, given, box, roi.dtype if roi is not None else np.float32)
        perm = [d for d in range(rank) if d != a] + [a]
        inverse = list(np.argsort(perm))
        moved = op.permute_dims(out, perm)
        moved = op.add(op.matmul(moved, ctx.expr(weights.astype(ctx.dtype(x)))), ctx.expr(bias.astype(ctx.dtype(x))))
        out = op.permute_dims(moved, inverse)
    return [out]


# --- values known when the module is built -------------------------------------------------------


@rule("Size")
def _size(ctx, node, args):
    return [np.array(int(np.prod(ctx.shape(ctx.expr(args[0])))), np.int64)]


@rule("ConstantOfShape")
def _constant_of_shape(ctx, node, args):
    shape = _ints(args[0], "ConstantOfShape's shape")
    value = node.attr("value")
    fill = np.zeros(1, np.float32) if value is None else value.numpy().reshape(-1)
    return [_op().full(shape, ctx.expr(fill[:1].reshape(())), str(fill.dtype))]


@rule("Range")
def _range(ctx, node, args):
    start, limit, delta = (static(a, "Range's bounds") for a in args)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return [(start + np.arange(n, dtype=start.dtype) * delta).astype(start.dtype)]
