"""The pattern rewriter: IR in, IR out, the numbers unchanged, and every rewrite recorded."""

from __future__ import annotations

import numpy as np
import pytest

from irforge.core_ir import interpret, parse_graph, print_graph
from irforge.core_ir.pattern import Pattern
from irforge.core_ir.rewriter import PROVENANCE, apply_patterns


def _double_neg(p):
    return p.op.Neg(p.op.Neg(p.var("x")))


DOUBLE_NEG = Pattern("double-negation", _double_neg, lambda b, m: m["x"])


def _add_zero(p):
    return p.op.Add(p.var("x"), p.const("zero"))


def _is_zero_and_keeps_shape(m):
    c = m.constant("zero")
    if c is None or np.any(c != 0):
        return m.fail("the constant is not all zeros")
    if m.shape("x") is None or c.ndim > m.rank("x"):
        return m.fail("adding it could broadcast x")
    return True


ADD_ZERO = Pattern("add-zero", _add_zero, lambda b, m: m["x"], check=_is_zero_and_keeps_shape)


def _split_of_neg(p):
    return p.op.Split(p.op.Neg(p.var("x")), _outputs=2, axis=0)


def _negate_each_half(b, m):
    lo, hi = b.op.Split(m["x"], axis=0, _outputs=2)
    return b.op.Neg(lo), b.op.Neg(hi)


SPLIT_NEG = Pattern("split-of-neg", _split_of_neg, _negate_each_half)


def _rewrite(text, patterns, **kw):
    g = parse_graph(text)
    x = {v.name: np.random.default_rng(0).standard_normal([int(d) for d in v.type.shape]).astype(np.float32)
         for v in g.inputs}  # fmt: skip
    before = interpret(g, x)
    result = apply_patterns(g, patterns, **kw)
    for a, b in zip(before, interpret(g, x), strict=True):
        np.testing.assert_array_equal(a, b)
    return g, result


def test_double_negation_collapses_and_is_recorded():
    g, result = _rewrite(
        "graph @g(%x: f32[4]) {\n  %a = Neg(%x)\n  %b = Neg(%a)\n  %c = Relu(%b)\n  return %c\n}\n", [DOUBLE_NEG]
    )
    assert [n.op_type for n in g] == ["Relu"]
    (record,) = result.records
    assert record.pattern == "double-negation"
    assert record.defined_at.endswith(f"test_pattern_rewriter.py:{_double_neg.__code__.co_firstlineno}")
    assert len(record.matched) == 2 and record.created == ()


def test_four_negations_reach_the_fixed_point():
    text = "graph @g(%x: f32[4]) {\n" + "".join(
        f"  %n{i} = Neg(%{'x' if i == 0 else f'n{i - 1}'})\n" for i in range(4)
    ) + "  return %n3\n}\n"  # fmt: skip
    g, result = _rewrite(text, [DOUBLE_NEG])
    assert len(g) == 0 and len(result.records) == 2
    assert g.outputs[0] is g.inputs[0]


@pytest.mark.parametrize("order", ["%x, %zero", "%zero, %x"])
def test_commutative_match_either_order(order):
    g, result = _rewrite(
        "graph @g(%x: f32[4]) {\n  %zero = Constant() <value = dense<f32[4]>[0.0, 0.0, 0.0, 0.0]>\n"
        f"  %y = Add({order})\n  %z = Relu(%y)\n  return %z\n}}\n",
        [ADD_ZERO],
    )
    assert [n.op_type for n in g] == ["Relu"]
    assert result.counts() == {"add-zero": 1}


def test_check_refusal_is_traced_with_the_failed_condition():
    g, result = _rewrite(
        "graph @g(%x: f32[4]) {\n  %one = Constant() <value = dense<f32[4]>[0.0, 1.0, 0.0, 0.0]>\n"
        "  %y = Add(%x, %one)\n  return %y\n}\n",
        [ADD_ZERO, DOUBLE_NEG],
        debug=True,
    )
    assert not result.changed and len(g) == 2
    node, reason = result.near_misses["add-zero"]
    assert "Add" in node and reason == "check refused: the constant is not all zeros"


def test_partial_match_reports_where_it_stopped():
    _, result = _rewrite("graph @g(%x: f32[4]) {\n  %a = Abs(%x)\n  %b = Neg(%a)\n  return %b\n}\n",
                         [DOUBLE_NEG], debug=True)  # fmt: skip
    assert "wanted Neg, found" in result.near_misses["double-negation"][1]


def test_multi_output_pattern_and_provenance():
    g, result = _rewrite(
        "graph @g(%x: f32[4]) {\n  %n = Neg(%x)\n  %s0, %s1 = Split(%n) <axis = 0, num_outputs = 2>\n"
        "  %o = Concat(%s1, %s0) <axis = 0>\n  return %o\n}\n",
        [SPLIT_NEG],
    )
    assert [n.op_type for n in g] == ["Split", "Neg", "Neg", "Concat"]
    for n in list(g)[:3]:
        assert n.metadata[PROVENANCE]
    assert result.counts() == {"split-of-neg": 1}
    assert "Split" in print_graph(g)


def test_rules_that_undo_each_other_stop_at_the_cap():
    flip = Pattern("relu-to-abs", lambda p: p.op.Relu(p.var("x")), lambda b, m: b.op.Abs(m["x"]))
    flop = Pattern("abs-to-relu", lambda p: p.op.Abs(p.var("x")), lambda b, m: b.op.Relu(m["x"]))
    g = parse_graph("graph @g(%x: f32[4]) {\n  %y = Relu(%x)\n  %z = Neg(%y)\n  return %z\n}\n")
    with pytest.warns(UserWarning, match="stopped after 7 rewrites"):
        result = apply_patterns(g, [flip, flop], max_rewrites=7)
    assert len(result.records) == 7 and len(g) == 2
