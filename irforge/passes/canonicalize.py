"""canonicalize: local identities and algebraic simplifications, as rewrite patterns.

Every rule forwards or rebuilds values without changing any result: a rule that would drop an
operation checks that it cannot broadcast, change a dtype, or rename a graph output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.graph import Graph
from ..core_ir.pattern import Match, Pattern
from ..core_ir.types import TensorType
from .base import Pass, PassContext, PassResult, run_patterns


def _forwardable(m: Match, name: str) -> bool:
    return _can_replace(m, m[name])


def _can_replace(m: Match, x) -> bool:
    """Replacing the output by ``x`` keeps the graph's interface: a graph output that is produced
    by a node must not become an input, an initializer, an outer-scope value or a second output."""
    out = m.outputs[0]
    if out.is_graph_output() and (
        x.producer() is None or x.is_graph_output() or x.producer().graph is not out.producer().graph
    ):
        return m.fail(f"the result is a graph output and %{x.name} cannot take its place")
    if out.type is not None and x.type is not None and getattr(out.type, "dtype", None) != getattr(x.type, "dtype", 0):
        return m.fail("the dtype would change")
    return True


def _neutral(element: float):
    """Check: ``c`` is all ``element`` and broadcasting it against ``x`` cannot grow ``x``."""

    def check(m: Match) -> bool:
        c = m.constant("c")
        if c is None or c.dtype.kind not in "fiu" or np.any(c != element):
            return m.fail(f"the constant is not all {element}")
        shape = m.shape("x")
        if shape is None or c.ndim > len(shape):
            return m.fail("the shape of x is unknown or the constant has more dimensions")
        for cd, xd in zip(reversed(c.shape), reversed(shape), strict=False):
            if cd != 1 and cd != xd:
                return m.fail("the constant would broadcast x")
        return _forwardable(m, "x")

    return check


def _x(b, m: Match):
    return m["x"]


def _same_dtype_cast(m: Match) -> bool:
    to = m.outputs[0].producer().attr("to")
    return (m.dtype("x") == to or m.fail("the cast changes the dtype")) and _forwardable(m, "x")


def _resolved(target, shape: tuple, allowzero: int) -> tuple | None:
    """The shape ``Reshape(x, target)`` gives an ``x`` of static ``shape``: a 0 copies the
    input's dim (without ``allowzero``), one -1 takes what is left."""
    dims = [int(d) for d in target]
    if not allowzero:
        dims = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(dims)]
    if dims.count(-1) > 1:
        return None
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        total = int(np.prod(shape))
        if known == 0 or total % known:
            return None
        dims[dims.index(-1)] = total // known
    return tuple(dims)


def _static_shape_equals(m: Match) -> bool:
    want, shape = m.constant("c"), m.shape("x")
    if want is None or shape is None or not all(isinstance(d, int) for d in shape):
        return m.fail("the shapes are not both static")
    if 0 in shape or _resolved(want.reshape(-1), shape, m.nodes[0].attr("allowzero", 0)) != tuple(shape):
        return m.fail("the target shape differs from the input's")
    return _forwardable(m, "x")


def _groups(shape: tuple, merged: tuple) -> list[list[int]] | None:
    """The runs of ``shape``'s axes that a Reshape to ``merged`` multiplies into each of its dims
    (trailing size-1 axes join the last run), or None when the Reshape is not such a merge."""
    groups, axis = [], 0
    for size in merged:
        run, product = [], 1
        while axis < len(shape) and (not run or product < size):
            run.append(axis)
            product *= shape[axis]
            axis += 1
        if product != size:
            return None
        groups.append(run)
    rest = list(range(axis, len(shape)))
    if not groups or any(shape[a] != 1 for a in rest):
        return None
    groups[-1].extend(rest)
    return groups


def _grouped_perm(m: Match) -> tuple[list[int], tuple] | None:
    """``(perm, shape)``: ``Reshape(Transpose(Reshape(x, merged), p), target)`` is
    ``Reshape(Transpose(x, perm), shape)`` (just the Transpose when ``shape`` is its result's)
    when the first Reshape merges runs of ``x``'s axes, the Transpose moves the runs and the last
    Reshape splits them back, or merges runs of what that gives (the torch exporter transposes a
    4-D key through 3-D so, and a repeated key across its repeat)."""
    outer, transpose, inner = m.nodes
    x, perm, target, first = m.shape("x"), transpose.attr("perm"), m.constant("s"), m.constant("m")
    if x is None or perm is None or target is None or not all(isinstance(d, int) for d in x) or 0 in x:
        return None
    merged = _resolved(first.reshape(-1), x, inner.attr("allowzero", 0))
    if merged is None:
        return None
    groups = _groups(tuple(x), tuple(merged))
    if groups is None or len(perm) != len(groups):
        return None
    full = [a for i in perm for a in groups[i]]
    moved = tuple(merged[i] for i in perm)
    shape = _resolved(target.reshape(-1), moved, outer.attr("allowzero", 0))
    want = tuple(x[a] for a in full)
    if shape is None or (shape != want and _groups(want, shape) is None):
        return None
    return full, shape


