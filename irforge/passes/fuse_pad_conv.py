"""fuse-pad-conv: a zero Pad of the spatial axes folded into the Conv (or pool) that reads it.

A Conv pads its input with zeros itself (its ``pads``), so a constant-mode ``Pad`` by 0 that
only widens the spatial axes, read by nothing but the Conv, is the same Conv with those amounts
added to its own pads: one node and one padded copy of the activation fewer.  Exporters write
such pairs for ``F.pad`` before a convolution, for asymmetric "same" padding (TensorFlow's
converters) and for padding modes a Conv attribute cannot express at export time.  Negative pads
(crops), other modes and other values stay as they are.

Pools take a Pad too, where their own padding means the same: an ``AveragePool`` a zero Pad
(which it then counts, ``count_include_pad = 1``; unless it pads itself without counting), a
``MaxPool`` a Pad by ``-inf`` (what its own padding stands for), both with ``ceil_mode = 0``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.graph import Graph
from ..core_ir.pattern import Match, Pattern
from .base import Pass, PassContext, PassResult, run_patterns


def _spatial_pads(m: Match) -> list[int] | None:
    """The Pad's amounts as Conv ``pads`` (spatial begins, then ends), or None where they cannot be."""
    pads, rank = m.constant("pads"), m.rank("x")
    if pads is None or rank is None or rank < 3 or pads.ndim != 1 or pads.size != 2 * rank:
        return None
    begins, ends = [int(p) for p in pads[:rank]], [int(p) for p in pads[rank:]]
    if any(begins[:2]) or any(ends[:2]) or min(begins + ends) < 0:
        return None
    return begins[2:] + ends[2:]


def _pad_value(m: Match) -> float | None:
    if "value" not in m.values:
        return 0.0
    value = m.constant("value")
    return None if value is None or value.size != 1 else float(np.asarray(value).reshape(-1)[0])


def _check(m: Match) -> bool:
    pad, conv = m.nodes[-1], m.nodes[0]
    mode = pad.attributes.get("mode")
    if mode is not None and (mode.ref is not None or mode.value not in ("constant", b"constant")):
        return m.fail("the Pad is not in constant mode")
    wanted = -np.inf if conv.op_type == "MaxPool" else 0.0
    if _pad_value(m) != wanted:
        return m.fail(f"the Pad's value is not a constant {wanted}")
    if conv.op_type != "Conv":
        if any(a.ref is not None for a in conv.attributes.values()) or conv.attr("ceil_mode", 0):
            return m.fail("the pool rounds its output size up (ceil_mode) or its attributes are references")
        if len([o for o in conv.outputs if o is not None and o.has_uses()]) > 1:
            return m.fail("the pool's indices are read")
        if conv.op_type == "AveragePool" and not conv.attr("count_include_pad", 0) and any(conv.attr("pads", ())):
            return m.fail("the pool pads itself without counting the padding, which the Pad's zeros would be")
    auto = conv.attributes.get("auto_pad")
    if auto is not None and (auto.ref is not None or auto.value not in ("NOTSET", b"NOTSET")):
        return m.fail("the Conv pads automatically (auto_pad)")
    if _spatial_pads(m) is None:
        return m.fail("the Pad widens the batch or channel axis, crops, or its amounts are not constant")
    out = pad.outputs[0]
    if out.num_uses() != 1 or out.is_graph_output():
        return m.fail("the Pad's result is read elsewhere")
    return True


def _fuse(b, m: Match):
    conv = m.nodes[0]
    extra = _spatial_pads(m)
    spatial = len(extra) // 2
    own = conv.attributes.get("pads")
    current = list(own.value) if own is not None else [0] * (2 * spatial)
    attrs = {k: a for k, a in conv.attributes.items() if k != "pads"}
    pads = [c + e for c, e in zip(current, extra, strict=True)]
    if conv.op_type != "Conv":
        if conv.op_type == "AveragePool":
            attrs["count_include_pad"] = 1
        out = b.add_node(conv.op_type, [m["x"]], {**attrs, "pads": pads}, num_outputs=1).outputs[0]
        out.type = m.outputs[0].type
        return out
    inputs = [m["x"], m["w"], *([m["b"]] if "b" in m.values else [])]
    out = b.op.Conv(*inputs, pads=pads, **attrs)
    out.type = m.outputs[0].type
    return out


def _patterns() -> list[Pattern]:
    patterns = []
    for with_value in (False, True):
        for with_bias in (False, True):

            def source(p, with_value=with_value, with_bias=with_bias):
                pad_inputs = (p.var("x"), p.const("pads"), *([p.const("value")] if with_value else []))
                conv_inputs = (p.op.Pad(*pad_inputs), p.var("w"), *([p.var("b")] if with_bias else []))
                return p.op.Conv(*conv_inputs)

            name = "pad" + ("-value" if with_value else "") + "-conv" + ("-bias" if with_bias else "")
            patterns.append(Pattern(name, source, _fuse, check=_check))
        for pool in ("AveragePool", "MaxPool"):

            def source(p, with_value=with_value, pool=pool):
                pad_inputs = (p.var("x"), p.const("pads"), *([p.const("value")] if with_value else []))
                return getattr(p.op, pool)(p.op.Pad(*pad_inputs))

            name = "pad" + ("-value" if with_value else "") + f"-{pool.lower()}"
            patterns.append(Pattern(name, source, _fuse, check=_check))
    return patterns


PATTERNS: list[Pattern] = _patterns()


@dataclass(frozen=True)
class FusePadConv(Pass):
    name = "fuse-pad-conv"
    summary = "a zero Pad of the spatial axes folded into the pads of the Conv (or pool) that reads it"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_patterns(self, graph, ctx, PATTERNS)
