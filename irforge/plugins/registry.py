"""Discovery (entry points of group ``irforge.plugins``) and the registries it fills.

Each hook implementation is called on its own, so every registered name knows the plugin, and
the distribution, that provided it; a name given twice is an error naming both.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from ..core_ir.errors import IrforgeError
from ..passes.apply_pattern import pattern_pass
from . import builtin, hookspecs

BUILTIN = "irforge (built-in)"
_SINGULAR = {"passes": "pass", "patterns": "pattern", "runnable": "pass or pattern", "pipelines": "pipeline",
             "frontends": "frontend", "backends": "backend", "kernels": "kernel"}  # fmt: skip


class PluginError(IrforgeError):
    """A plugin failed to load or registered something twice; the message names the plugins."""


@dataclass
class Registry:
    """Everything the plugins registered, by kind and name, with who provided each entry."""

    plugin_manager: pluggy.PluginManager
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    providers: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def passes(self) -> dict[str, type]:
        return self.entries["passes"]

    @property
    def pipelines(self) -> dict[str, str]:
        return self.entries["pipelines"]

    @property
    def runnable(self) -> dict[str, type]:
        """What pipeline text may name: every pass, and every pattern as a pass of its own."""
        return self.entries["runnable"]

    def provider(self, kind: str, name: str) -> str:
        return self.providers.get((kind, name), "unknown")

    def add(self, kind: str, name: str, item: Any, provider: str) -> None:
        table = self.entries.setdefault(kind, {})
        if name in table:
            raise PluginError(
                f"{_SINGULAR.get(kind, kind)} {name!r} is registered twice: by {self.provider(kind, name)} "
                f"and by {provider}; uninstall or rename one of them"
            )
        table[name] = item
        self.providers[(kind, name)] = provider


def _provider_names(pm: pluggy.PluginManager) -> dict[int, str]:
    names = {id(builtin): BUILTIN}
    for plugin, dist in pm.list_plugin_distinfo():
        names[id(plugin)] = f"{dist.project_name} {dist.version}"
    return names


def _calls(pm: pluggy.PluginManager, hook: str, names: dict[int, str]):
    for impl in getattr(pm.hook, hook).get_hookimpls():
        plugin = impl.plugin
        provider = names.get(id(plugin)) or getattr(plugin, "__name__", None) or type(plugin).__qualname__
        try:
            yield provider, impl.function() or []
        except Exception as e:
            raise PluginError(f"plugin {provider}: {hook} raised {type(e).__name__}: {e}") from e


def build_registry(discover: bool = True, plugins: Iterable[Any] = ()) -> Registry:
    """A fresh registry: the built-ins, every installed plugin (with ``discover``), and the
    given plugin objects (modules or instances with hook implementations, for programs that
    bring their own passes without packaging them)."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(builtin, name=BUILTIN)
    for plugin in plugins:
        pm.register(plugin)
    if discover:
        try:
            pm.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
        except Exception as e:
            raise PluginError(f"loading the plugins of entry-point group {hookspecs.ENTRY_POINT_GROUP!r} "
                              f"failed: {type(e).__name__}: {e}") from e  # fmt: skip
    names = _provider_names(pm)
    reg = Registry(pm, {"passes": {}, "patterns": {}, "pipelines": {}, "frontends": {}, "backends": {}})
    for provider, passes in _calls(pm, "irforge_register_passes", names):
        for cls in passes:
            name = getattr(cls, "name", "")
            if not name:
                raise PluginError(f"plugin {provider}: pass class {cls.__qualname__} has no name")
            reg.add("passes", name, cls, provider)
    for provider, patterns in _calls(pm, "irforge_register_patterns", names):
        for pattern in patterns:
            reg.add("patterns", pattern.name, pattern, provider)
    for name, cls in reg.passes.items():
        reg.add("runnable", name, cls, reg.provider("passes", name))
    for name, pattern in reg.entries["patterns"].items():
        reg.add("runnable", name, pattern_pass(pattern), reg.provider("patterns", name))
    for kind in ("pipelines", "frontends", "backends"):
        for provider, items in _calls(pm, f"irforge_register_{kind}", names):
            for name, item in items:
                reg.add(kind, name, item, provider)
    for provider, kernels in _calls(pm, "irforge_register_kernels", names):
        for domain, op_type, kernel in kernels:
            reg.add("kernels", f"{domain}::{op_type}", kernel, provider)
    return reg


@functools.cache
def default_registry() -> Registry:
    """The registry of this process, built once on first use."""
    return build_registry()
