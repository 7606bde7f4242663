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
    idx = args[1]
    if not isinstance(idx, np.ndarray):
        raise Refused("Gather with run-time indices (negative ones would need wrapping)")
    idx = np.where(idx < 0, idx + ctx.shape(x)[axis], idx)
    return [_op().take(x, ctx.expr(idx.astype(np.int64)), axis=axis)]


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


def _reduce(kind: str) -> Rule:
    def fn(ctx, node, args):
        op, x = _op(), ctx.expr(args[0])
        rank = len(ctx.shape(x))
        axes = _ints(args[1], "the reduction's axes") if len(args) > 1 and args[1] is not None else node.attr("axes")
        if not axes:
            if node.attr("noop_with_empty_axes", 0):
                return [x]
            axes = list(range(rank))
        axes = [_axis(a, rank) for a in axes]
        if ctx.dtype(x) == "bool" or any(ctx.shape(x)[a] == 0 for a in axes):
            raise Refused("a reduction of booleans or over an empty axis")
        keep = bool(node.attr("keepdims", 1))
        return [{"Sum": op.sum, "Mean": op.mean, "Max": op.max, "Min": op.min, "Prod": op.prod}[kind](x, axes, keep)]

    return fn


for _kind in ("Sum", "Mean", "Max", "Min", "Prod"):
    RULES[f"Reduce{_kind}"] = _reduce(_kind)


@rule("Softmax", "LogSoftmax")
def _softmax(ctx, node, args):
    x = ctx.expr(args[0])
    f = _op().nn.softmax if node.op_type == "Softmax" else _op().nn.log_softmax
    return [f(x, axis=node.attr("axis", -1))]


@rule("LayerNormalization")
def _layer_norm(ctx, node, args):
    if len([o for o in node.outputs if o is not None]) > 1:
        raise Refused("LayerNormalization's mean and inverse-deviation outputs")
    x = ctx.expr(args[0])
    rank = len(ctx.shape(x))
    axes = list(range(_axis(node.attr("axis", -1), rank), rank))
    beta = args[2] if len(args) > 2 and args[2] is not None else np.zeros(1, np.float32)
    gamma, beta = ctx.expr(args[1]), ctx.expr(beta)
    if len(ctx.shape(gamma)) != len(axes) or len(ctx.shape(beta)) != len(axes):
        raise Refused("LayerNormalization whose scale or bias broadcasts")
    return [_op().nn.layer_norm(x, gamma, beta, axes, epsilon=node.attr("epsilon", 1e-5))]


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
    return [_op().matmul(ctx.expr(args[0]), ctx.expr(args[1]))]


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
    y = conv(x, w, strides=strides, padding=pads, dilation=dilations, groups=node.attr("group", 1),
             data_layout=layouts[0], kernel_layout=layouts[1])  # fmt: skip
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
