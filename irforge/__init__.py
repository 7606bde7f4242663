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


def from_torch(module, example_args=(), **kwargs) -> Model:
    """Import a ``torch.nn.Module`` through ``torch.export`` (see :func:`irforge.frontends.from_torch`)."""
    from .frontends.torch import from_torch as _from_torch

    return _from_torch(module, example_args, **kwargs)


def from_jax(fn, *example_args, **kwargs) -> Model:
    """Import a JAX function through its jaxpr (see :func:`irforge.frontends.from_jax`)."""
    from .frontends.jax import from_jax as _from_jax

    return _from_jax(fn, *example_args, **kwargs)


def save(model: Model, path: str | os.PathLike, **kwargs) -> None:
    """Save as ONNX (see :func:`irforge.backends.onnx.save` for external-data options)."""
    from .backends.onnx import save as _save

    _save(model, path, **kwargs)


def to_onnx(model: Model):
    """The model as an in-memory ``onnx.ModelProto``."""
    from .backends.onnx import to_proto

    return to_proto(model)


def optimize(
    model: Model,
    pipeline: str = "-O1",
    *,
    target: str | None = None,
    verify_each: bool = True,
    keep_going: bool = False,
    validate_rewrites: bool = False,
) -> Model:
    """Run ``pipeline`` on ``model`` in place and return it.

    ``pipeline`` is spelled as on the command line: a level (``"-O2"`` or ``"O2"``) or pipeline
    text (``"topological-sort,dce"``, which may name levels too).  ``target`` (``onnxruntime``,
    ``xla``, ``stablehlo``, ``tvm``, ``reference``; ``--target`` on the command line) ends the
    pipeline with that backend's lowering of the fused ops.  Passes come from the built-ins
    and every installed plugin.  A pass that fails is rolled back and raises
    :class:`irforge.passes.PassFailedError` naming it and its plugin (or, with ``keep_going``, is
    skipped with a warning); the model is then as it was before that pass.  With
    ``validate_rewrites`` (``--validate-rewrites``) every rewrite is run on random, special and
    extreme values first; one that changes numbers is undone and reported as a
    :class:`irforge.passes.RewriteRejectedWarning`.
    """
    from .passes import PassManager, VerifyEach
    from .passes.levels import with_target

    instruments = [VerifyEach()] if verify_each else []
    text = with_target(pipeline.strip().removeprefix("-"), target)
    checker = None
    if validate_rewrites:
        from .passes import RewriteChecker

        checker = RewriteChecker()
    PassManager.parse(text, instruments=instruments, keep_going=keep_going, rewrite_checker=checker).run(model)
    return model


def backend(name: str):
    """The registered backend called ``name`` (built-in or from a plugin)."""
    from .plugins import default_registry

    backends = default_registry().backends
    if name not in backends:
        from .backends import BackendError

        raise BackendError(f"no backend named {name!r}; installed: {', '.join(sorted(backends))}")
    return backends[name]


def _prepared(model: Model, b) -> Model:
    """A copy of ``model`` ready for backend ``b`` (the caller's model is never changed)."""
    from .core_ir.clone import clone_model

    inline = b.inlines_functions and bool(model.functions)
    if not b.expands_functions and not inline:
        return model
    from .passes import PassManager
    from .passes.expand_functions import ExpandFunctions
    from .passes.inline_functions import InlineFunctions

    copy = clone_model(model)
    keep = "+".join(sorted(op for domain, op in b.supported_ops() if not domain))
    passes = [InlineFunctions()] if inline else []
    if b.expands_functions:
        passes.append(ExpandFunctions(keep=keep))
    PassManager.from_passes(passes).run(copy)
    return copy


def emit(model: Model, target: str = "stablehlo", **options):
    """The model as ``target`` (``onnx``, ``stablehlo``, ``stablehlo-bytecode``, ``hlo``,
    ``hlo-optimized``, or one a plugin backend adds): an :class:`irforge.backends.Artifact` whose
    ``data`` is the text or bytes.  Raises :class:`irforge.backends.UnsupportedError` listing every
    op the target cannot take."""
    from .backends import BackendError
    from .plugins import default_registry

    if target == "onnx":
        from .backends import Artifact
        from .backends.onnx import to_bytes

        return Artifact("onnx", to_bytes(model))
    for b in default_registry().backends.values():
        if target in b.targets:
            return b.lower(_prepared(model, b), target, **options)
    targets = sorted({"onnx", *(t for b in default_registry().backends.values() for t in b.targets)})
    raise BackendError(f"no backend writes {target!r}; the targets are {', '.join(targets)}")


def compile(model: Model, backend: str = "xla", device: str = "cpu"):
    """Compile ``model`` for ``backend`` (``xla``, ``onnxruntime``, ``reference``, or a plugin's):
    an :class:`irforge.backends.Executable`, called with numpy arrays, returning numpy arrays."""
    b = globals()["backend"](backend)
    if device not in b.devices:
        from .backends import BackendError

        raise BackendError(f"the {backend} backend runs on {', '.join(b.devices)}, not {device!r}")
    prepared = _prepared(model, b)
    b.check(prepared)
    return b.compile(prepared, device)


__all__ = [
    "Builder", "Graph", "IrforgeError", "Model", "Node", "Value", "__version__", "backend", "compile", "emit",
    "from_jax", "from_onnx", "from_torch", "interpret", "load", "optimize", "parse", "save", "to_onnx", "verify",
]  # fmt: skip
