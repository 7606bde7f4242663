"""Rollback by journal: every built-in pass, stopped at a random mutation, leaves the model
exactly as it was (structurally equal, same node order, consistent use lists); random edits
under nested journals undo exactly; and the paranoid cross-check agrees."""

from __future__ import annotations

import os
import random

import firing_cases as fc
import pytest
import test_light_models as tlm
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ir_mutation import check_use_lists

import irforge
from irforge.core_ir import Builder, DataType, Graph, TensorType, clone_model, models_equal, print_model, verify_model
from irforge.core_ir import journal as jr
from irforge.passes import Instrument, PassFailedError, PassManager
from irforge.plugins import build_registry

REGISTRY = build_registry(discover=False)
PASSES = sorted(REGISTRY.passes)


class FailAfter(Instrument):
    """Makes the pass fail at its ``n``-th mutation (the journal counts them)."""

    def __init__(self, n: int):
        self.n = n

    def before_pass(self, pass_, model, ctx):
        jr.ACTIVE.fail_after(self.n)


class CountMutations(Instrument):
    BIG = 10**12

    def __init__(self) -> None:
        self.count = 0

    def before_pass(self, pass_, model, ctx):
        jr.ACTIVE.fail_after(self.BIG)

    def after_pass(self, pass_, model, ctx, result):
        self.count = self.BIG - (jr.ACTIVE.countdown or self.BIG)
        jr.ACTIVE.countdown = None


def _mutations(pass_name: str, make) -> int:
    counter = CountMutations()
    PassManager.parse(pass_name, REGISTRY, instruments=[counter]).run(make())
    return counter.count


def _fail_and_compare(pass_name: str, make, n: int, paranoid: bool = False) -> None:
    model, original = make(), make()
    text = print_model(model)
    pm = PassManager.parse(pass_name, REGISTRY, instruments=[FailAfter(n)], paranoid_rollback=paranoid)
    with pytest.raises(PassFailedError, match="injected failure"):
        pm.run(model)
    assert models_equal(model, original) is None
    assert print_model(model) == text  # node order and names exactly as before
    for fn in [model.graph, *(f.graph for f in model.functions.values())]:
        check_use_lists(fn)
    # and the rolled-back model rewrites exactly as a fresh one does
    fresh = make()
    PassManager.parse(pass_name, REGISTRY).run(fresh)
    PassManager.parse(pass_name, REGISTRY).run(model)
    assert print_model(model) == print_model(fresh)


@pytest.mark.parametrize(("pass_name", "case"), fc.all_cases())
def test_a_pass_stopped_at_any_mutation_is_rolled_back_exactly(pass_name, case):
    make = lambda: fc.model(pass_name, case)  # noqa: E731
    total = _mutations(pass_name, make)
    assert total > 0, f"{pass_name} made no mutation on {case}"
    points = sorted({1, total, *random.Random(f"{pass_name}/{case}").sample(range(1, total + 1), min(total, 6))})
    for n in points:
        _fail_and_compare(pass_name, make, n)


LIGHT = [m for m in tlm.MODELS if os.path.basename(m) in ("light_resnet50.onnx", "light_squeezenet.onnx")]


@pytest.mark.parametrize("path", LIGHT, ids=os.path.basename)
def test_every_pass_rolls_back_on_light_models(path):
    """Each pass in turn, on the model as -O1 hands it over (weights frozen, functions inlined,
    shapes inferred, constants folded), stopped at its first, last and a random mutation."""
    loaded = irforge.load(path)
    PassManager.parse("freeze-initializers,inline-functions,shape-inference,constant-fold", REGISTRY).run(loaded)
    fired = []
    for pass_name in PASSES:
        make = lambda: clone_model(loaded)  # noqa: E731
        total = _mutations(pass_name, make)
        if not total:
            continue
        fired.append(pass_name)
        for n in sorted({1, total, random.Random(pass_name).randint(1, total)}):
            _fail_and_compare(pass_name, make, n)
    assert {"fuse-conv-bn", "canonicalize", "cse", "dce"} & set(fired), fired


def test_o1_stopped_in_its_fixpoint_rolls_back_only_the_failing_pass():
    make = lambda: fc.model("fuse-conv-bn", "conv-bn-scale")  # noqa: E731
    model = make()
    pm = PassManager.parse("O1", REGISTRY)
    pm.run(model)
    expected = print_model(model)

    class FailInCse(Instrument):
        def before_pass(self, pass_, model, ctx):
            if pass_.name == "cse":
                raise RuntimeError("stop here")

    model = make()
    with pytest.raises(PassFailedError, match="'cse'"):
        PassManager.parse("O1", REGISTRY, instruments=[FailInCse()]).run(model)
    verify_model(model)
    assert print_model(model) != expected  # the passes before cse kept their work


def test_paranoid_rollback_agrees_with_the_journal():
    make = lambda: fc.model("canonicalize", "identities")  # noqa: E731
    _fail_and_compare("canonicalize", make, 3, paranoid=True)