def _grouped_transpose(m: Match) -> bool:
    if _grouped_perm(m) is None:
        return m.fail("not a merge of axis runs, a move of the runs and their split back")
    return True


def _transposed(b, x, perm: list[int], m: Match):
    """``Transpose(x, perm)``, typed (the rules after it read its shape before any inference)."""
    out = b.op.Transpose(x, perm=perm)
    shape = m.shape("x") if x is m["x"] else getattr(x.type, "shape", None)
    if shape is not None and m.dtype("x") is not None:
        out.type = TensorType(m.dtype("x"), tuple(shape[a] for a in perm))
    return out


def _ungrouped(b, m: Match):
    perm, shape = _grouped_perm(m)
    out = _transposed(b, m["x"], perm, m)
    if tuple(getattr(out.type, "shape", None) or ()) == shape:
        return out
    reshaped = b.op.Reshape(out, b.constant(np.asarray(shape, np.int64)))
    reshaped.type = m.outputs[0].type
    return reshaped


def _merge_moved(m: Match) -> tuple[list[int], tuple] | None:
    """``(perm, shape)``: ``Transpose(Reshape(y, s), p)`` is ``Reshape(Transpose(y, perm), shape)``
    when the Reshape merges runs of ``y``'s axes (at least one run of two) and is read only there:
    the merge moves after the Transpose, where it may meet the Reshape it undoes."""
    transpose, reshape = m.nodes
    y, p, target = m.shape("x"), transpose.attr("perm"), m.constant("s")
    if y is None or p is None or target is None or not all(isinstance(d, int) for d in y) or 0 in y:
        return None
    merge = reshape.outputs[0]
    if merge.num_uses() != 1 or merge.is_graph_output():
        return None
    merged = _resolved(target.reshape(-1), tuple(y), reshape.attr("allowzero", 0))
    groups = _groups(tuple(y), tuple(merged)) if merged is not None else None
    if groups is None or len(groups) != len(p) or all(len(g) == 1 for g in groups):
        return None
    return [a for i in p for a in groups[i]], tuple(merged[i] for i in p)


def _merge_after(b, m: Match):
    perm, shape = _merge_moved(m)
    out = b.op.Reshape(_transposed(b, m["x"], perm, m), b.constant(np.asarray(shape, np.int64)))
    out.type = m.outputs[0].type
    return out


def _transpose_pair(b, m: Match):
    inner = m.nodes[1].attr("perm")
    outer = m.nodes[0].attr("perm")
    perm = [list(inner)[i] for i in outer]
    if perm == sorted(perm):
        return m["x"]
    return b.op.Transpose(m["x"], perm=perm)


def _both_perms(m: Match) -> bool:
    inner, outer = m.nodes[1].attr("perm"), m.nodes[0].attr("perm")
    if inner is None or outer is None or len(inner) != len(outer):
        return m.fail("a Transpose has no explicit perm")
    return True if [list(inner)[i] for i in outer] != sorted(outer) else _forwardable(m, "x")


def _reshape_pair_ok(m: Match) -> bool:
    s = m.constant("s")
    if s is None or np.any(s == 0):
        return m.fail("the outer shape is unknown or copies dimensions (0)")
    if m.nodes[0].attr("allowzero", 0) or m.nodes[1].attr("allowzero", 0):
        return m.fail("allowzero is set")
    return True


def _squeeze_unsqueeze_ok(m: Match) -> bool:
    a, s = m.constant("a"), m.constant("s")
    if a is None or s is None or sorted(a.reshape(-1).tolist()) != sorted(s.reshape(-1).tolist()):
        return m.fail("the axes are not the same constants")
    if np.any(a < 0):
        return m.fail("negative axes")
    return _forwardable(m, "x")


