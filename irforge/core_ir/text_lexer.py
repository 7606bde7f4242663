"""Tokens of the text format, shared by the printer (quoting) and the parser (scanning)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from .errors import ParseError

_BARE_NAME = re.compile(r"[A-Za-z0-9_.$/\-]+\Z")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")

TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r]+|//[^\n]*)
  | (?P<nl>\n)
  | (?P<value>%(?:\#\d+|"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.$/\-]+))
  | (?P<symbol>@(?:"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.$/\-]+))
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>[-+]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![A-Za-z0-9_]))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>::|->|[()\[\]{}<>,:=?*])
    """,
    re.VERBOSE,
)


def quote(s: str) -> str:
    """A double-quoted literal that :func:`unquote` reads back exactly (lone surrogates too)."""
    try:
        s.encode("utf-8")
        return json.dumps(s, ensure_ascii=False)
    except UnicodeEncodeError:
        return json.dumps(s, ensure_ascii=True)


def unquote(token: str) -> str:
    return json.loads(token)


def format_name(name: str) -> str:
    """A value or symbol name as printed after ``%`` / ``@``."""
    return name if _BARE_NAME.match(name) else quote(name)


def format_ident(s: str) -> str:
    """An op type or domain: bare when it is a dotted identifier, quoted otherwise."""
    return s if _IDENT.match(s) and s not in _RESERVED else quote(s)


_RESERVED = {"return", "init", "graph", "func", "opset", "model", "with", "none", "_"}


class Token:
    __slots__ = ("col", "kind", "line", "text")

    def __init__(self, kind: str, text: str, line: int, col: int):
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self) -> str:
        return f"{self.kind}:{self.text!r}@{self.line}:{self.col}"


def tokenize(text: str, source: str = "<text>") -> Iterator[Token]:
    pos, line, line_start, n = 0, 1, 0, len(text)
    match = TOKEN_RE.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r}", line, pos - line_start + 1, source)
        kind = m.lastgroup
        if kind == "nl":
            line += 1
            line_start = m.end()
        elif kind != "ws":
            yield Token(kind, m.group(), line, pos - line_start + 1)  # type: ignore[arg-type]
        pos = m.end()
    yield Token("eof", "", line, pos - line_start + 1)
