"""The onnxruntime backend runs the dtypes its CPU provider lacks kernels for (bfloat16 arithmetic,
16-bit integer reductions, bfloat16 across its Python API) in a wider dtype, rounding back once."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper

import irforge


def _model(nodes, inputs, outputs, opset=20):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])  # fmt: skip
    return irforge.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def test_bfloat16_arithmetic_runs_in_float32_and_rounds_once():
    m = _model([helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Sqrt", ["e"], ["s"]),
                helper.make_node("ReduceSum", ["s"], ["r"], keepdims=0), helper.make_node("Sin", ["x"], ["t"])],
               [("x", TensorProto.BFLOAT16, [3, 4])],
               [("r", TensorProto.BFLOAT16, []), ("t", TensorProto.BFLOAT16, [3, 4])])  # fmt: skip
    before = str(m)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(ml_dtypes.bfloat16)
    r, t = irforge.compile(m, "onnxruntime")(x)
    assert str(m) == before  # the caller's model is not touched
    assert r.dtype == t.dtype == ml_dtypes.bfloat16
    wide = x.astype(np.float32)
    e = np.exp(wide).astype(ml_dtypes.bfloat16).astype(np.float32)  # each node rounds its result once
    s = np.sqrt(e).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(r.astype(np.float32), s.sum().astype(ml_dtypes.bfloat16).astype(np.float32), rtol=1e-2)
    np.testing.assert_array_equal(t, np.sin(wide).astype(ml_dtypes.bfloat16))


def test_small_integers_wrap_as_their_own_width_does():
    m = _model([helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0), helper.make_node("Neg", ["b"], ["n"])],
               [("a", TensorProto.INT16, [4]), ("b", TensorProto.UINT16, [3])],
               [("s", TensorProto.INT16, []), ("n", TensorProto.UINT16, [3])])  # fmt: skip
    a = np.asarray([30000, 30000, 10000, -5], np.int16)  # overflows int16: the sum wraps
    b = np.asarray([0, 1, 65535], np.uint16)
    s, n = irforge.compile(m, "onnxruntime")(a, b)
    assert s.dtype == np.int16 and n.dtype == np.uint16
    assert s == np.int16(a.astype(np.int64).sum() - 65536)
    np.testing.assert_array_equal(n, np.asarray([0, 65535, 1], np.uint16))


def test_a_node_onnxruntime_runs_as_it_is_goes_through_unchanged():
    from irforge.backends.onnx.onnxruntime_dtypes import for_onnxruntime

    m = _model([helper.make_node("Exp", ["x"], ["y"]), helper.make_node("Sin", ["y"], ["z"])],
               [("x", TensorProto.FLOAT16, [2])], [("z", TensorProto.FLOAT16, [2])])  # fmt: skip
    prepared = for_onnxruntime(m)[0]
    assert [n.op_type for n in prepared.graph] == ["Exp", "Sin"]  # onnxruntime takes float16 itself
    z = irforge.compile(m, "onnxruntime")(np.asarray([0, 1], np.float16))[0]
    assert z.dtype == np.float16
    np.testing.assert_allclose(z.astype(np.float32), np.sin(np.exp(np.asarray([0, 1], np.float32))), rtol=2e-3)
    f32 = _model([helper.make_node("Sin", ["x"], ["y"])], [("x", TensorProto.FLOAT, [2])],
                 [("y", TensorProto.FLOAT, [2])])  # fmt: skip
    assert for_onnxruntime(f32)[0] is f32
