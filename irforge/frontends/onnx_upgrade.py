"""Opset upgrades done on the IR for the common case, so that an old model need not make a round
trip through ONNX's C++ version converter (serialize, convert, decode again: a third of loading
time for a CNN at opset 9).

Only steps that ONNX's converter itself treats as compatible (the new version only widens types
or allows what the old one refused, ``CompatibleAdapter`` in ``onnx/version_converter/convert.h``)
and the move of ``axes`` from an attribute to an input at opset 13 are done here.  Anything else
(Softmax's changed axis semantics, Split, Pad, Resize, Dropout, subgraphs, functions, opsets
below 9) answers ``False`` and the caller uses the converter for the whole model.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx.defs

from ..core_ir.builder import NameGenerator
from ..core_ir.model import Model
from ..core_ir.node import Node
from ..core_ir.tensors import NumpyTensor
from ..core_ir.types import TensorType
from ..core_ir.value import Value

_COMPATIBLE: dict[int, frozenset[str]] = {
    10: frozenset({"AveragePool", "MaxPool", "Dropout"}),
    11: frozenset({
        "ArgMax", "ArgMin", "AveragePool", "Concat", "Constant", "Compress", "Conv", "ConvTranspose",
        "DepthToSpace", "Equal", "Flatten", "Gather", "Gemm", "Hardmax", "LogSoftmax", "LpPool", "MaxPool",
        "MaxUnpool", "OneHot", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
        "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare", "Slice", "Split", "Squeeze",
        "TopK", "Unsqueeze",
    }),
    12: frozenset({
        "ArgMax", "ArgMin", "BatchNormalization", "Constant", "Clip", "GatherND", "Min", "Max", "MaxPool", "Pow",
        "ReduceMax", "ReduceMin",
    }),
    13: frozenset({
        "Abs", "Add", "ArgMin", "ArgMax", "Cast", "Ceil", "Clip", "Concat", "Constant", "DepthToSpace",
        "DequantizeLinear", "Div", "Dropout", "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather",
        "GatherElements", "GatherND", "Gemm", "Greater", "Hardmax", "Identity", "IsNaN", "Less", "Log", "LRN",
        "MatMul", "Max", "Mean", "MeanVarianceNormalization", "Min", "Mod", "Mul", "Neg", "NonZero", "Pow",
        "Pad", "QuantizeLinear", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
        "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "Relu", "Reshape", "Resize",
        "ScatterElements", "ScatterND", "Shape", "Sigmoid", "Sign", "Size", "Slice", "SpaceToDepth", "Sqrt",
        "Sub", "Sum", "Tanh", "Tile", "Transpose",
    }),
}  # fmt: skip
"""Per opset step, the ops whose new version ONNX's converter adopts unchanged (opsets 10-13)."""
_AXES_TO_INPUT_13 = frozenset({"ReduceSum", "Squeeze", "Unsqueeze"})
"""Ops whose ``axes`` attribute became their second input at opset 13."""
_LOWEST = 9
"""Below this, steps change attributes (BatchNormalization's ``spatial``, Upsample, Scan)."""


@functools.cache
def _steps(op_type: str, start: int, target: int) -> tuple[int, ...] | None:
    """The opsets in ``(start, target]`` at which ONNX defines a new version of ``op_type`` (None
    for an op ONNX does not define all along); walked down schema by schema, far cheaper than
    reading ONNX's whole schema history."""
    steps = []
    version = target
    while version > start:
        try:
            since = onnx.defs.get_schema(op_type, version, "").since_version
        except onnx.defs.SchemaError:
            return None  # not an ONNX op at one of these opsets: the converter explains
        if since <= start:
            break
        steps.append(since)
        version = since - 1
    return tuple(steps)


def upgrade(model: Model, target: int) -> bool:
    """Move ``model`` from its ONNX opset up to ``target`` in place, if every node's steps are
    known to be safe; ``False`` (and the model untouched) otherwise."""
    start = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    if start is None or start >= target:
        return start is not None
    if start < _LOWEST or target != 13 or model.functions:
        return False
    moves: list[Node] = []
    for node in model.graph:
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.subgraphs():
            return False
        steps = _steps(node.op_type, start, target)
        if steps is None:
            return False
        for step in steps:
            if step == 13 and node.op_type in _AXES_TO_INPUT_13:
                if len(node.inputs) != 1:
                    return False  # not valid at the old opset: the converter explains
                moves.append(node)
            elif node.op_type not in _COMPATIBLE.get(step, ()):
                return False
    names = NameGenerator(model.graph)
    for node in moves:
        axes = node.attr("axes")
        if axes is None:  # Squeeze of every unit dim, ReduceSum over every axis: the same at 13
            continue
        node.remove_attribute("axes")
        data = NumpyTensor(np.asarray(axes, dtype=np.int64))
        v = model.graph.add_initializer(Value(names.fresh("axes"), TensorType(data.dtype, tuple(data.shape)), data))
        node.append_input(v)
    key = "" if "" in model.opset_imports else "ai.onnx"
    model.opset_imports[key] = target
    return True
