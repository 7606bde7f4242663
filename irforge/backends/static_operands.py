"""Operands whose values fix the shape of a result.

Compilers that build static shapes (XLA, TVM) must know these values when they compile: a
``Reshape``'s shape, a ``Slice``'s bounds, reduction axes.  When such a value comes from a graph
input, the compiled model specializes on it (one executable per value it meets).
"""

from __future__ import annotations

from ..core_ir.model import Model

STATIC_OPERANDS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Squeeze": (1,), "Unsqueeze": (1,),
    "Split": (1,), "Pad": (1, 3), "ConstantOfShape": (0,), "Range": (0, 1, 2), "OneHot": (1,), "TopK": (1,),
    "CumSum": (1,), "CumProd": (1,), "Trilu": (1,), "Dropout": (1, 2), "Resize": (1, 2, 3),
    "DFT": (1, 2), "Col2Im": (1, 2), "AffineGrid": (1,), "STFT": (1, 2, 3),
    **{f"Reduce{k}": (1,) for k in ("Sum", "Mean", "Max", "Min", "Prod", "L1", "L2", "LogSum", "LogSumExp",
                                     "SumSquare")},
}  # fmt: skip
"""op type -> indices of the operands that fix a result's shape."""


def static_inputs(model: Model) -> list:
    """Graph inputs whose values fix a result's shape (a ``Reshape``'s shape fed as an input):
    the lowering needs their values, so a compiled model specializes on them."""
    graph = model.graph
    wanted = {v for v in graph.inputs if not v.is_initializer()}
    found: set = set()
    seen: set = set()
    stack = []
    for g in graph.all_graphs():
        for node in g:
            for i in STATIC_OPERANDS.get(node.op_type, ()) if not node.domain else ():
                if i < len(node.inputs) and node.inputs[i] is not None:
                    stack.append(node.inputs[i])
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in wanted:
            found.add(v)
        p = v.producer()
        if p is not None and p.op_type not in ("Shape", "Size"):
            stack.extend(x for x in p.inputs if x is not None)
            for g in p.subgraphs():  # an If's or Loop's results come from its branches' outputs
                stack.extend(g.outputs)
    return [v for v in graph.inputs if v in found]
