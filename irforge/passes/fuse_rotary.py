"""fuse-rotary: rotary position embeddings written in primitives become one
``irforge::RotaryEmbedding`` op.

LLaMA-family models rotate Q and K by their positions, ``x * cos + rotate_half(x) * sin`` where
``rotate_half(x) = concat(-x[..., d/2:], x[..., :d/2])`` (``transformers``' ``apply_rotary_pos_emb``):
two Slices, a Neg, a Concat, two Muls and an Add per tensor, each writing the whole head out.  As
one op a runtime rotates in one pass (onnxruntime's ``RotaryEmbedding``,
``lower-fused{target=onnxruntime}``; XLA and TVM fuse the body).  The halves must split the last
axis evenly (``Slice`` from 0 to ``d/2`` and from ``d/2`` to the end, or an equal ``Split`` as in
the fused op's own body, so ``-O3`` twice fuses the same), the Concat run over the
last axis, ``x`` a float tensor of known rank, and the intermediates read by nothing else;
``cos`` and ``sin`` may be any values that broadcast onto ``x``.

``irforge::RotaryEmbedding(X, Cos, Sin)``: its body is the same primitives (the halves by an
equal ``Split``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core_ir.builder import Builder
from ..core_ir.dtypes import COMPUTE_FLOATS
from ..core_ir.graph import Graph
from ..core_ir.model import Function
from ..core_ir.pattern import Match, Pattern, constant_value
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult
from .fused_ops import DOMAIN, only_read_inside, run_fusion


def _slice_bounds(m: Match, node_index: int) -> tuple[int, int] | None:
    """``(start, end)`` of a matched Slice over the last axis with step 1, ends clamped to the dim."""
    node = m.nodes[node_index]
    rank, width = m.rank("x"), (m.shape("x") or (None,))[-1]
    if len(node.inputs) < 4 or not isinstance(width, int):
        return None
    starts, ends, axes = (constant_value(v) for v in node.inputs[1:4])
    steps = constant_value(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else None
    if starts is None or ends is None or axes is None or starts.size != 1 or ends.size != 1 or axes.size != 1:
        return None
    if int(axes.reshape(-1)[0]) % rank != rank - 1 or (steps is not None and int(steps.reshape(-1)[0]) != 1):
        return None
    start, end = int(starts.reshape(-1)[0]), int(ends.reshape(-1)[0])
    start, end = (s + width if s < 0 else s for s in (start, end))
    return start, min(end, width)


def _check(m: Match) -> bool:
    if m.dtype("x") not in COMPUTE_FLOATS or m.rank("x") is None or m.rank("x") < 2:
        return m.fail("x is not a float tensor of known rank")
    width = m.shape("x")[-1]
    if not isinstance(width, int) or width % 2:
        return m.fail("the last axis is not of a known even size")
    concat = next(n for n in m.nodes if n.op_type == "Concat")
    neg = next(n for n in m.nodes if n.op_type == "Neg")
    split = next((n for n in m.nodes if n.op_type == "Split"), None)
    if split is not None:  # irforge::RotaryEmbedding's own body, inlined
        sizes = constant_value(split.inputs[1]) if len(split.inputs) > 1 and split.inputs[1] is not None else None
        if split.attr("axis", 0) % m.rank("x") != m.rank("x") - 1 or (sizes is not None and list(sizes) != [
                width // 2] * 2) or neg.inputs[0] is not split.outputs[1]:  # fmt: skip
            return m.fail("the Split does not take the two halves of the last axis")
    else:
        slices = [i for i, n in enumerate(m.nodes) if n.op_type == "Slice"]
        bounds = sorted(_slice_bounds(m, i) or (-1, -1) for i in slices)
        if bounds != [(0, width // 2), (width // 2, width)]:
            return m.fail("the Slices do not take the two halves of the last axis")
        second = neg.inputs[0].producer()
        if _slice_bounds(m, m.nodes.index(second)) != (width // 2, width):
            return m.fail("not concat(-second half, first half)")
    if concat.inputs[0] is not neg.outputs[0]:
        return m.fail("not concat(-second half, first half)")
    if concat.attr("axis", 0) % m.rank("x") != m.rank("x") - 1:
        return m.fail("the Concat is not over the last axis")
    if not only_read_inside(m):
        return m.fail("an intermediate (a half, the rotated tensor) is read elsewhere")
    return True


def _rewrite(b: Builder, m: Match) -> Value:
    node = b.add_node("RotaryEmbedding", [m["x"], m["cos"], m["sin"]], {}, domain=DOMAIN, num_outputs=1)
    node.overload = ""
    out = node.outputs[0]
    out.type = m.outputs[0].type
    return out


def _source(halves: str):
    """``x * cos + concat(-second, first) * sin`` with the halves taken by ``halves``: two Slices
    with steps, two without, or one equal Split."""

    def source(p):
        x = p.var("x")
        if halves == "split":
            first, second = p.op.Split(x, _outputs=2)
        else:
            first, second = (p.op.Slice(x, p.const(f"s{i}"), p.const(f"e{i}"), p.const(f"a{i}"),
                                        *((p.const(f"t{i}"),) if halves == "slices" else ())) for i in (0, 1))
        rotated = p.op.Concat(p.op.Neg(second), first)
        return p.op.Add(p.op.Mul(x, p.var("cos")), p.op.Mul(rotated, p.var("sin")))

    return source


PATTERNS = [Pattern(name, _source(halves), _rewrite, check=_check, benefit=4)
            for name, halves in (("rotary-embedding", "slices"), ("rotary-embedding-no-steps", "slices-no-steps"),
                                 ("rotary-embedding-split", "split"))]  # fmt: skip


def _function(overload: str, opset: int) -> Function:
    g = Graph(inputs=[Value("X"), Value("Cos"), Value("Sin")], name="RotaryEmbedding", opset_imports={"": opset})
    b = Builder(g, opset=opset)
    x, cos, sin = g.inputs
    attrs = {"axis": -1, **({"num_outputs": 2} if opset >= 18 else {})}
    first, second = b.add_node("Split", [x], attrs, num_outputs=2).outputs
    rotated = b.op.Concat(b.op.Neg(second), first, axis=-1)
    g.append_output(b.op.Add(b.op.Mul(x, cos), b.op.Mul(rotated, sin)))
    doc = ("X * Cos + concat(-X[..., d/2:], X[..., :d/2]) * Sin: the decomposition of irforge::RotaryEmbedding "
           "(rotary position embeddings, halves not interleaved)")  # fmt: skip
    return Function(DOMAIN, "RotaryEmbedding", g, overload=overload, doc_string=doc)


BODIES = [("RotaryEmbedding", _function)]
"""The fused op this pass makes, with its decomposition (registered by the built-in plugin)."""


@dataclass(frozen=True)
class FuseRotary(Pass):
    name = "fuse-rotary"
    summary = "rotary position embeddings in primitives (x*cos + rotate_half(x)*sin) -> irforge::RotaryEmbedding"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_fusion(self, graph, ctx, PATTERNS)
