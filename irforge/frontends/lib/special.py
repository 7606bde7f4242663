"""Special functions ONNX has no op for, written in ONNX ops the way XLA expands them.

``lgamma`` and ``digamma`` use the Lanczos approximation (g = 7, nine terms) with the reflection
formula below 1/2, as XLA's ``chlo.lgamma``/``chlo.digamma`` expansions do; ``erfinv`` uses Giles'
single-precision polynomials ("Approximating the erfinv function", 2010), as XLA's ``ErfInv32``
does.  So a framework's graph imported through these runs the same arithmetic on every backend.
Half-precision inputs are computed in float32 and rounded back; ``erfinv`` refuses float64,
whose polynomial it does not carry.
"""

from __future__ import annotations

import math

import numpy as np

from ...core_ir.dtypes import DataType, to_numpy
from ...core_ir.value import Value
from ..common import Emitter, NotMapped

LANCZOS_G = 7.0
LANCZOS_BASE = 0.99999999999980993227684700473478
LANCZOS_COEFFICIENTS = (
    676.520368121885098567009190444019, -1259.13921672240287047156078755283, 771.3234287776530788486528258894,
    -176.61502916214059906584551354, 12.507343278686904814458936853, -0.13857109526572011689554707,
    9.984369578019570859563e-6, 1.50563273514931155834e-7,
)  # fmt: skip
ERFINV_BELOW_5 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)  # fmt: skip
ERFINV_ABOVE_5 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                  -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)  # fmt: skip
_WIDENED = (DataType.FLOAT16, DataType.BFLOAT16)


class _Math:
    """Element-wise arithmetic in one float dtype, constants made to match."""

    def __init__(self, e: Emitter, dtype: DataType):
        self.e, self.dtype = e, dtype

    def c(self, x: float) -> Value:
        return self.e.const(np.asarray(x, to_numpy(self.dtype)))

    def __getattr__(self, op: str):
        return lambda *xs, **attrs: self.e.emit(op, *(self.c(x) if isinstance(x, (int, float)) else x for x in xs),
                                                **attrs)  # fmt: skip

    def where(self, cond: Value, a, b) -> Value:
        return self.Where(cond, a, b)


def _widened(e: Emitter, x: Value, compute):
    """``compute`` in float32 for half-precision ``x``, in ``x``'s own dtype otherwise."""
    dtype = x.type.dtype
    if dtype in _WIDENED:
        return e.cast(compute(_Math(e, DataType.FLOAT), e.cast(x, DataType.FLOAT)), dtype)
    if dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"a special function of {dtype.name}")
    return compute(_Math(e, dtype), x)


def _series_terms(m: _Math) -> int:
    return 8 if m.dtype == DataType.DOUBLE else 4


def log1p_of(m: _Math, x: Value) -> Value:
    """log(1 + x) without losing small x: below |x| = 0.1 the series 2·atanh(x / (2 + x)), so no
    difference of nearly equal numbers is formed (which a compiler may also rewrite away)."""
    small = m.Less(m.Abs(x), 0.1)
    s = m.Div(m.where(small, x, 0.0), m.Add(m.where(small, x, 0.0), 2.0))
    s2, poly = m.Mul(s, s), m.c(0.0)
    for k in reversed(range(_series_terms(m))):
        poly = m.Add(m.Mul(poly, s2), 1.0 / (2 * k + 1))
    return m.where(small, m.Mul(m.Mul(s, poly), 2.0), m.Log(m.Add(x, 1.0)))


def expm1_of(m: _Math, x: Value) -> Value:
    """exp(x) - 1 without losing small x: below |x| = 0.1 its Taylor series."""
    small = m.Less(m.Abs(x), 0.1)
    t, poly = m.where(small, x, 0.0), m.c(0.0)
    for k in reversed(range(1, 2 * _series_terms(m) + 1)):
        poly = m.Mul(m.Add(poly, 1.0), m.Div(t, float(k)))
    return m.where(small, poly, m.Sub(m.Exp(x), 1.0))


def log1p(e: Emitter, x: Value) -> Value:
    return _widened(e, x, log1p_of)


def expm1(e: Emitter, x: Value) -> Value:
    return _widened(e, x, expm1_of)


def _lanczos_sums(m: _Math, z: Value) -> tuple[Value, Value]:
    """Σ cᵢ/(z+i+1) (plus the base term) and -Σ cᵢ/(z+i+1)², for z = x - 1."""
    a, d = m.c(LANCZOS_BASE), None
    for i, coeff in enumerate(LANCZOS_COEFFICIENTS):
        q = m.Add(z, float(i + 1))
        a = m.Add(a, m.Div(coeff, q))
        term = m.Div(coeff, m.Mul(q, q))
        d = m.Neg(term) if d is None else m.Sub(d, term)
    return a, d


def _log_t(m: _Math, z: Value) -> tuple[Value, Value]:
    """t = z + g + 1/2 and log t, written as log(g + 1/2) + log1p(z / (g + 1/2)) for accuracy."""
    t = m.Add(z, LANCZOS_G + 0.5)
    ratio = m.Div(z, LANCZOS_G + 0.5)
    log1p = m.Log(m.Add(ratio, 1.0))
    return t, m.Add(log1p, math.log(LANCZOS_G + 0.5))


