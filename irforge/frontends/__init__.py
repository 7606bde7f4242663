"""Frontends: importers from ONNX, PyTorch (torch.export) and JAX (jaxpr) into the IR.

``from_torch`` and ``from_jax`` read the framework's own program (no ONNX detour); an op they
cannot map is reported with every other one in one :class:`UnsupportedOpsError`, kept as a node
of its framework's domain (``keep_unmapped=True``), or mapped by a plugin through the
``irforge_register_frontend_ops`` hook.  Importing this package loads neither framework.
"""

from .common import (
    FRAMEWORK_OP,
    MODULE,
    SOURCE,
    Emitter,
    FrontendError,
    NotMapped,
    UnmappedOp,
    UnsupportedOpsError,
)
from .jax import from_jax, from_jaxpr
from .onnx import load
from .torch import from_exported_program, from_torch

__all__ = [
    "FRAMEWORK_OP", "MODULE", "SOURCE", "Emitter", "FrontendError", "NotMapped", "UnmappedOp", "UnsupportedOpsError",
    "from_exported_program", "from_jax", "from_jaxpr", "from_torch", "load",
]  # fmt: skip
