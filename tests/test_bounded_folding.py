"""Folding never runs what it cannot bound: valid models holding ops whose results would take
tens of gigabytes are optimized under a 1.5 GiB address-space limit, the bombs stay ops, and
everything else in the model still folds."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import irforge
from irforge.passes.result_bounds import BOUNDS, result_bound

HUGE = 10_000_000_000  # elements: 80 GB of int64


def _const(name: str, value, dtype=np.int64) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype), name))


def _bomb_model(bomb: list[onnx.NodeProto], result: str, result_type: int) -> onnx.ModelProto:
    """``bomb`` computes ``result`` from constants; a ReduceSum keeps it small for the graph
    output, and a foldable Add of two constants sits next to it (it must fold)."""
    nodes = [
        *bomb,
        helper.make_node("Cast", [result], ["as_float"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["as_float"], ["total"], keepdims=0),
        _const("a", [1.0, 2.0, 3.0], np.float32),
        _const("b", [4.0, 5.0, 6.0], np.float32),
        helper.make_node("Add", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["x", "ab"], ["xab"]),
        helper.make_node("Add", ["xab", "total"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "bomb",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


BOMBS = {
    "range": [_const("s", 0), _const("e", HUGE), _const("d", 1), helper.make_node("Range", ["s", "e", "d"], ["r"])],
    "range-float": [
        _const("s", 0.0, np.float32), _const("e", 1e10, np.float32), _const("d", 1.0, np.float32),
        helper.make_node("Range", ["s", "e", "d"], ["r"]),
    ],
    "constant-of-shape": [_const("shape", [HUGE]), helper.make_node("ConstantOfShape", ["shape"], ["r"])],
    "expand": [
        _const("one", [1]), _const("shape", [100_000, 100_000]), helper.make_node("Expand", ["one", "shape"], ["r"]),
    ],
    "tile": [_const("one", [1, 2]), _const("reps", [HUGE // 2]), helper.make_node("Tile", ["one", "reps"], ["r"])],
    "pad": [
        _const("one", [1]), _const("pads", [0, HUGE]),
        helper.make_node("Pad", ["one", "pads"], ["r"]),
    ],
    "one-hot": [
        _const("idx", [0, 1]), _const("depth", HUGE), _const("vals", [0, 1]),
        helper.make_node("OneHot", ["idx", "depth", "vals"], ["r"]),
    ],
    "resize": [
        _const("img", np.ones((1, 1, 2, 2)), np.float32), _const("scales", [1, 1, 50_000, 50_000], np.float32),
        helper.make_node("Resize", ["img", "", "scales"], ["r"]),
    ],
    "hann-window": [_const("size", HUGE), helper.make_node("HannWindow", ["size"], ["r"])],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_stays_an_op_and_the_rest_still_folds(name, tmp_path):
    path = tmp_path / f"{name}.onnx"
    onnx.save(_bomb_model(BOMBS[name], "r", TensorProto.INT64), path)
    script = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
        import irforge
        m = irforge.load({str(path)!r})
        irforge.optimize(m, "-O2")
        ops = [n.op_type for n in m.graph]
        print(",".join(ops))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ops = proc.stdout.strip().split(",")
    bomb_op = BOMBS[name][-1].op_type
    assert bomb_op in ops, ops  # not folded
    assert ops.count("Add") == 2, ops  # Add(a, b) folded; x + ab + total remain


def test_small_instances_of_the_same_ops_still_fold():
    nodes = [_const("s", 0), _const("e", 10), _const("d", 2), helper.make_node("Range", ["s", "e", "d"], ["r"])]
    model = irforge.from_onnx(_bomb_model(nodes, "r", TensorProto.INT64))
    irforge.optimize(model, "O1")
    ops = [n.op_type for n in model.graph]
    assert "Range" not in ops and ops == ["Add", "Add"], ops  # everything folded but (x + ab) + total
    got = irforge.interpret(model, {"x": np.zeros(3, np.float32)})[0]
    np.testing.assert_allclose(got, [5 + 20, 7 + 20, 9 + 20])


@pytest.mark.parametrize(
    ("op", "args", "attrs", "at_least"),
    [
        ("Range", [np.array(0), np.array(10), np.array(3)], {}, 4),
        ("Range", [np.array(5.0), np.array(0.0), np.array(-0.5)], {}, 10),
        ("Tile", [np.ones((2, 3)), np.array([4, 5])], {}, 120),
        ("Expand", [np.ones((3, 1)), np.array([2, 1, 4])], {}, 24),
        ("NonZero", [np.ones((4, 5))], {}, 40),
        ("TopK", [np.ones((4, 6)), np.array([2])], {"axis": 1}, 16),
        ("Pad", [np.ones((2, 2)), np.array([1, 1, 1, 1])], {}, 16),
        ("OneHot", [np.array([1, 2, 3]), np.array(7), np.array([0, 1])], {}, 21),
    ],
)
def test_bounds_are_upper_bounds(op, args, attrs, at_least):
    bound = result_bound(op, args, attrs)
    assert bound is not None and bound >= at_least * 8


def test_every_bound_refuses_what_it_cannot_read():
    for op in BOUNDS:
        assert result_bound(op, [None, None, None, None], {}) is None, op
