"""The StableHLO rule table, one module per family of ops; importing this package fills it.

How each ONNX op is spelled in JAX's ``lax``/``jax.numpy``, whose own lowering rules then emit
the StableHLO (the same rules ``jax.jit`` uses, so every op lowers the way XLA expects it).  A rule
is ``fn(ctx, node, args) -> results`` (:mod:`irforge.backends.table`); ``args`` are traced arrays,
numpy constants or ``None`` for an omitted optional input.
"""

from . import elementwise, nn, quant, reduce, resize, shape, signal  # noqa: F401  (each fills RULES)
from .common import RULES, rule

__all__ = ["RULES", "rule"]
