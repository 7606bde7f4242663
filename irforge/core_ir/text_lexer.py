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


_NUMBER = r"[-+]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![A-Za-z0-9_])"
_NUMBER_LIST = re.compile(rf"[ \t]*((?:{_NUMBER}(?:[ \t]*,[ \t]*{_NUMBER})*)?)[ \t]*\]")


class Lexer:
    """Tokens one at a time (the parser never holds more than two), plus a fast path for the
    long number lists of tensor literals, which would otherwise be two tokens per element."""

    def __init__(self, text: str, source: str = "<text>"):
        self.text, self.source = text, source
        self.pos, self.line, self.line_start = 0, 1, 0

        self.tokens: Iterator[Token] = self._scan()
        """The tokens in order; after the last one it keeps giving an ``eof`` token."""

    def _scan(self) -> Iterator[Token]:
        text, match, n = self.text, TOKEN_RE.match, len(self.text)
        while True:
            pos = self.pos  # re-read: number_list may have moved it
            while pos < n:
                m = match(text, pos)
                if m is None:
                    self.pos = pos
                    raise ParseError(f"unexpected character {text[pos]!r}", self.line, pos - self.line_start + 1,
                                     self.source)  # fmt: skip
                kind = m.lastgroup
                end = m.end()
                if kind == "nl":
                    self.line += 1
                    self.line_start = end
                elif kind != "ws":
                    self.pos = end
                    yield Token(kind, m.group(), self.line, pos - self.line_start + 1)  # type: ignore[arg-type]
                    break
                pos = end
            else:
                self.pos = pos
                eof = Token("eof", "", self.line, pos - self.line_start + 1)
                while True:
                    yield eof

    def number_list(self) -> list[str] | None:
        """Just after a ``[``: the numbers up to the closing ``]`` when that is all there is on
        this line (``None`` otherwise, and nothing is consumed)."""
        m = _NUMBER_LIST.match(self.text, self.pos)
        if m is None:
            return None
        self.pos = m.end()
        body = m.group(1)
        return [x.strip() for x in body.split(",")] if body else []


def tokenize(text: str, source: str = "<text>") -> Iterator[Token]:
    for tok in Lexer(text, source).tokens:
        yield tok
        if tok.kind == "eof":
            return
