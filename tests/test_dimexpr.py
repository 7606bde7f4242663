"""Dim expressions (``2*batch``, ``b*n``, ``(s0+1)//2``): parsed safely, evaluated, renamed."""

from __future__ import annotations

import pytest

from irforge.core_ir.dimexpr import DimExprError, canonical, evaluate, is_dim_expr, rename, symbols


@pytest.mark.parametrize("text", ["batch", "2*batch", "b*n", "(s0+1)//2", "max(a,b)-1", "n%4"])
def test_expressions_are_recognised(text):
    assert is_dim_expr(text)


@pytest.mark.parametrize("text", ["", "2.5*n", "__import__('os')", "a**2", "f(x)", "n[0]", "a if b else c"])
def test_anything_else_is_not_an_expression(text):
    assert not is_dim_expr(text)
    with pytest.raises(DimExprError):
        evaluate(text, {"n": 1, "a": 1, "b": 1, "c": 1, "x": 1})


def test_evaluate_rename_and_symbols():
    assert evaluate("2*batch+1", {"batch": 4}) == 9
    assert evaluate("(s0+1)//2", {"s0": 7}) == 4
    assert symbols("b*n+b") == ["b", "n"]
    assert rename("2*s0+s1", {"s0": "batch", "s1": "seq"}) == canonical("2*batch+seq")
    with pytest.raises(DimExprError, match="needs a size for 'n'"):
        evaluate("b*n", {"b": 2})