def lgamma(e: Emitter, x: Value) -> Value:
    """log |Γ(x)|: +inf at the poles (0, -1, -2, ...) and at ±inf, NaN for NaN."""

    def compute(m: _Math, x: Value) -> Value:
        reflect = m.Less(x, 0.5)
        y = m.where(reflect, m.Sub(1.0, x), x)  # Γ(x) from Γ(1-x) below 1/2
        z = m.Sub(y, 1.0)
        a, _ = _lanczos_sums(m, z)
        t, log_t = _log_t(m, z)
        # (z + 1/2) log t - t, with log t split so large z loses nothing
        body = m.Add(m.Sub(m.Mul(m.Add(z, 0.5), log_t), t), m.Add(m.Log(a), 0.5 * math.log(2 * math.pi)))
        # log |sin(πx)| from the distance of |x| to the nearest integer, so it stays exact for large x
        ax = m.Abs(x)
        frac = m.Sub(ax, m.Floor(ax))
        frac = m.where(m.Greater(frac, 0.5), m.Sub(1.0, frac), frac)
        log_sin = m.Log(m.Sin(m.Mul(frac, math.pi)))
        reflected = m.Sub(m.Sub(math.log(math.pi), log_sin), body)
        out = m.where(reflect, reflected, body)
        inf = m.c(math.inf)
        out = m.where(m.IsInf(x), inf, out)
        pole = m.And(m.LessOrEqual(x, 0.0), m.Equal(x, m.Floor(x)))
        return m.where(pole, inf, out)

    return _widened(e, x, compute)


def digamma(e: Emitter, x: Value) -> Value:
    """ψ(x) = d/dx log Γ(x): NaN at the poles (0, -1, ...) and at -inf, +inf at +inf."""

    def compute(m: _Math, x: Value) -> Value:
        reflect = m.Less(x, 0.5)
        y = m.where(reflect, m.Sub(1.0, x), x)
        z = m.Sub(y, 1.0)
        a, d = _lanczos_sums(m, z)
        t, log_t = _log_t(m, z)
        body = m.Sub(m.Add(log_t, m.Div(d, a)), m.Div(LANCZOS_G, t))
        # ψ(x) = ψ(1-x) - π / tan(πx), with πx reduced to (-π/2, π/2] first
        reduced = m.Sub(x, m.Floor(m.Add(x, 0.5)))
        angle = m.Mul(reduced, math.pi)
        reflected = m.Sub(body, m.Div(m.Mul(m.Cos(angle), math.pi), m.Sin(angle)))
        out = m.where(reflect, reflected, body)
        out = m.where(m.IsInf(x, detect_negative=0), m.c(math.inf), out)
        bad = m.Or(m.IsInf(x, detect_positive=0), m.And(m.LessOrEqual(x, 0.0), m.Equal(x, m.Floor(x))))
        return m.where(bad, m.c(math.nan), out)

    return _widened(e, x, compute)


def erfinv(e: Emitter, x: Value) -> Value:
    """The inverse of erf on [-1, 1]: ±inf at ±1, NaN outside."""
    if x.type.dtype == DataType.DOUBLE:
        raise NotMapped("erfinv of float64 (only the single-precision polynomial is carried)")

    def compute(m: _Math, x: Value) -> Value:
        w = m.Neg(m.Log(m.Mul(m.Sub(1.0, x), m.Add(x, 1.0))))
        small = m.Less(w, 5.0)
        w = m.where(small, m.Sub(w, 2.5), m.Sub(m.Sqrt(w), 3.0))
        p = m.where(small, m.c(ERFINV_BELOW_5[0]), m.c(ERFINV_ABOVE_5[0]))
        for lo, hi in zip(ERFINV_BELOW_5[1:], ERFINV_ABOVE_5[1:], strict=True):
            p = m.Add(m.where(small, m.c(lo), m.c(hi)), m.Mul(p, w))
        out = m.Mul(p, x)
        edge = m.Equal(m.Abs(x), 1.0)
        return m.where(edge, m.Mul(x, math.inf), out)

    return _widened(e, x, compute)


# Cephes' Chebyshev coefficients for the exponentially scaled modified Bessel functions of the first
# kind (as ATen's Math.h and jax's bessel_i0e carry them), highest order first: I0e and I1e/x on
# [0, 8] in (x/2 - 2), and sqrt(x) I0e, sqrt(x) I1e on (8, inf) in (32/x - 2).
I0E_BELOW_8 = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16, 1.71539128555513303061e-15,
    -1.16853328779934516808e-14, 7.67618549860493561688e-14, -4.85644678311192946090e-13, 2.95505266312963983461e-12,
    -1.72682629144155570723e-11, 9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7, 1.11738753912010371815e-6,
    -4.41673835845875056359e-6, 1.64484480707288970893e-5, -5.75419501008210370398e-5, 1.88502885095841655729e-4,
    -5.76375574538582365885e-4, 1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2, 1.71620901522208775349e-1,
    -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)  # fmt: skip
I0E_ABOVE_8 = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17, 3.46122286769746109310e-17,
    -2.82762398051658348494e-16, -3.42548561967721913462e-16, 1.77256013305652638360e-15, 3.81168066935262242075e-15,
    -9.55484669882830764870e-15, -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11, -3.14991652796324136454e-11,
    1.18891471078464383424e-11, 4.94060238822496958910e-10, 3.39623202570838634515e-9, 2.26666899049817806459e-8,
    2.04891858946906374183e-7, 2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)  # fmt: skip
I1E_BELOW_8 = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16, -1.10559694773538630805e-15,
    7.60068429473540693410e-15, -5.04218550472791168711e-14, 3.22379336594557470981e-13, -1.98397439776494371520e-12,
    1.17361862988909016308e-11, -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7, -8.56872026469545474066e-7,
    3.47025130813767847674e-6, -1.32731636560394358279e-5, 4.78156510755005422638e-5, -1.61760815825896745588e-4,
    5.12285956168575772895e-4, -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1, -1.76416518357834055153e-1,
    2.52587186443633654823e-1,
)  # fmt: skip
I1E_ABOVE_8 = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17, -3.20952592199342395980e-17,
    2.96262899764595013876e-16, 3.30820231092092828324e-16, -1.88035477551078244854e-15, -3.81440307243700780478e-15,
    1.04202769841288027642e-14, 4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11, 3.25260358301548823856e-11,
    -1.89749581235054123450e-11, -5.58974346219658380687e-10, -3.83538038596423702205e-9, -2.63146884688951950684e-8,
    -2.51223623787020892529e-7, -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)  # fmt: skip


