"""Core ATen ops → ONNX ops.  ``TABLE`` maps ``aten.name.overload`` (or ``aten.name.*`` for every
overload) to a converter ``fn(cx, *args, **kwargs)``: ``cx`` is a
:class:`~irforge.frontends.torch.TorchContext`, the arguments are the FX node's with tensors
replaced by IR values.  A converter returns a value or a tuple of values (``None`` for an output
nobody reads), or raises :class:`~irforge.frontends.common.NotMapped` for a use it cannot express.

Type promotion is torch's: the FX node's output dtype (``cx.out_dtype``) is what operands are
cast to, so ``int_tensor * 0.5`` computes in float.

One module a family, as torch's own ``_refs`` and onnxscript's ``torch_lib/ops`` are laid out; importing
the package fills ``TABLE`` from all of them.
"""

from __future__ import annotations

from . import backward as _backward
from . import (  # noqa: F401  (each module registers its converters into TABLE)
    control_flow,
    creation,
    elementwise,
    indexing,
    linalg,
    nn,
    preserved,
    random,
    reductions,
    shapes,
    special,
    symbolic,
)
from .common import INT64_MAX, TABLE, aten

_backward.register(aten)

__all__ = ["INT64_MAX", "TABLE", "aten"]
