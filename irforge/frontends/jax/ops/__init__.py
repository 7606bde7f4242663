"""JAX primitives → ONNX ops.  ``TABLE`` maps a primitive's name to a converter
``fn(cx, *operands, **params)``: ``cx`` is a :class:`~irforge.frontends.jax.JaxContext`, the
operands are IR values or numpy literals, the params are the equation's.  A converter returns a
value or a list of values, or raises :class:`~irforge.frontends.common.NotMapped` for a use it
cannot express.  Operands of a jaxpr equation already share one dtype (jaxprs are explicitly
typed), so unlike ATen no promotion happens here.

One module a family, as jax's own ``_src/lax`` is laid out; importing the package fills ``TABLE`` from
all of them.
"""

from __future__ import annotations

from . import (  # noqa: F401  (each module registers its converters into TABLE)
    control_flow,
    convolution,
    elementwise,
    linalg,
    reductions,
    shapes,
    slicing,
    special,
    windowed_reductions,
)
from .common import INT64_MAX, TABLE, prim

__all__ = ["INT64_MAX", "TABLE", "prim"]
