"""irforge: a graph-level IR rewriting framework for deep-learning models.

``import irforge`` is cheap: frontends and backends load their toolchains only when used.
"""

from __future__ import annotations

import os

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


def load(path: str | os.PathLike | bytes, **kwargs) -> Model:
    """Load an ONNX model from a path or bytes (see :func:`irforge.frontends.onnx.load`)."""
    from .frontends.onnx import load as _load

    return _load(path, **kwargs)


def from_onnx(model_proto) -> Model:
    """Import an in-memory ``onnx.ModelProto`` (it is copied, never modified)."""
    from .frontends.onnx import load as _load

    return _load(model_proto)


def save(model: Model, path: str | os.PathLike, **kwargs) -> None:
    """Save as ONNX (see :func:`irforge.backends.onnx.save` for external-data options)."""
    from .backends.onnx import save as _save

    _save(model, path, **kwargs)


def to_onnx(model: Model):
    """The model as an in-memory ``onnx.ModelProto``."""
    from .backends.onnx import to_proto

    return to_proto(model)


def optimize(model: Model, pipeline: str = "-O1", *, verify_each: bool = True, keep_going: bool = False) -> Model:
    """Run ``pipeline`` on ``model`` in place and return it.

    ``pipeline`` is spelled as on the command line: a level (``"-O2"`` or ``"O2"``) or pipeline
    text (``"topological-sort,dce"``, which may name levels too).  Passes come from the built-ins
    and every installed plugin.  A pass that fails is rolled back and raises
    :class:`irforge.passes.PassFailedError` naming it and its plugin (or, with ``keep_going``, is
    skipped with a warning); the model is then as it was before that pass.
    """
    from .passes import PassManager, VerifyEach

    instruments = [VerifyEach()] if verify_each else []
    PassManager.parse(pipeline, instruments=instruments, keep_going=keep_going).run(model)
    return model


__all__ = [
    "Builder", "Graph", "IrforgeError", "Model", "Node", "Value", "__version__", "from_onnx",
    "interpret", "load", "optimize", "parse", "save", "to_onnx", "verify",
]  # fmt: skip
