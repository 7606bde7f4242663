"""The user's entry points: load, import, optimize, emit, compile, save.

This module is where the plugin registry meets everything under it: it builds (on first use) the
registry of the built-ins and every installed plugin, hands it to the pass manager, the importers
and the backends, and installs it as the default of the functions that take a ``registry``
argument.  Every function here is re-exported by ``irforge``.
"""

from __future__ import annotations

import os
from typing import Any

from .core_ir import installed
from .core_ir.model import Model


def registry():
    """The registry of this process: built-ins and every installed plugin, built once."""
    from .plugins import default_registry

    return default_registry()


installed.install(registry)


def load(path: str | os.PathLike | bytes, **kwargs) -> Model:
    """Load an ONNX model from a path or bytes (see :func:`irforge.frontends.onnx.load`), or IR
    text from a ``.irf`` file (a crash reproducer, a test case)."""
    if isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith(".irf"):
        return _load_text(os.fspath(path))
    from .frontends.onnx import load as _load

    return _load(path, **kwargs)


def _load_text(path: str) -> Model:
    from .core_ir.errors import IrforgeError
    from .core_ir.parser import parse_model

    try:
        with open(path, encoding="utf-8") as f:
            return parse_model(f, source=path)
    except OSError as e:
        raise IrforgeError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise IrforgeError(f"{path}: not UTF-8 text at byte {e.start}; IR text files are UTF-8") from None


def from_onnx(model_proto) -> Model:
    """Import an in-memory ``onnx.ModelProto`` (it is copied, never modified)."""
    from .frontends.onnx import load as _load

    return _load(model_proto)


def from_torch(module, example_args=(), **kwargs) -> Model:
    """Import a ``torch.nn.Module`` through ``torch.export`` (see :func:`irforge.frontends.from_torch`)."""
    from .frontends.torch import from_torch as _from_torch

    kwargs.setdefault("registry", registry())
    return _from_torch(module, example_args, **kwargs)


def from_jax(fn, *example_args, **kwargs) -> Model:
    """Import a JAX function through its jaxpr (see :func:`irforge.frontends.from_jax`)."""
    from .frontends.jax import from_jax as _from_jax

    kwargs.setdefault("registry", registry())
    return _from_jax(fn, *example_args, **kwargs)


def save(model: Model, path: str | os.PathLike, **kwargs) -> None:
    """Save as ONNX (see :func:`irforge.backends.onnx.save` for external-data options)."""
    from .backends.onnx import save as _save

    _save(model, path, **kwargs)


def to_onnx(model: Model):
    """The model as an in-memory ``onnx.ModelProto``."""
    from .backends.onnx import to_proto

    return to_proto(model)


def pipeline_text(pipeline: str = "-O1", target: str | None = None) -> str:
    """``pipeline`` (a level such as ``-O2`` or ``O2``, or pipeline text) ending in ``target``'s
    lowering of the fused ops (:attr:`irforge.backends.Backend.lowering`)."""
    from .passes.levels import with_target

    return with_target(pipeline.strip().removeprefix("-"), None if target is None else backend(target))


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
    text (``"topological-sort,dce"``, which may name levels too).  ``target`` (any registered
    backend: ``onnxruntime``, ``xla``, ``stablehlo``, ``tvm``, ``reference`` or a plugin's;
    ``--target`` on the command line) ends the pipeline with that backend's lowering of the fused
    ops.  Passes come from the built-ins and every installed plugin.  A pass that fails is rolled
    back and raises :class:`irforge.passes.PassFailedError` naming it and its plugin (or, with
    ``keep_going``, is skipped with a warning); the model is then as it was before that pass.  With
    ``validate_rewrites`` (``--validate-rewrites``) every rewrite is run on random, special and
    extreme values first; one that changes numbers is undone and reported as a
    :class:`irforge.passes.RewriteRejectedWarning`.
    """
    from .passes import PassManager, VerifyEach

    instruments = [VerifyEach()] if verify_each else []
    checker = None
    if validate_rewrites:
        from .passes import RewriteChecker

        checker = RewriteChecker()
    PassManager.parse(pipeline_text(pipeline, target), registry(), instruments=instruments, keep_going=keep_going,
                      rewrite_checker=checker).run(model)  # fmt: skip
    return model


def backend(name: str):
    """The registered backend called ``name`` (built-in or from a plugin)."""
    backends = registry().backends
    if name not in backends:
        from .backends import BackendError

        raise BackendError(f"no backend named {name!r}; installed: {', '.join(sorted(backends))}")
    return backends[name]


def backend_names() -> list[str]:
    """Every registered backend's name: what ``--target`` and ``--backend`` accept."""
    return sorted(registry().backends)


def emit_targets() -> list[str]:
    """Every artifact ``emit`` can write: ``onnx`` and each registered backend's targets."""
    return sorted({"onnx", *(t for b in registry().backends.values() for t in b.targets)})


def prepare(model: Model, b: Any) -> Model:
    """A copy of ``model`` ready for backend ``b``: model-local functions inlined where ``b``
    lowers no call, ONNX function ops ``b`` has no rule for expanded to their bodies (the
    caller's model is never changed; without anything to do, ``model`` itself)."""
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


def unsupported(model: Model, backend_name: str) -> list:
    """Everything in ``model`` the backend cannot take, as ``irforge.compile`` would refuse it
    (empty when it takes all of it)."""
    b = backend(backend_name)
    return b.unsupported(prepare(model, b))


def emit(model: Model, target: str = "stablehlo", **options):
    """The model as ``target`` (``onnx``, ``stablehlo``, ``stablehlo-bytecode``, ``hlo``,
    ``hlo-optimized``, ``relax``, or one a plugin backend adds): an
    :class:`irforge.backends.Artifact` whose ``data`` is the text or bytes.  Raises
    :class:`irforge.backends.UnsupportedError` listing every op the target cannot take."""
    from .backends import BackendError

    if target == "onnx":
        from .backends import Artifact
        from .backends.onnx import to_bytes

        return Artifact("onnx", to_bytes(model))
    for b in registry().backends.values():
        if target in b.targets:
            return b.lower(prepare(model, b), target, **options)
    raise BackendError(f"no backend writes {target!r}; the targets are {', '.join(emit_targets())}")


def compile(model: Model, backend: str = "xla", device: str = "cpu"):
    """Compile ``model`` for ``backend`` (``xla``, ``tvm``, ``onnxruntime``, ``reference``, or a
    plugin's): an :class:`irforge.backends.Executable`, called with numpy arrays, returning numpy
    arrays.  Everything the backend cannot take is refused first, in one
    :class:`irforge.backends.UnsupportedError`."""
    b = globals()["backend"](backend)
    if device not in b.devices:
        from .backends import BackendError

        raise BackendError(f"the {backend} backend runs on {', '.join(b.devices)}, not {device!r}")
    prepared = prepare(model, b)
    b.check(prepared)
    exe = b.compile(prepared, device)
    if exe.inputs is None:  # a plugin's executable: the base class checks its calls all the same
        from .backends.inputs import input_specs

        exe.inputs = input_specs(model)
    return exe


__all__ = ["backend", "backend_names", "compile", "emit", "emit_targets", "from_jax", "from_onnx", "from_torch",
           "load", "optimize", "pipeline_text", "prepare", "registry", "save", "to_onnx", "unsupported"]  # fmt: skip
