"""Backends: the IR out to ONNX, StableHLO, XLA and the engines results are checked against.

Every backend implements :class:`Backend` (``lower`` to an :class:`Artifact`, ``compile`` to an
:class:`Executable`) and is registered by name through the ``irforge_register_backends`` plugin
hook; ``irforge.emit`` and ``irforge.compile`` find them there.  Toolchains (jax, onnxruntime) are
imported only when a backend is used.
"""

from .base import (
    Artifact,
    Backend,
    BackendError,
    Executable,
    Unsupported,
    UnsupportedError,
    collect_unsupported,
)

__all__ = ["Artifact", "Backend", "BackendError", "Executable", "Unsupported", "UnsupportedError",
           "collect_unsupported"]  # fmt: skip
