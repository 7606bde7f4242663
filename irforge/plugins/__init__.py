"""Plugin hook specs and registries (pluggy project ``irforge``, entry-point group ``irforge.plugins``)."""

from .hookspecs import hookimpl, hookspec
from .registry import PluginError, Registry, build_registry, default_registry

__all__ = ["PluginError", "Registry", "build_registry", "default_registry", "hookimpl", "hookspec"]
