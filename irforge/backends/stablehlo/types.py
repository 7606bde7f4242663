"""What the StableHLO and XLA backends take: element types, and the ops their driver lowers itself."""

from __future__ import annotations

from ...core_ir.dtypes import DataType
from ...core_ir.node import Node
from ...ops.checks import scan_problem

DTYPES = frozenset({
    DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16, DataType.BFLOAT16, DataType.BOOL,
    DataType.INT8, DataType.INT16, DataType.INT32, DataType.INT64,
    DataType.UINT8, DataType.UINT16, DataType.UINT32, DataType.UINT64,
    DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ,
})  # fmt: skip
"""Element types the StableHLO/XLA backends take (strings, complex, 4-bit and 2-bit types do not)."""

CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
RANDOM = frozenset({"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli",
                    "Multinomial"})  # fmt: skip
"""Ops that draw random numbers: a model holding one takes a PRNG key (``uint32[2]``) as the first
argument of its module, and the XLA backend passes a fresh key at every call."""


def control_flow_problem(node: Node) -> str | None:
    """Why the driver cannot lower this If, Loop or Scan (random ops and Constant it always can)."""
    if node.op_type == "Scan":
        return scan_problem(node)
    if node.op_type == "Loop":
        body = node.attr("body")
        n_carried = len(node.inputs) - 2
        if body is not None and len(body.outputs) - 1 > n_carried:
            return "Loop with scan outputs (their length is known only at run time)"
    return None

