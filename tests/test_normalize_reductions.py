"""normalize-reductions: a sum whose dims come back by Unsqueeze keeps them, a sum over the
count is a mean, exp(x - c) over its sum is a softmax; a count that is not the number summed,
a shift that varies along the softmax axis and a sum read elsewhere stay as they are."""

from __future__ import annotations

import pytest

import irforge
from irforge.core_ir import parse_model
from irforge.testing import assert_preserves_semantics, assert_rewrites

_MEAN = """model {{
  opset "" = {opset}
  graph @g(%x: f32[2,3,4]) {{
    init %axes = dense<i64[1]>[-1]
    init %n = dense<f32[]>[{count}]
    %s: f32[2,3] = ReduceSum(%x, %axes) <keepdims = 0>
    %u: f32[2,3,1] = Unsqueeze(%s, %axes)
    %m: f32[2,3,1] = Div(%u, %n)
    %y = Sub(%x, %m)
    return %y
  }}
}}"""


def test_a_sum_unsqueezed_and_divided_by_its_count_is_a_mean():
    assert_rewrites("normalize-reductions,dce", _MEAN.format(opset=18, count="4.0"), """model {
  opset "" = 18
  graph @g(%x: f32[2,3,4]) {
    init %const_2 = dense<i64[1]>[2]
    %m: f32[2,3,1] = ReduceMean(%x, %const_2) <keepdims = 1>
    %y = Sub(%x, %m)
    return %y
  }
}""")
    assert_preserves_semantics("normalize-reductions,dce", _MEAN.format(opset=18, count="4.0"))


def test_before_opset_18_the_mean_takes_its_axes_as_an_attribute():
    model = parse_model(_MEAN.format(opset=17, count="4.0"))
    irforge.optimize(model, "normalize-reductions,dce")
    (mean,) = (n for n in model.graph if n.op_type == "ReduceMean")
    assert list(mean.attr("axes")) == [2] and len(mean.inputs) == 1
    assert_preserves_semantics("normalize-reductions,dce", _MEAN.format(opset=17, count="4.0"))


def test_a_count_that_is_not_the_number_summed_stays_a_division():
    model = parse_model(_MEAN.format(opset=18, count="3.0"))
    irforge.optimize(model, "normalize-reductions,dce")
    assert "ReduceMean" not in {n.op_type for n in model.graph}


_SOFTMAX = """model {{
  opset "" = 18
  graph @g(%x: f32[2,3,4], %c: f32[{shift}]) {{
    init %axes = dense<i64[1]>[2]
    %d: f32[2,3,4] = Sub(%x, %c)
    %e: f32[2,3,4] = Exp(%d)
    %s: f32[2,3] = ReduceSum(%e, %axes) <keepdims = 0>
    %u: f32[2,3,1] = Unsqueeze(%s, %axes)
    %y: f32[2,3,4] = Div(%e, %u)
    return %y{extra}
  }}
}}"""


@pytest.mark.parametrize("shift", ["2,3,1", "1"])
def test_exp_over_its_sum_is_a_softmax_whatever_it_was_shifted_by(shift):
    text = _SOFTMAX.format(shift=shift, extra="")
    model = parse_model(text)
    irforge.optimize(model, "normalize-reductions,dce")
    assert [n.op_type for n in model.graph] == ["Softmax"] and model.graph.nodes[0].attr("axis") == 2
    assert_preserves_semantics("normalize-reductions,dce", text)


@pytest.mark.parametrize(("shift", "extra"), [("2,3,4", ""), ("2,3,1", ", %s")])
def test_a_shift_along_the_axis_or_a_sum_read_elsewhere_is_no_softmax(shift, extra):
    text = _SOFTMAX.format(shift=shift, extra=extra)
    model = parse_model(text)
    irforge.optimize(model, "normalize-reductions,dce")
    assert "Softmax" not in {n.op_type for n in model.graph}
    assert_preserves_semantics("normalize-reductions,dce", text)
