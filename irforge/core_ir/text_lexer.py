"""Tokens of the text format, shared by the printer (quoting) and the parser (scanning)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

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
    long number lists of tensor literals, which would otherwise be two tokens per element.

    No token spans a line (strings escape their newlines), so the source is read a line at a
    time: a text stream is never held whole, which keeps parsing a large file within the
    memory of the graph it builds.
    """

    def __init__(self, source_text: str | Iterable[str], source: str = "<text>"):
        self.source = source
        self._lines = _lines_of(source_text) if isinstance(source_text, str) else iter(source_text)
        self.text, self.pos, self.line = "", 0, 0

        self.tokens: Iterator[Token] = self._scan()
        """The tokens in order; after the last one it keeps giving an ``eof`` token."""

    def _scan(self) -> Iterator[Token]:
        match, lines = TOKEN_RE.match, self._lines
        for text in lines:
            self.text, self.pos, n = text, 0, len(text)
            self.line += 1
            line = self.line
            while True:
                pos = self.pos  # re-read: number_list may have moved it
                if pos >= n:
                    break
                m = match(text, pos)
                if m is None:
                    raise ParseError(f"unexpected character {text[pos]!r}", line, pos + 1, self.source)
                kind = m.lastgroup
                self.pos = m.end()
                if kind != "ws" and kind != "nl":
                    yield Token(kind, m.group(), line, pos + 1)  # type: ignore[arg-type]
        eof = Token("eof", "", max(self.line, 1), self.pos + 1)
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


def _lines_of(text: str) -> Iterator[str]:
    """The lines of ``text``, newline included, without splitting it all at once."""
    start, n = 0, len(text)
    while start < n:
        end = text.find("\n", start)
        end = n if end < 0 else end + 1
        yield text[start:end]
        start = end


def tokenize(text: str, source: str = "<text>") -> Iterator[Token]:
    for tok in Lexer(text, source).tokens:
        yield tok
        if tok.kind == "eof":
            return
