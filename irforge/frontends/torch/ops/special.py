"""``torch.special`` and friends: gamma-family, Bessel, zeta and orthogonal-polynomial functions, computed by
:mod:`irforge.frontends.lib` in core ONNX ops."""

from __future__ import annotations

import numpy as np

from ....core_ir.dtypes import is_floating, to_numpy
from ....core_ir.value import Value
from ...common import NotMapped
from ...lib import incomplete, polynomials, special
from .common import _special, aten
from .elementwise import _promoted
from .linalg import _outputs


def _torch_digamma(cx, x: Value) -> Value:
    """ψ with torch's value at zero: -inf at +0, +inf at -0 (the pole's one-sided limits)."""
    at_zero = cx.emit("Neg", cx.emit("Reciprocal", x))
    return cx.emit("Where", cx.emit("Equal", x, cx.const(np.asarray(0, to_numpy(x.type.dtype)))), at_zero,
                   special.digamma(cx, x))  # fmt: skip


aten("lgamma.default")(_special(special.lgamma))


aten("digamma.default")(_special(_torch_digamma))


aten("erfinv.default")(_special(special.erfinv))


aten("special_i0e.default")(_special(special.bessel_i0e))


aten("special_i1e.default")(_special(special.bessel_i1e))


aten("special_ndtri.default")(_special(special.ndtri))


aten("special_erfcx.default")(_special(special.erfcx))


aten("special_log_ndtr.default")(_special(special.log_ndtr))


aten("special_bessel_j0.default")(_special(lambda e, x: special.bessel_j(e, x, 0)))


aten("special_bessel_j1.default")(_special(lambda e, x: special.bessel_j(e, x, 1)))


aten("special_bessel_y0.default")(_special(lambda e, x: special.bessel_y(e, x, 0)))


aten("special_bessel_y1.default")(_special(lambda e, x: special.bessel_y(e, x, 1)))


aten("special_spherical_bessel_j0.default")(_special(special.spherical_bessel_j0))


aten("special_airy_ai.default")(_special(special.airy_ai))


aten("special_modified_bessel_k0.default")(_special(lambda e, x: special.bessel_k(e, x, 0)))


aten("special_modified_bessel_k1.default")(_special(lambda e, x: special.bessel_k(e, x, 1)))


aten("special_scaled_modified_bessel_k0.default")(_special(lambda e, x: special.bessel_k(e, x, 0, scaled=True)))


aten("special_scaled_modified_bessel_k1.default")(_special(lambda e, x: special.bessel_k(e, x, 1, scaled=True)))


@aten("nextafter.default")
def _nextafter(cx, x, other):
    dt = _promoted(cx, x, other)
    cx.importer.require_opset(special.BITCAST_OPSET)
    return cx.emit_typed("Identity", special.nextafter(cx, cx.tensor(x, dt), cx.tensor(other, dt)))


@aten("frexp.Tensor")
def _frexp(cx, x):
    return _outputs(cx, *special.frexp(cx, cx.tensor(x, cx.dtype(x))))


@aten("polygamma.default")
def _polygamma(cx, n, x):
    if not isinstance(n, int) or n < 0:
        raise NotMapped(f"polygamma of order {n!r}")
    if n == 0:
        return _special(_torch_digamma)(cx, x)
    if n == 1:
        return _special(special.trigamma)(cx, x)
    return _special(lambda e, v: special.polygamma(e, n, v))(cx, x)


@aten("special_zeta.default")
def _zeta(cx, x, q):
    dt = _promoted(cx, x, q)
    if not is_floating(dt):
        raise NotMapped(f"zeta of {dt.name}")
    return cx.emit_typed("Identity", special.zeta(cx, cx.tensor(x, dt), cx.tensor(q, dt)))


def _polynomial(name: str):
    def convert(cx, x, n):
        dt = cx.out_dtype
        value = polynomials.orthogonal_polynomial(cx, name, cx.tensor(x, dt), cx.tensor(n, dt))
        return cx.emit_typed("Identity", value)

    return convert


for _name in polynomials.FAMILIES:
    aten(f"special_{_name}.default", f"special_{_name}.x_scalar", f"special_{_name}.n_scalar")(_polynomial(_name))


@aten("igamma.default", "igammac.default")
def _igamma(cx, a, x):
    dt = _promoted(cx, a, x)
    if not is_floating(dt):
        raise NotMapped(f"the incomplete gamma function of {dt.name}")
    upper = "igammac" in str(cx.fx.target)
    p = incomplete.regularized_gamma(cx, cx.tensor(a, dt), cx.tensor(x, dt), upper=upper, framework="torch")
    return cx.emit_typed("Identity", p)


aten("log1p.default")(_special(special.log1p))


aten("expm1.default")(_special(special.expm1))