def _chebyshev(m: _Math, y: Value, coefficients: tuple[float, ...]) -> Value:
    """Clenshaw's recurrence for a Chebyshev series at ``y`` (Cephes' ``chbevl``)."""
    b0, b1 = m.Add(m.Mul(y, coefficients[0]), coefficients[1]), m.c(coefficients[0])
    b2 = None
    for c in coefficients[2:]:
        b2, b1 = b1, b0
        b0 = m.Add(m.Sub(m.Mul(y, b1), b2), c)
    return m.Mul(m.Sub(b0, b2), 0.5)


def _bessel_e(m: _Math, x: Value, below: tuple, above: tuple, order: int) -> Value:
    ax = m.Abs(x)
    near = _chebyshev(m, m.Sub(m.Mul(ax, 0.5), 2.0), below)
    if order == 1:
        near = m.Mul(near, ax)
    far = m.Div(_chebyshev(m, m.Sub(m.Div(32.0, ax), 2.0), above), m.Sqrt(ax))
    out = m.where(m.LessOrEqual(ax, 8.0), near, far)
    return out if order == 0 else m.where(m.Less(x, 0.0), m.Neg(out), out)


def bessel_i0e(e: Emitter, x: Value) -> Value:
    """exp(-|x|) I0(x), Cephes' two Chebyshev expansions (XLA's and ATen's too)."""
    return _widened(e, x, lambda m, x: _bessel_e(m, x, I0E_BELOW_8, I0E_ABOVE_8, 0))


def bessel_i1e(e: Emitter, x: Value) -> Value:
    """exp(-|x|) I1(x), odd in x."""
    return _widened(e, x, lambda m, x: _bessel_e(m, x, I1E_BELOW_8, I1E_ABOVE_8, 1))


def bessel_i0(e: Emitter, x: Value) -> Value:
    """I0(x): the scaled function times exp(|x|), as ATen computes it."""
    return _widened(e, x, lambda m, x: m.Mul(m.Exp(m.Abs(x)), _bessel_e(m, x, I0E_BELOW_8, I0E_ABOVE_8, 0)))


def bessel_i1(e: Emitter, x: Value) -> Value:
    return _widened(e, x, lambda m, x: m.Mul(m.Exp(m.Abs(x)), _bessel_e(m, x, I1E_BELOW_8, I1E_ABOVE_8, 1)))


K0_BELOW_2 = (1.37446543561352307156e-16, 4.25981614279661018399e-14, 1.03496952576338420167e-11,
              1.90451637722020886025e-09, 2.53479107902614945675e-07, 2.28621210311945178607e-05,
              1.26461541144692592338e-03, 3.59799365153615016266e-02, 3.44289899924628486886e-01,
              -5.35327393233902768720e-01)  # fmt: skip
K0_ABOVE_2 = (5.30043377268626276149e-18, -1.64758043015242134646e-17, 5.21039150503902756861e-17,
              -1.67823109680541210385e-16, 5.51205597852431940784e-16, -1.84859337734377901440e-15,
              6.34007647740507060557e-15, -2.22751332699166985548e-14, 8.03289077536357521100e-14,
              -2.98009692317273043925e-13, 1.14034058820847496303e-12, -4.51459788337394416547e-12,
              1.85594911495471785253e-11, -7.95748924447710747776e-11, 3.57739728140030116597e-10,
              -1.69753450938905987466e-09, 8.57403401741422608519e-09, -4.66048989768794782956e-08,
              2.76681363944501510342e-07, -1.83175552271911948767e-06, 1.39498137188764993662e-05,
              -1.28495495816278026384e-04, 1.56988388573005337491e-03, -3.14481013119645005427e-02,
              2.44030308206595545468e+00)  # fmt: skip
K1_BELOW_2 = (-7.02386347938628759343e-18, -2.42744985051936593393e-15, -6.66690169419932900609e-13,
              -1.41148839263352776110e-10, -2.21338763073472585583e-08, -2.43340614156596823496e-06,
              -1.73028895751305206302e-04, -6.97572385963986435018e-03, -1.22611180822657148235e-01,
              -3.53155960776544875667e-01, 1.52530022733894777053e+00)  # fmt: skip
K1_ABOVE_2 = (-5.75674448366501715755e-18, 1.79405087314755922667e-17, -5.68946255844285935196e-17,
              1.83809354436663880070e-16, -6.05704724837331885336e-16, 2.03870316562433424052e-15,
              -7.01983709041831346144e-15, 2.47715442448130437068e-14, -8.97670518232499435011e-14,
              3.34841966607842919884e-13, -1.28917396095102890680e-12, 5.13963967348173025100e-12,
              -2.12996783842756842877e-11, 9.21831518760500529508e-11, -4.19035475934189648750e-10,
              2.01504975519703286596e-09, -1.03457624656780970260e-08, 5.74108412545004946722e-08,
              -3.50196060308781257119e-07, 2.40648494783721712015e-06, -1.93619797416608296024e-05,
              1.95215518471351631108e-04, -2.85781685962277938680e-03, 1.03923736576817238437e-01,
              2.72062619048444266945e+00)  # fmt: skip


