"""The mutation API keeps use-def chains right at every step, and refuses unsafe changes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irforge.core_ir import (
    Builder,
    DataType,
    Graph,
    IRError,
    Node,
    TensorType,
    Value,
    clone_graph,
    interpret,
    parse_graph,
    structural_diff,
    verify,
)

F32 = TensorType(DataType.FLOAT, (4,))


def check_use_lists(g: Graph) -> None:
    """The invariant: a value's uses are exactly the (node, index) pairs that read it."""
    expected: dict[Value, set] = {}
    for n in g.all_nodes():
        for i, v in enumerate(n.inputs):
            if v is not None:
                expected.setdefault(v, set()).add((n, i))
    seen = set()
    for gg in g.all_graphs():
        for v in gg.values():
            seen.add(v)
            assert set(v.uses()) == expected.get(v, set()), v
            for n in gg:
                for o in n.outputs:
                    if o is not None:
                        assert o.producer() is n
    for v, uses in expected.items():
        assert set(v.uses()) == uses
    outputs = [v for gg in g.all_graphs() for v in gg.outputs]
    for v in outputs:
        assert v.is_graph_output()


def chain(n: int = 3) -> tuple[Graph, Builder]:
    g = Graph(name="chain")
    b = Builder(g)
    x = b.input("x", F32)
    v = x
    for _ in range(n):
        v = b.op.Relu(v)
    g.set_outputs([v])
    return g, b


def test_builder_names_and_uses():
    g, _ = chain(2)
    r1, r2 = g.nodes
    assert r1.outputs[0].uses() == [(r2, 0)]
    assert r1.outputs[0].name != r2.outputs[0].name
    check_use_lists(g)


def test_replace_all_uses_with_keeps_output_name():
    g = parse_graph("graph @g(%x: f32[4]) {\n  %a = Relu(%x)\n  %y = Neg(%a)\n  return %y\n}")
    a_node, neg = g.nodes
    new = Builder(g, after=neg).op.Abs(a_node.outputs[0])
    old = neg.outputs[0]
    old.replace_all_uses_with(new)
    assert g.outputs[0] is new and new.name == "y"
    assert not old.is_graph_output()
    g.remove(neg)
    verify(g)
    check_use_lists(g)


def test_remove_refuses_used_node_and_changes_nothing():
    g, _ = chain(3)
    before = str(g)
    first = g.nodes[0]
    with pytest.raises(IRError, match="still used"):
        g.remove(first)
    with pytest.raises(IRError, match="graph output"):
        g.remove(g.nodes[-1])
    assert str(g) == before
    check_use_lists(g)


def test_bulk_remove_checks_before_mutating():
    g, _ = chain(3)
    before = str(g)
    with pytest.raises(IRError):
        g.remove(g.nodes[:2])  # node 1's output is still read by node 2
    assert str(g) == before
    g.set_outputs([g.inputs[0]])
    g.remove(g.nodes)  # all three at once: fine, uses are internal to the batch
    assert len(g) == 0
    assert g.inputs[0].uses() == []


def test_iteration_is_safe_under_removal_and_insertion():
    g, _ = chain(5)
    g.set_outputs([g.inputs[0]])
    visited = []
    for n in g:
        visited.append(n)
        if len(visited) == 2:
            g.remove(list(g.reversed())[:3])  # nodes 3..5, ahead of the cursor
    assert len(visited) == 2
    g2, _ = chain(2)
    seen = []
    for n in g2:
        seen.append(n.op_type)
        if n.op_type == "Relu" and len(seen) == 1:
            Builder(g2, after=n).op.Neg(n.outputs[0])  # inserted after the cursor: visited
    assert seen == ["Relu", "Neg", "Relu"]
    g3, _ = chain(3)
    order = []
    for n in g3:
        order.append(n)
        n.outputs[0].replace_all_uses_with(n.inputs[0])
        g3.remove(n)  # removing the current node: iteration continues with its successor
    assert len(order) == 3 and len(g3) == 0


def test_insert_before_after_and_move():
    g, _ = chain(2)
    r1, r2 = g.nodes
    n = Node("Neg", [r1.outputs[0]])
    g.insert_after(r1, n)
    assert g.nodes == [r1, n, r2]
    g.move_before(r1, r2)
    assert g.nodes == [r2, r1, n]
    g.sort()  # stable: r1 first (r2 needs it), then r2 and n in their current order
    assert g.nodes == [r1, r2, n]
    with pytest.raises(IRError, match="already in a graph"):
        g.append(n)