def test_paranoid_rollback_catches_an_edit_the_journal_cannot_see():
    from dataclasses import dataclass

    from irforge.passes import Pass

    @dataclass(frozen=True)
    class EditsMetadataInPlace(Pass):
        name = "edits-metadata-in-place"

        def run(self, graph, ctx):
            graph.metadata["secret"] = "changed behind the API"
            raise RuntimeError("and fails")

    model = fc.model("dce", "dead-nodes")
    pm = PassManager.parse("edits-metadata-in-place", {"edits-metadata-in-place": EditsMetadataInPlace},
                           paranoid_rollback=True)  # fmt: skip
    with pytest.raises(PassFailedError, match="rollback did not restore the model"):
        pm.run(model)


# -- random edits under nested journals --------------------------------------------------------

F32 = TensorType(DataType.FLOAT, (4,))
EDITS = ["relu", "add", "rauw", "remove", "set_input", "insert", "move", "sort", "output", "type", "name",
         "attr", "init", "subgraph", "nest"]  # fmt: skip


def _base() -> Graph:
    g = Graph(name="g")
    b = Builder(g)
    x = b.input("x", F32)
    y = b.op.Relu(b.op.Neg(x))
    g.set_outputs([y])
    return g


def _edit(g: Graph, op: str, r1: int, r2: int, nested: list) -> None:
    b = Builder(g)
    nodes = g.nodes
    values = list(g.inputs) + [o for n in nodes for o in n.outputs]
    v1, v2 = values[r1 % len(values)], values[r2 % len(values)]
    pos = {n: i for i, n in enumerate(nodes)}
    # only reads of values defined earlier in the list and not downstream of n, so no cycle forms
    earlier = lambda a, n: a.producer() is None or (  # noqa: E731
        pos.get(a.producer(), -1) < pos[n] and not _reaches(n, a.producer()))
    if op == "relu":
        b.op.Relu(v1)
    elif op == "add":
        b.op.Add(v1, v2)
    elif op == "rauw" and v1.producer() is not None and v2 is not v1 and earlier(v2, v1.producer()):
        v1.replace_all_uses_with(v2)
    elif op == "remove":
        dead = [n for n in nodes if not any(o.has_uses() for o in n.outputs)]
        if dead:
            g.remove(dead[r1 % len(dead)])
    elif op == "set_input" and nodes:
        n = nodes[r1 % len(nodes)]
        if earlier(v2, n):
            n.set_input(r2 % len(n.inputs), v2)
    elif op == "insert" and nodes:
        Builder(g, before=nodes[r1 % len(nodes)]).op.Abs(g.inputs[0])
    elif op in ("move", "sort") and len(nodes) > 1:
        g.move_after(nodes[-1], nodes[r1 % len(nodes)]) if nodes[r1 % len(nodes)] is not nodes[-1] else None
        if op == "sort":
            g.sort()
    elif op == "output":
        g.set_output(0, v1)
    elif op == "type":
        v1.type = TensorType(DataType.FLOAT, (r2 % 7,))
    elif op == "name" and nodes:
        nodes[r1 % len(nodes)].name = f"n{r2}"
    elif op == "attr" and nodes:
        nodes[r1 % len(nodes)].set_attribute("k", r2)
    elif op == "init":
        import numpy as np

        from irforge.core_ir import NumpyTensor, Value

        name = f"w{r1}"
        if name not in g.initializers:
            g.add_initializer(Value(name, F32, NumpyTensor(np.full(4, r2, np.float32))))
    elif op == "subgraph" and nodes and earlier(v1, nodes[r1 % len(nodes)]):
        body = Graph(name=f"b{r1}")
        body.set_outputs([Builder(body).op.Neg(v1)])
        nodes[r1 % len(nodes)].set_attribute("body", body)
    elif op == "nest":
        if nested and r1 % 2:
            j = nested.pop()
            j.rollback() if r2 % 2 else j.commit()
        else:
            nested.append(jr.Journal().open())


def _reaches(src, dst) -> bool:
    """Whether ``dst`` reads (transitively) a result of ``src``."""
    stack, seen = [src], set()
    while stack:
        n = stack.pop()
        if n is dst:
            return True
        for o in n.outputs:
            for user, _ in o.uses():
                if user not in seen:
                    seen.add(user)
                    stack.append(user)
    return False


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(EDITS), st.integers(0, 10**6), st.integers(0, 10**6)), max_size=40),
    st.booleans(),
)
def test_random_edits_under_nested_journals_roll_back_exactly(steps, commit_inner):
    g = _base()
    from irforge.core_ir import Model

    model = Model(g)
    before = print_model(model)
    outer = jr.Journal().open()
    nested: list = []
    try:
        for op, r1, r2 in steps:
            _edit(g, op, r1, r2, nested)
            check_use_lists(g)
    finally:
        while nested:
            j = nested.pop()
            j.commit() if commit_inner else j.rollback()
        outer.rollback()
    assert jr.ACTIVE is None
    assert print_model(model) == before
    check_use_lists(g)
    assert len(g) == len(g.nodes)
