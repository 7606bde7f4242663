"""Shape inference in windows (big graphs) finds exactly what inference over the whole graph
finds: windows end only where floating-point values alone cross, so ONNX's data propagation of
shapes is never cut."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import irforge
from irforge.passes import PassManager


def _blocks(count: int, long_lived_shape: bool) -> irforge.Model:
    """``count`` blocks of Shape→Gather→Unsqueeze→Concat→Reshape (shapes known only through data
    propagation) around float ops; with ``long_lived_shape`` one shape tensor made at the start
    is read at the very end, so no cut is free of integers."""
    nodes, h = [], "x"
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
             numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one"),
             numpy_helper.from_array(np.array([0], np.int64), "axes0")]  # fmt: skip
    if long_lived_shape:
        nodes.append(helper.make_node("Shape", ["x"], ["first_shape"]))
    for i in range(count):
        nodes += [
            helper.make_node("Shape", [h], [f"s{i}"]),
            helper.make_node("Gather", [f"s{i}", "zero"], [f"d{i}"], axis=0),
            helper.make_node("Unsqueeze", [f"d{i}", "axes0"], [f"u{i}"]),
            helper.make_node("Gather", [f"s{i}", "one"], [f"e{i}"], axis=0),
            helper.make_node("Unsqueeze", [f"e{i}", "axes0"], [f"w{i}"]),
            helper.make_node("Concat", [f"u{i}", f"w{i}"], [f"c{i}"], axis=0),
            helper.make_node("NonZero", [h], [f"nz{i}"]),  # a dim ONNX cannot know: it names it unk__N
            helper.make_node("Reshape", [h, f"c{i}"], [f"r{i}"]),
            helper.make_node("Relu", [f"r{i}"], [f"a{i}"]),
            helper.make_node("Sigmoid", [f"a{i}"], [f"h{i}"]),
        ]
        h = f"h{i}"
    out = h
    if long_lived_shape:
        nodes.append(helper.make_node("Reshape", [h, "first_shape"], ["y"]))
        out = "y"
    graph = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return irforge.from_onnx(model)


def _types(model) -> list[str]:
    """The types, with invented dim names numbered by first appearance (runs may number them
    differently; what matters is which dims share a name)."""
    names: dict[str, str] = {}
    out = []
    for n in model.graph:
        for o in n.outputs:
            dims = [names.setdefault(d, f"?{len(names)}") if isinstance(d, str) and d.startswith("unk__") else d
                    for d in (o.type.shape or ())]  # fmt: skip
            out.append(f"{o.name}: {o.type.dtype if o.type else None} {dims}")
    return out


@pytest.mark.parametrize("long_lived_shape", [False, True])
def test_windows_find_what_the_whole_graph_inference_finds(long_lived_shape):
    whole, windowed = _blocks(60, long_lived_shape), _blocks(60, long_lived_shape)
    PassManager.parse("shape-inference{window=0}").run(whole)
    PassManager.parse("shape-inference{window=20}").run(windowed)
    assert _types(windowed) == _types(whole)
    reshaped = next(o for n in windowed.graph for o in n.outputs if o.name == "r59")
    assert reshaped.type.shape == ("batch", 6)  # known only through data propagation
    invented = [o.type.shape[1] for n in windowed.graph for o in n.outputs if o.name.startswith("nz")]
    assert len(set(invented)) == 60  # unrelated unknown dims keep distinct names across windows