def test_sort_reports_cycles():
    g = parse_graph("graph @c(%x: f32[1]) {\n  %a = Add(%x, %b)\n  %b = Relu(%a)\n  return %b\n}")
    with pytest.raises(IRError, match="cycle"):
        g.sort()


def test_clone_is_equal_and_independent():
    g = parse_graph(
        """graph @g(%c: bool[], %x: f32[4]) {
  init %w = dense<f32[4]>[1.0, 2.0, 3.0, 4.0]
  %y = Add(%x, %w)
  %z = If(%c) <then_branch = graph @t() {
      %n = Neg(%y)
      return %n
    }, else_branch = graph @e() {
      return %y
    }>
  return %z
}"""
    )
    c = clone_graph(g)
    assert structural_diff(g, c) is None
    add = c.nodes[0]
    inner = c.nodes[1].attributes["then_branch"].value.nodes[0]
    assert inner.inputs[0] is add.outputs[0]  # outer reference remapped to the clone
    c.nodes[0].name = "changed"
    assert g.nodes[0].name == ""
    check_use_lists(c)
    check_use_lists(g)


def test_initializers_and_inputs_api():
    g = Graph(name="g")
    b = Builder(g)
    x = b.input("x", F32)
    w = b.constant(np.ones(4, np.float32), name="w")
    y = b.op.Add(x, w)
    g.set_outputs([y])
    with pytest.raises(IRError, match="still used"):
        g.remove_initializer(w)
    with pytest.raises(IRError, match="already has an initializer"):
        g.add_initializer(Value("w", F32, w.const_value))
    np.testing.assert_array_equal(interpret(g, [np.zeros(4, np.float32)])[0], np.ones(4))


# -- property-based: random mutation sequences ---------------------------------------------------

OPS = ["relu", "add", "rauw", "remove_dead", "set_input", "insert_before", "move", "set_output", "clone"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10**6), st.integers(0, 10**6)), max_size=40))
def test_random_mutations_keep_use_lists_consistent(steps):
    g = Graph(name="rand")
    b = Builder(g)
    inputs = [b.input(f"in{i}", F32) for i in range(2)]
    g.set_outputs([inputs[0]])
    for op, r1, r2 in steps:
        nodes = g.nodes
        values = list(inputs) + [o for n in nodes for o in n.outputs]
        v1, v2 = values[r1 % len(values)], values[r2 % len(values)]
        if op == "relu":
            b.op.Relu(v1)
        elif op == "add":
            b.op.Add(v1, v2)
        elif op == "rauw" and v1.producer() is not None and v2 is not v1:
            # only replace with values defined earlier, so the graph stays acyclic
            pos = {n: i for i, n in enumerate(nodes)}
            p2 = v2.producer()
            if p2 is None or pos[p2] < pos[v1.producer()]:
                v1.replace_all_uses_with(v2)
        elif op == "remove_dead":
            dead = [n for n in nodes if not any(o.has_uses() for o in n.outputs)]
            if dead:
                g.remove(dead[r1 % len(dead)])
        elif op == "set_input" and nodes:
            n = nodes[r1 % len(nodes)]
            pos = {m: i for i, m in enumerate(nodes)}
            p2 = v2.producer()
            if p2 is None or pos[p2] < pos[n]:
                n.set_input(r2 % len(n.inputs), v2)
        elif op == "insert_before" and nodes:
            anchor = nodes[r1 % len(nodes)]
            Builder(g, before=anchor).op.Neg(inputs[r2 % 2])
        elif op == "move" and len(nodes) > 1:
            n = nodes[r1 % len(nodes)]
            g.move_after(nodes[-1], n) if n is not nodes[-1] else None
            g.sort()
        elif op == "set_output":
            g.set_output(0, v1)
        elif op == "clone":
            c = clone_graph(g)
            assert structural_diff(g, c) is None
            check_use_lists(c)
        check_use_lists(g)
        assert len(g) == len(g.nodes)
    assert verify(g, raise_on_error=False) == []
