"""Undo journals: rolling back a failed rewrite without copying the model first.

Every mutation of the IR goes through the methods of :class:`Graph`, :class:`Node` and
:class:`Value`, and while a journal is open each of them records how to undo itself:

- the first time an object's own fields change (a node's inputs or attributes, a value's type,
  name, payload or use list, a graph's inputs, outputs or initializers), the journal saves those
  fields as they were; later changes to the same object cost nothing more;
- edits of a graph's node list (insert, remove, move, sort) are logged as operations and undone
  in reverse order, so the list comes back in its exact order with its own link boxes.

The two kinds never touch the same fields, so a rollback restores the saved fields and then undoes
the logged operations.  Journals nest: committing an inner journal hands what it saved to the one
around it (keeping the older snapshot of an object both saved), rolling it back restores only
what changed since it opened.  The cost is proportional to what a rewrite changes, not to the
size of the model.

Fields a pass assigns directly (``value.type = t``, ``node.op_type = "Relu"``) are recorded
through properties.  Metadata dicts are replaced, never edited in place (a dict edited in place
is not seen): that rule is what ``--paranoid-rollback`` cross-checks against a full copy.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from .errors import IrforgeError

ACTIVE: Journal | None = None
"""The innermost open journal, or ``None`` (then mutations record nothing)."""


class InjectedFailure(IrforgeError):
    """Raised by a journal told to fail after a number of mutations (``fail_after``): how the
    rollback tests stop a pass at an arbitrary point."""


class Journal:
    """One level of undo.  Use it as a context manager (commit on success, roll back on an
    exception) or call :meth:`commit` / :meth:`rollback` yourself."""

    __slots__ = ("_closed", "countdown", "log", "parent", "saved")

    def __init__(self) -> None:
        self.parent: Journal | None = None
        self.saved: dict[Any, tuple] = {}
        self.log: list[tuple[Callable[..., None], tuple]] = []
        self.countdown: int | None = None
        self._closed = True

    def open(self) -> Journal:
        global ACTIVE
        self.parent, self._closed = ACTIVE, False
        ACTIVE = self
        return self

    def fail_after(self, mutations: int) -> None:
        """Raise :class:`InjectedFailure` at the ``mutations``-th recorded mutation from now."""
        self.countdown = mutations

    @property
    def mutations(self) -> int:
        """Objects saved plus node-list operations logged (an upper bound of the undo work)."""
        return len(self.saved) + len(self.log)

    def _close(self) -> None:
        global ACTIVE
        if self._closed:
            raise IrforgeError("internal: journal closed twice")
        if ACTIVE is not self:
            raise IrforgeError("internal: journals must be closed innermost first")
        ACTIVE, self._closed = self.parent, True

    def commit(self) -> None:
        """Keep the changes; an enclosing journal can still undo them."""
        self._close()
        parent = self.parent
        if parent is not None:
            # the parent's saved states are the older ones: they win
            if len(self.saved) > len(parent.saved):
                self.saved.update(parent.saved)
                parent.saved = self.saved
            else:
                for obj, state in self.saved.items():
                    parent.saved.setdefault(obj, state)
            parent.log.extend(self.log)
        self.saved, self.log = {}, []

    def rollback(self) -> None:
        """Put every object this journal saw back as it was when the journal opened."""
        self._close()
        for obj, state in self.saved.items():
            obj._restore(state)
        for undo, args in reversed(self.log):
            undo(*args)
        self.saved, self.log = {}, []

    def __enter__(self) -> Journal:
        return self.open()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()


def _tick(j: Journal) -> None:
    j.countdown -= 1  # type: ignore[operator]
    if j.countdown <= 0:  # type: ignore[operator]
        j.countdown = None
        raise InjectedFailure("injected failure: the journal's mutation budget ran out")


def touch(obj: Any) -> None:
    """Save ``obj``'s fields in the open journal before its first change there."""
    j = ACTIVE
    if j is None:
        return
    if j.countdown is not None:
        _tick(j)
    if obj not in j.saved:
        j.saved[obj] = obj._save()


def record(undo: Callable[..., None], *args: Any) -> None:
    """Log a node-list operation's inverse in the open journal."""
    j = ACTIVE
    if j is None:
        return
    j.log.append((undo, args))  # the operation is done: log it before an injected failure can stop us
    if j.countdown is not None:
        _tick(j)


def journaled(slot: str, doc: str = "") -> property:
    """A field stored in ``slot``: read as fast as a plain attribute (a C getter), written through
    :func:`touch`, so that ``value.type = t`` or ``node.op_type = "Relu"`` can be undone."""

    def write(self: Any, value: Any) -> None:
        if ACTIVE is not None:
            touch(self)
        setattr(self, slot, value)

    return property(attrgetter(slot), write, doc=doc)
