"""Plugin hook specs and registries (pluggy project ``irforge``, entry-point group ``irforge.plugins``).

A plugin package implements hooks with :data:`hookimpl`; irforge finds it through its entry point.
A plugin that cannot be loaded is left out with one :class:`PluginWarning`, and
``IRFORGE_DISABLE_PLUGINS=name,...`` turns plugins off by entry-point or distribution name.
"""

from .hookspecs import hookimpl, hookspec
from .registry import PluginError, PluginInfo, PluginWarning, Registry, build_registry, default_registry

__all__ = [
    "PluginError", "PluginInfo", "PluginWarning", "Registry", "build_registry", "default_registry",
    "hookimpl", "hookspec",
]  # fmt: skip