def bessel_k(e: Emitter, x: Value, order: int, scaled: bool = False) -> Value:
    """K0 or K1 (``scaled``: times exp(x)) as ATen computes them: a Chebyshev series in x² - 2
    with the I term up to 2, one in 8/x - 2 beyond; inf at 0, NaN below."""

    def compute(m: _Math, x: Value) -> Value:
        near = m.LessOrEqual(x, 2.0)
        xs = m.where(m.And(near, m.Greater(x, 0.0)), x, 1.0)
        series = _chebyshev(m, m.Sub(m.Mul(xs, xs), 2.0), K0_BELOW_2 if order == 0 else K1_BELOW_2)
        below, above = (I0E_BELOW_8, I0E_ABOVE_8) if order == 0 else (I1E_BELOW_8, I1E_ABOVE_8)
        i = m.Mul(m.Exp(xs), _bessel_e(m, xs, below, above, order))
        log_half = m.Log(m.Mul(xs, 0.5))
        small = m.Sub(series, m.Mul(log_half, i)) if order == 0 else m.Add(m.Mul(log_half, i), m.Div(series, xs))
        if scaled:
            small = m.Mul(small, m.Exp(xs))
        xf = m.where(near, 3.0, x)
        large = m.Div(_chebyshev(m, m.Sub(m.Div(8.0, xf), 2.0), K0_ABOVE_2 if order == 0 else K1_ABOVE_2), m.Sqrt(xf))
        if not scaled:
            large = m.Mul(m.Exp(m.Neg(xf)), large)
        value = m.where(near, small, large)
        value = m.where(m.Or(m.Less(x, 0.0), m.IsNaN(x)), math.nan, value)
        return m.where(m.Equal(x, 0.0), math.inf, value)

    return _widened(e, x, compute)


BITCAST_OPSET = 26
"""The first ONNX opset with ``BitCast``: a model that bitcasts imports at it."""
SAME_WIDTH_INT = {DataType.FLOAT16: DataType.INT16, DataType.BFLOAT16: DataType.INT16,
                  DataType.FLOAT: DataType.INT32, DataType.DOUBLE: DataType.INT64}  # fmt: skip
"""The signed integer type of each float type's width (its bits, read as an integer)."""


def nextafter(e: Emitter, x: Value, y: Value) -> Value:
    """The float next to ``x`` towards ``y``, stepped on the bits: one unit in the last place,
    subnormals included (from ±0 to the smallest subnormal of ``y``'s sign); ``y`` where they are
    equal, NaN where either is."""
    dtype = x.type.dtype
    if dtype not in (DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"nextafter of {dtype.name}")
    itype = SAME_WIDTH_INT[dtype]
    inp = to_numpy(itype)
    bits = e.emit("BitCast", x, to=int(itype))
    m = _Math(e, dtype)
    # the bits read as a signed integer grow with the magnitude on both sides of zero
    away = m.Equal(m.Greater(y, x), m.Greater(x, 0.0))
    step = e.emit("Where", away, e.const(np.asarray(1, inp)), e.const(np.asarray(-1, inp)))
    moved = e.emit("Add", bits, step)
    smallest = e.emit("Where", m.Greater(y, 0.0), e.const(np.asarray(1, inp)),
                      e.const(np.asarray(np.iinfo(inp).min + 1, inp)))  # fmt: skip
    moved = e.emit("Where", m.Equal(x, 0.0), smallest, moved)
    out = e.emit("BitCast", moved, to=int(dtype))
    out = m.where(m.Equal(x, y), y, out)
    return m.where(m.Or(m.IsNaN(x), m.IsNaN(y)), m.Add(x, y), out)


def frexp(e: Emitter, x: Value) -> tuple[Value, Value]:
    """``x = mantissa * 2**exponent`` with ``0.5 <= |mantissa| < 1`` (C's ``frexp``); ±0, ±inf and
    NaN are their own mantissa with exponent 0.  Computed in float64, where every float32 or half
    value, subnormals included, scales exactly; the scale goes in two halves so that a float64
    subnormal's power of two does not overflow."""
    dtype = x.type.dtype
    if dtype not in (DataType.FLOAT16, DataType.BFLOAT16, DataType.FLOAT, DataType.DOUBLE):
        raise NotMapped(f"frexp of {dtype.name}")
    m = _Math(e, DataType.DOUBLE)
    xd = e.cast(x, DataType.DOUBLE)
    a = m.Abs(xd)
    ok = m.And(m.Greater(a, 0.0), m.Less(a, math.inf))  # NaN is neither
    exponent = m.Add(m.Floor(m.Div(m.Log(m.where(ok, a, 1.0)), math.log(2.0))), 1.0)
    half = m.Floor(m.Div(exponent, 2.0))
    mantissa = m.Mul(m.Mul(xd, m.Pow(2.0, m.Neg(half))), m.Pow(2.0, m.Sub(half, exponent)))
    # the logarithm may land one off next to a power of two: one step either way puts it right
    big = m.GreaterOrEqual(m.Abs(mantissa), 1.0)
    mantissa, exponent = m.where(big, m.Div(mantissa, 2.0), mantissa), m.where(big, m.Add(exponent, 1.0), exponent)
    small = m.Less(m.Abs(mantissa), 0.5)
    mantissa, exponent = m.where(small, m.Mul(mantissa, 2.0), mantissa), m.where(small, m.Sub(exponent, 1.0), exponent)
    mantissa = e.cast(m.where(ok, mantissa, xd), dtype)
    return mantissa, e.cast(m.where(ok, exponent, 0.0), DataType.INT32)


