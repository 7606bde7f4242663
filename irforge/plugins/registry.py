"""Discovery (entry points of group ``irforge.plugins``) and the registries it fills.

Each plugin is loaded, and each of its hook implementations called, on its own: a plugin that
fails to import, whose hook raises, or that registers a name another plugin already took is left
out with one warning naming it and its distribution, and everything else still works.  Plugins a
program passes in itself (``build_registry(plugins=[...])``) are held to a stricter rule: their
failures raise, since the program asked for them by hand.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from ..core_ir.errors import IrforgeError
from ..core_ir.interpreter import register_kernel
from ..ops.fused import register_body
from ..passes.apply_pattern import pattern_pass
from . import builtin, hookspecs

BUILTIN = "irforge (built-in)"
DISABLE_ENV = "IRFORGE_DISABLE_PLUGINS"
_SINGULAR = {"passes": "pass", "patterns": "pattern", "runnable": "pass or pattern", "pipelines": "pipeline",
             "frontends": "frontend", "frontend_ops": "frontend op", "backends": "backend",
             "kernels": "kernel", "fused_ops": "fused op"}  # fmt: skip
_REGISTRATION_HOOKS = ("passes", "patterns", "pipelines", "frontends", "frontend_ops", "backends", "kernels",
                       "fused_ops")


class PluginError(IrforgeError):
    """A plugin failed to load or registered something twice; the message names the plugins."""


class PluginWarning(UserWarning):
    """An installed plugin could not be loaded and was left out; the rest of irforge still works."""


@dataclass
class PluginInfo:
    """One discovered plugin: its entry-point name, distribution, and what it registered or why it
    failed (``error`` is empty for a plugin that loaded)."""

    name: str
    distribution: str
    version: str
    registered: dict[str, list[str]] = field(default_factory=dict)
    error: str = ""
    disabled: bool = False

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version}".strip()


@dataclass
class Registry:
    """Everything the plugins registered, by kind and name, with who provided each entry."""

    plugin_manager: pluggy.PluginManager
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    providers: dict[tuple[str, str], str] = field(default_factory=dict)
    plugins: list[PluginInfo] = field(default_factory=list)
    """Every plugin found through the entry points, the ones that failed or were disabled too."""

    @property
    def passes(self) -> dict[str, type]:
        return self.entries["passes"]

    @property
    def pipelines(self) -> dict[str, str]:
        return self.entries["pipelines"]

    @property
    def backends(self) -> dict[str, Any]:
        return self.entries["backends"]

    @property
    def runnable(self) -> dict[str, type]:
        """What pipeline text may name: every pass, and every pattern as a pass of its own."""
        return self.entries["runnable"]

    @property
    def failed(self) -> list[PluginInfo]:
        return [p for p in self.plugins if p.error]

    def provider(self, kind: str, name: str) -> str:
        return self.providers.get((kind, name), "unknown")

    def add(self, kind: str, name: str, item: Any, provider: str) -> None:
        self._check_free(kind, name, provider)
        self.entries.setdefault(kind, {})[name] = item
        self.providers[(kind, name)] = provider

    def _check_free(self, kind: str, name: str, provider: str) -> None:
        if name in self.entries.get(kind, {}):
            raise PluginError(
                f"{_SINGULAR.get(kind, kind)} {name!r} is registered twice: by {self.provider(kind, name)} "
                f"and by {provider}; uninstall or rename one of them"
            )


def disabled_plugins() -> set[str]:
    """Plugin names (entry-point or distribution names) turned off by ``IRFORGE_DISABLE_PLUGINS``."""
    return {n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip()}


def _collect(plugin: Any, provider: str) -> list[tuple[str, str, Any]]:
    """Call every registration hook ``plugin`` implements: ``(kind, name, item)`` for each entry.
    Raises :class:`PluginError` naming the hook that raised or the item that is malformed."""
    out: list[tuple[str, str, Any]] = []
    for kind in _REGISTRATION_HOOKS:
        hook = f"irforge_register_{kind}"
        fn = getattr(plugin, hook, None)
        if fn is None or not hasattr(fn, hookspecs.PROJECT + "_impl"):
            continue
        try:
            items = fn() or []
        except Exception as e:
            raise PluginError(f"plugin {provider}: {hook} raised {type(e).__name__}: {e}") from e
        for item in items:
            if kind == "passes":
                name = getattr(item, "name", "")
                if not name:
                    what = getattr(item, "__qualname__", item)
                    raise PluginError(f"plugin {provider}: pass class {what} has no name")
                out.append((kind, name, item))
            elif kind == "patterns":
                out.append((kind, item.name, item))
            elif kind in ("kernels", "frontend_ops"):
                domain, op_type, fn = item
                out.append((kind, f"{domain}::{op_type}", fn))
            else:
                name, value = item
                out.append((kind, name, value))
    return out


def _admit(reg: Registry, entries: list[tuple[str, str, Any]], provider: str) -> None:
    """Add one plugin's entries, all or none: a clash leaves the registry untouched."""
    seen: set[tuple[str, str]] = set()
    for kind, name, _ in entries:
        if (kind, name) in seen:
            raise PluginError(f"plugin {provider} registers the {_SINGULAR.get(kind, kind)} {name!r} twice")
        seen.add((kind, name))
        reg._check_free(kind, name, provider)
        if kind in ("passes", "patterns"):
            reg._check_free("runnable", name, provider)
    for kind, name, item in entries:
        reg.add(kind, name, item, provider)
        if kind == "kernels":  # the interpreter (and so folding and the verifier) runs them from now on
            domain, _, op_type = name.partition("::")
            register_kernel(domain, op_type, item)
        elif kind == "fused_ops":  # fusion passes, the rewrite checker and lower-fused find its body from now on
            register_body(name, item)
        elif kind == "passes":
            reg.add("runnable", name, item, provider)
        elif kind == "patterns":
            reg.add("runnable", name, pattern_pass(item), provider)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    eps = importlib.metadata.entry_points(group=hookspecs.ENTRY_POINT_GROUP)
    return sorted(eps, key=lambda ep: (ep.dist.name if ep.dist else "", ep.name))


