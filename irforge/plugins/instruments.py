"""Plugins' instrumentation: the pluggy hooks, wrapped as one pass-manager instrument."""

from __future__ import annotations

from ..passes.instrumentation import HookRelay
from .registry import Registry


def plugin_hooks(registry: Registry) -> HookRelay:
    """An instrument calling every plugin's ``irforge_before_pass`` / ``irforge_after_pass``."""
    return HookRelay(registry.plugin_manager.hook)


def pass_manager(pipeline: str, registry: Registry, instruments=(), **options):
    """A manager for pipeline text over ``registry``'s passes, with the plugins' hooks among its
    instruments and each pass's provider named in its errors."""
    from ..passes.manager import PassManager

    return PassManager.parse(pipeline, registry, instruments=list(instruments), **options)