def trigamma(e: Emitter, x: Value) -> Value:
    """ψ' as ATen's ``trigamma`` computes it: reflection below 1/2, six recurrence steps, then the
    asymptotic series."""

    def compute(m: _Math, x: Value) -> Value:
        below = m.Less(x, 0.5)
        sin_pi_x = m.Sin(m.Mul(x, math.pi))
        result = m.where(below, m.Neg(m.Div(math.pi * math.pi, m.Mul(sin_pi_x, sin_pi_x))), 0.0)
        x = m.where(below, m.Sub(1.0, x), x)
        for _ in range(6):
            result = m.Add(result, m.Div(1.0, m.Mul(x, x)))
            x = m.Add(x, 1.0)
        ixx = m.Div(1.0, m.Mul(x, x))
        series = m.Sub(1.0 / 30, m.Mul(ixx, 1.0 / 42))
        series = m.Add(m.Add(1.0, m.Div(1.0, m.Mul(x, 2.0))), m.Mul(ixx, m.Sub(1.0 / 6, m.Mul(ixx, series))))
        result = m.Add(result, m.Div(series, x))
        return m.where(below, m.Neg(result), result)

    return _widened(e, x, compute)


ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
          -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
          -7.1661652561756670113e18)  # fmt: skip
ZETA_TERMS = 64
"""Direct terms of the Euler-Maclaurin sum: Cephes sums until ``q + i > 9`` (and at least 9),
so every ``q > 9 - ZETA_TERMS`` gets exactly its terms."""
_MACHEP = 1.11022302462515654042e-16


def zeta(e: Emitter, x: Value, q: Value) -> Value:
    """The Hurwitz zeta function ζ(x, q) as Cephes' ``zeta`` (and ATen's) computes it, in float64:
    the loops unrolled, each one's early exit kept as a mask, so the sum stops where theirs does."""
    dtype = x.type.dtype
    m = _Math(e, DataType.DOUBLE)
    x, q = e.cast(x, DataType.DOUBLE), e.cast(q, DataType.DOUBLE)
    s = m.Pow(q, m.Neg(x))
    done = m.Less(m.Abs(s), -1.0)  # all false, shaped like the result
    b = m.Mul(s, 0.0)
    last = q
    for i in range(1, ZETA_TERMS + 1):
        a = m.Add(q, float(i))
        # Cephes' loop condition before this step: fewer than 9 terms so far, or q + i - 1 <= 9
        active = m.Not(done) if i <= 9 else m.And(m.Not(done), m.LessOrEqual(m.Add(q, float(i - 1)), 9.0))
        term = m.Pow(a, m.Neg(x))
        s = m.where(active, m.Add(s, term), s)
        b, last = m.where(active, term, b), m.where(active, a, last)
        done = m.Or(done, m.And(active, m.And(m.Less(m.Mul(s, -_MACHEP), term), m.Less(term, m.Mul(s, _MACHEP)))))
    w = last
    s = m.where(done, s, m.Sub(m.Add(s, m.Div(m.Mul(b, w), m.Sub(x, 1.0))), m.Mul(b, 0.5)))
    a, k = m.c(1.0), 0.0
    for coefficient in ZETA_A:
        a = m.Mul(a, m.Add(x, k))
        b = m.Div(b, w)
        t = m.Div(m.Mul(a, b), coefficient)
        added = m.Add(s, t)
        s = m.where(done, s, added)
        done = m.Or(done, m.Less(m.Abs(m.Div(t, added)), _MACHEP))
        k += 1.0
        a = m.Mul(a, m.Add(x, k))
        b = m.Div(b, w)
        k += 1.0
    # the domain: a pole at x = 1 and at the non-positive integers q; NaN below x = 1 and for a
    # negative non-integer q with a non-integer x
    q_integer = m.Equal(q, m.Floor(q))
    s = m.where(m.And(m.LessOrEqual(q, 0.0), m.Not(q_integer)), m.where(m.Equal(x, m.Floor(x)), s, math.nan), s)
    s = m.where(m.And(m.LessOrEqual(q, 0.0), q_integer), math.inf, s)
    s = m.where(m.Less(x, 1.0), math.nan, s)
    s = m.where(m.Equal(x, 1.0), math.inf, s)
    return e.cast(s, dtype)


def polygamma(e: Emitter, n: int, x: Value) -> Value:
    """ψ⁽ⁿ⁾ for n >= 2 as ATen's ``calc_polygamma``: (-1)^(n+1) n! ζ(n + 1, x)."""
    m = _Math(e, DataType.DOUBLE)
    order = e.const(np.asarray(n + 1, to_numpy(x.type.dtype)))
    value = m.Mul(e.cast(zeta(e, order, x), DataType.DOUBLE), (1.0 if n % 2 else -1.0) * math.factorial(n))
    return e.cast(value, x.type.dtype)


# Cephes' Bessel functions of the first and second kind, orders 0 and 1 (ATen's bessel_j0_forward
# and its siblings): rational approximations up to 5, asymptotic forms beyond; highest order first
J0_PP = (7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
         5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
         9.99999999999999997821e-01)  # fmt: skip
J0_PQ = (9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
         5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
         1.00000000000000000218e+00)  # fmt: skip
J0_QP = (-1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
         -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
         -5.14105326766599330220e+01, -6.05014350600728481186e+00)  # fmt: skip
J0_QQ = (6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
         7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
         2.42005740240291393179e+02)  # fmt: skip
J0_RP = (-4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
         9.70862251047306323952e+15)  # fmt: skip
J0_RQ = (4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
         1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
         3.18121955943204943306e+16, 1.71086294081043136091e+18)  # fmt: skip
Y0_YP = (1.55924367855235737965e+04, -1.46639295903971606143e+07, 5.43526477051876500413e+09,
         -9.82136065717911466409e+11, 8.75906394395366999549e+13, -3.46628303384729719441e+15,
         4.42733268572569800351e+16, -1.84950800436986690637e+16)  # fmt: skip
