"""from_jax: models written with jax.numpy and lax compute what jax.jit computes, on the reference
interpreter, onnxruntime and XLA, before and after -O2; symbolic dims, provenance, unmapped
primitives and the plugin hook work as for PyTorch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from frontend_check import assert_matches, run_on
from jax import lax

from irforge.frontends import FrontendError, UnsupportedOpsError, from_jax
from irforge.plugins import build_registry, hookimpl

RNG = np.random.default_rng(0)


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.gelu(x @ w + b)
    w, b = params[-1]
    return jax.nn.log_softmax(x @ w + b)


def cnn(params, x):  # NHWC, as flax writes it
    x = lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x = jax.nn.relu(x)
    x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = lax.conv_general_dilated(x, params["k2"], (2, 2), [(1, 1), (1, 1)], dimension_numbers=("NHWC", "HWIO", "NHWC"))
    x = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID") / 4
    return x.mean(axis=(1, 2)) @ params["head"]


def transformer_block(params, x):
    def norm(h, g):
        mu = h.mean(-1, keepdims=True)
        return (h - mu) * lax.rsqrt(((h - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g

    b, n, d = x.shape
    q, k, v = jnp.split(norm(x, params["g1"]) @ params["qkv"], 3, axis=-1)
    heads = lambda t: t.reshape(b, n, 4, d // 4).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = heads(q), heads(k), heads(v)
    mask = jnp.tril(jnp.ones((n, n), bool))
    scores = jnp.where(mask, jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d // 4), -1e9)
    a = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, -1), v).transpose(0, 2, 1, 3).reshape(b, n, d)
    x = x + a @ params["proj"]
    return x + jax.nn.gelu(norm(x, params["g2"]) @ params["up"]) @ params["down"]


def with_cond(x, y):
    return lax.cond(x.sum() > y.sum(), lambda a, b: a * b, lambda a, b: a - jnp.tanh(b), x, y)


def with_scan(xs, h0, w):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.sum()

    return lax.scan(step, h0, xs)


def with_while(x):
    return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.5 + 1), (0, x))[1]


def with_indexing(x, idx):
    return x[idx], jnp.take(x, idx[:2], axis=1), lax.dynamic_slice(x, (1, 2), (2, 3)), jnp.cumsum(x, 0)


CASES = {
    "mlp": (mlp, lambda: ([(_randn(8, 16), _randn(16)), (_randn(16, 16), _randn(16)), (_randn(16, 4), _randn(4))],
                          _randn(5, 8))),
    "cnn": (cnn, lambda: ({"k1": _randn(3, 3, 3, 8), "k2": _randn(3, 3, 8, 8), "head": _randn(8, 10)},
                          _randn(2, 16, 16, 3))),
    "transformer_block": (transformer_block, lambda: ({"g1": _randn(32), "g2": _randn(32), "qkv": _randn(32, 96) * .2,
                                                       "proj": _randn(32, 32) * .2, "up": _randn(32, 64) * .2,
                                                       "down": _randn(64, 32) * .2}, _randn(2, 6, 32))),
    "cond": (with_cond, lambda: (_randn(3, 4), _randn(3, 4))),
    "scan": (with_scan, lambda: (_randn(7, 2, 8), _randn(2, 8), _randn(8, 8) * .3)),
    "while_loop": (with_while, lambda: (_randn(3),)),
    "indexing": (with_indexing, lambda: (_randn(4, 6), np.array([3, 0, 1], np.int32))),
}  # fmt: skip


def _flat(args):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_model_matches_jit_on_every_backend_before_and_after_O2(name):
    fn, make = CASES[name]
    args = make()
    model = from_jax(fn, *args)
    expected = _flat(jax.jit(fn)(*args))
    assert_matches(model, _flat(args), expected, backends=("reference", "onnxruntime", "xla"), pipeline="-O2")


def test_params_pytree_leaves_name_the_inputs():
    fn, make = CASES["cnn"]
    model = from_jax(fn, *make())
    assert [v.name for v in model.graph.inputs] == ["arg0.head", "arg0.k1", "arg0.k2", "arg1"]


def test_abstracted_axes_become_named_dims_and_other_sizes_run():
    fn, make = CASES["transformer_block"]
    params, x = make()
    model = from_jax(lambda p, h: fn(p, h), params, x, abstracted_axes=(None, {0: "batch"}))
    assert model.graph.inputs[-1].type.shape == ("batch", 6, 32)
    x5 = _randn(5, 6, 32)
    assert_matches(model, _flat((params, x5)), _flat(jax.jit(fn)(params, x5)), backends=("reference", "xla"))


def test_nodes_carry_source_line_and_name_stack():
    def f(x):
        with jax.named_scope("encoder"):
            return jnp.sin(x) * 2

    model = from_jax(f, _randn(3))
    sin = next(n for n in model.graph if n.op_type == "Sin")
    assert sin.metadata["framework_op"] == "sin"
    assert sin.metadata["source"].startswith(__file__ + ":")
    assert "encoder" in sin.metadata["module"]


def special(x):
    return lax.linalg.hessenberg(x)[0] + lax.linalg.hessenberg(x * 2)[0] + lax.linalg.tridiagonal(x)[0]


def test_every_unmapped_primitive_is_reported_at_once():
    with pytest.raises(UnsupportedOpsError) as info:
        from_jax(special, _randn(3, 3))
    ops = {u.op: u for u in info.value.ops}
    assert ops["hessenberg"].count == 2 and "tridiagonal" in ops
    assert ops["hessenberg"].location.startswith(__file__)


def test_keep_unmapped_keeps_them_as_jax_lax_nodes():
    model = from_jax(special, _randn(3, 3), keep_unmapped=True)
    kept = sorted(n.op_type for n in model.graph if n.domain == "jax.lax")
    assert kept == ["hessenberg", "hessenberg", "tridiagonal"]


class _BesselPlugin:
    @hookimpl
    def irforge_register_frontend_ops(self):
        def i0e_series(cx, x, **_):  # e^-|x| (1 + x²/4): a deliberately short series, enough to see the hook used
            sq = cx.emit("Mul", x, x)
            series = cx.emit("Add", cx.value(1.0, cx.dtype(x)), cx.emit("Mul", sq, cx.value(0.25, cx.dtype(x))))
            return cx.typed("Mul", series, cx.emit("Exp", cx.emit("Neg", cx.emit("Abs", x))))

        return [("jax", "bessel_i0e", i0e_series)]  # a plugin's mapping wins over the built-in one


def test_a_plugin_maps_a_primitive_through_the_frontend_hook(monkeypatch):
    registry = build_registry(discover=False, plugins=[_BesselPlugin()])
    monkeypatch.setattr("irforge.plugins.default_registry", lambda: registry)
    x = _randn(4)
    model = from_jax(lambda t: lax.bessel_i0e(t), x)
    expected = (1 + x * x / 4) * np.exp(-np.abs(x))
    assert_matches(model, [x], [expected.astype(np.float32)])


def test_bad_input_is_a_frontend_error_naming_it():
    with pytest.raises(FrontendError, match="takes a function"):
        from_jax(3, _randn(2))
    with pytest.raises(FrontendError, match="could not trace broken"):

        def broken(x):
            return x @ x  # rank-1 @ rank-1 of mismatched... fine; make it fail below

        from_jax(broken, _randn(2, 3))


def test_cond_branches_hold_their_own_ops():
    model = from_jax(with_cond, _randn(3, 4), _randn(3, 4))
    node = next(n for n in model.graph if n.op_type == "If")
    then_ops = {n.op_type for n in node.attributes["then_branch"].value}
    else_ops = {n.op_type for n in node.attributes["else_branch"].value}
    assert "Mul" in then_ops | else_ops and "Tanh" in then_ops | else_ops
    assert not {n.op_type for n in model.graph} & {"Mul", "Tanh"}


def test_switch_becomes_nested_ifs_and_takes_every_branch():
    def f(i, x):
        return lax.switch(i, [lambda t: t * 2, jnp.sin, lambda t: t - 1], x)

    x = _randn(3)
    model = from_jax(f, np.int32(0), x)
    for i in (0, 1, 2, 7, -1):  # lax.switch clamps the index
        index = np.asarray(i, np.int32)
        assert_matches(model, [index, x], [np.asarray(jax.jit(f)(index, x))], backends=("reference", "onnxruntime"))


def _special_inputs():
    """Poles, zeros, infinities, NaN, tiny and huge values, and a spread of ordinary ones."""
    spread = RNG.uniform(-20, 20, 200)
    edges = [0.0, -0.0, -1.0, -2.0, 1.0, 2.0, 0.5, np.inf, -np.inf, np.nan, 1e-30, -3.5, 1e6, -1e6 + 0.5]
    return np.concatenate([spread, RNG.uniform(0, 3, 50), edges]).astype(np.float32)


@pytest.mark.parametrize("fn", [lax.lgamma, lax.digamma], ids=["lgamma", "digamma"])
def test_lanczos_special_functions_match_xla(fn):
    x = _special_inputs()
    assert_matches(from_jax(fn, x), [x], [np.asarray(jax.jit(fn)(x))], backends=("reference", "onnxruntime", "xla"))


def test_erf_inv_matches_xla_up_to_the_poles():
    u = np.concatenate([RNG.uniform(-1, 1, 300), [1.0, -1.0, 0.0, 0.999999, -0.999999, 1.5, np.nan]])
    u = u.astype(np.float32)
    assert_matches(from_jax(lax.erf_inv, u), [u], [np.asarray(jax.jit(lax.erf_inv)(u))],
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


def rng_sampling(x, seed):
    key = jax.random.key(seed)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    noise = x + jax.random.normal(k1, x.shape) + jax.random.uniform(jax.random.fold_in(k2, 3), x.shape)
    keys = jax.random.split(k3, 3)
    per_key = jax.vmap(lambda k: jax.random.bits(k, (2,), jnp.uint8))(keys)
    return (noise, per_key, jax.random.randint(k4, (5,), 0, 100), jax.random.permutation(k4, 6),
            jax.random.bernoulli(k2, 0.3, (7,)), jax.random.bits(jax.random.PRNGKey(seed), (3,)))


def test_random_primitives_give_the_bits_jit_gives_on_every_backend():
    x = _randn(2, 3)
    for seed in (0, 7, -5):
        s = np.int32(seed)
        model = from_jax(rng_sampling, x, s)
        expected = _flat(jax.jit(rng_sampling)(x, s))
        # bits and integers exactly; floats made from them to the last bit but for the backend's log/erf_inv
        assert_matches(model, [x, s], expected, backends=("reference", "onnxruntime", "xla"), pipeline="-O2",
                       rtol=1e-6, atol=1e-6)


def gamma_family(seed, a):
    k1, k2 = jax.random.split(jax.random.key(seed))
    return (jax.random.gamma(k1, a), jax.random.gamma(k2, 2.5, (3,)), jax.random.beta(k2, a, 2.0),
            jax.random.dirichlet(k1, jnp.array([1.0, 2.0, 0.5])), jax.random.loggamma(k2, a))  # fmt: skip


def test_random_gamma_and_what_rests_on_it_give_the_numbers_jit_gives():
    # JAX draws gamma variates by rejection in a vmapped while_loop: a batched predicate, which
    # runs while any element is still rejecting and leaves the finished ones alone
    a, s = np.asarray([0.3, 1.0, 4.0, 0.05, 30.0], np.float32), np.int32(7)
    assert_matches(from_jax(gamma_family, s, a), [s, a], _flat(jax.jit(gamma_family)(s, a)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


def test_key_arrays_are_their_key_data_and_bitcast_lifts_the_opset():
    model = from_jax(lambda s: jax.random.uniform(jax.random.key(s), (4,)), np.int32(1))
    assert model.opset_imports[""] >= 26 and any(n.op_type == "BitCast" for n in model.graph)
    key_model = from_jax(lambda s: jax.random.split(jax.random.key(s)), np.int32(1))
    out = key_model.graph.outputs[0]
    assert out.type.dtype.name == "UINT32" and out.type.shape == (2, 2)


def test_stack_and_narrow_integer_sort():
    def f(a, b, c):
        return jnp.stack([a, b], axis=1), jnp.sort(c), jnp.argsort(c)

    a, b = _randn(4), _randn(4)
    c = np.array([7, 3, 250, 3, 0], np.uint8)
    assert_matches(from_jax(f, a, b, c), [a, b, c], _flat(jax.jit(f)(a, b, c)), backends=("reference", "onnxruntime"))


def test_top_k_ranks_floats_in_xla_total_order_and_narrow_integers():
    def f(x, h, u):
        return lax.top_k(x, 8), lax.top_k(h, 3), lax.top_k(u, 2)

    nan = np.float32(np.nan)
    x = np.array([np.inf, nan, -nan, -np.inf, 3.0, -0.0, 0.0, -3.0], np.float32)  # -NaN ranks last
    h = np.array([-np.nan, 1.0, -2.0, np.nan], np.float16)
    u = np.array([7, 65535, 3, 65535], np.uint16)
    assert np.signbit(x[2]) and not np.signbit(x[1])
    expected = _flat(jax.jit(f)(x, h, u))
    assert_matches(from_jax(f, x, h, u), [x, h, u], expected, backends=("reference", "onnxruntime", "xla"))
    b = np.array([-np.nan, 1.0, -2.0, np.nan, 0.5], jnp.bfloat16)  # onnxruntime takes no bfloat16 inputs
    g = lambda b: lax.top_k(b, 4)  # noqa: E731
    assert_matches(from_jax(g, b), [b], _flat(jax.jit(g)(b)), backends=("reference", "xla"))


def test_bessel_and_nextafter_match_jit():
    def f(x, y):
        return lax.bessel_i0e(x), lax.bessel_i1e(x), lax.nextafter(x, y)

    edges = [0.0, -0.0, 8.0, -8.0, 7.99, 1e-8, 700.0, np.inf, -np.inf, np.nan, 1.4e-45, -3.4e38]
    x = np.concatenate([np.linspace(-30, 30, 61), edges]).astype(np.float32)
    y = np.concatenate([RNG.uniform(-40, 40, 61), [1.0, -1.0, 0.0, 9.0, 7.99, 0.0, -1.0, 0.0, 0.0, 1.0, 0.0, -np.inf]])
    y = y.astype(np.float32)
    model = from_jax(f, x, y)
    assert model.opset_imports[""] >= 26  # nextafter steps on the bits
    assert_matches(model, [x, y], _flat(jax.jit(f)(x, y)), backends=("reference", "onnxruntime", "xla"), rtol=1e-5,
                   atol=1e-6)  # fmt: skip


def test_generic_reductions_windows_popcount_and_approx_top_k_match_jit():
    def f(x, i, b, u):
        pairwise = lambda a, c: (a[0] + c[0], lax.min(a[1], c[1]))  # noqa: E731
        total, least = lax.reduce((x, i), (np.float32(2.0), np.int32(7)), pairwise, (1,))
        anyb = lax.reduce(b, False, lax.bitwise_or, (0,))
        prod = lax.reduce_window(x, np.float32(1.0), lax.mul, (2, 3), (1, 2), ((1, 0), (0, 2)),
                                 window_dilation=(2, 1))  # fmt: skip
        imax = lax.reduce_window(i, np.int32(-5), lax.max, (3, 1), (1, 1), "SAME")
        lo = lax.reduce_window(x, np.float32(np.inf), lax.min, (2, 2), (2, 1), "VALID")
        return total, least, anyb, prod, imax, lo, lax.population_count(i), lax.population_count(u), \
            *lax.approx_max_k(x, 3), *lax.approx_min_k(x, 2)

    x = RNG.normal(size=(5, 7)).astype(np.float32)
    i = RNG.integers(-2**31, 2**31 - 1, size=(5, 7), dtype=np.int32)
    b = RNG.random((4, 3)) < 0.2
    u = np.array([0, 1, 255, 128, 77], np.uint8)
    args = (x, i, b, u)
    assert_matches(from_jax(f, *args), list(args), _flat(jax.jit(f)(*args)),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


def test_cholesky_and_triangular_solve_match_jit():
    def f(spd, bad, t, b):
        outs = [lax.linalg.cholesky(spd), lax.linalg.cholesky(bad)]  # not positive definite: NaN
        for left in (True, False):
            for lower in (True, False):
                for trans in (False, True):
                    tri = t if lower else jnp.swapaxes(t, -1, -2)
                    rhs = b if left else jnp.swapaxes(b, -1, -2)
                    outs.append(lax.linalg.triangular_solve(tri, rhs, left_side=left, lower=lower,
                                                            transpose_a=trans, unit_diagonal=trans))  # fmt: skip
        return outs

    m = RNG.normal(size=(3, 4, 4))
    spd = (m @ np.swapaxes(m, -1, -2) + 4 * np.eye(4)).astype(np.float32)
    bad = spd - 20 * np.eye(4, dtype=np.float32)
    t = (np.tril(RNG.normal(size=(3, 4, 4))) + 4 * np.eye(4)).astype(np.float32)
    b = RNG.normal(size=(3, 4, 4)).astype(np.float32)
    args = (spd, bad, t, b)
    assert_matches(from_jax(f, *args), list(args), _flat(jax.jit(f)(*args)),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


def test_lu_matches_jit_with_pivots_and_permutation():
    def f(a, wide, m):  # solve and inv on one matrix: over a batch, jnp permutes through batched gathers
        return (*lax.linalg.lu(a), *lax.linalg.lu(wide), jnp.linalg.det(a), jnp.linalg.solve(m, m[:, :2]),
                jnp.linalg.inv(m))  # fmt: skip

    a = RNG.normal(size=(2, 5, 5)).astype(np.float32)
    wide = RNG.normal(size=(3, 6)).astype(np.float32)
    m = RNG.normal(size=(4, 4)).astype(np.float32)
    assert_matches(from_jax(f, a, wide, m), [a, wide, m], _flat(jax.jit(f)(a, wide, m)),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


def test_qr_matches_jit_with_lapack_signs():
    def f(tall, wide):
        return (*lax.linalg.qr(tall, full_matrices=False), *lax.linalg.qr(tall, full_matrices=True),
                *lax.linalg.qr(wide, full_matrices=False))  # fmt: skip

    tall = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    wide = RNG.normal(size=(3, 6)).astype(np.float32)
    assert_matches(from_jax(f, tall, wide), [tall, wide], _flat(jax.jit(f)(tall, wide)),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


def test_vmapped_gathers_and_scatters_index_their_batching_dims():
    def f(x, i, v, a):
        pick = jax.vmap(lambda row, j: row[j])(x, i)  # a gather per row: operand and index batching dims
        put = jax.vmap(lambda row, j, u: row.at[j].add(u))(x, i, v)
        setr = jax.vmap(lambda row, j: row.at[j].set(-1.0))(x, i)
        return pick, put, setr, jnp.linalg.solve(a, a[..., :2]), jnp.linalg.inv(a)

    x = RNG.normal(size=(4, 6)).astype(np.float32)
    i = np.array([0, 5, 2, 2], np.int32)
    v = RNG.normal(size=(4,)).astype(np.float32)
    a = RNG.normal(size=(3, 4, 4)).astype(np.float32)
    model = from_jax(f, x, i, v, a)
    assert_matches(model, [x, i, v, a], _flat(jax.jit(f)(x, i, v, a)), backends=("reference", "onnxruntime", "xla"))


def test_max_pool_gradients_select_and_scatter_and_gather_match_jit():
    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")

    def f(x, t):
        grad = jax.grad(lambda x: (pool(x) * jnp.arange(1.0, 1.0 + pool(x).size).reshape(pool(x).shape)).sum())(x)
        _, tangent = jax.jvp(pool, (x,), (t,))
        return grad, tangent

    x = RNG.normal(size=(2, 7, 6, 3)).astype(np.float32)
    t = RNG.normal(size=x.shape).astype(np.float32)
    model = from_jax(f, x, t)
    assert {"select_and_scatter_add", "select_and_gather_add"} <= {n.metadata.get("framework_op") for n in model.graph}
    assert_matches(model, [x, t], _flat(jax.jit(f)(x, t)), backends=("reference", "onnxruntime", "xla"))


def test_tridiagonal_solve_pivots_as_gtsv_and_gives_nan_for_a_singular_system():
    def f(dl, d, du, b, one_d, one_b):
        return lax.linalg.tridiagonal_solve(dl, d, du, b), lax.linalg.tridiagonal_solve(one_d, one_d, one_d, one_b)

    dl = RNG.normal(size=(3, 6)).astype(np.float32)
    d = (0.1 * RNG.normal(size=(3, 6))).astype(np.float32)  # small diagonals: rows are swapped
    du = RNG.normal(size=(3, 6)).astype(np.float32)
    dl[:, 0] = du[:, -1] = 0
    d[1, 0] = dl[1, 1] = 0.0  # the first column is zero: this system is singular
    d[2] = 3.0  # diagonally dominant: no swap at all
    b = RNG.normal(size=(3, 6, 2)).astype(np.float32)
    one_d, one_b = np.asarray([2.0], np.float32), np.asarray([[4.0, -1.0]], np.float32)
    args = (dl, d, du, b, one_d, one_b)
    expected = _flat(jax.jit(f)(*args))
    assert np.isnan(expected[0][1]).all() and not np.isnan(expected[0][0]).any()
    assert_matches(from_jax(f, *args), list(args), expected, backends=("reference", "onnxruntime", "xla"),
                   rtol=1e-4, atol=1e-5)  # fmt: skip


def test_incomplete_gamma_matches_jit_with_jax_s_edges():
    """JAX's own series and continued fraction in float32 (and float16 through float32), where
    its edge values differ from PyTorch's (a = 0)."""
    def f(a, x, h, hx):
        return lax.igamma(a, x), lax.igammac(a, x), lax.igamma(h, hx)

    edges_a = [0.0, 0.0, 0.5, 1.0, 2.5, 100.0, 1e3, np.inf, -1.0, 3.0, 0.0, np.nan, 2.0, 1e-3]
    edges_x = [0.5, 2.0, 0.3, 1.0, 4.0, 110.0, 1e3, 1.0, 1.0, 0.0, 0.0, 1.0, np.inf, 1e-4]
    grid_a, grid_x = np.meshgrid(np.geomspace(0.05, 60, 12), np.geomspace(0.01, 80, 12))
    a = np.concatenate([edges_a, grid_a.ravel()]).astype(np.float32)
    x = np.concatenate([edges_x, grid_x.ravel()]).astype(np.float32)
    args = (a, x, a.astype(np.float16), x.astype(np.float16))
    assert_matches(from_jax(f, *args), list(args), _flat(jax.jit(f)(*args)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


def test_regularized_incomplete_beta_matches_jit_on_both_sides_and_at_the_edges():
    def f(a, b, x, h):
        return lax.betainc(a, b, x), lax.betainc(h, h, h)

    edges = [(0.0, 1.0, 0.5), (1.0, 0.0, 0.5), (0.0, 0.0, 0.5), (2.0, 3.0, 0.0), (2.0, 3.0, 1.0), (np.inf, 1.0, 0.5),
             (-1.0, 1.0, 0.5), (1.0, 1.0, 1.5), (np.nan, 1.0, 0.5), (1e-3, 2.0, 0.3), (50.0, 40.0, 0.55)]  # fmt: skip
    grid = np.stack(np.meshgrid(np.geomspace(0.1, 30, 6), np.geomspace(0.1, 30, 6), np.linspace(0.02, 0.98, 7)))
    a, b, x = (np.concatenate([np.asarray(col), g.ravel()]).astype(np.float32)
               for col, g in zip(zip(*edges, strict=True), grid, strict=True))  # fmt: skip
    h = np.linspace(0.1, 0.9, 9).astype(np.float16)
    args = (a, b, x, h)
    # atol: where I = 1 - (something near 1), one ulp of float32 lgamma (ours and XLA's differ by
    # one at 30.1) shows as 7e-6
    assert_matches(from_jax(f, *args), list(args), _flat(jax.jit(f)(*args)),
                   backends=("reference", "onnxruntime", "xla"), rtol=2e-5, atol=1e-5)  # fmt: skip


def test_singular_values_match_jit_and_vectors_match_it_up_to_sign():
    from irforge.testing.frontend_conformance import align_vectors

    def values(a, wide):
        return jnp.linalg.svd(a, compute_uv=False), jnp.linalg.svd(wide, compute_uv=False)

    a, wide = RNG.normal(size=(2, 5, 3)).astype(np.float32), RNG.normal(size=(3, 7)).astype(np.float32)
    assert_matches(from_jax(values, a, wide), [a, wide], _flat(jax.jit(values)(a, wide)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-4, atol=1e-5)  # fmt: skip

    def vectors(a, wide, sym):
        return (*jnp.linalg.svd(a, full_matrices=False), *jnp.linalg.svd(wide),
                *lax.linalg.eigh(sym, lower=False, symmetrize_input=False))  # fmt: skip

    sym = RNG.normal(size=(6, 6)).astype(np.float32)
    want = _flat(jax.jit(vectors)(a, wide, sym))
    model = from_jax(vectors, a, wide, sym)
    for backend in ("reference", "onnxruntime", "xla"):
        got = run_on(model, backend, [a, wide, sym])
        got = (align_vectors(got[:3], want[:3], (0, 2, True)) + align_vectors(got[3:6], want[3:6], (0, 2, True))
               + align_vectors(got[6:], want[6:], (0, None, False)))  # fmt: skip
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=backend)


def test_scatter_of_windows_wider_than_one_element_drops_or_clips_whole_windows():
    def f(x, y, upd, upd2, idx, idx2):
        dn1 = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(),
                                          scatter_dims_to_operand_dims=(0,))  # fmt: skip
        dn2 = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                          scatter_dims_to_operand_dims=(0,))  # fmt: skip
        drop, clip = lax.GatherScatterMode.FILL_OR_DROP, lax.GatherScatterMode.CLIP
        return (lax.scatter_min(x, idx, upd, dn1, mode=drop), lax.scatter_add(x, idx, upd, dn1, mode=clip),
                lax.scatter_max(y, idx2, upd2, dn2, mode=drop), lax.scatter(y, idx2, upd2, dn2, mode=clip))  # fmt: skip

    x, y = RNG.normal(size=(10,)).astype(np.float32), RNG.normal(size=(10, 5)).astype(np.float32)
    upd, upd2 = RNG.normal(size=(4, 3)).astype(np.float32), RNG.normal(size=(3, 3)).astype(np.float32)
    idx = np.asarray([[0], [8], [3], [-1]], np.int32)  # windows of 3: [8, 11) and [-1, 2) do not fit
    idx2 = np.asarray([[2], [6], [12]], np.int32)  # 12: dropped, or clipped to row 9
    args = (x, y, upd, upd2, idx, idx2)
    assert_matches(from_jax(f, *args), list(args), _flat(jax.jit(f)(*args)),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


@pytest.mark.parametrize("algorithm", ["RNG_THREE_FRY", "RNG_PHILOX", "RNG_DEFAULT"])
def test_rng_bit_generator_gives_xla_s_own_bits_and_next_key(algorithm):
    alg = getattr(lax.RandomAlgorithm, algorithm)

    def f(key):
        outs = []
        for shape, dtype in (((), jnp.uint32), ((5, 7), jnp.uint32), ((4, 3, 6), jnp.uint8), ((3,), jnp.uint16)):
            key, bits = lax.rng_bit_generator(key, shape, dtype=dtype, algorithm=alg)
            outs.append(bits)
        return key, *outs

    key = np.array([0xFFFFFFF0, 7, 0xFFFFFFFE, 3], np.uint32)  # counters that carry into the next word
    assert_matches(from_jax(f, key), [key], _flat(jax.jit(f)(key)), backends=("reference", "onnxruntime", "xla"))


def test_lu_pivots_to_permutation_and_householder_product_match_jit():
    def f(pivots, a, taus):
        return lax.linalg.lu_pivots_to_permutation(pivots, 6), lax.linalg.householder_product(a, taus)

    pivots = np.array([[3, 3, 5, 4], [0, 2, 2, 5]], np.int32)  # repeats, a row swapped twice, a row kept
    a, taus = RNG.normal(size=(2, 5, 3)).astype(np.float32), RNG.uniform(1.0, 2.0, size=(2, 3)).astype(np.float32)
    assert_matches(from_jax(f, pivots, a, taus), [pivots, a, taus], _flat(jax.jit(f)(pivots, a, taus)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-5)  # fmt: skip


_FILTER = (RNG.normal(size=(3, 5)) + 1j * RNG.normal(size=(3, 5))).astype(np.complex64)


def spectral(x, s):
    """Every fft type, complex arithmetic and shapes, a complex constant (a spectral filter)."""
    spec = jnp.fft.rfft2(x, norm="ortho")
    filtered = jnp.fft.irfft2(spec * _FILTER, s=(3, 8), norm="ortho")
    full = jnp.fft.fft(x, n=10, axis=1)  # zero-padded
    back = jnp.fft.ifftn(full + 1.5 * jnp.conj(full), axes=(1, 2))
    z = lax.complex(s[:, :4], s[:, 4:])
    return (jnp.abs(spec), filtered, jnp.real(full), jnp.imag(back), jnp.fft.irfft(jnp.fft.rfft(s, n=9), n=9),
            jnp.abs(jnp.fft.fft(z)), jnp.real(z * z - z / (z + 2.0)), jnp.fft.hfft(x, n=6),
            jnp.sum(jnp.abs(z.T.reshape(2, 4)), axis=0))  # fmt: skip


def test_fft_and_complex_arithmetic_match_jit_on_every_backend():
    x, s = RNG.normal(size=(2, 3, 8)).astype(np.float32), RNG.normal(size=(2, 8)).astype(np.float32)
    assert_matches(from_jax(spectral, x, s), [x, s], _flat(jax.jit(spectral)(x, s)),
                   backends=("reference", "onnxruntime", "xla"), pipeline="-O2", rtol=1e-4, atol=1e-4)  # fmt: skip


def test_complex_values_never_reach_a_primitive_that_would_take_their_pairs_for_reals():
    def outside(x, z):
        y = jnp.fft.fft(x)
        return jnp.real(jnp.exp(y)), y, jnp.abs(z)

    x, z = RNG.normal(size=(4, 6)).astype(np.float32), np.ones(3, np.complex64)
    for keep in (False, True):  # kept primitives would read pairs as reals: never kept
        with pytest.raises(UnsupportedOpsError) as info:
            from_jax(outside, x, z, keep_unmapped=keep)
        text = str(info.value)
        for what in ("exp on complex numbers", "complex function output", "complex function input"):
            assert what in text, text
