"""fuse-elementwise: TVM FuseOps-style groups.  A product takes its element-wise epilogue (diamonds
included), element-wise and injective chains group and may end in a reduction, opaque ops split
groups, two products never share one, nothing joins a product's group from its input side; each
group is one irforge::FusedGroup call whose function holds the nodes, so outputs stay the same on
the reference interpreter, onnxruntime and xla."""

from __future__ import annotations

import numpy as np
import pytest
import zoo
from conftest import COUNTS

import irforge
from irforge.core_ir import interpret, parse_model, verify_model
from irforge.core_ir.clone import clone_model
from irforge.passes.fuse_elementwise import Kind, find_groups, kind
from irforge.testing import _onnxruntime_outputs, assert_preserves_semantics, assert_rewrites

_HEAD = 'model {\n  opset "" = 21\n'


def _ops_of_groups(model) -> list[list[str]]:
    return [[n.op_type for n in model.functions[(c.domain, c.op_type, c.overload)].graph]
            for c in model.graph if c.op_type == "FusedGroup"]  # fmt: skip


def test_a_product_and_its_diamond_epilogue_become_one_call_of_their_function():
    before = _HEAD + """  graph @g(%x: f32[2,3], %z: f32[2,2]) {
    init %w = dense<f32[3,2]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    %t = MatMul(%x, %w)
    %s = Sigmoid(%t)
    %u = Mul(%t, %s)
    %v = Add(%u, %z)
    return %v
  }
}"""
    after = """model {
  opset "" = 21
  opset "irforge" = 1
  func irforge::@FusedGroup(%x0: f32[2,3], %x1: f32[2,2]) with {overload = "MatMul_Sigmoid_Mul_Add_c221e064",
                                                               opsets = {"": 21}} {
    init %c0 = dense<f32[3,2]>[0.5, -1.0, 2.0, 0.25, -0.5, 1.5]
    %t0_0 = MatMul(%x0, %c0) with {name = "n0"}
    %t1_0 = Sigmoid(%t0_0) with {name = "n1"}
    %t2_0 = Mul(%t0_0, %t1_0) with {name = "n2"}
    %y0 = Add(%t2_0, %x1) with {name = "n3"}
    return %y0
  }
  graph @g(%x: f32[2,3], %z: f32[2,2]) {
    %v = irforge::FusedGroup@MatMul_Sigmoid_Mul_Add_c221e064(%x, %z)
    return %v
  }
}"""
    assert_rewrites("fuse-elementwise", before, after)
    assert_preserves_semantics("fuse-elementwise", before)


