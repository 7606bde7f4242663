"""irforge: a graph-level IR rewriting framework for deep-learning models.

``import irforge`` is cheap: frontends and backends load their toolchains only when used.
"""

from __future__ import annotations

from .api import (
    backend,
    compile,
    emit,
    from_jax,
    from_onnx,
    from_torch,
    load,
    optimize,
    prepare,
    save,
    to_onnx,
    unsupported,
)
from .core_ir import (
    Builder,
    Graph,
    IrforgeError,
    Model,
    Node,
    Value,
    interpret,
    parse,
    verify,
)

__version__ = "0.1.0"

_prepared = prepare  # the name earlier releases used


__all__ = [
    "Builder", "Graph", "IrforgeError", "Model", "Node", "Value", "__version__", "backend", "compile", "emit",
    "from_jax", "from_onnx", "from_torch", "interpret", "load", "optimize", "parse", "prepare", "save", "to_onnx",
    "unsupported", "verify",
]  # fmt: skip