def _dropout_inference(m: Match) -> bool:
    node = m.nodes[0]
    if (
        len(node.outputs) > 1
        and node.outputs[1] is not None
        and (node.outputs[1].has_uses() or node.outputs[1].is_graph_output())
    ):
        return m.fail("the mask output is used")
    return _forwardable(m, "x")


def _training_off(m: Match) -> bool:
    t = m.constant("training")
    return (t is not None and t.size == 1 and not bool(t.reshape(-1)[0])) or m.fail("training_mode is not false")


def _reshaped_dims(m: Match) -> list[int] | None:
    """The static shape ``Reshape(ConstantOfShape(s), t)`` has, worked out from ``s`` and ``t``."""
    s, t = m.constant("s"), m.constant("t")
    if s is None or t is None or s.ndim != 1 or t.ndim != 1:
        return None
    source, dims = [int(d) for d in s], [int(d) for d in t]
    if not m.nodes[0].attr("allowzero", 0):
        if any(d == 0 and i >= len(source) for i, d in enumerate(dims)):
            return None
        dims = [source[i] if d == 0 else d for i, d in enumerate(dims)]
    total = int(np.prod(source))
    if dims.count(-1) == 1:
        rest = int(np.prod([d for d in dims if d != -1]))
        if rest == 0 or total % rest:
            return None
        dims[dims.index(-1)] = total // rest
    if any(d < 0 for d in dims) or int(np.prod(dims)) != total:
        return None
    return dims


def _transposed_dims(m: Match) -> list[int] | None:
    s = m.constant("s")
    if s is None or s.ndim != 1:
        return None
    perm = m.nodes[0].attr("perm")
    perm = list(range(s.size))[::-1] if perm is None else list(perm)
    return [int(s[p]) for p in perm] if sorted(perm) == list(range(s.size)) else None


def _filled(name: str, source, dims_of) -> Pattern:
    """A view of ``ConstantOfShape`` becomes ``ConstantOfShape`` of the new shape: a uniform tensor
    stays uniform under a view, so the view goes without materialising anything."""

    def check(m: Match) -> bool:
        return dims_of(m) is not None or m.fail("the shapes are not constants that agree")

    def rebuild(b, m: Match):
        out = b.op.ConstantOfShape(b.constant(np.array(dims_of(m), np.int64)), **m.nodes[1].attributes)
        out.type = m.outputs[0].type
        return out

    return Pattern(name, source, rebuild, check=check)


def _softmax_of_flatten_axis(m: Match) -> int | None:
    """The one axis a Softmax over ``Flatten(x, a)`` normalises when the other flattened dims are
    1 (the form ONNX's opset converter writes for Softmax before opset 13); None otherwise."""
    shape, t = m.shape("x"), m.constant("t")
    if shape is None or not all(isinstance(d, int) for d in shape) or t is None:
        return None
    if [int(d) for d in t.reshape(-1)] != list(shape):
        return None
    a = m.nodes[2].attr("axis", 1)
    a = a + len(shape) if a < 0 else a
    if m.nodes[1].attr("axis", -1) not in (-1, 1) or not 0 <= a <= len(shape):
        return None
    wide = [i for i in range(a, len(shape)) if shape[i] != 1]
    if len(wide) > 1:
        return None
    return wide[0] if wide else len(shape) - 1


def _softmax_of_flatten(op: str) -> Pattern:
    def check(m: Match) -> bool:
        return _softmax_of_flatten_axis(m) is not None or m.fail(
            "the result is not reshaped back, or more than one flattened dim is not 1"
        )

    def rebuild(b, m: Match):
        out = getattr(b.op, op)(m["x"], axis=_softmax_of_flatten_axis(m))
        out.type = m.outputs[0].type
        return out

    source = lambda p: p.op.Reshape(getattr(p.op, op)(p.op.Flatten(p.var("x"))), p.const("t"))  # noqa: E731
    return Pattern(f"{op.lower()}-of-flatten", source, rebuild, check=check)


def _idempotent(op: str) -> Pattern:
    return Pattern(f"{op.lower()}-idempotent", lambda p: getattr(p.op, op)(getattr(p.op, op)(p.var("x"))),
                   lambda b, m: m.nodes[1].outputs[0],
                   check=lambda m: _can_replace(m, m.nodes[1].outputs[0]))  # fmt: skip


def _involution(op: str) -> Pattern:
    return Pattern(f"double-{op.lower()}", lambda p: getattr(p.op, op)(getattr(p.op, op)(p.var("x"))), _x,
                   check=lambda m: _forwardable(m, "x"))  # fmt: skip


