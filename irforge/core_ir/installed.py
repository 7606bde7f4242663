"""The installed plugin registry, as the layers under it reach it.

The registry sits on top: it imports the passes and backends it registers, so they cannot import
it.  Functions that take a ``registry`` argument (``PassManager.parse``, the importers) use, when
given none, the one the API module installs here when ``irforge`` is imported: the built-ins and
every installed plugin, built on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import IrforgeError

_provider: Callable[[], Any] | None = None


def install(provider: Callable[[], Any]) -> None:
    """Make ``provider()`` the registry used where a caller gives none."""
    global _provider
    _provider = provider


def installed_registry() -> Any:
    """The registry of this process (:func:`irforge.plugins.default_registry`)."""
    if _provider is None:
        raise IrforgeError("no plugin registry is installed: import irforge, or pass registry=...")
    return _provider()
