"""Backends: the IR out to ONNX, StableHLO, XLA and the engines results are checked against.

Every backend implements :class:`Backend` (``lower`` to an :class:`Artifact`, ``compile`` to an
:class:`Executable`) and is registered by name through the ``irforge_register_backends`` plugin
hook; ``irforge.emit`` and ``irforge.compile`` find them there.  A backend that lowers op by op
keeps its rules in a :class:`RuleTable` (:mod:`.table`): one rule signature, one up-front check
per rule, one driver for folding and for the walk that lists what it cannot take.  Toolchains (jax, onnxruntime) are
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
from .inputs import InputError, InputSpec, input_specs
from .table import Lowering, NotStatic, Refused, RuleTable, static

__all__ = ["Artifact", "Backend", "BackendError", "Executable", "InputError", "InputSpec", "Lowering", "NotStatic",
           "Refused", "RuleTable", "Unsupported", "UnsupportedError", "collect_unsupported", "input_specs",
           "static"]  # fmt: skip
