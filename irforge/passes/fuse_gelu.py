"""fuse-gelu: GELU written out in primitives becomes one GELU op.

Exporters before opset 20 have no ``Gelu``, so ``torch.onnx.export`` and hand-written models
spell ``x * 0.5 * (1 + erf(x / sqrt(2)))`` (five nodes) or the tanh approximation
``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`` (eight or nine), each writing a
full activation map.  Every order of the products, ``Div`` by sqrt(2) or ``Mul`` by 1/sqrt(2),
and ``Pow(x, 3)`` or ``x*x*x`` are matched; the constants must be those numbers (float32
tolerance) and the intermediate results read by nothing else.  At opset 20 and later the
result is ONNX's ``Gelu``; before, it is ``irforge::Gelu`` (overload ``none`` or ``tanh``, its
body the same primitives), which ``lower-fused{target=onnxruntime}`` makes onnxruntime's
``Gelu`` / ``FastGelu``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.builder import Builder
from ..core_ir.dtypes import COMPUTE_FLOATS
from ..core_ir.graph import Graph
from ..core_ir.model import Function
from ..core_ir.pattern import Match, Pattern
from ..core_ir.value import Value
from .base import Pass, PassContext, PassResult
from .fused_ops import DOMAIN, gelu_body, only_read_inside, onnx_opset, run_fusion

_CONSTANTS = {"half": 0.5, "one": 1.0, "cubic": 0.044715, "sqrt2pi": float(np.sqrt(2 / np.pi))}


def _near(m: Match, name: str, want: float) -> bool:
    c = m.constant(name)
    return c is not None and c.size == 1 and bool(np.isclose(float(c.reshape(-1)[0]), want, rtol=1e-3, atol=0))


def _check(m: Match) -> bool:
    for name, want in _CONSTANTS.items():
        if name in m.values and not _near(m, name, want):
            return m.fail(f"the constant {name} is not {want}")
    if "three" in m.values and not _near(m, "three", 3.0):
        return m.fail("the power is not 3")
    if "root2" in m.values:
        div = any(n.op_type == "Div" for n in m.nodes)
        if not _near(m, "root2", float(np.sqrt(2)) if div else float(1 / np.sqrt(2))):
            return m.fail("the erf argument is not x / sqrt(2)")
    if m.dtype("x") not in COMPUTE_FLOATS:
        return m.fail("not a float type")
    if not only_read_inside(m):
        return m.fail("an intermediate result is read elsewhere")
    return True


def _rewrite(tanh: bool, native: bool):
    def rewrite(b: Builder, m: Match) -> Value:
        approximate = "tanh" if tanh else "none"
        if native:
            out = b.op.Gelu(m["x"], approximate=approximate)
        else:
            node = b.add_node("Gelu", [m["x"]], {"approximate": approximate}, domain=DOMAIN, num_outputs=1)
            node.overload = approximate
            out = node.outputs[0]
        out.type = m.outputs[0].type
        return out

    return rewrite


def _gate_sources():
    """(name, tanh, builder of the gate ``1 + erf(..)`` or ``1 + tanh(..)`` from x)."""

    def erf(op_type):
        return lambda p, x: p.op.Add(p.op.Erf(getattr(p.op, op_type)(x, p.const("root2"))), p.const("one"))

    def tanh(cube):
        def gate(p, x):
            inner = p.op.Mul(p.op.Add(x, p.op.Mul(cube(p, x), p.const("cubic"))), p.const("sqrt2pi"))
            return p.op.Add(p.op.Tanh(inner), p.const("one"))

        return gate

    def erfc(p, x):  # JAX: erfc(-x / sqrt 2) = 1 - erf(-x / sqrt 2), which is 1 + erf(x / sqrt 2)
        return p.op.Sub(p.const("one"), p.op.Erf(p.op.Mul(p.op.Neg(x), p.const("root2"))))

    return [
        ("erf-div", False, erf("Div")), ("erf-mul", False, erf("Mul")), ("erfc-mul", False, erfc),
        ("tanh-pow", True, tanh(lambda p, x: p.op.Pow(x, p.const("three")))),
        ("tanh-mul", True, tanh(lambda p, x: p.op.Mul(p.op.Mul(x, x), x))),
        ("tanh-mul2", True, tanh(lambda p, x: p.op.Mul(x, p.op.Mul(x, x)))),
    ]  # fmt: skip


def _patterns(native: bool) -> list[Pattern]:
    """The GELU patterns; ``native``: the model's opset has ``Gelu`` (20 and later)."""
    out = []
    products = {  # where the 0.5 sits: ((x * gate) * 0.5), ((x * 0.5) * gate), (x * (gate * 0.5))
        "outer": lambda p, x, g: p.op.Mul(p.op.Mul(x, g), p.const("half")),
        "first": lambda p, x, g: p.op.Mul(p.op.Mul(x, p.const("half")), g),
        "inner": lambda p, x, g: p.op.Mul(x, p.op.Mul(g, p.const("half"))),
    }
    for gate_name, tanh, gate in _gate_sources():
        for where, product in products.items():

            def source(p, gate=gate, product=product):
                x = p.var("x")
                return product(p, x, gate(p, x))

            out.append(Pattern(f"gelu-{gate_name}-{where}", source, _rewrite(tanh, native), check=_check, benefit=3))
    return out


PATTERNS: dict[bool, list[Pattern]] = {native: _patterns(native) for native in (False, True)}
"""The patterns for models without (False) and with (True) ONNX's ``Gelu``."""


def _function(overload: str, opset: int) -> Function:
    g = Graph(inputs=[Value("X")], name=f"Gelu_{overload}", opset_imports={"": opset})
    b = Builder(g, opset=opset)
    g.append_output(gelu_body(b, g.inputs[0], tanh=overload == "tanh"))
    doc = f"GELU ({overload} approximation) in primitives: the decomposition of irforge::Gelu"
    return Function(DOMAIN, "Gelu", g, attributes=["approximate"], overload=overload, doc_string=doc)


BODIES = [("Gelu", _function)]
"""The fused op this pass makes, with its decomposition (registered by the built-in plugin)."""


@dataclass(frozen=True)
class FuseGelu(Pass):
    name = "fuse-gelu"
    summary = "GELU written in primitives (erf or tanh form, any product order) -> one Gelu op"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return run_fusion(self, graph, ctx, PATTERNS[onnx_opset(ctx, graph) >= 20])
