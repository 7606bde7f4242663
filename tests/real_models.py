"""The light_*.onnx architectures with weights that make a wrong rewrite visible.

The models in the onnx wheel hold their weights as uniform ``ConstantOfShape`` fills, so most of
them output the same value for every class and every input: a fusion that scales a weight by 1.1
or flips a mean's sign changes nothing a test could see.  Here every fill becomes an initializer
of seeded random values (as an exporter writes weights) and every float initializer is drawn
again: convolution and dense weights with He scaling (activations stay of order one through a
hundred layers), BatchNormalization scales and variances positive, everything else small.
"""

from __future__ import annotations

import functools
import glob
import os

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(glob.glob(os.path.join(LIGHT_DIR, "light_*.onnx")))


def _role(name: str, consumers: dict[str, list[tuple[onnx.NodeProto, int]]]) -> str:
    for node, index in consumers.get(name, []):
        if node.op_type in ("BatchNormalization", "InstanceNormalization") and index == 1:
            return "bn-scale"
        if node.op_type == "BatchNormalization" and index == 4:
            return "positive"
        if node.op_type in ("Conv", "Gemm", "MatMul", "ConvTranspose") and index == 1:
            return "weight"
    return "small"


def _draw(shape: tuple[int, ...], role: str, rng: np.random.Generator) -> np.ndarray:
    if role == "positive":
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if role == "bn-scale":  # below one, so residual sums do not saturate the softmax at the end
        return rng.uniform(0.2, 0.6, shape).astype(np.float32)
    if role == "weight" and len(shape) >= 2:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 2 else shape[0]
        return (rng.standard_normal(shape) * np.sqrt(2.0 / max(fan_in, 1))).astype(np.float32)
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


@functools.cache
def _randomized_bytes(path: str, seed: int) -> bytes:
    model = onnx.load(path)
    g = model.graph
    rng = np.random.default_rng(seed)
    consumers: dict[str, list] = {}
    for node in g.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
    inits = {t.name: t for t in g.initializer}
    keep, fills = [], []
    for node in g.node:
        shape_name = node.input[0] if node.op_type == "ConstantOfShape" and node.input else None
        if shape_name in inits:
            shape = tuple(int(d) for d in numpy_helper.to_array(inits[shape_name]).reshape(-1))
            fills.append(numpy_helper.from_array(_draw(shape, _role(node.output[0], consumers), rng), node.output[0]))
        else:
            keep.append(node)
    del g.node[:]
    g.node.extend(keep)
    for t in g.initializer:
        if t.data_type == onnx.TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(_draw(tuple(t.dims), _role(t.name, consumers), rng), t.name))
    g.initializer.extend(fills)
    for t in fills:  # IR 3: every initializer is listed among the inputs too
        g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return model.SerializeToString()


@functools.cache
def weight_count(path: str) -> int:
    """Elements in the model's weights, fills included (what randomizing it materialises)."""
    model = onnx.load(path)
    inits = {t.name: t for t in model.graph.initializer}
    count = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            count += int(np.prod(numpy_helper.to_array(inits[node.input[0]])))
    return count


def randomized(path: str, seed: int = 0) -> onnx.ModelProto:
    """A fresh copy of the light model at ``path`` with non-uniform, seeded weights."""
    return onnx.ModelProto.FromString(_randomized_bytes(path, seed))


def feeds(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for i in model.graph.input:
        if i.name not in inits:
            shape = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def onnxruntime_outputs(original: onnx.ModelProto, model) -> tuple[list, list]:
    """onnxruntime's outputs of ``original`` and of the rewritten irforge ``model`` on the same
    random input; ``model`` must verify and export to a file onnx's full checker accepts."""
    import node_suite as ns

    from irforge.backends.onnx import to_proto
    from irforge.core_ir import verify_model

    verify_model(model)
    exported = to_proto(model)
    onnx.checker.check_model(exported, full_check=True)
    inputs = feeds(original)
    want = ns.ort_session(original.SerializeToString()).run(None, inputs)
    return want, ns.ort_session(exported.SerializeToString()).run(None, inputs)
