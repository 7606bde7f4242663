"""Synthetic ONNX graphs for scaling benchmarks: chains and ladders of Add/Mul/MatMul/Relu.

Built straight from protobuf messages (not through irforge), so every tool reads the same file.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH = 4
_OPS = ("Add", "Mul", "MatMul", "Relu")


def _const(i: int, op: str, rng) -> onnx.TensorProto:
    shape = (WIDTH, WIDTH) if op == "MatMul" else (WIDTH,)
    scale = 0.5 if op == "MatMul" else 0.1
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), f"c{i}")


def build(kind: str, num_nodes: int, seed: int = 0) -> onnx.ModelProto:
    """``kind`` is ``chain`` (one long dependency chain) or ``ladder`` (two chains, rungs between)."""
    rng = np.random.default_rng(seed)
    graph = onnx.GraphProto(name=f"{kind}_{num_nodes}")
    graph.input.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", WIDTH]))
    rails = ["x", "x"]
    for i in range(num_nodes):
        op = _OPS[i % 4]
        rail = i % 2 if kind == "ladder" else 0
        src = rails[rail]
        node = graph.node.add(op_type=op, name=f"n{i}")
        out = f"v{i}"
        if op == "Relu":
            node.input.append(src)
        elif kind == "ladder" and op == "Add" and i > 2:
            node.input.extend([src, rails[1 - rail]])  # a rung between the two rails
        else:
            graph.initializer.append(_const(i, op, rng))
            node.input.extend([src, f"c{i}"])
        node.output.append(out)
        rails[rail] = out
    final = rails[0]
    if kind == "ladder":
        final = f"v{num_nodes}"
        graph.node.add(op_type="Add", name="join", input=rails, output=[final])
    graph.output.append(helper.make_tensor_value_info(final, TensorProto.FLOAT, ["batch", WIDTH]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], producer_name="irforge-bench")
    model.ir_version = 10
    return model
