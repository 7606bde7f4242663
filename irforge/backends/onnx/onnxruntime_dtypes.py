"""Dtypes onnxruntime's CPU provider has no kernel for, computed in a wider one.

onnxruntime implements bfloat16 and the 8- and 16-bit integers for few ops: no bfloat16 Exp,
Sqrt, Sin or ReduceSum, no int16 ReduceSum or Neg, and its Python API cannot feed or return a
bfloat16 array at all.  A node it cannot run at those dtypes runs on widened inputs (bfloat16 and
float16 in float32, the small integers in int32) and its results are rounded back, the way XLA's
CPU compiler computes bfloat16: a float result is the wide result rounded once, an integer result
is the same modulo 2^bits, since two's complement arithmetic commutes with truncation.  bfloat16
graph inputs and outputs cross the boundary as float32 (exactly).  Whether a node needs widening is
asked of onnxruntime itself, once per op, opset and input types, with a one-node model.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx

from ...core_ir.builder import NameGenerator
from ...core_ir.clone import clone_model
from ...core_ir.dtypes import DataType
from ...core_ir.graph import Graph
from ...core_ir.model import Model
from ...core_ir.node import Node
from ...core_ir.types import TensorType
from ...core_ir.value import Value

WIDER = {DataType.BFLOAT16: DataType.FLOAT, DataType.FLOAT16: DataType.FLOAT, DataType.INT8: DataType.INT32,
         DataType.UINT8: DataType.INT32, DataType.INT16: DataType.INT32, DataType.UINT16: DataType.INT32}  # fmt: skip
_KEEP = {"Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Constant"}


def _dtype(v: Value | None) -> DataType | None:
    return v.type.dtype if v is not None and isinstance(v.type, TensorType) else None


def for_onnxruntime(model: Model) -> tuple[Model, list[str], list[str]]:
    """``model`` as onnxruntime can run it (a copy, typed by shape inference, when it holds a
    narrow dtype at all), and the names of the graph inputs and outputs that cross the boundary as
    float32 instead of bfloat16."""
    if not _mentions_narrow(model):
        return model, [], []
    from ...passes import PassManager
    from ...passes.shape_inference import ShapeInference

    model = clone_model(model)
    PassManager.from_passes([ShapeInference()]).run(model)  # every node's result dtype, to round back to
    opset = model.opset_imports.get("", onnx.defs.onnx_opset_version())
    names = NameGenerator(model.graph)
    for g in list(model.graph.all_graphs()):
        for n in list(g):
            if _needs_widening(n, opset):
                _widen(g, n, names)
    return model, *_float32_boundary(model.graph, names)


def _mentions_narrow(model: Model) -> bool:
    for g in model.graph.all_graphs():
        if any(_dtype(v) in WIDER for v in g.values()):
            return True
        if any(n.op_type == "Cast" and n.attr("to") in WIDER for n in g):
            return True
    return False


def _needs_widening(n: Node, opset: int) -> bool:
    if n.domain not in ("", "ai.onnx") or n.op_type in _KEEP or n.subgraphs():
        return False
    types = {v.name: _dtype(v) for v in n.inputs if v is not None}
    if None in types.values() or not any(dt in WIDER for dt in types.values()):
        return False  # an input of unknown type: nothing to ask onnxruntime
    if session_opens(probe_model(n, types, opset)):
        return False
    return session_opens(probe_model(n, {name: WIDER.get(dt, dt) for name, dt in types.items()}, opset))


def probe_model(n: Node, types: dict[str, DataType | None], opset: int) -> bytes:
    """A one-node model of ``n`` at its input types, serialized (the cache key)."""
    from ...core_ir.serde import Serializer

    node = onnx.NodeProto()
    Serializer().node(n, node)
    node.name = node.doc_string = ""
    del node.metadata_props[:]
    # names of their own, so that nodes alike share one probe (and one session) whatever they read
    renamed = {name: f"i{k}" for k, name in enumerate(dict.fromkeys(i for i in node.input if i))}
    node.input[:] = [renamed.get(i, "") for i in node.input]
    node.output[:] = [f"o{k}" if o else "" for k, o in enumerate(node.output)]
    inputs = [onnx.helper.make_tensor_value_info(new, int(types[old] or 0), None) for old, new in renamed.items()]
    outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = onnx.helper.make_graph([node], "probe", inputs, outputs)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    return model.SerializeToString()


@functools.lru_cache(maxsize=4096)
def session_opens(probe: bytes) -> bool:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        ort.InferenceSession(probe, so, providers=["CPUExecutionProvider"])
    except Exception:
        return False
    return True


def _widen(g: Graph, n: Node, names: NameGenerator) -> None:
    """``n`` computed on widened inputs, its narrow results rounded back."""
    inputs = []
    for v in n.inputs:
        dt = _dtype(v)
        if dt in WIDER:
            cast = Node("Cast", [v], attributes={"to": int(WIDER[dt])}, outputs=[names.fresh(f"{v.name}_wide")],
                        output_types=[TensorType(WIDER[dt], v.type.shape)])  # fmt: skip
            g.insert_before(n, cast)
            v = cast.outputs[0]
        inputs.append(v)
    types = [TensorType(WIDER[_dtype(o)], o.type.shape) if _dtype(o) in WIDER else (o.type if o else None)
             for o in n.outputs]  # fmt: skip
    wide = Node(n.op_type, inputs, domain=n.domain, attributes=dict(n.attributes),
                outputs=[names.fresh(f"{o.name}_wide") if o is not None else None for o in n.outputs],
                output_types=types)  # fmt: skip
    wide.metadata = n.metadata
    g.insert_before(n, wide)
    finals = []
    for old, new in zip(n.outputs, wide.outputs, strict=True):
        if old is not None and _dtype(old) in WIDER:
            back = Node("Cast", [new], attributes={"to": int(_dtype(old))}, outputs=[names.fresh(old.name)],
                        output_types=[old.type])  # fmt: skip
            g.insert_before(n, back)
            new = back.outputs[0]
        finals.append((old, new))
    for old, new in finals:
        if old is not None:
            old.replace_all_uses_with(new)  # a graph output's name moves to ``new``
    g.remove(n)


def _float32_boundary(g: Graph, names: NameGenerator) -> tuple[list[str], list[str]]:
    """bfloat16 graph inputs and outputs as float32 (onnxruntime's Python API has no bfloat16)."""
    fed, returned = [], []
    for v in g.inputs:
        if _dtype(v) != DataType.BFLOAT16 or v.is_initializer():
            continue
        uses = v.uses()
        v.type = TensorType(DataType.FLOAT, v.type.shape)
        cast = Node("Cast", [v], attributes={"to": int(DataType.BFLOAT16)}, outputs=[names.fresh(f"{v.name}_bf16")],
                    output_types=[TensorType(DataType.BFLOAT16, v.type.shape)])  # fmt: skip
        g.prepend(cast)
        for user, index in uses:
            user.set_input(index, cast.outputs[0])
        if v.is_graph_output():
            for i, o in enumerate(g.outputs):
                if o is v:
                    g.set_output(i, cast.outputs[0])
        fed.append(v.name)
    for i, v in enumerate(g.outputs):
        if _dtype(v) != DataType.BFLOAT16:
            continue
        cast = Node("Cast", [v], attributes={"to": int(DataType.FLOAT)}, outputs=[names.fresh(f"{v.name}_f32")],
                    output_types=[TensorType(DataType.FLOAT, v.type.shape)])  # fmt: skip
        g.append(cast)
        g.set_output(i, cast.outputs[0])
        name = v.name
        v.name, cast.outputs[0].name = names.fresh(name), name
        returned.append(name)
    return fed, returned


def to_float32(array: np.ndarray) -> np.ndarray:
    return np.asarray(array).astype(np.float32)


def to_bfloat16(array: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return np.asarray(array).astype(ml_dtypes.bfloat16)
