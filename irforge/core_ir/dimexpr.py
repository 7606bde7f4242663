"""Dimension expressions: symbolic dims such as ``2*batch`` or ``seq*heads`` that can be read,
evaluated and compared, not only carried as opaque names.

Frontends produce them (torch.export's derived dims, JAX's shape polymorphism); a backend that
compiles at static shapes evaluates them from the sizes of the plain symbols (``--dim batch=4``),
and StableHLO keeps them symbolic.  In a :class:`TensorType` a dim expression is stored as its
canonical text (a ``str``), so everything that handles a named dim handles it too.

The grammar is integer arithmetic over identifiers: ``+ - * // % ( )``, ``max(a, b)`` and
``min(a, b)``, integers; ``/`` is accepted as floor division.
"""

from __future__ import annotations

import ast
import functools
import operator

from .errors import IrforgeError


class DimExprError(IrforgeError):
    """A dimension expression that does not parse or cannot be evaluated; the message says which."""


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod}  # fmt: skip
_CALLS = {"max": max, "min": min}


@functools.lru_cache(maxsize=4096)
def _tree(text: str) -> ast.expr:
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise DimExprError(f"{text!r} is not a dimension expression (integers, names, + - * // % max min)") from None
    for sub in ast.walk(tree):
        ok = isinstance(sub, (ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Call, ast.Load, ast.USub,
                              ast.UAdd, *_BINOPS))  # fmt: skip
        if isinstance(sub, ast.Constant) and not isinstance(sub.value, int):
            ok = False
        if isinstance(sub, ast.Call) and not (isinstance(sub.func, ast.Name) and sub.func.id in _CALLS):
            ok = False
        if not ok:
            raise DimExprError(f"{text!r} is not a dimension expression (integers, names, + - * // % max min)")
    return tree


def is_dim_expr(text: str) -> bool:
    """True when ``text`` parses as a dimension expression (a plain name is one too)."""
    try:
        _tree(text)
    except DimExprError:
        return False
    return True


def symbols(text: str) -> list[str]:
    """The names ``text`` refers to, in order of first appearance."""
    seen: dict[str, None] = {}
    for sub in ast.walk(_tree(text)):
        if isinstance(sub, ast.Name) and sub.id not in _CALLS:
            seen.setdefault(sub.id)
    return list(seen)


def evaluate(text: str, sizes: dict[str, int]) -> int:
    """The value of ``text`` with each name sized from ``sizes``; raises :class:`DimExprError`
    naming the first unsized name."""

    def ev(e: ast.expr) -> int:
        if isinstance(e, ast.Constant):
            return int(e.value)
        if isinstance(e, ast.Name):
            if e.id not in sizes:
                raise DimExprError(f"the dim {text!r} needs a size for {e.id!r}")
            return int(sizes[e.id])
        if isinstance(e, ast.UnaryOp):
            return -ev(e.operand) if isinstance(e.op, ast.USub) else ev(e.operand)
        if isinstance(e, ast.Call):
            return _CALLS[e.func.id](*(ev(a) for a in e.args))
        return _BINOPS[type(e.op)](ev(e.left), ev(e.right))

    return ev(_tree(text))


def rename(text: str, names: dict[str, str]) -> str:
    """``text`` with its symbols renamed (``s0*s1`` with ``{s0: batch}`` → ``batch*s1``)."""

    class _Rename(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.Name:
            return ast.Name(names.get(node.id, node.id), ast.Load()) if node.id not in _CALLS else node

    _tree(text)  # raises on a malformed expression
    tree = _Rename().visit(ast.parse(text.strip(), mode="eval"))
    return canonical(ast.unparse(tree))


def canonical(text: str) -> str:
    """The expression printed without redundant spaces or parentheses (``2 * (s0)`` → ``2*s0``)."""
    out = ast.unparse(_tree(text))
    return out.replace(" * ", "*").replace(" // ", "//").replace(" % ", "%")
