"""The Relax rule table, one module per family of ops; importing this package fills it.

How each ONNX op is spelled in Relax (``tvm.relax.op``).  A rule is ``fn(ctx, node, args) ->
results`` (:mod:`irforge.backends.table`): ``args`` are Relax expressions, numpy constants
(values known at compile time) or ``None``; ``ctx.expr(x)`` turns a constant into a
``relax.const`` where an op needs an expression, ``ctx.shape(x)`` reads an expression's static
shape.  The uses a rule cannot express exactly are refused up front by the checks in
:mod:`.checks`, before anything is lowered.
"""

from ...table import Refused
from . import checks, composed, elementwise, index, nn, reduce, shape  # noqa: F401  (each fills RULES)
from .common import DTYPES, RULES, rule

checks.attach()

__all__ = ["DTYPES", "RULES", "Refused", "rule"]