_CASES = {
    "an opaque op splits": ("""  graph @g(%x: f32[2,4]) {
    init %w = RANDOM
    %t = MatMul(%x, %w)
    %r = Relu(%t)
    %s = Softmax(%r)
    %e = Exp(%s)
    %y = Neg(%e)
    return %y
  }""", [["MatMul", "Relu"], ["Exp", "Neg"]]),
    "two products never share a group": ("""  graph @g(%x: f32[2,4]) {
    init %w = RANDOM
    %t = MatMul(%x, %w)
    %r = Relu(%t)
    %u = MatMul(%r, %w)
    %y = Tanh(%u)
    return %y
  }""", [["MatMul", "Relu"], ["MatMul", "Tanh"]]),
    "no prologue joins a product": ("""  graph @g(%x: f32[2,4]) {
    init %w = RANDOM
    %n = Neg(%x)
    %a = Abs(%n)
    %t = MatMul(%a, %w)
    %y = Relu(%t)
    return %y
  }""", [["Neg", "Abs"], ["MatMul", "Relu"]]),
    "a value read outside ends the group": ("""  graph @g(%x: f32[2,4]) {
    init %w = RANDOM
    %t = MatMul(%x, %w)
    %r = Relu(%t)
    %y = Neg(%r)
    return %y, %r
  }""", [["MatMul", "Relu"]]),
    "injective chains end in one reduction": ("""  graph @g(%x: f32[2,4]) {
    init %shape = dense<i64[2]>[4, 2]
    init %axes = dense<i64[1]>[1]
    %t = Transpose(%x) <perm = ints[1, 0]>
    %r = Reshape(%t, %shape)
    %e = Exp(%r)
    %s = ReduceSum(%e, %axes)
    %y = Sqrt(%s)
    %z = ReduceMax(%y, %axes)
    return %z
  }""", [["Transpose", "Reshape", "Exp", "ReduceSum"], ["Sqrt", "ReduceMax"]]),
    "a side branch does not join a product's epilogue": ("""  graph @g(%x: f32[2,4], %b: f32[2,4]) {
    init %w = RANDOM
    %t = MatMul(%x, %w)
    %n = Neg(%b)
    %y = Add(%t, %n)
    return %y
  }""", [["MatMul", "Add"]]),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_group_boundaries(case):
    body, groups = _CASES[case]
    text = _HEAD + body.replace("RANDOM", "dense<f32[4,4]>[" + ", ".join(f"{(i * 7 % 11 - 5) / 4}" for i in range(16)) +
                                "]") + "\n}"  # fmt: skip
    model = parse_model(text)
    irforge.optimize(model, "fuse-elementwise")
    verify_model(model)
    assert _ops_of_groups(model) == groups
    assert_preserves_semantics("fuse-elementwise", text)


def test_op_kinds_follow_tvms_classes():
    model = parse_model(_HEAD + """  graph @g(%x: f32[2,4], %c: bool[]) {
    init %axes = dense<i64[1]>[1]
    %a = Add(%x, %x)
    %t = Transpose(%a)
    %r = ReduceMean(%t, %axes)
    %m = MatMul(%x, %t)
    %s = Softmax(%m)
    %i = If(%c) <then_branch = graph @t() {
      return %x
    }, else_branch = graph @e() {
      return %a
    }>
    return %r, %s, %i
  }
}""")
    assert [kind(n) for n in model.graph] == [Kind.ELEMWISE, Kind.INJECTIVE, Kind.REDUCTION,
                                              Kind.OUT_ELEMWISE_FUSABLE, Kind.OPAQUE, Kind.OPAQUE]  # fmt: skip


NETWORKS = {
    "mobilenet_v2": (lambda: zoo.mobilenet_v2(size=64), {"-O1": 45, "-O2": 10}),
    "resnet50": (lambda: zoo.resnet50(size=64), {"-O1": 49, "-O2": 16}),
    "bert": (lambda: zoo.bert(layers=2, hidden=64, heads=4, ffn=128, seq=16), {"-O1": 24, "-O2": 18}),
}


@pytest.mark.parametrize("level", ["-O1", "-O2"])
@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_networks_keep_their_outputs_on_every_engine(network, level):
    """ResNet-50 at -O1: every Conv with its Relu, and the residual Add with the Relu after it
    (49 groups, 16 at -O2, where fuse-activation took the Conv->Relu pairs first)."""
    make, counts = NETWORKS[network]
    proto = make()
    model = irforge.from_onnx(proto)
    feeds = zoo.feeds(proto)
    want = interpret(model, feeds)
    grouped = irforge.optimize(clone_model(model), f"{level},fuse-elementwise")
    verify_model(grouped)
    assert len(find_groups(grouped.graph)) == 0  # a fixed point: nothing left to group
    assert sum(n.op_type == "FusedGroup" for n in grouped.graph) == counts[level]
    for engine, got in (("reference", interpret(grouped, feeds)), ("onnxruntime", _onnxruntime_outputs(grouped, feeds)),
                        ("xla", irforge.compile(grouped, "xla")(**feeds))):  # fmt: skip
        zoo.assert_close_to_scale(want, got, f"{network} {level},fuse-elementwise on {engine}")
        COUNTS[f"fuse-elementwise: networks keep their outputs ({engine})"] += 1
    assert all(np.asarray(g).dtype == w.dtype for g, w in zip(got, want, strict=True))