Y0_YQ = (1.04128353664259848412e+03, 6.26107330137134956842e+05, 2.68919633393814121987e+08,
         8.64002487103935000337e+10, 2.02979612750105546709e+13, 3.17157752842975028269e+15,
         2.50596256172653059228e+17)  # fmt: skip
J1_PP = (7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
         5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
         1.00000000000000000254e+00)  # fmt: skip
J1_PQ = (5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
         5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
         9.99999999999999997461e-01)  # fmt: skip
J1_QP = (5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
         3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
         2.11688757100572135698e+02, 2.52070205858023719784e+01)  # fmt: skip
J1_QQ = (7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
         9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
         3.36093607810698293419e+02)  # fmt: skip
J1_RP = (-8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
         3.68295732863852883286e+15)  # fmt: skip
J1_RQ = (6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
         2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
         8.95222336184627338078e+16, 5.32278620332680085395e+18)  # fmt: skip
Y1_YP = (1.26320474790178026440e+09, -6.47355876379160291031e+11, 1.14509511541823727583e+14,
         -8.12770255501325109621e+15, 2.02439475713594898196e+17, -7.78877196265950026825e+17)  # fmt: skip
Y1_YQ = (5.94301592346128195359e+02, 2.35564092943068577943e+05, 7.34811944459721705660e+07,
         1.87601316108706159478e+10, 3.88231277496238566008e+12, 6.20557727146953693363e+14,
         6.87141087355300489866e+16, 3.97270608116560655612e+18)  # fmt: skip
_SQRT_2_OVER_PI = 0.797884560802865355879892119868763737
_TWO_OVER_PI = 0.636619772367581343075535053490057448


def _bessel_far(m: _Math, x: Value, order: int, second_kind: bool) -> Value:
    """The asymptotic form beyond 5 (``x`` already kept above 5 where it is not used)."""
    pp, pq, qp, qq = (J0_PP, J0_PQ, J0_QP, J0_QQ) if order == 0 else (J1_PP, J1_PQ, J1_QP, J1_QQ)
    w = m.Div(25.0, m.Mul(x, x)) if order == 0 else m.Mul(m.Div(5.0, x), m.Div(5.0, x))
    p, q = m.Div(_polynomial(m, w, pp), _polynomial(m, w, pq)), m.Div(_polynomial(m, w, qp), _polynomial(m, w, qq))
    phase = m.Sub(x, 0.785398163397448309615660845819875721 if order == 0 else 2.356194490192344928846982537459627163)
    q5 = m.Mul(m.Div(5.0, x), q)
    if second_kind:
        value = m.Add(m.Mul(p, m.Sin(phase)), m.Mul(q5, m.Cos(phase)))
    else:
        value = m.Sub(m.Mul(p, m.Cos(phase)), m.Mul(q5, m.Sin(phase)))
    return m.Div(m.Mul(value, _SQRT_2_OVER_PI), m.Sqrt(x))


def _bessel_j_near(m: _Math, x: Value, order: int) -> Value:
    z = m.Mul(x, x)
    if order == 0:
        rational = m.Div(_polynomial(m, z, J0_RP), _polynomial(m, z, J0_RQ))
        near = m.Mul(m.Mul(m.Sub(z, 5.78318596294678452118e+00), m.Sub(z, 3.04712623436620863991e+01)), rational)
        return m.where(m.Less(x, 0.00001), m.Sub(1.0, m.Div(z, 4.0)), near)
    rational = m.Div(_polynomial(m, z, J1_RP), _polynomial(m, z, J1_RQ))
    return m.Mul(m.Mul(m.Mul(rational, x), m.Sub(z, 1.46819706421238932572e+01)), m.Sub(z, 4.92184563216946036703e+01))


def bessel_j(e: Emitter, x: Value, order: int) -> Value:
    """J0 (even) or J1 (odd) as ATen computes them, in ``x``'s own float type."""

    def compute(m: _Math, x: Value) -> Value:
        ax = m.Abs(x)
        far = m.Greater(ax, 5.0)
        value = m.where(far, _bessel_far(m, m.where(far, ax, 5.0), order, False),
                        _bessel_j_near(m, m.where(far, 0.0, ax), order))  # fmt: skip
        return value if order == 0 else m.where(m.Less(x, 0.0), m.Neg(value), value)

    return _widened(e, x, compute)


def bessel_y(e: Emitter, x: Value, order: int) -> Value:
    """Y0 or Y1 as ATen computes them: -inf at 0, NaN below."""

    def compute(m: _Math, x: Value) -> Value:
        far = m.Greater(x, 5.0)
        near_x = m.where(m.And(m.Not(far), m.Greater(x, 0.0)), x, 1.0)
        z = m.Mul(near_x, near_x)
        j = _bessel_j_near(m, near_x, order)
        if order == 0:
            rational = m.Div(_polynomial(m, z, Y0_YP), _polynomial(m, z, Y0_YQ))
            near = m.Add(rational, m.Mul(m.Mul(m.Log(near_x), j), _TWO_OVER_PI))
        else:
            rational = m.Mul(near_x, m.Div(_polynomial(m, z, Y1_YP), _polynomial(m, z, Y1_YQ)))
            near = m.Add(rational, m.Mul(m.Sub(m.Mul(j, m.Log(near_x)), m.Div(1.0, near_x)), _TWO_OVER_PI))
        value = m.where(far, _bessel_far(m, m.where(far, x, 5.0), order, True), near)
        value = m.where(m.Or(m.Less(x, 0.0), m.IsNaN(x)), math.nan, value)
        return m.where(m.Equal(x, 0.0), -math.inf, value)

    return _widened(e, x, compute)


