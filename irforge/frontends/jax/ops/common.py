"""The table every converter registers into, and the helpers shared by the families."""

from __future__ import annotations

import numpy as np

TABLE: dict = {}


INT64_MAX = 2**63 - 1


def prim(*names: str):
    def register(fn):
        for n in names:
            TABLE[n] = fn
        return fn

    return register


def _i64(values) -> np.ndarray:
    return np.asarray(values, np.int64).reshape(-1)
