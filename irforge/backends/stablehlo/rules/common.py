"""What every StableHLO rule module shares: the table, the ``jax`` imports, small helpers."""
from __future__ import annotations

from ...table import RuleTable
from ..types import DTYPES, RANDOM, control_flow_problem

RULES = RuleTable("stablehlo", "StableHLO", DTYPES, native=("Constant", "If", "Loop", "Scan", *RANDOM),
                  native_check=control_flow_problem)
rule = RULES.rule


def _jnp():
    import jax.numpy as jnp

    return jnp


def _lax():
    from jax import lax

    return lax


def _np_dtype(onnx_dtype: int):
    from ....core_ir.dtypes import to_numpy

    return to_numpy(onnx_dtype)


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a