def spherical_bessel_j0(e: Emitter, x: Value) -> Value:
    """sin(x)/x, with ATen's series below 1/2 and 0 at ±inf."""

    def compute(m: _Math, x: Value) -> Value:
        z = m.Mul(x, x)
        series = m.c(1.0 / 6227020800)
        for c in (-1.0 / 39916800, 1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6):
            series = m.Add(m.Mul(z, series), c)
        series = m.Add(m.Mul(z, series), 1.0)
        value = m.where(m.Less(m.Abs(x), 0.5), series, m.Div(m.Sin(x), x))
        return m.where(m.IsInf(x), 0.0, value)

    return _widened(e, x, compute)


# Cephes' ndtri (as ATen's calc_ndtri carries it): a rational approximation around the median, and
# two in z = sqrt(-2 log y) for the tails (2 <= z < 8, 8 <= z < 64); highest order first.
NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
            1.39312609387279679503e1, -1.23916583867381258016e0)  # fmt: skip
NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
            -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
            1.59056225126211695515e1, -1.18331621121330003142e0)  # fmt: skip
NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
            4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
            -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)  # fmt: skip
NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
            1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
            -3.80806407691578277194e-2, -9.33259480895457427372e-4)  # fmt: skip
NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
            1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
            3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)  # fmt: skip
NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
            2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
            2.89247864745380683936e-6, 6.79019408009981274425e-9)  # fmt: skip
_EXP_M2 = 0.13533528323661269189
_SQRT_2PI = 2.50662827463100050242


def _polynomial(m: _Math, x: Value, coefficients: tuple[float, ...]) -> Value:
    """Horner's rule, highest order first (Cephes' ``polevl``)."""
    acc = m.c(coefficients[0])
    for c in coefficients[1:]:
        acc = m.Add(m.Mul(acc, x), c)
    return acc


def ndtri(e: Emitter, x: Value) -> Value:
    """The standard normal quantile: -inf at 0, +inf at 1, NaN outside [0, 1]."""

    def compute(m: _Math, y0: Value) -> Value:
        folded = m.Greater(y0, 1.0 - _EXP_M2)  # the upper tail, computed as the lower one of 1 - y
        y = m.where(folded, m.Sub(1.0, y0), y0)
        centred = m.Sub(y0, 0.5)
        c2 = m.Mul(centred, centred)
        ratio = m.Div(m.Mul(c2, _polynomial(m, c2, NDTRI_P0)), _polynomial(m, c2, NDTRI_Q0))
        middle = m.Mul(m.Add(centred, m.Mul(centred, ratio)), _SQRT_2PI)
        t = m.Sqrt(m.Mul(m.Log(y), -2.0))
        z = m.Reciprocal(t)
        near = m.Less(t, 8.0)
        p = m.where(near, _polynomial(m, z, NDTRI_P1), _polynomial(m, z, NDTRI_P2))
        q = m.where(near, _polynomial(m, z, NDTRI_Q1), _polynomial(m, z, NDTRI_Q2))
        tail = m.Sub(m.Sub(t, m.Div(m.Log(t), t)), m.Div(m.Mul(z, p), q))
        tail = m.where(folded, tail, m.Neg(tail))
        out = m.where(m.Greater(y, _EXP_M2), middle, tail)
        out = m.where(m.Equal(y0, 0.0), m.c(-math.inf), out)
        out = m.where(m.Equal(y0, 1.0), m.c(math.inf), out)
        return m.where(m.Or(m.Less(y0, 0.0), m.Greater(y0, 1.0)), m.c(math.nan), out)

    return _widened(e, x, compute)


ERFCX_SERIES_TERMS = 30
"""Terms of erf's everywhere-positive series below 2 (relative error 2e-13 there, float64)."""
ERFCX_FRACTION_DEPTH = 60
"""Depth of erfc's continued fraction from 2 to 50 (relative error 5e-16 there, float64)."""
_ISPI = 0.56418958354775628694807945156  # 1 / sqrt(pi)


def _erfcx_positive(m: _Math, x: Value) -> Value:
    """exp(x²) erfc(x) for x >= 0 in float64: ``exp(x²) - 2/√π Σ 2ⁿ x²ⁿ⁺¹ / (2n+1)!!`` below 2,
    the continued fraction ``1/√π / (x + 0.5/(x + 1/(x + 1.5/(x + …))))`` to 50, and above that
    ATen's own five- and one-term expansions."""
    small = m.Min(x, 2.0)
    total, term = m.Mul(small, 0.0), small
    for n in range(ERFCX_SERIES_TERMS):
        total = m.Add(total, term)
        term = m.Div(m.Mul(term, m.Mul(m.Mul(small, small), 2.0)), float(2 * n + 3))
    series = m.Sub(m.Exp(m.Mul(small, small)), m.Mul(total, 2.0 * _ISPI))
    mid = m.Max(x, 2.0)
    t = mid
    for k in range(ERFCX_FRACTION_DEPTH, 0, -1):
        t = m.Add(mid, m.Div(k / 2.0, t))
    fraction = m.Div(_ISPI, t)
    big = m.Max(x, 50.0)
    xx = m.Mul(big, big)
    numerator = m.Mul(m.Add(m.Mul(xx, m.Add(xx, 4.5)), 2.0), _ISPI)
    five = m.Div(numerator, m.Mul(big, m.Add(m.Mul(xx, m.Add(xx, 5.0)), 3.75)))
    far = m.where(m.Greater(big, 5e7), m.Div(_ISPI, big), five)
    return m.where(m.Less(x, 2.0), series, m.where(m.LessOrEqual(x, 50.0), fraction, far))


