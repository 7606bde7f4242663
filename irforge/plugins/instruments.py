"""Plugins' instrumentation: the pluggy hooks, wrapped as one pass-manager instrument."""

from __future__ import annotations

from ..passes.instrumentation import HookRelay
from .registry import Registry


def plugin_hooks(registry: Registry) -> HookRelay:
    """An instrument calling every plugin's ``irforge_before_pass`` / ``irforge_after_pass``."""
    return HookRelay(registry.plugin_manager.hook)
