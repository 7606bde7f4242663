"""Special functions (jax's ``lax.special``): igamma, betainc, erf_inv, Bessel, computed by
:mod:`irforge.frontends.lib` in core ONNX ops."""

from __future__ import annotations

from ...lib import incomplete, special
from .common import prim

_SPECIAL = {"lgamma": special.lgamma, "digamma": special.digamma, "erf_inv": special.erfinv,
            "bessel_i0e": special.bessel_i0e, "bessel_i1e": special.bessel_i1e}  # fmt: skip


@prim(*_SPECIAL)
def _special(cx, x, **_):
    fn = _SPECIAL[cx.eqn.primitive.name]
    return cx.typed("Identity", fn(cx, cx.value(x)))


@prim("igamma", "igammac")
def _igamma(cx, a, x, **_):
    upper = cx.eqn.primitive.name == "igammac"
    p = incomplete.regularized_gamma(cx, cx.value(a), cx.value(x), upper=upper, framework="jax")
    return cx.typed("Identity", p)


@prim("regularized_incomplete_beta")
def _betainc(cx, a, b, x, **_):
    return cx.typed("Identity", incomplete.regularized_beta(cx, cx.value(a), cx.value(b), cx.value(x)))


@prim("nextafter")
def _nextafter(cx, x, y, **_):
    cx.importer.require_opset(special.BITCAST_OPSET)
    return cx.typed("Identity", special.nextafter(cx, cx.value(x), cx.value(y)))