def _single_input(op: str) -> Pattern:
    return Pattern(f"{op.lower()}-of-one", lambda p: getattr(p.op, op)(p.var("x")), _x,
                   check=lambda m: _forwardable(m, "x"))  # fmt: skip


def _binary_neutral(op: str, element: float, name: str) -> Pattern:
    return Pattern(name, lambda p: getattr(p.op, op)(p.var("x"), p.const("c")), _x, check=_neutral(element))


PATTERNS: list[Pattern] = [
    Pattern("identity", lambda p: p.op.Identity(p.var("x")), _x, check=lambda m: _forwardable(m, "x")),
    _binary_neutral("Add", 0, "add-zero"),
    _binary_neutral("Sub", 0, "sub-zero"),
    _binary_neutral("Mul", 1, "mul-one"),
    _binary_neutral("Div", 1, "div-one"),
    _binary_neutral("Pow", 1, "pow-one"),
    _involution("Neg"),
    _involution("Not"),
    *(_idempotent(op) for op in ("Relu", "Abs", "Floor", "Ceil", "Round", "Sign")),
    Pattern("abs-of-neg", lambda p: p.op.Abs(p.op.Neg(p.var("x"))), lambda b, m: b.op.Abs(m["x"])),
    *(_single_input(op) for op in ("Concat", "Sum", "Max", "Min", "Mean")),
    Pattern("cast-to-same-type", lambda p: p.op.Cast(p.var("x")), _x, check=_same_dtype_cast),
    Pattern("transpose-pair", lambda p: p.op.Transpose(p.op.Transpose(p.var("x"))), _transpose_pair, check=_both_perms),
    Pattern(
        "reshape-pair",
        lambda p: p.op.Reshape(p.op.Reshape(p.var("x"), p.var("inner")), p.const("s")),
        lambda b, m: b.op.Reshape(m["x"], m["s"]),
        check=_reshape_pair_ok,
    ),
    Pattern(
        "reshape-transpose-reshape",
        lambda p: p.op.Reshape(p.op.Transpose(p.op.Reshape(p.var("x"), p.const("m"))), p.const("s")),
        _ungrouped,
        check=_grouped_transpose,
    ),
    Pattern(
        "transpose-of-merge",
        lambda p: p.op.Transpose(p.op.Reshape(p.var("x"), p.const("s"))),
        _merge_after,
        check=lambda m: _merge_moved(m) is not None or m.fail("not a merge of axis runs read only by the Transpose"),
    ),
    Pattern("reshape-to-same-shape", lambda p: p.op.Reshape(p.var("x"), p.const("c")), _x, check=_static_shape_equals),
    Pattern("expand-to-same-shape", lambda p: p.op.Expand(p.var("x"), p.const("c")), _x, check=_static_shape_equals),
    Pattern(
        "squeeze-of-unsqueeze",
        lambda p: p.op.Squeeze(p.op.Unsqueeze(p.var("x"), p.const("a")), p.const("s")),
        _x,
        check=_squeeze_unsqueeze_ok,
    ),
    _filled("reshape-of-filled", lambda p: p.op.Reshape(p.op.ConstantOfShape(p.const("s")), p.const("t")),
            _reshaped_dims),
    _filled("transpose-of-filled", lambda p: p.op.Transpose(p.op.ConstantOfShape(p.const("s"))), _transposed_dims),
    *(_softmax_of_flatten(op) for op in ("Softmax", "LogSoftmax", "Hardmax")),
    Pattern("dropout-inference", lambda p: p.op.Dropout(p.var("x")), _x, check=_dropout_inference),
    Pattern(
        "dropout-inference-ratio", lambda p: p.op.Dropout(p.var("x"), p.var("ratio")), _x, check=_dropout_inference
    ),
    Pattern(
        "dropout-training-off",
        lambda p: p.op.Dropout(p.var("x"), p.var("ratio"), p.const("training")),
        _x,
        check=lambda m: _training_off(m) and _dropout_inference(m),
    ),
]


@dataclass(frozen=True)
class Canonicalize(Pass):
    name = "canonicalize"
    summary = "identities and algebraic simplifications (x+0, x*1, double negation, transpose pairs, ...)"
    max_rewrites: int = 0
    """0: ten per node plus 100."""

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_patterns(self, graph, ctx, PATTERNS, max_rewrites=self.max_rewrites or None)
