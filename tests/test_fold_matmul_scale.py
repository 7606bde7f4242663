"""fold-matmul-scale: a constant scalar Mul or Div next to a MatMul by constant weights joins the
weights; a scale that is not a scalar, not constant, or whose intermediate is read again stays."""

from __future__ import annotations

import numpy as np
import pytest

import irforge
from irforge.core_ir import parse_model
from irforge.testing import assert_preserves_semantics

_GRAPH = """model {{
  opset "" = 21
  graph @g(%x: f32[2,3], %k: f32[]) {{
    init %w = dense<f32[3,2]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    init %c = dense<f32[{cshape}]>[{cvalue}]
    {body}
    return %y{extra}
  }}
}}"""

_AFTER = "%t = MatMul(%x, %w)\n    %y = {op}(%t, {c})"
_BEFORE = "%t = {op}(%x, {c})\n    %y = MatMul(%t, %w)"


def _graph(body=_AFTER, op="Mul", c="%c", cshape="", cvalue="4.0", extra=""):
    return _GRAPH.format(body=body.format(op=op, c=c), cshape=cshape, cvalue=cvalue, extra=extra)


@pytest.mark.parametrize(("body", "op", "factor"), [
    (_AFTER, "Mul", 4.0), (_AFTER, "Div", 0.25), (_BEFORE, "Mul", 4.0), (_BEFORE, "Div", 0.25),
])  # fmt: skip
def test_a_scalar_factor_joins_the_weights(body, op, factor):
    text = _graph(body=body, op=op)
    model = parse_model(text)
    irforge.optimize(model, "fold-matmul-scale,dce")
    (node,) = model.graph
    assert node.op_type == "MatMul"
    np.testing.assert_allclose(node.inputs[1].const_value.numpy(),
                               np.array([[0.5, -1.0], [2.0, 0.25], [-0.5, 1.5]]) * factor)  # fmt: skip
    assert_preserves_semantics("fold-matmul-scale,dce", text)


@pytest.mark.parametrize("case", [
    {"cshape": "2", "cvalue": "4.0, 2.0"},  # per-column: a different fold, not this one
    {"c": "%k"},  # not a constant
    {"extra": ", %t"},  # the unscaled product is read too
    {"op": "Div", "cvalue": "0.0"},  # a division by zero stays as written
])  # fmt: skip
def test_near_misses_stay(case):
    text = _graph(**case)
    model = parse_model(text)
    irforge.optimize(model, "fold-matmul-scale")
    assert len(model.graph) == 2
    if case.get("cvalue") != "0.0":
        assert_preserves_semantics("fold-matmul-scale", text)
