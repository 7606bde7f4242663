"""The exceptions irforge raises.

Every error a user can provoke with bad input is an :class:`IrforgeError`; its message names the
file, node, value or pass at fault and says what to do.  Anything else escaping irforge is a bug.
"""

from __future__ import annotations

from collections.abc import Sequence


class IrforgeError(Exception):
    """Base class of every error irforge raises on purpose."""


class ParseError(IrforgeError):
    """The text form of a graph could not be read; the message gives line and column."""

    def __init__(self, message: str, line: int = 0, column: int = 0, source: str = "<text>"):
        self.line, self.column, self.source = line, column, source
        super().__init__(f"{source}:{line}:{column}: {message}")


class LoadError(IrforgeError):
    """A model file or buffer could not be read into the IR."""


class ExternalDataError(LoadError):
    """External tensor data is missing, malformed, or points outside the model's folder."""


class ExportError(IrforgeError):
    """The IR could not be written out in the requested format."""


class IRError(IrforgeError):
    """A mutation would break an IR invariant (e.g. removing a node whose outputs are still used)."""


class InterpreterError(IrforgeError):
    """Running a graph failed; the message names the node and its op."""


class MissingExtraError(IrforgeError, ImportError):
    """An optional toolchain is not installed; the message names the extra that provides it."""

    def __init__(self, module: str, extra: str, purpose: str):
        self.module, self.extra = module, extra
        super().__init__(
            f"{purpose} needs the Python package {module!r}, which is not installed. "
            f"Install it with: pip install 'irforge[{extra}]'"
        )


class Problem:
    """One verifier finding: which rule failed, where, and why."""

    __slots__ = ("message", "node", "rule", "value")

    def __init__(self, rule: str, message: str, node: str | None = None, value: str | None = None):
        self.rule, self.message, self.node, self.value = rule, message, node, value

    def __str__(self) -> str:
        where = []
        if self.node is not None:
            where.append(f"node {self.node}")
        if self.value is not None:
            where.append(f"value %{self.value}")
        loc = f" at {', '.join(where)}" if where else ""
        return f"[{self.rule}]{loc}: {self.message}"

    def __repr__(self) -> str:
        return f"Problem({self!s})"


class VerificationError(IrforgeError):
    """The verifier found one or more broken invariants; ``problems`` lists them all."""

    def __init__(self, problems: Sequence[Problem], subject: str = "graph"):
        self.problems = list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        n = len(self.problems)
        super().__init__(f"{subject} failed verification ({n} problem{'s' * (n != 1)}):\n{lines}")


def first_line(e: BaseException) -> str:
    """The first line of a foreign exception's message, for an irforge error that wraps it: the
    runtimes' messages go on with backtraces (lines that say ``Traceback`` or are indented)."""
    lines = [line for line in str(e).splitlines() if line.strip() and not line.startswith(("Traceback", " "))]
    return lines[0].strip() if lines else type(e).__name__
