"""cse and dce: IR in, IR out, same numbers; random ops and foreign-domain ops are kept."""

from __future__ import annotations

import numpy as np

from irforge.core_ir import Model, interpret, parse_graph
from irforge.passes.manager import PassManager
from irforge.plugins import build_registry

PASSES = build_registry(discover=False).passes


def _run(text: str, pipeline: str):
    g = parse_graph(text)
    feed = {v.name: np.random.default_rng(1).standard_normal([int(d) for d in v.type.shape]).astype(np.float32)
            for v in g.inputs}  # fmt: skip
    deterministic = not any(n.op_type.startswith("Random") for n in g)
    before = interpret(g, feed) if deterministic else None
    changed = PassManager.parse(pipeline, PASSES).run(Model(g))
    if before is not None:
        for a, b in zip(before, interpret(g, feed), strict=True):
            np.testing.assert_array_equal(a, b)
    return g, changed


def test_cse_merges_equal_nodes_and_constants():
    g, changed = _run(
        "graph @g(%x: f32[3]) {\n  %c1 = Constant() <value = dense<f32[1]>[2.0]>\n"
        "  %c2 = Constant() <value = dense<f32[1]>[2.0]>\n  %a = Mul(%x, %c1)\n  %b = Mul(%x, %c2)\n"
        "  %s = Add(%a, %b)\n  return %s\n}\n",
        "cse",
    )
    assert changed and [n.op_type for n in g] == ["Constant", "Mul", "Add"]


def test_cse_keeps_different_attributes_apart():
    g, changed = _run(
        "graph @g(%x: f32[2,3]) {\n  %a = Softmax(%x) <axis = 0>\n  %b = Softmax(%x) <axis = 1>\n"
        "  %s = Add(%a, %b)\n  return %s\n}\n",
        "cse",
    )
    assert not changed and len(g) == 3


def test_cse_never_merges_random_draws():
    g, changed = _run(
        "graph @g(%x: f32[3]) {\n  %a = RandomNormalLike(%x)\n  %b = RandomNormalLike(%x)\n"
        "  %s = Sub(%a, %b)\n  return %s\n}\n",
        "cse",
    )
    assert not changed and len(g) == 3


def test_cse_keeps_two_graph_outputs_distinct():
    g, changed = _run("graph @g(%x: f32[3]) {\n  %a = Neg(%x)\n  %b = Neg(%x)\n  return %a, %b\n}\n", "cse")
    assert not changed and [v.name for v in g.outputs] == ["a", "b"]


def test_cse_moves_a_graph_output_with_its_name():
    g, changed = _run(
        "graph @g(%x: f32[3]) {\n  %a = Neg(%x)\n  %r = Relu(%a)\n  %b = Neg(%x)\n  return %r, %b\n}\n", "cse"
    )
    assert changed and len(g) == 2 and [v.name for v in g.outputs] == ["r", "b"]


def test_dce_removes_unread_chains():
    g, changed = _run("graph @g(%x: f32[3]) {\n  %d = Exp(%x)\n  %e = Log(%d)\n  %y = Neg(%x)\n  return %y\n}\n", "dce")
    assert changed and [n.op_type for n in g] == ["Neg"]


def test_dce_keeps_ops_of_other_domains():
    """An op of an unknown domain may have effects beyond its outputs (logging, I/O)."""
    g = parse_graph("graph @g(%x: f32[3]) {\n  %d = my::Log(%x)\n  %y = Neg(%x)\n  return %y\n}\n")
    assert not PassManager.parse("dce", PASSES).run(Model(g))
    assert [n.op_type for n in g] == ["Log", "Neg"]



def _dense(values) -> str:
    return "dense<f32[10,10]>[" + ", ".join(f"{v:.1f}" for v in values) + "]"


def _two_matmuls(second) -> str:
    """%x times two 100-element weights (over the by-value limit): equal bytes or not."""
    return (
        f"graph @g(%x: f32[2,10]) {{\n  init %w1 = {_dense(range(100))}\n  init %w2 = {_dense(second)}\n"
        "  %a = MatMul(%x, %w1)\n  %b = MatMul(%x, %w2)\n  %s = Add(%a, %b)\n  return %s\n}\n"
    )


def test_cse_shares_initializers_with_equal_bytes():
    g, changed = _run(_two_matmuls(range(100)), "cse,dce")
    assert changed and [n.op_type for n in g] == ["MatMul", "Add"]
    assert list(g.initializers) == ["w1"]


def test_cse_keeps_initializers_that_differ_past_the_probe():
    g, changed = _run(_two_matmuls([*range(99), 7]), "cse,dce")
    assert not changed and [n.op_type for n in g] == ["MatMul", "MatMul", "Add"]
