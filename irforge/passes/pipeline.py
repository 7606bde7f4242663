"""Pipelines as text, MLIR style: ``a,b{opt=1},fixpoint(c,d){max-iterations=10}``.

``PassManager.parse(text, registry)`` and building a ``PassManager`` by hand give equal objects,
and ``str(pm)`` spells one back in text that parses to the same pipeline.  Only options that
differ from their defaults are spelled, so the text stays short.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .base import Pass, PassError

_LEVEL_FLAG = re.compile(r"(?<![\w\-])-(O\d)\b")
"""``-O2`` (the command-line spelling) names the pipeline ``O2`` in text too."""
_TOKEN = re.compile(r"\s*(?:([A-Za-z_][\w\-.]*)|(.))")


@dataclass(frozen=True)
class Fixpoint:
    """Runs its passes in order, again and again, until none changes the graph."""

    passes: tuple[Element, ...]
    max_iterations: int = 10

    name = "fixpoint"

    def __str__(self) -> str:
        inner = ",".join(str_element(p) for p in self.passes)
        opts = "" if self.max_iterations == 10 else f"{{max-iterations={self.max_iterations}}}"
        return f"fixpoint({inner}){opts}"


Element = Pass | Fixpoint


def str_element(p: Element) -> str:
    if isinstance(p, Fixpoint):
        return str(p)
    opts = p.changed_options()
    if not opts:
        return p.name
    return p.name + "{" + " ".join(f"{k.replace('_', '-')}={_spell(v)}" for k, v in opts.items()) + "}"


def _spell(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return ",".join(str(item) for item in v)
    return str(v)


@dataclass(frozen=True)
class Pipeline:
    """An ordered list of passes and fixed-point groups; ``str()`` is its pipeline text."""

    passes: tuple[Element, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        return ",".join(str_element(p) for p in self.passes)

    @classmethod
    def parse(
        cls, text: str, registry: Mapping[str, type[Pass]], pipelines: Mapping[str, str] | None = None
    ) -> Pipeline:
        """Read pipeline text; an unknown pass or option is a ``PassError`` naming it.

        A name in ``pipelines`` (such as ``O2``) stands for its passes; empty text is the empty
        pipeline.
        """
        text = _LEVEL_FLAG.sub(r"\1", text)
        if not text.strip():
            return cls(())
        return cls(tuple(_Reader(text, registry, pipelines or {}).pipeline(top=True)))


class _Reader:
    def __init__(self, text: str, registry: Mapping[str, type[Pass]], pipelines: Mapping[str, str], depth: int = 0):
        self.text, self.registry, self.pipelines, self.depth = text, registry, pipelines, depth
        self.tokens = [(m.group(1), m.group(2), m.start()) for m in _TOKEN.finditer(text) if m.group(0).strip()]
        self.i = 0

    def error(self, msg: str) -> PassError:
        at = self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)
        return PassError(f"pipeline {self.text!r}, at column {at + 1}: {msg}")

    def peek(self) -> str | None:
        if self.i >= len(self.tokens):
            return None
        word, punct, _ = self.tokens[self.i]
        return word or punct

    def take(self) -> str | None:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, want: str) -> None:
        if self.peek() != want:
            raise self.error(f"expected {want!r}, found {self.peek() or 'the end'!r}")
        self.i += 1

    def pipeline(self, top: bool = False) -> list[Element]:
        out = self.elements()
        while self.peek() == ",":
            self.i += 1
            out += self.elements()
        if top and self.peek() is not None:
            raise self.error(f"unexpected {self.peek()!r}")
        return out

    def elements(self) -> list[Element]:
        """One pass or fixed-point group, or the passes of a named pipeline."""
        name = self.peek()
        if name in self.pipelines and name not in self.registry and name != "fixpoint":
            self.i += 1
            if self.depth > 16:
                raise self.error(f"named pipeline {name!r} refers to itself")
            text = self.pipelines[name]
            if not text.strip():
                return []
            return _Reader(text, self.registry, self.pipelines, self.depth + 1).pipeline(top=True)
        return [self.element()]

    def element(self) -> Element:
        if self.i >= len(self.tokens) or not self.tokens[self.i][0]:
            raise self.error(f"expected a pass name, found {self.peek() or 'the end'!r}")
        name = self.take()
        if name == "fixpoint":
            self.expect("(")
            inner = self.pipeline()
            self.expect(")")
            opts = self.options({"max-iterations": int})
            return Fixpoint(tuple(inner), **opts)
        cls = self.registry.get(name)  # type: ignore[arg-type]
        if cls is None:
            self.i -= 1  # point at the name
            raise self.error(_unknown(name, [*self.registry, *self.pipelines, "fixpoint"]))
        kinds = {f.name.replace("_", "-"): _kind(cls, f) for f in dataclasses.fields(cls)}
        opts = self.options(kinds, name)  # its errors name their column already
        try:
            return cls(**opts)
        except PassError as e:  # an option value the pass itself refuses
            raise self.error(str(e)) from None
        except (TypeError, ValueError) as e:
            raise self.error(f"pass {name!r}: {e}") from None

    def options(self, kinds: dict[str, type], owner: str = "fixpoint") -> dict[str, Any]:
        if self.peek() != "{":
            return {}
        start = self.tokens[self.i][2]
        end = self.text.find("}", start)
        if end < 0:
            raise self.error("'{' is never closed")
        out: dict[str, Any] = {}
        listing = None  # the list option whose items are being read (MLIR style: ``ops=A,B``)
        for item in re.split(r"[\s,]+", self.text[start + 1 : end].strip()):
            if not item:
                continue
            key, eq, value = item.partition("=")
            if not eq and listing is not None:
                out[listing] += (item,)
                continue
            listing = key.replace("-", "_") if eq and kinds.get(key) is tuple else None
            if not eq or key not in kinds:
                known = ", ".join(kinds) or "none"
                raise self.error(f"{owner}: unknown option {key!r} (options: {known})")
            out[key.replace("-", "_")] = _convert(value, kinds[key], owner, key, self)
        while self.i < len(self.tokens) and self.tokens[self.i][2] <= end:
            self.i += 1
        return out


def _unknown(name: str, known: list[str]) -> str:
    import difflib  # only an unknown name needs it

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    if close:
        return f"unknown pass {name!r}; did you mean {' or '.join(close)}? (`irforge passes` lists them all)"
    return f"unknown pass {name!r} (known: {', '.join(sorted(known)) or 'none'})"


def _kind(cls: type, f: dataclasses.Field) -> type:
    default = f.default if f.default is not dataclasses.MISSING else None
    return type(default) if default is not None else str


def _convert(value: str, kind: type, owner: str, key: str, reader: _Reader) -> Any:
    try:
        if kind is tuple:
            return tuple(item for item in (value,) if item)
        if kind is bool:
            if value not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return value in ("true", "1")
        return kind(value)
    except ValueError:
        raise reader.error(f"{owner}: option {key!r} wants {kind.__name__}, got {value!r}") from None
