"""Pausing Python's cycle collector while building or walking large graphs."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Building millions of objects that all stay alive makes the cycle collector rescan them
    again and again (superlinear time); it waits until the build is done instead."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
