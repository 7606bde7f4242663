"""canonicalize, rule by rule: IR in, IR out, the same numbers, and the cases each rule refuses."""

from __future__ import annotations

import numpy as np
import pytest

from irforge.core_ir import interpret, parse_graph
from irforge.core_ir.rewriter import apply_patterns
from irforge.passes.canonicalize import PATTERNS

BY_NAME = {p.name: p for p in PATTERNS}


def _c(name: str, values: list, dtype: str = "f32", shape: str | None = None) -> str:
    shape = shape if shape is not None else str(len(values))
    body = ", ".join(str(v) for v in values)
    return f"  %{name} = Constant() <value = dense<{dtype}[{shape}]>[{body}]>\n"


def _i64(name: str, values: list) -> str:
    return _c(name, values, "i64")


FILL = "  %f = ConstantOfShape(%s) <value = dense<f32[1]>[0.5]>\n"

# (rule, graph body, input shape, op types left after; the graph returns %y)
CASES = [
    ("identity", "  %t = Identity(%x)\n  %y = Relu(%t)\n", "2,3", ["Relu"]),
    ("add-zero", _c("c", [0.0, 0.0, 0.0], shape="3") + "  %t = Add(%c, %x)\n  %y = Relu(%t)\n", "2,3", ["Relu"]),
    ("sub-zero", _c("c", [0.0]) + "  %t = Sub(%x, %c)\n  %y = Relu(%t)\n", "2,3", ["Relu"]),
    ("mul-one", _c("c", [1.0]) + "  %t = Mul(%x, %c)\n  %y = Relu(%t)\n", "2,3", ["Relu"]),
    ("div-one", _c("c", [1.0]) + "  %t = Div(%x, %c)\n  %y = Relu(%t)\n", "2,3", ["Relu"]),
    ("pow-one", _c("c", [1.0]) + "  %t = Pow(%x, %c)\n  %y = Relu(%t)\n", "2,3", ["Relu"]),
    ("double-neg", "  %a = Neg(%x)\n  %b = Neg(%a)\n  %y = Relu(%b)\n", "2,3", ["Relu"]),
    ("relu-idempotent", "  %a = Relu(%x)\n  %b = Relu(%a)\n  %y = Neg(%b)\n", "2,3", ["Relu", "Neg"]),
    ("abs-idempotent", "  %a = Abs(%x)\n  %b = Abs(%a)\n  %y = Neg(%b)\n", "2,3", ["Abs", "Neg"]),
    ("floor-idempotent", "  %a = Floor(%x)\n  %b = Floor(%a)\n  %y = Neg(%b)\n", "2,3", ["Floor", "Neg"]),
    ("ceil-idempotent", "  %a = Ceil(%x)\n  %b = Ceil(%a)\n  %y = Neg(%b)\n", "2,3", ["Ceil", "Neg"]),
    ("round-idempotent", "  %a = Round(%x)\n  %b = Round(%a)\n  %y = Neg(%b)\n", "2,3", ["Round", "Neg"]),
    ("sign-idempotent", "  %a = Sign(%x)\n  %b = Sign(%a)\n  %y = Neg(%b)\n", "2,3", ["Sign", "Neg"]),
    ("abs-of-neg", "  %a = Neg(%x)\n  %y = Abs(%a)\n", "2,3", ["Abs"]),
    ("concat-of-one", "  %a = Concat(%x) <axis = 0>\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    ("sum-of-one", "  %a = Sum(%x)\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    ("max-of-one", "  %a = Max(%x)\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    ("min-of-one", "  %a = Min(%x)\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    ("mean-of-one", "  %a = Mean(%x)\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    ("cast-to-same-type", "  %a = Cast(%x) <to = 1>\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    (
        "transpose-pair",
        "  %a = Transpose(%x) <perm = ints[1, 0]>\n  %b = Transpose(%a) <perm = ints[1, 0]>\n  %y = Relu(%b)\n",
        "2,3",
        ["Relu"],
    ),
    (
        "transpose-pair",
        "  %a = Transpose(%x) <perm = ints[1, 2, 0]>\n  %b = Transpose(%a) <perm = ints[0, 2, 1]>\n  %y = Relu(%b)\n",
        "2,3,4",
        ["Transpose", "Relu"],
    ),
    (
        "reshape-pair",
        _i64("s1", [6]) + _i64("s2", [3, 2]) + "  %a = Reshape(%x, %s1)\n  %b = Reshape(%a, %s2)\n  %y = Relu(%b)\n",
        "2,3",
        ["Reshape", "Relu"],
    ),
    ("reshape-to-same-shape", _i64("s", [2, 3]) + "  %a = Reshape(%x, %s)\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    ("reshape-to-same-shape", _i64("s", [0, -1]) + "  %a = Reshape(%x, %s)\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    (
        "reshape-transpose-reshape",  # a 4-D key transposed through 3-D, as the torch exporter writes it
        _i64("m", [4, 6, 5]) + _i64("s", [1, 4, 5, 6]) + "  %a = Reshape(%x, %m)\n"
        "  %b = Transpose(%a) <perm = ints[0, 2, 1]>\n  %c = Reshape(%b, %s)\n  %y = Relu(%c)\n",
        "1,4,6,5",
        ["Transpose", "Relu"],
    ),
    (
        "reshape-transpose-reshape",  # a repeated key transposed through 3-D across the repeat
        _i64("m", [8, 4, 3]) + _i64("s", [1, 8, 3, 4]) + "  %a = Reshape(%x, %m)\n"
        "  %b = Transpose(%a) <perm = ints[0, 2, 1]>\n  %c = Reshape(%b, %s)\n  %y = Relu(%c)\n",
        "1,2,4,4,3",
        ["Transpose", "Reshape", "Relu"],
    ),
    (
        "transpose-of-merge",
        _i64("s", [1, 8, 4, 3]) + "  %a = Reshape(%x, %s)\n  %b = Transpose(%a) <perm = ints[0, 1, 3, 2]>\n"
        "  %y = Relu(%b)\n",
        "1,2,4,4,3",
        ["Transpose", "Reshape", "Relu"],
    ),
    ("expand-to-same-shape", _i64("s", [2, 3]) + "  %a = Expand(%x, %s)\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    (
        "squeeze-of-unsqueeze",
        _i64("a", [0]) + _i64("b", [0]) + "  %u = Unsqueeze(%x, %a)\n  %s = Squeeze(%u, %b)\n  %y = Relu(%s)\n",
        "2,3",
        ["Relu"],
    ),
    ("dropout-inference", "  %a = Dropout(%x)\n  %y = Relu(%a)\n", "2,3", ["Relu"]),
    (
        "reshape-of-filled",
        _i64("s", [2, 3]) + _i64("t", [0, -1, 1]) + FILL + "  %r = Reshape(%f, %t)\n  %y = Add(%x, %r)\n",
        "2,3,1",
        ["ConstantOfShape", "Add"],
    ),
    (
        "transpose-of-filled",
        _i64("s", [3, 2]) + FILL + "  %r = Transpose(%f) <perm = ints[1, 0]>\n  %y = Add(%x, %r)\n",
        "2,3",
        ["ConstantOfShape", "Add"],
    ),
    *(
        (f"{op.lower()}-of-flatten", _i64("t", [2, 5, 1, 1]) + f"  %f = Flatten(%x) <axis = 1>\n"
         f"  %s = {op}(%f) <axis = 1>\n  %y = Reshape(%s, %t)\n", "2,5,1,1", [op])
        for op in ("Softmax", "LogSoftmax", "Hardmax")
    ),
    (
        "dropout-inference-ratio",
        _c("r", [0.5], shape="") + "  %a = Dropout(%x, %r)\n  %y = Relu(%a)\n",
        "2,3",
        ["Relu"],
    ),
    (
        "dropout-training-off",
        _c("r", [0.5], shape="") + _c("t", ["false"], "bool", "") + "  %a = Dropout(%x, %r, %t)\n  %y = Relu(%a)\n",
        "2,3",
        ["Relu"],
    ),
    ("double-not", "  %a = Not(%x)\n  %b = Not(%a)\n  %y = Not(%b)\n", "2,3", ["Not"]),
]

FILL = "  %f = ConstantOfShape(%s) <value = dense<f32[1]>[0.5]>\n"

# (rule, graph body, input shape): the rule must leave these alone
REFUSED = [
    ("add-zero", _c("c", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0], shape="2,1,3") + "  %y = Add(%x, %c)\n", "2,3"),  # broadcasts
    ("add-zero", _c("c", [0.0, 1.0, 0.0], shape="3") + "  %y = Add(%x, %c)\n", "2,3"),  # not zero
    ("mul-one", _c("c", [1.0, 1.0], shape="2,1") + "  %t = Mul(%x, %c)\n  %y = Relu(%t)\n", "3"),  # broadcasts
    ("identity", "  %y = Identity(%x)\n", "2,3"),  # the graph input cannot become the graph output
    ("cast-to-same-type", "  %y2 = Cast(%x) <to = 10>\n  %y = Cast(%y2) <to = 1>\n", "2,3"),
    (
        "reshape-pair",
        _i64("s1", [6]) + _i64("s2", [0, -1]) + "  %a = Reshape(%x, %s1)\n  %y = Reshape(%a, %s2)\n",
        "2,3",
    ),
    ("reshape-to-same-shape", _i64("s", [3, 2]) + "  %y = Reshape(%x, %s)\n", "2,3"),
    (
        "transpose-of-merge",  # a split, not a merge
        _i64("s", [2, 2, 3]) + "  %a = Reshape(%x, %s)\n  %y = Transpose(%a) <perm = ints[0, 2, 1]>\n",
        "4,3",
    ),
    (
        "reshape-transpose-reshape",  # the last Reshape does not split the merged axes back
        _i64("m", [6, 4]) + _i64("s", [4, 3, 2]) + "  %a = Reshape(%x, %m)\n"
        "  %b = Transpose(%a) <perm = ints[1, 0]>\n  %y = Reshape(%b, %s)\n",
        "2,3,4",
    ),
    (
        "squeeze-of-unsqueeze",
        _i64("a", [0]) + _i64("b", [2]) + "  %u = Unsqueeze(%x, %a)\n  %y = Squeeze(%u, %b)\n",
        "2,1",
    ),
    ("dropout-inference", "  %a, %mask = Dropout(%x)\n  %y = Where(%mask, %a, %x)\n", "2,3"),
    ("reshape-of-filled", _i64("s", [3, 2]) + FILL + "  %t = Shape(%x)\n  %y = Reshape(%f, %t)\n", "2,3"),
    (
        "softmax-of-flatten",
        _i64("t", [2, 5, 3]) + "  %f = Flatten(%x) <axis = 1>\n  %s = Softmax(%f)\n  %y = Reshape(%s, %t)\n",
        "2,5,3",
    ),
    (
        "dropout-training-off",
        _c("r", [0.0], shape="") + _c("t", ["true"], "bool", "") + "  %y = Dropout(%x, %r, %t)\n",
        "2,3",
    ),
]


def _graph(body: str, shape: str, dtype: str = "f32"):
    return parse_graph(f"graph @g(%x: {dtype}[{shape}]) {{\n{body}  return %y\n}}\n")


def _feed(g):
    v = g.inputs[0]
    shape = [int(d) for d in v.type.shape]
    data = np.random.default_rng(0).standard_normal(shape) * 3
    return {v.name: (data > 0) if v.type.dtype == 9 else data.astype(np.float32)}


def _check_same_numbers(g, rule):
    feed = _feed(g)
    before = interpret(g, feed)
    result = apply_patterns(g, [BY_NAME[rule]])
    for a, b in zip(before, interpret(g, feed), strict=True):
        np.testing.assert_array_equal(a, b)
    return result


@pytest.mark.parametrize(("rule", "body", "shape", "after"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule_rewrites_and_keeps_numbers(rule, body, shape, after):
    g = _graph(body, shape, "bool" if "Not" in body else "f32")
    result = _check_same_numbers(g, rule)
    assert rule in result.counts()
    assert [n.op_type for n in g if n.op_type != "Constant"] == after


@pytest.mark.parametrize(("rule", "body", "shape"), REFUSED, ids=[f"{c[0]}-{i}" for i, c in enumerate(REFUSED)])
def test_rule_refuses_what_would_change_results(rule, body, shape):
    g = _graph(body, shape)
    before = [n.op_type for n in g]
    result = _check_same_numbers(g, rule)
    assert not result.changed
    assert [n.op_type for n in g] == before


def test_every_rule_has_a_case():
    assert {c[0] for c in CASES} == set(BY_NAME)
    assert len(BY_NAME) >= 25
