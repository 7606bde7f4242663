"""The hooks third-party packages implement.  Names are a stable contract: add hooks, never rename."""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "irforge"
ENTRY_POINT_GROUP = "irforge.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def irforge_register_passes() -> list[type]:
    """Pass classes, each with a unique kebab-case ``name``."""


@hookspec
def irforge_register_patterns() -> list[Any]:
    """Rewrite patterns, each with a unique ``name``, usable by name in pipelines."""


@hookspec
def irforge_register_pipelines() -> list[tuple[str, str]]:
    """Named pipelines as ``(name, pipeline text)``."""


@hookspec
def irforge_register_frontends() -> list[tuple[str, Any]]:
    """Importers as ``(name, callable)``."""


@hookspec
def irforge_register_frontend_ops() -> list[tuple[str, str, Any]]:
    """Op converters for a frontend as ``(framework, op, converter)``: ``("torch", "aten.erfinv.default",
    fn)`` or ``("jax", "erf_inv", fn)``.  They extend (and take precedence over) the built-in op
    tables; see docs/frontends.md for the converter signature of each framework."""


@hookspec
def irforge_register_backends() -> list[tuple[str, Any]]:
    """Backends as ``(name, instance)`` of :class:`irforge.backends.Backend`: what ``irforge emit
    --target`` and ``irforge run --backend`` (and ``irforge.emit``/``irforge.compile``) find by name."""


@hookspec
def irforge_register_kernels() -> list[tuple[str, str, Any]]:
    """Reference kernels (and shape functions) for custom ops as ``(domain, op_type, kernel)``."""


@hookspec
def irforge_register_fused_ops() -> list[tuple[str, Any]]:
    """Fused ops of the ``irforge`` domain as ``(op_type, builder)``: ``builder(overload, opset)``
    returns the model-local function that decomposes the op (:mod:`irforge.ops.fused`)."""


@hookspec
def irforge_before_pass(pass_: Any, graph: Any, ctx: Any) -> None:
    """Called before a pass runs on a model."""


@hookspec
def irforge_after_pass(pass_: Any, graph: Any, ctx: Any, result: Any) -> None:
    """Called after a pass ran on a model, with its ``PassResult``."""