def _erfcx64(m: _Math, x: Value) -> Value:
    """erfcx of a float64 ``x`` with ATen's branches for negative arguments."""
    positive = _erfcx_positive(m, m.Abs(x))
    near = m.Min(m.Abs(x), 26.7)
    twice = m.Mul(m.Exp(m.Mul(near, near)), 2.0)
    negative = m.where(m.Less(x, -26.7), math.inf, m.where(m.Less(x, -6.1), twice, m.Sub(twice, positive)))
    return m.where(m.IsNaN(x), x, m.where(m.GreaterOrEqual(x, 0.0), positive, negative))


def erfcx(e: Emitter, x: Value) -> Value:
    """The scaled complementary error function exp(x²) erfc(x), computed in float64."""
    m = _Math(e, DataType.DOUBLE)
    return e.cast(_erfcx64(m, e.cast(x, DataType.DOUBLE)), x.type.dtype)


def log_ndtr(e: Emitter, x: Value) -> Value:
    """log Φ(x) as ATen (after SciPy) takes it: ``log(erfcx(-t)/2) - t²`` below -1 and
    ``log1p(-erfc(t)/2)`` above, t = x/√2, with erfc from erfcx; in float64."""
    m = _Math(e, DataType.DOUBLE)
    x64 = e.cast(x, DataType.DOUBLE)
    t = m.Mul(x64, math.sqrt(0.5))
    low = m.Sub(m.Log(m.Div(_erfcx64(m, m.Neg(t)), 2.0)), m.Mul(t, t))
    tt = m.Max(t, -1.0)  # the branch above -1 only
    y = m.Neg(m.Div(m.Mul(m.Exp(m.Neg(m.Mul(tt, tt))), _erfcx64(m, tt)), 2.0))
    return e.cast(m.where(m.Less(x64, -1.0), low, log1p_of(m, y)), x.type.dtype)


AIRY_AN = (3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
             1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
             1.40264691163389668864e+01, 9.99999999999999995305e-01)  # fmt: skip
AIRY_AD = (5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
             1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
             1.40959135607834029598e+01, 1.00000000000000000470e+00)  # fmt: skip
AIRY_AFN = (-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
              -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
              -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08)  # fmt: skip
AIRY_AFD = (1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
              9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
              4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07)  # fmt: skip
AIRY_AGN = (1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
              9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
              5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
              8.11789239554389293311e-08, 3.41551784765923618484e-10)  # fmt: skip
AIRY_AGD = (9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
              5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
              4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
              4.91834570062930015649e-09)  # fmt: skip
"""Cephes' rational approximations of the Airy function, as ATen's ``airy_ai_forward`` carries them."""


def airy_ai(e: Emitter, x: Value) -> Value:
    """Ai(x) as ATen computes it: the oscillating asymptotic form below -2.09, the decaying one from
    2.09 (0 above 103.892), the Maclaurin series of its two components in between, NaN at ±inf."""

    def compute(m: _Math, x: Value) -> Value:
        below, above = m.Less(x, -2.09), m.GreaterOrEqual(x, 2.09)
        xn = m.where(below, x, -3.0)  # each branch evaluated only where it is taken
        zeta_n = m.Div(m.Mul(m.Mul(xn, -2.0), m.Sqrt(m.Neg(xn))), 3.0)
        z = m.Div(1.0, zeta_n)
        zz = m.Mul(z, z)
        t = m.Add(zeta_n, 0.25 * math.pi)
        f = m.Add(1.0, m.Div(m.Mul(zz, _polynomial(m, zz, AIRY_AFN)), _polynomial(m, zz, AIRY_AFD)))
        g = m.Div(m.Mul(z, _polynomial(m, zz, AIRY_AGN)), _polynomial(m, zz, AIRY_AGD))
        oscillating = m.Mul(m.Div(_INV_SQRT_PI, m.Sqrt(m.Sqrt(m.Neg(xn)))),
                            m.Sub(m.Mul(m.Sin(t), f), m.Mul(m.Cos(t), g)))  # fmt: skip
        xp = m.where(above, x, 3.0)
        zeta = m.Div(m.Mul(m.Mul(xp, 2.0), m.Sqrt(xp)), 3.0)
        w = m.Div(1.0, zeta)
        ratio = m.Div(_polynomial(m, w, AIRY_AN), _polynomial(m, w, AIRY_AD))
        decaying = m.Div(m.Mul(ratio, _INV_SQRT_PI), m.Mul(m.Mul(m.Sqrt(m.Sqrt(xp)), 2.0), m.Exp(zeta)))
        xm = m.where(m.Or(below, above), 0.0, x)
        cube = m.Mul(m.Mul(xm, xm), xm)
        f, g, mm, n = m.c(1.0), xm, m.c(1.0), xm
        for k in range(2, 3 * _AIRY_TERMS + 2, 3):  # ATen's loop, run past float64's convergence
            mm = m.Div(m.Div(m.Mul(mm, cube), float(k)), float(k + 1))
            n = m.Div(m.Div(m.Mul(n, cube), float(k + 1)), float(k + 2))
            f, g = m.Add(f, mm), m.Add(g, n)
        series = m.Sub(m.Mul(f, 0.355028053887817239260), m.Mul(g, 0.258819403792806798405))
        value = m.where(below, oscillating, m.where(above, decaying, series))
        value = m.where(m.Greater(x, 103.892), 0.0, value)
        return m.where(m.IsInf(x), math.nan, value)

    return _widened(e, x, compute)


_INV_SQRT_PI = 5.64189583547756286948e-01
_AIRY_TERMS = 12
"""Series steps: at |x| = 2.09, the widest the series is used for, the 12th term is 1.6e-17,
below float64's epsilon."""