def _discover(reg: Registry, disabled: set[str]) -> None:
    pm = reg.plugin_manager
    for ep in _entry_points():
        dist = ep.dist.name if ep.dist else "unknown distribution"
        info = PluginInfo(ep.name, dist, ep.dist.version if ep.dist else "")
        reg.plugins.append(info)
        if ep.name in disabled or dist in disabled:
            info.disabled = True
            continue
        try:
            plugin = ep.load()
            entries = _collect(plugin, info.label)
            _admit(reg, entries, info.label)
        except Exception as e:
            info.error = str(e) if isinstance(e, PluginError) else f"{type(e).__name__}: {e}"
            warnings.warn(
                f"plugin {ep.name!r} (distribution {dist}) could not be loaded: {info.error}; it is left out "
                f"(set {DISABLE_ENV}={ep.name} to silence this)",
                PluginWarning,
                stacklevel=3,
            )
            continue
        pm.register(plugin, name=f"{hookspecs.ENTRY_POINT_GROUP}:{ep.name}")
        for kind, name, _ in entries:
            info.registered.setdefault(kind, []).append(name)


def build_registry(
    discover: bool = True, plugins: Iterable[Any] = (), disabled: Iterable[str] | None = None
) -> Registry:
    """A fresh registry: the built-ins, every installed plugin (with ``discover``; those named in
    ``disabled``, or by default in ``IRFORGE_DISABLE_PLUGINS``, are skipped), and the given plugin
    objects (modules or instances with hook implementations, for programs that bring their own
    passes without packaging them)."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    reg = Registry(pm, {kind: {} for kind in (*_REGISTRATION_HOOKS, "runnable")})
    pm.register(builtin, name=BUILTIN)
    _admit(reg, _collect(builtin, BUILTIN), BUILTIN)
    for plugin in plugins:
        provider = getattr(plugin, "__name__", None) or type(plugin).__qualname__
        _admit(reg, _collect(plugin, provider), provider)
        pm.register(plugin)
    if discover:
        _discover(reg, disabled_plugins() if disabled is None else set(disabled))
    return reg


@functools.cache
def default_registry() -> Registry:
    """The registry of this process (built-ins and installed plugins), built once on first use."""
    return build_registry()
