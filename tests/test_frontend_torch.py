"""from_torch: models of the common architectures compute what eager PyTorch computes, on the
reference interpreter, onnxruntime and XLA, before and after -O2; dims, weights and provenance
come through; ops irforge cannot map are reported whole, kept on request, or mapped by a plugin."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from frontend_check import assert_matches, run_on
from torch_models import MODELS

import irforge
from irforge.backends import UnsupportedError
from irforge.core_ir.printer import print_model
from irforge.frontends import FrontendError, UnsupportedOpsError, from_torch
from irforge.plugins import build_registry, hookimpl


def _eager(module, args):
    with torch.no_grad():
        out = module(*args)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_eager_on_every_backend_before_and_after_O2(name):
    module, args, dynamic = MODELS[name]()
    model = from_torch(module, args, dynamic_shapes=dynamic)
    assert_matches(model, [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), pipeline="-O2")  # fmt: skip


def test_dynamic_batch_is_a_named_dim_and_other_batch_sizes_run():
    module, args, dynamic = MODELS["bert_dynamic"]()
    model = from_torch(module, args, dynamic_shapes=dynamic)
    assert [v.type.shape for v in model.graph.inputs] == [("batch", 16), ("batch", 16)]
    ids = torch.randint(0, 100, (5, 16))
    mask = torch.ones(5, 16, dtype=torch.int64)
    assert_matches(model, [ids.numpy(), mask.numpy()], _eager(module, (ids, mask)), backends=("reference", "xla"))


class _Pairs(torch.nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0] // 2, 2, x.shape[1]).sum(1)


def test_a_derived_dim_is_an_expression_of_its_root():
    n = torch.export.Dim("n", max=64)
    x = torch.randn(6, 3)
    model = from_torch(_Pairs(), (x,), dynamic_shapes={"x": {0: 2 * n}})
    assert model.graph.inputs[0].type.shape == ("2*n", 3)
    assert model.graph.outputs[0].type.shape == ("n", 3)
    x8 = torch.randn(8, 3)
    assert_matches(model, [x8.numpy()], _eager(_Pairs(), (x8,)), backends=("reference", "onnxruntime"))


class _Merge(torch.nn.Module):
    def forward(self, x):
        return x.reshape(-1, x.shape[2]) * 2


def test_a_product_of_two_dims_is_an_expression_and_runs_at_new_sizes():
    b, n = torch.export.Dim("b", max=64), torch.export.Dim("n", max=64)
    model = from_torch(_Merge(), (torch.randn(2, 3, 4),), dynamic_shapes=({0: b, 1: n},))
    assert model.graph.inputs[0].type.shape == ("b", "n", 4)
    assert model.graph.outputs[0].type.shape in (("b*n", 4), ("n*b", 4))
    x = torch.randn(5, 7, 4)
    assert_matches(model, [x.numpy()], _eager(_Merge(), (x,)), backends=("reference", "xla"))


def test_parameters_are_named_initializers_sharing_the_modules_memory():
    module, args, _ = MODELS["resnet50"]()
    model = from_torch(module, args)
    inits = model.graph.initializers
    state = module.state_dict()
    weight = inits["0.weight"].const_value.numpy()
    assert np.shares_memory(weight, state["0.weight"].numpy())
    assert {"0.weight", "1.running_mean", "4.conv1.weight"} <= set(inits)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)).mean((2, 3)))


def test_nodes_carry_source_line_module_path_and_aten_op_through_print_and_O2():
    model = from_torch(_Net(), (torch.randn(1, 3, 8, 8),))
    conv = next(n for n in model.graph if n.op_type == "Conv")
    assert conv.metadata["module"] == "conv"
    assert conv.metadata["framework_op"] == "aten.conv2d.default"
    assert conv.metadata["source"].startswith(__file__ + ":")
    assert f'"source": "{__file__}:' in print_model(model)
    irforge.optimize(model, "-O2")
    conv = next(n for n in model.graph if n.op_type in ("Conv", "FusedConv"))  # fused with its activation
    assert conv.metadata["module"] == "conv" and conv.metadata["source"].startswith(__file__)


class _Branchy(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: t.sin() * 2, lambda t: t.cos() - 1, (x,))


class _Countdown(torch.nn.Module):
    def forward(self, x):
        from torch._higher_order_ops.while_loop import while_loop

        return while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2 + 1), (torch.tensor(0), x))[1]


@pytest.mark.parametrize("module", [_Branchy(), _Countdown()], ids=["cond", "while_loop"])
def test_control_flow_becomes_if_and_loop(module):
    for x in (torch.randn(3, 4), -torch.rand(3, 4) - 0.1):
        model = from_torch(module, (x,))
        ops = {n.op_type for n in model.graph}
        assert ops & {"If", "Loop"}
        assert_matches(model, [x.numpy()], _eager(module, (x,)), backends=("reference", "onnxruntime"))


@torch.library.custom_op("irforge_test::glow", mutates_args=())
def _glow(x: torch.Tensor) -> torch.Tensor:  # ops of a user's own library: no converter knows them
    return x.cos()


@torch.library.custom_op("irforge_test::flare", mutates_args=())
def _flare(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.cos(), x.sin()


_glow.register_fake(lambda x: torch.empty_like(x))
_flare.register_fake(lambda x: (torch.empty_like(x), torch.empty_like(x)))


class _Special(torch.nn.Module):
    def forward(self, x):
        return _glow(x) + _glow(x * 2) + _flare(x)[0]


def test_every_unmapped_op_is_reported_at_once_with_count_and_line():
    with pytest.raises(UnsupportedOpsError) as info:
        from_torch(_Special(), (torch.randn(3, 3),))
    ops = {u.op: u for u in info.value.ops}
    assert ops["irforge_test.glow.default"].count == 2
    assert "irforge_test.flare.default" in ops
    assert ops["irforge_test.glow.default"].location.startswith(__file__)
    assert "keep_unmapped=True" in str(info.value) and "irforge_register_frontend_ops" in str(info.value)


def test_keep_unmapped_keeps_them_as_torch_aten_nodes():
    model = from_torch(_Special(), (torch.randn(3, 3),), keep_unmapped=True)
    kept = [n for n in model.graph if n.domain == "torch.aten"]
    assert sorted(n.op_type for n in kept) == ["irforge_test.flare.default"] + ["irforge_test.glow.default"] * 2
    assert all(n.outputs[0].type.shape == (3, 3) for n in kept)
    for backend in ("reference", "onnxruntime", "xla", "tvm"):  # until a pass lowers them, no engine runs them
        with pytest.raises(UnsupportedError, match=r"torch\.aten::irforge_test\.glow\.default"):
            irforge.compile(model, backend)


class _StandInPlugin:
    @hookimpl
    def irforge_register_frontend_ops(self):
        def as_cos(cx, x):  # a deliberately simple stand-in, enough to see the hook used
            return cx.emit_typed("Cos", x)

        def first_as_cos(cx, x):  # the second output unused
            return cx.emit_typed("Cos", x), None

        return [("torch", "irforge_test.glow.default", as_cos), ("torch", "irforge_test.flare.default", first_as_cos)]


def test_a_plugin_maps_an_op_through_the_frontend_hook(monkeypatch):
    registry = build_registry(discover=False, plugins=[_StandInPlugin()])
    monkeypatch.setattr("irforge.plugins.default_registry", lambda: registry)
    x = torch.randn(3, 3)
    model = from_torch(_Special(), (x,))
    expected = (torch.cos(x) + torch.cos(x * 2) + torch.cos(x)).numpy()
    assert_matches(model, [x.numpy()], [expected])


def test_bad_input_is_a_frontend_error_naming_it():
    with pytest.raises(FrontendError, match=r"takes a torch\.nn\.Module"):
        from_torch(lambda x: x, (torch.randn(2),))

    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(int(x.sum()))

    with pytest.raises(FrontendError, match=r"torch\.export could not export DataDependent"):
        from_torch(DataDependent(), (torch.randn(2),))


def test_a_dynamic_dim_torch_export_specialises_is_explained_in_one_paragraph():
    """A batch marked dynamic whose example is 1 is specialised by torch.export: the error says so,
    once, in a few lines, and says what to do (torch's own message repeats itself for pages)."""

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    batch = torch.export.Dim("batch")
    with pytest.raises(FrontendError) as e:
        from_torch(Double(), (torch.randn(1, 3),), dynamic_shapes=({0: batch},))
    text = str(e.value)
    assert "specialized it to be a constant (1)" in text and "a batch of 2, not 1" in text, text
    assert text.count("specialized it") == 1 and len(text) < 1000 and "\n" not in text, text


def test_the_users_module_is_left_unchanged():
    module, args, _ = MODELS["mobilenet_v2"]()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    model = from_torch(module, args)
    irforge.optimize(model, "-O2")
    after = module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not module.training


@pytest.mark.parametrize("name", ["resnet50", "vit_block"])
def test_every_node_still_knows_its_source_after_fusion(name):
    module, args, _ = MODELS[name]()
    model = irforge.optimize(from_torch(module, args), "-O2")
    fused = [n for n in model.graph if n.op_type in ("Conv", "Gemm") and "irforge.provenance" in n.metadata]
    assert fused  # conv+bn and matmul+add were rewritten...
    assert all("source" in n.metadata for n in model.graph)  # ...and lost nothing


@pytest.mark.parametrize("decompose", ["auto", True])
def test_a_fully_mapped_program_imports_undecomposed_and_both_ways_agree(decompose):
    module, args, _ = MODELS["vit_block"]()
    model = from_torch(module, args, decompose=decompose)
    ops = {n.op_type for n in model.graph}
    assert ("LayerNormalization" in ops) and (("aten.layer_norm.default" in {
        n.metadata.get("framework_op") for n in model.graph}) == (decompose == "auto"))
    assert_matches(model, [a.numpy() for a in args], _eager(module, args), backends=("reference",))


def test_an_op_refused_as_exported_sends_the_program_through_decomposition():
    module = torch.nn.Sequential(torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.0)).train()
    x = torch.randn(8, 4)
    model = from_torch(module, (x,))
    assert "aten.batch_norm.default" not in {n.metadata.get("framework_op") for n in model.graph}
    with torch.no_grad():
        expected = torch.nn.functional.batch_norm(x, None, None, training=True).numpy()
    assert_matches(model, [x.numpy()], [expected])


class _InPlace(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        before = y + 1  # reads y before the update
        y.add_(x)
        y.mul_(3)
        return y + before


class _InPlaceThroughView(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        flat = y.view(-1)  # shares y's memory: the update shows through it
        y.add_(1)
        return flat * 1


@pytest.mark.parametrize("module", [_InPlace(), _InPlaceThroughView()], ids=["intermediate", "viewed"])
def test_in_place_updates_import_as_the_values_they_compute(module):
    x = torch.randn(3, 4)
    model = from_torch(module, (x,))
    ops = {n.metadata.get("framework_op") for n in model.graph}
    # an intermediate's update imports as it is; one seen through a view goes through decomposition
    assert ("aten.add_.Tensor" in ops) == isinstance(module, _InPlace)
    assert_matches(model, [x.numpy()], _eager(module, (x,)), backends=("reference", "onnxruntime"))


class _GammaFamily(torch.nn.Module):
    def forward(self, x, u):
        return torch.lgamma(x), torch.digamma(x), torch.polygamma(0, x), torch.special.erfinv(u), torch.special.gammaln(
            x.double())


class _HalfLgamma(torch.nn.Module):
    def forward(self, x):
        return torch.lgamma(x.half())


def test_lgamma_digamma_and_erfinv_match_eager_at_poles_and_edges():
    rng = np.random.default_rng(1)
    edges = [0.0, -0.0, -1.0, -2.0, 1.0, 2.0, 0.5, np.inf, -np.inf, np.nan, 1e-30, -3.5, 1e6, -1e6 + 0.5]
    x = torch.from_numpy(np.concatenate([rng.uniform(-20, 20, 200), rng.uniform(0, 3, 50), edges]).astype(np.float32))
    u = torch.from_numpy(np.concatenate([rng.uniform(-1, 1, 300), [1.0, -1.0, 0.0, 0.999999, 1.5]]).astype(np.float32))
    module = _GammaFamily()
    model = from_torch(module, (x, u))
    assert not {n.domain for n in model.graph} - {""}
    assert_matches(model, [x.numpy(), u.numpy()], _eager(module, (x, u)), backends=("reference", "onnxruntime", "xla"))
    half = _HalfLgamma()  # computed in float32, rounded to float16's 11 bits
    assert_matches(from_torch(half, (x,)), [x.numpy()], _eager(half, (x,)), backends=("reference", "xla"),
                   rtol=1e-3, atol=1e-3)  # fmt: skip


class _Bessel(torch.nn.Module):
    def forward(self, x, d):
        s = torch.special
        return (s.i0(x), s.i0e(x), s.i1(x), s.i1e(x), s.modified_bessel_i0(x), s.modified_bessel_i1(x), s.i0e(d),
                torch.nextafter(x, x.flip(0)), torch.nextafter(d, torch.zeros_like(d)))  # fmt: skip


def test_bessel_functions_and_nextafter_match_eager_on_both_sides_of_8_and_at_the_edges():
    edges = [0.0, -0.0, 7.99, 8.0, 8.01, -8.0, 1e-8, 80.0, -80.0, 700.0, np.inf, -np.inf, np.nan]
    x = torch.from_numpy(np.concatenate([np.linspace(-30, 30, 121), edges]).astype(np.float32))
    d = torch.from_numpy(np.concatenate([np.linspace(-50, 50, 101), edges]))  # float64: Cephes' full series
    module = _Bessel()
    assert_matches(from_torch(module, (x, d)), [x.numpy(), d.numpy()], _eager(module, (x, d)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _FrexpHistc(torch.nn.Module):
    def forward(self, x, d):
        m, e = torch.frexp(x)
        md, ed = torch.frexp(d)
        r = x[:200]  # plain numbers: out of range, torch's bin arithmetic overflows (undefined in C++)
        return (m, e, md, ed, torch.histc(r, 10), torch.histc(x, 7, -1.0, 1.0), torch.histc(r, 5, 2.0, 2.0))


def test_frexp_and_histc_match_eager_at_the_edges():
    """frexp on zeros of both signs, subnormals (float32 and float64), powers of two, inf and NaN;
    histc with the data's range, a given range (edges inclusive, NaN and outliers not counted) and
    an empty range."""
    edges = [0.0, -0.0, 1.0, -3.0, 0.75, 0.5, 1 - 1e-7, 1e-40, -2.5e-39, 1e-45, 3.4e38, np.inf, -np.inf, np.nan, -1.0]
    x = torch.from_numpy(np.concatenate([np.random.default_rng(2).standard_normal(200) * 3, edges]).astype(np.float32))
    d = torch.from_numpy(np.asarray([1e-310, 5.0, 0.0, -2.0**-1074, 1e300, 2.0**60]))
    module = _FrexpHistc()
    model = from_torch(module, (x, d))
    assert_matches(model, [x.numpy(), d.numpy()], _eager(module, (x, d)), backends=("reference", "onnxruntime"),
                   rtol=0, atol=0)  # fmt: skip
    # XLA's CPU code flushes subnormals to zero: it gets every other number
    x, d = torch.where(x.abs() < 1e-37, 0.0, x), torch.where(d.abs() < 1e-300, 0.0, d)
    assert_matches(model, [x.numpy(), d.numpy()], _eager(module, (x, d)), backends=("xla",), rtol=0, atol=0)


class _BatchNormUpdate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.linspace(-1, 1, 3))
        self.register_buffer("var", torch.linspace(0.5, 2, 3))

    def forward(self, x, w, b):
        y, saved_mean, saved_rstd, _ = torch.ops.aten._batch_norm_with_update(x, w, b, self.mean, self.var, 0.3, 1e-5)
        return y, saved_mean, saved_rstd, self.mean + 0, self.var + 0


class _NonzeroStatic(torch.nn.Module):
    def forward(self, x, s):
        return torch.nonzero_static(x, size=7), torch.nonzero_static(x, size=2, fill_value=9), \
            torch.nonzero_static(s, size=3)


def test_training_batch_norm_updates_the_running_statistics_and_nonzero_static_pads():
    x, w, b = torch.randn(4, 3, 5, 5), torch.randn(3), torch.randn(3)
    module = _BatchNormUpdate()
    want = _eager(_BatchNormUpdate(), (x, w, b))  # a fresh module: the update happens once
    assert_matches(from_torch(module, (x, w, b)), [x.numpy(), w.numpy(), b.numpy()], want,
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-5)  # fmt: skip
    x = torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    s = torch.tensor(2.0)
    module = _NonzeroStatic()
    assert_matches(from_torch(module, (x, s)), [x.numpy(), s.numpy()], _eager(module, (x, s)),
                   backends=("reference", "onnxruntime"), rtol=0, atol=0)  # fmt: skip


class _AdaptiveMaxWithIndices(torch.nn.Module):
    def forward(self, x, v, c):
        f = torch.nn.functional
        return (*f.adaptive_max_pool2d(x, (3, 2), return_indices=True),
                *f.adaptive_max_pool1d(v, 4, return_indices=True), *f.adaptive_max_pool3d(c, 2, return_indices=True))


def test_adaptive_max_pooling_gives_torch_s_indices_over_uneven_windows_and_ties():
    x = torch.randn(2, 3, 7, 5)
    x[0, 0] = 1.0  # every window a tie: the first position wins
    v, c = torch.randn(2, 9), torch.randint(0, 3, (1, 2, 5, 3, 4)).float()
    module = _AdaptiveMaxWithIndices()
    args = (x, v, c)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=0, atol=0)  # fmt: skip


class _BilinearPoolBackwardRrelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bilinear = torch.nn.Bilinear(4, 3, 5)

    def forward(self, a, b, x, g):
        y, indices = torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
        back = torch.ops.aten.max_pool2d_with_indices_backward(g, x, [3, 3], [2, 2], [1, 1], [1, 1], False, indices)
        return self.bilinear(a, b), y, back, torch.nn.functional.rrelu(x, 0.1, 0.3, training=False)


def test_bilinear_max_pool_backward_and_evaluation_rrelu_match_eager():
    a, b = torch.randn(6, 4), torch.randn(6, 3)
    x = torch.randn(2, 3, 7, 6)
    x[0, 0, :3, :3] = 1.0  # a tie inside one window
    g = torch.randn(2, 3, 4, 3)
    module = _BilinearPoolBackwardRrelu()
    args = (a, b, x, g)
    assert_matches(from_torch(module, args), [t.numpy() for t in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-5)  # fmt: skip


def test_training_rrelu_draws_slopes_between_its_bounds():
    class Rrelu(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.rrelu(x, 0.1, 0.3, training=True)

    x = torch.cat([torch.linspace(-5, -0.5, 50), torch.linspace(0, 5, 10)])
    (y,) = irforge.interpret(from_torch(Rrelu(), (x,)), [x.numpy()])
    slopes = y[:50] / x[:50].numpy()
    assert np.all((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6)) and np.unique(slopes).size > 10
    np.testing.assert_array_equal(y[50:], x[50:].numpy())


class _Segments(torch.nn.Module):
    def __init__(self, reduce, initial, offsets):
        super().__init__()
        self.reduce, self.initial, self.offsets = reduce, initial, offsets

    def forward(self, x, bounds):
        kw = {} if self.initial is None else {"initial": self.initial}
        kw["offsets" if self.offsets else "lengths"] = bounds
        return torch.segment_reduce(x, self.reduce, **kw)


@pytest.mark.parametrize("reduce", ["max", "min", "mean", "sum", "prod"])
def test_segment_reduce_follows_torch_s_rules_for_initial_empty_segments_and_nan(reduce):
    nan = float("nan")
    for x in [torch.tensor([3.0, -1.0, 5.0, 2.0, 7.0]), torch.tensor([nan, 1.0, 2.0, 3.0, 4.0]), torch.randn(5, 3)]:
        for offsets in (False, True):
            bounds = torch.tensor([0, 0, 1, 3, 5]) if offsets else torch.tensor([0, 1, 2, 2])  # an empty first segment
            for initial in (None, 1.0, 10.0):
                module = _Segments(reduce, initial, offsets)
                want = _eager(module, (x, bounds))
                assert_matches(from_torch(module, (x, bounds)), [x.numpy(), bounds.numpy()], want,
                               backends=("reference", "onnxruntime"), rtol=1e-6, atol=1e-6)  # fmt: skip


class _Mode(torch.nn.Module):
    def forward(self, x, i):
        return (*torch.mode(x, 1), *torch.mode(x, 0, True), *torch.mode(i, -1))


def test_mode_takes_the_smallest_most_frequent_value_and_its_last_position():
    x = torch.tensor([[3.0, 1, 3, 1, 2, 1, 3], [5, 5, 4, 4, 0, 0, 9], [1, 2, 3, 4, 5, 6, 7], [2, 2, 2, 2, 2, 2, 2]])
    i = torch.randint(0, 4, (3, 9))
    module = _Mode()
    assert_matches(from_torch(module, (x, i)), [x.numpy(), i.numpy()], _eager(module, (x, i)),
                   backends=("reference", "onnxruntime", "xla"), rtol=0, atol=0)  # fmt: skip


class _PolygammaZeta(torch.nn.Module):
    def forward(self, x, a, q):
        return (*(torch.polygamma(n, x) for n in (1, 2, 3, 4, 7)), torch.special.zeta(a, q))


def test_polygamma_and_hurwitz_zeta_match_eager_across_poles_and_negative_arguments():
    """Orders 1 (ATen's trigamma) and 2+ (Cephes' zeta, its loops unrolled with their early exits
    as masks) over negative non-integers, the poles, huge q, NaN and inf."""
    x = torch.cat([torch.linspace(-9, 9, 181), torch.tensor([0.0, -1.0, -2.0, 0.5, 1e-3, 50.0, 1e9, np.nan, np.inf])])
    a = torch.tensor([1.0, 1.5, 2.0, 3.0, 4.5, 10.0, 0.5, 2.0, 2.0, 3.0, 50.0])
    q = torch.tensor([1.0, 2.0, 0.5, -2.5, -3.0, 3.0, 1.0, -1.0, 1e9, -30.5, 0.3])
    module = _PolygammaZeta()
    args = (x, a, q)
    assert_matches(from_torch(module, args), [t.numpy() for t in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _BesselJY(torch.nn.Module):
    def forward(self, x, d):
        s = torch.special
        kinds = (s.bessel_j0, s.bessel_j1, s.bessel_y0, s.bessel_y1, s.modified_bessel_k0, s.modified_bessel_k1,
                 s.scaled_modified_bessel_k0, s.scaled_modified_bessel_k1)  # fmt: skip
        return (*(f(t) for t in (x, d) for f in kinds), s.spherical_bessel_j0(x))


def test_bessel_j_y_and_k_match_eager_across_their_switches_and_the_edges():
    edges = [0.0, -0.0, 1e-6, 1.999, 2.0, 2.001, 4.999, 5.0, 5.001, 0.3, -0.49, 1e3, 1e5, np.nan, np.inf, -np.inf]
    x = torch.from_numpy(np.concatenate([np.linspace(-30, 30, 601), edges]).astype(np.float32))
    d = x.double()
    module = _BesselJY()
    assert_matches(from_torch(module, (x, d)), [x.numpy(), d.numpy()], _eager(module, (x, d)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _Search(torch.nn.Module):
    def forward(self, x, b, rows, values, sorter):
        return (torch.bucketize(x, b), torch.bucketize(x, b, right=True, out_int32=True),
                torch.searchsorted(b, x), torch.searchsorted(rows, values, side="right"),
                torch.searchsorted(b[sorter], x, sorter=torch.argsort(sorter)))  # fmt: skip


def test_bucketize_and_searchsorted_count_as_torch_s_binary_search():
    b = torch.tensor([-1.0, 0.0, 0.0, 2.5, 7.0])
    x = torch.tensor([[-3.0, -1.0, 0.0, 1.0], [2.5, 7.0, 9.0, float("nan")]])  # ties, both ends, NaN
    rows = torch.sort(torch.randn(3, 6), dim=1).values
    values = torch.cat([rows[:, :2], torch.randn(3, 3)], dim=1)
    sorter = torch.tensor([4, 2, 0, 1, 3])
    module = _Search()
    args = (x, b, rows, values, sorter)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _KthAndDiagonal(torch.nn.Module):
    def forward(self, x, src, wide, band):
        v, i = torch.kthvalue(x, 3, dim=1)
        kv, ki = torch.kthvalue(x, 1, dim=-1, keepdim=True)
        return v, i, kv, ki, torch.diagonal_scatter(x, src), torch.diagonal_scatter(wide, band, 1, 2, 1)


def test_kthvalue_and_diagonal_scatter_match_eager():
    x = torch.randn(4, 5, 5)
    src = torch.randn(5, 4)  # the diagonal of dims 0 and 1 of x (4 long) for each of dim 2's 5
    wide = torch.randn(4, 4, 3)
    band = torch.randn(4, 3)  # offset 1 between dims 2 and 1 (3 long) for each of dim 0's 4
    module = _KthAndDiagonal()
    args = (x, src, wide, band)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _Draws(torch.nn.Module):
    def forward(self, x):
        return (torch.empty_like(x).uniform_(-2, 3), torch.normal(x, 0.5), torch.empty_like(x).exponential_(2.0),
                torch.empty_like(x).cauchy_(), torch.empty_like(x).geometric_(0.3), torch.empty_like(x).log_normal_(),
                torch.randint(3, 9, (50,)), torch.randint_like(x, 4))  # fmt: skip


def test_random_draws_have_their_distributions_support_and_are_never_folded():
    x = torch.zeros(400, 10)
    model = irforge.optimize(from_torch(_Draws(), (x,)), "-O2")
    assert sum(n.op_type.startswith("Random") for n in model.graph) == 8
    uniform, normal, expo, cauchy, geo, lognormal, ints, ints_like = irforge.compile(model, "onnxruntime")(x.numpy())
    assert uniform.min() >= -2 and uniform.max() < 3 and abs(uniform.mean() - 0.5) < 0.15
    assert abs(normal.std() - 0.5) < 0.05 and abs(expo.mean() - 0.5) < 0.05 and expo.min() >= 0
    assert np.isfinite(cauchy).all() and abs(np.median(cauchy)) < 0.15
    assert geo.min() >= 1 and geo.dtype == np.float32 and abs(geo.mean() - 1 / 0.3) < 0.3
    assert lognormal.min() > 0 and abs(np.median(np.log(lognormal)) - 1.0) < 0.2
    assert ints.dtype == np.int64 and set(np.unique(ints)) <= set(range(3, 9)) and len(np.unique(ints)) == 6
    assert set(np.unique(ints_like)) == {0.0, 1.0, 2.0, 3.0}


class _Ndtri(torch.nn.Module):
    def forward(self, y, d):
        return torch.special.ndtri(y), torch.special.ndtri(d)


def test_ndtri_matches_eager_in_the_middle_both_tails_and_outside():
    edges = [0.0, 1.0, 1e-10, 1e-20, 1e-30, 1 - 1e-7, 0.135, 0.1354, 0.8647, 0.865, -0.1, 1.1, np.nan]
    y = torch.from_numpy(np.concatenate([np.linspace(0, 1, 201), edges]).astype(np.float32))
    d = torch.from_numpy(np.concatenate([np.linspace(0, 1, 101), edges, [1e-300, 1e-100]]))  # z beyond 8
    module = _Ndtri()
    # XLA's CPU flushes subnormal inputs to zero, so none is given here (the reference interpreter
    # and onnxruntime follow torch on them)
    assert_matches(from_torch(module, (y, d)), [y.numpy(), d.numpy()], _eager(module, (y, d)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _Cumulative(torch.nn.Module):
    def forward(self, x, i):
        return (*torch.cummax(x, 1), *torch.cummin(x, 0), *torch.cummax(i, -1), *torch.cummin(i, 0))


def test_cummax_and_cummin_give_torch_s_values_and_indices_through_ties_and_nans():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, float("nan"), 5.0, float("nan"), 0.0],
                      [-1.0, -1.0, -0.0, 0.0, -2.0, 7.0, 7.0, 6.0],
                      [float("nan"), 1.0, 2.0, 2.0, 1.0, 0.0, -1.0, 3.0]])  # fmt: skip
    i = torch.tensor([[4, 4, 1, 9, 9, 2], [0, -3, 5, 5, -3, 8]])
    module = _Cumulative()
    assert_matches(from_torch(module, (x, i)), [x.numpy(), i.numpy()], _eager(module, (x, i)),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _Medians(torch.nn.Module):
    def forward(self, x, clean, empty):
        return (torch.median(x), torch.nanmedian(x), *torch.nanmedian(x, 1), *torch.nanmedian(x, 0, keepdim=True),
                *torch.median(clean, 1), torch.median(clean), *torch.median(x, 1), torch.nanmedian(empty),
                torch.nanmedian(empty, 1).values)  # fmt: skip


def test_median_and_nanmedian_match_eager_with_nans_infs_and_all_nan_rows():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[3.0, nan, 1.0, 2.0, inf, 0.5], [nan, 7.0, nan, nan, nan, nan],
                      [inf, nan, inf, -1.0, 4.0, 2.0], [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]])  # fmt: skip
    clean = torch.randn(5, 7)
    empty = torch.full((2, 6), nan)  # all NaN: NaN, at an index torch leaves unspecified (it varies with the length)
    module = _Medians()
    args = (x, clean, empty)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _IndexReduce(torch.nn.Module):
    def forward(self, x, index, src, ints, int_src):
        return (x.index_reduce(1, index, src, "prod"), x.index_reduce(1, index, src, "mean", include_self=False),
                x.index_reduce(1, index, src, "amax"), x.index_reduce(1, index, src, "amin", include_self=False),
                ints.index_reduce(0, index[:3] // 2, int_src, "mean"),
                ints.scatter_reduce(0, torch.zeros_like(int_src), int_src, "mean"))  # fmt: skip


def test_index_reduce_and_integer_means_floor_as_torch_does():
    x, src = torch.randn(3, 5), torch.randn(3, 4)
    index = torch.tensor([4, 0, 4, 2])  # a repeated target, and columns 1 and 3 left alone
    ints = torch.tensor([[-7, 3], [5, -2], [0, 9], [4, 4]])
    int_src = torch.tensor([[-4, 1], [2, -9], [3, 3]])
    module = _IndexReduce()
    args = (x, index, src, ints, int_src)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _Strided(torch.nn.Module):
    def forward(self, x, src, mask, source, index, repeated, values, a, b):
        return (torch.as_strided(x, (3, 3), (2, 1), 1),  # overlapping rows, from an offset
                torch.as_strided_scatter(x, src, (2, 3), (4, 1), 2),
                x.masked_scatter(mask, source),  # a row mask broadcast over the columns
                x.put(index, values), x.put(repeated, values, accumulate=True),
                *(torch.cdist(a, b, p=p) for p in (0.0, 1.0, 2.0, 3.0, float("inf"))),
                torch.pdist(a[0]), torch.pdist(a[0], p=1.0))  # fmt: skip


def test_strided_views_masked_scatter_put_and_distances_match_eager():
    x = torch.randn(4, 5)
    src = torch.randn(2, 3)
    mask = torch.tensor([[True], [False], [True], [True]])
    source = torch.randn(20)
    index = torch.tensor([0, -1, 7, 3])  # one from the end (torch leaves a repeated index's winner open)
    repeated = torch.tensor([0, -1, 7, 7])  # accumulated, a repeated index adds twice
    values = torch.randn(4)
    a, b = torch.randn(2, 6, 3), torch.randn(2, 4, 3)
    a[0, 1, 2] = b[0, 0, 2]  # an equal coordinate: p = 0 counts only those that differ
    module = _Strided()
    args = (x, src, mask, source, index, repeated, values, a, b)
    assert_matches(from_torch(module, args), [t.numpy() for t in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _Triangular(torch.nn.Module):
    def forward(self, spd, t, b, rhs):
        low, up = torch.linalg.cholesky(spd), torch.linalg.cholesky(spd, upper=True)
        info = torch.linalg.cholesky_ex(spd - 10 * torch.eye(5)).info  # not positive definite: the failing order
        return (low, up, info, torch.linalg.solve_triangular(t, b, upper=False),
                torch.linalg.solve_triangular(t.mT, b, upper=True, unitriangular=True),
                torch.linalg.solve_triangular(t[0], rhs, upper=False, left=False),
                *torch.triangular_solve(b, t, upper=False, transpose=True),
                torch.cholesky_solve(b, low), torch.cholesky_solve(b, up, upper=True), torch.cholesky_inverse(low[1]))


def test_cholesky_and_triangular_solves_match_eager():
    m = torch.randn(2, 5, 5, dtype=torch.float64)
    spd = (m @ m.mT + 5 * torch.eye(5, dtype=torch.float64)).float()
    t = torch.tril(torch.randn(2, 5, 5)) + 4 * torch.eye(5)
    b = torch.randn(5, 3)  # broadcast over the batch of matrices
    rhs = torch.randn(2, 4, 5)
    module = _Triangular()
    args = (spd, t, b, rhs)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _LU(torch.nn.Module):
    def forward(self, a, wide, tall, b, singular):
        lu, piv = torch.linalg.lu_factor(a)
        p, low, up = torch.linalg.lu(wide)
        return (lu, piv, p, low, up, *torch.linalg.lu_factor_ex(tall), *torch.lu_unpack(lu, piv),
                torch.linalg.inv(a), torch.linalg.solve(a, b), torch.linalg.solve(a[0], b[0, :, 0]),
                torch.linalg.det(a), *torch.linalg.slogdet(a), torch.linalg.det(singular),
                torch.linalg.lu_factor_ex(singular).info,
                torch.linalg.lu_solve(lu, piv, b), torch.linalg.lu_solve(lu, piv, b, adjoint=True),
                torch.linalg.lu_solve(lu, piv, b.mT, left=False),
                torch.linalg.lu_solve(lu, piv, b.mT, left=False, adjoint=True))  # fmt: skip


def test_lu_family_matches_eager_pivots_and_all():
    a = torch.randn(3, 5, 5)
    wide, tall = torch.randn(2, 3, 5), torch.randn(6, 4)
    b = torch.randn(3, 5, 2)
    singular = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    module = _LU()
    args = (a, wide, tall, b, singular)
    assert_matches(from_torch(module, args), [t.numpy() for t in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _QR(torch.nn.Module):
    def forward(self, tall, wide, zero_col):
        q, r = torch.linalg.qr(tall)
        qc, rc = torch.linalg.qr(wide, mode="complete")
        packed, tau = torch.geqrf(tall)
        return (q, r, qc, rc, torch.linalg.qr(tall, mode="r")[1], packed, tau,
                torch.linalg.householder_product(packed, tau), *torch.linalg.qr(zero_col))  # fmt: skip


def test_qr_matches_eager_with_lapack_signs():
    tall, wide = torch.randn(2, 6, 4), torch.randn(3, 5)
    zero_col = torch.randn(4, 3)
    zero_col[1:, 0] = 0.0  # nothing below the first pivot: no reflection there (tau 0)
    zero_col[0, 0] = -2.0
    module = _QR()
    args = (tall, wide, zero_col)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _DataSized(torch.nn.Module):
    def forward(self, x, mask):
        scalar = x[0, 0]  # a 0-d input: one row of no indices, or none
        return (torch.nonzero(x > 0), torch.masked_select(x, mask), torch.masked_select(x[0], x[0] < 0),
                torch.nonzero(scalar > -10), torch.nonzero(scalar > 10))  # fmt: skip


def test_data_dependent_sizes_run_where_shapes_may_be_dynamic_and_xla_refuses_them():
    x, mask = torch.randn(3, 4), torch.tensor([True, False, True, True])
    model = from_torch(_DataSized(), (x, mask))
    assert isinstance(model.graph.outputs[0].type.shape[0], str)  # the count is a dim of its own
    assert_matches(model, [x.numpy(), mask.numpy()], _eager(_DataSized(), (x, mask)),
                   backends=("reference", "onnxruntime"))  # fmt: skip
    with pytest.raises(UnsupportedError, match="NonZero"):
        irforge.compile(model, "xla")


_POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
                "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")  # fmt: skip


class _Polynomials(torch.nn.Module):
    def forward(self, x, n):
        return tuple(getattr(torch.special, name)(x, n) for name in _POLYNOMIALS)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_orthogonal_polynomials_of_tensor_degree_match_eager_through_every_closed_form(dtype):
    """Degrees from negative through the trigonometric switches (4, 6, 8) to Hermite's NaN limit
    (128 in float32, 512 in float64), at the interval's ends (0, ±1, ±0.5 for the shifted forms)
    and outside it, inf.  (A NaN ``x`` is left out: most of ATen's kernels return an uninitialized
    variable for it.)  onnxruntime has no float64 Acos kernel, so float64 runs on the others."""
    xs = np.concatenate([np.linspace(-1.5, 1.5, 11), [0.0, 1.0, -1.0, 0.5, 0.9999, np.inf, 3.0]])
    high = 129.0 if dtype == np.float32 else 513.0  # cos(n acos x) magnifies acos's rounding n times
    ns = np.asarray([-2.0, -0.5, 0.0, 0.7, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 9.0, 12.9, 40.0, high, np.nan, np.inf])
    x, n = (torch.from_numpy(a.astype(dtype)) for a in np.meshgrid(xs, ns))
    module = _Polynomials()
    backends = ("reference", "onnxruntime", "xla") if dtype == np.float32 else ("reference", "xla")
    atol = 1e-4 if dtype == np.float32 else 1e-9  # a trig form at degree n is n times as sensitive to rounding
    assert_matches(from_torch(module, (x, n)), [x.numpy(), n.numpy()], _eager(module, (x, n)), backends=backends,
                   rtol=1e-4 if dtype == np.float32 else 1e-9, atol=atol)  # fmt: skip


class _Erfcx(torch.nn.Module):
    def forward(self, x, d):
        return torch.special.erfcx(x), torch.special.log_ndtr(x), torch.special.erfcx(d), torch.special.log_ndtr(d)


def test_erfcx_and_log_ndtr_match_eager_across_their_branches_and_the_edges():
    """Both sides of the series/fraction switch (2) and ATen's (-26.7, -6.1, -1, 50, 5e7), both
    tails of log Φ, NaN and inf, in float32 and float64."""
    edges = [-30.0, -26.7, -6.2, -6.1, -6.0, -1.0001, -1.0, -0.9999, 0.0, -0.0, 1.999, 2.0, 2.001, 49.9, 50.0, 50.1,
             1e3, 6e7, 1e30, np.nan, np.inf, -np.inf]  # fmt: skip
    d = torch.from_numpy(np.concatenate([np.linspace(-12, 12, 481), edges]))
    x = d.float()
    module = _Erfcx()
    got = _eager(module, (x, d))
    assert_matches(from_torch(module, (x, d)), [x.numpy(), d.numpy()], got,
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _EmbeddingBag(torch.nn.Module):
    def forward(self, w, i, o, p):
        f = torch.nn.functional.embedding_bag
        return (f(i, w, o, mode="sum", per_sample_weights=p), f(i, w, o, mode="mean"), f(i, w, o, mode="max"),
                f(i, w, o, mode="sum", include_last_offset=True), f(i, w, o, mode="mean", padding_idx=5),
                f(i, w, o, mode="max", padding_idx=5))  # fmt: skip


def test_embedding_bag_sums_averages_and_maxes_its_bags_with_empty_ones_and_padding():
    w = torch.randn(10, 4)
    w[3, 1] = float("inf")  # a non-finite row stays in its own bag
    i = torch.tensor([5, 1, 6, 5, 6, 3, 0, 2, 5])
    o = torch.tensor([0, 3, 3, 5, 9])  # an empty bag in the middle, one at the end
    p = torch.randn(9)
    module = _EmbeddingBag()
    args = (w, i, o, p)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _Unique(torch.nn.Module):
    def forward(self, x, r):
        return (*torch.unique(x, sorted=False, return_inverse=True, return_counts=True),
                *torch.unique_consecutive(r, return_inverse=True, return_counts=True))  # fmt: skip


def test_unique_sorts_and_counts_as_aten_does_and_unique_consecutive_keeps_runs():
    """ATen's CPU unique sorts even when not asked to, and -0 and 0 are one value; in runs, NaN
    equals nothing.  (unique's input is NaN-free: engines rank NaNs differently when sorting.)"""
    x = torch.tensor([[3.0, 1.0, 2.0], [1.0, -0.0, 0.0], [7.0, 3.0, 3.0]])
    r = torch.tensor([1.0, 1.0, 2.0, 2.0, 3.0, 1.0, 1.0, float("nan"), float("nan"), 4.0])
    module = _Unique()
    assert_matches(from_torch(module, (x, r)), [x.numpy(), r.numpy()], _eager(module, (x, r)),
                   backends=("reference", "onnxruntime"))  # fmt: skip


class _Antialiased(torch.nn.Module):
    def forward(self, x):
        f = torch.nn.functional.interpolate
        return (f(x, size=(3, 3), mode="bilinear", antialias=True),
                f(x, size=(5, 31), mode="bilinear", antialias=True),
                f(x, size=(4, 7), mode="bicubic", antialias=True),
                f(x, scale_factor=0.3, mode="bilinear", antialias=True),
                f(x, size=(4, 6), mode="bilinear", antialias=True, align_corners=True))  # fmt: skip


def test_antialiased_resampling_matches_eager_down_and_up():
    x = torch.randn(2, 3, 10, 20)
    module = _Antialiased()
    assert_matches(from_torch(module, (x,)), [x.numpy()], _eager(module, (x,)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-5)  # fmt: skip


class _SplitAtData(torch.nn.Module):
    def forward(self, x, at):
        return torch.tensor_split(x, at, dim=1)


def test_split_points_read_from_a_tensor_become_data_dependent_slices():
    x, at = torch.randn(2, 7, 3), torch.tensor([1, 4, 4])
    model = from_torch(_SplitAtData(), (x, at))
    for points in (at, torch.tensor([0, 2, 6])):  # the split points the model was traced with, and others
        assert_matches(model, [x.numpy(), points.numpy()], _eager(_SplitAtData(), (x, points)),
                       backends=("reference", "onnxruntime"))  # fmt: skip


class _IncompleteGamma(torch.nn.Module):
    def forward(self, a, x):
        return torch.special.gammainc(a, x), torch.special.gammaincc(a, x), torch.igamma(a.double(), x.double())


def test_incomplete_gamma_matches_eager_in_both_regimes_and_at_aten_s_edges():
    """The series (x < max(1, a)) and the continued fraction, large a, and ATen's edge values
    (a = 0, infinite a or x, x = 0, negative and NaN arguments)."""
    edges_a = [0.0, 0.5, 1.0, 2.5, 100.0, 1e3, np.inf, np.inf, -1.0, 3.0, 0.0, np.nan, 2.0, 1e-3]
    edges_x = [2.0, 0.3, 1.0, 4.0, 110.0, 1e3, 1.0, np.inf, 1.0, 0.0, 0.0, 1.0, np.inf, 1e-4]
    grid_a, grid_x = np.meshgrid(np.geomspace(0.05, 60, 12), np.geomspace(0.01, 80, 12))
    a = torch.from_numpy(np.concatenate([edges_a, grid_a.ravel()]).astype(np.float32))
    x = torch.from_numpy(np.concatenate([edges_x, grid_x.ravel()]).astype(np.float32))
    module = _IncompleteGamma()
    assert_matches(from_torch(module, (a, x)), [a.numpy(), x.numpy()], _eager(module, (a, x)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _Log1pExpm1(torch.nn.Module):
    def forward(self, x, d):
        return torch.log1p(x), torch.expm1(x), torch.log1p(d), torch.expm1(d)


def test_log1p_and_expm1_keep_small_arguments_exact():
    x = torch.tensor([1e-10, -1e-10, 3e-8, 1e-5, 0.5, -0.5, 5.0, -1.0, 0.0, -0.0, 80.0, 100.0, -100.0,
                      float("inf"), -float("inf"), float("nan"), -2.0])  # fmt: skip
    module, args = _Log1pExpm1(), (x, x.double())
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-6, atol=0)  # fmt: skip


class _LinearCrossEntropy(torch.nn.Module):
    def __init__(self, reduction: str):
        super().__init__()
        self.reduction = reduction

    def forward(self, x, w, b, t, cw):
        from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

        options = LinearCrossEntropyOptions(batch_chunk_size=2)  # computed two rows at a time
        return torch.nn.functional.linear_cross_entropy(x, w, t, linear_bias=b, weight=cw, reduction=self.reduction,
                                                        ignore_index=1, options=options)  # fmt: skip


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_chunked_linear_cross_entropy_matches_eager_with_class_weights_and_ignored_targets(reduction):
    x, w, b = torch.randn(5, 3), torch.randn(4, 3), torch.randn(4)
    t, cw = torch.tensor([0, 1, 3, 2, 3]), torch.rand(4) + 0.5
    module, args = _LinearCrossEntropy(reduction), (x, w, b, t, cw)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _GridSample3d(torch.nn.Module):
    def forward(self, x, grid):
        f = torch.nn.functional.grid_sample
        return (f(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False),
                f(x, grid, mode="nearest", padding_mode="border", align_corners=True),
                f(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False))  # fmt: skip


def test_volumetric_grid_sampling_matches_eager():
    x, grid = torch.randn(2, 3, 4, 5, 6), torch.rand(2, 3, 4, 2, 3) * 2.4 - 1.2  # some points outside
    module = _GridSample3d()
    assert_matches(from_torch(module, (x, grid)), [x.numpy(), grid.numpy()], _eager(module, (x, grid)),
                   backends=("reference", "onnxruntime"), rtol=1e-5, atol=1e-5)  # fmt: skip


class _Ormqr(torch.nn.Module):
    def forward(self, a, c, r):
        packed, tau = torch.geqrf(a)
        return (torch.ormqr(packed, tau, c), torch.ormqr(packed, tau, c, transpose=True),
                torch.ormqr(packed, tau, r, left=False),
                torch.ormqr(packed, tau, r, left=False, transpose=True))  # fmt: skip


def test_ormqr_applies_geqrf_s_reflectors_from_either_side():
    a, c, r = torch.randn(2, 5, 3), torch.randn(2, 5, 4), torch.randn(2, 4, 5)
    module = _Ormqr()
    assert_matches(from_torch(module, (a, c, r)), [a.numpy(), c.numpy(), r.numpy()], _eager(module, (a, c, r)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-4, atol=1e-5)  # fmt: skip


class _MatrixExp(torch.nn.Module):
    def forward(self, a, d):
        return torch.linalg.matrix_exp(a), torch.linalg.matrix_exp(d)


def test_matrix_exp_matches_eager_from_tiny_to_large_norms():
    """Norms from 1e-3 (no squaring) to 40 (six squarings), in one batch: each matrix is squared
    its own number of times."""
    a = torch.randn(5, 4, 4) * torch.tensor([1e-3, 0.3, 1.0, 5.0, 10.0]).reshape(5, 1, 1)
    a[2] = torch.zeros(4, 4)
    module = _MatrixExp()
    args = (a, a.double())
    assert_matches(from_torch(module, args), [t.numpy() for t in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-4, atol=1e-5)  # fmt: skip


class _SingularValues(torch.nn.Module):
    def forward(self, a, wide, low, d):
        la = torch.linalg
        return (la.svdvals(a), la.svdvals(wide), la.matrix_rank(low), la.cond(a), la.matrix_norm(a, "nuc"),
                la.svdvals(d))  # fmt: skip


def test_singular_values_and_what_rests_on_them_match_eager():
    """svdvals (tall, wide, batched, float64), matrix_rank of a rank-deficient matrix, the condition
    number and the nuclear norm."""
    a, wide = torch.randn(3, 5, 4), torch.randn(3, 6)
    low = torch.randn(5, 2) @ torch.randn(2, 5)  # rank 2
    module, args = _SingularValues(), (a, wide, low, a.double())
    assert_matches(from_torch(module, args), [t.numpy() for t in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-4, atol=1e-5)  # fmt: skip


class _Decompositions(torch.nn.Module):
    def forward(self, tall, wide, low, sym):
        la = torch.linalg
        return (*la.svd(tall, full_matrices=False), *la.svd(wide), *la.svd(low), *la.eigh(sym),
                *la.eigh(sym.double(), UPLO="U"))  # fmt: skip


@pytest.mark.parametrize("backend", ["reference", "onnxruntime", "xla"])
def test_singular_and_eigen_vectors_are_valid_and_match_eager_up_to_sign(backend):
    """Values as eager; vectors orthonormal and reconstructing the matrix, and eager's own up to each
    vector's sign (and, for a zero singular value or a repeated eigenvalue, up to a basis of its space)."""
    from irforge.testing.frontend_conformance import align_vectors

    torch.manual_seed(0)
    low = torch.randn(5, 2) @ torch.randn(2, 4)  # rank 2: two zero singular values, U completed
    sym = torch.randn(2, 6, 6)
    sym = sym + sym.transpose(-1, -2)
    sym[1] = torch.diag(torch.tensor([2.0, -1.0, 2.0, 0.5, 3.0, 0.0]))  # repeated eigenvalue
    args = (torch.randn(2, 7, 4), torch.randn(3, 5), low, sym)
    module = _Decompositions()
    got = run_on(from_torch(module, args), backend, [a.numpy() for a in args])
    want = _eager(module, args)
    eye = np.eye
    for i, a in ((0, args[0]), (3, args[1]), (6, args[2])):
        u, s, vt = got[i: i + 3]
        np.testing.assert_allclose(s, want[i + 1], rtol=1e-4, atol=1e-5)
        k = s.shape[-1]
        np.testing.assert_allclose((u[..., :k] * s[..., None, :]) @ vt[..., :k, :], a.numpy(), atol=1e-4)
        np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ u, np.broadcast_to(eye(u.shape[-1]), u.shape[:-2] +
                                   (u.shape[-1],) * 2), atol=1e-5)  # fmt: skip
        np.testing.assert_allclose(vt @ np.swapaxes(vt, -1, -2), np.broadcast_to(eye(vt.shape[-2]), vt.shape[:-2] +
                                   (vt.shape[-2],) * 2), atol=1e-5)  # fmt: skip
        if i < 6:  # distinct nonzero values: unique up to sign
            aligned = align_vectors(got[i: i + 3], want[i: i + 3], (0, 2, True))
            for g, w in zip(aligned, want[i: i + 3], strict=True):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    for i, dtype in ((9, np.float32), (11, np.float64)):
        w, v = got[i: i + 2]
        assert v.dtype == dtype
        np.testing.assert_allclose(w, want[i], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(sym.numpy() @ v, v * w[..., None, :], atol=1e-4)
        np.testing.assert_allclose(np.swapaxes(v, -1, -2) @ v, np.broadcast_to(eye(6), (2, 6, 6)), atol=1e-5)
        aligned = align_vectors([w[:1], v[:1]], [want[i][:1], want[i + 1][:1]], (1, None, False))
        np.testing.assert_allclose(aligned[1], want[i + 1][:1], rtol=1e-4, atol=1e-4)


class _Eigenvalues(torch.nn.Module):
    def forward(self, a, d):
        la = torch.linalg
        return la.eigvalsh(a), la.eigvalsh(a, UPLO="U"), la.matrix_rank(a, hermitian=True), la.eigvalsh(d)


def test_symmetric_eigenvalues_read_only_the_named_triangle_and_match_eager():
    m = torch.randn(3, 5, 5)
    a = m + m.transpose(-1, -2) + torch.triu(torch.randn(5, 5), 1) * 7  # the triangles disagree
    a[1] = torch.diag(torch.tensor([3.0, -1.0, 0.0, 0.0, 2.0]))  # already diagonal, repeated eigenvalues
    module, args = _Eigenvalues(), (a, a.double())
    assert_matches(from_torch(module, args), [t.numpy() for t in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-4, atol=1e-5)  # fmt: skip


class _Histogram(torch.nn.Module):
    def forward(self, x, w, one):
        return (*torch.histogram(x, bins=7), *torch.histogram(x, bins=4, range=(-1.0, 1.5), weight=w),
                *torch.histogram(x, bins=5, density=True), *torch.histogram(one, bins=3))  # fmt: skip


def test_histogram_bins_as_torch_does_with_ranges_weights_density_and_one_value():
    x = torch.cat([torch.randn(40), torch.tensor([-1.0, 1.5, 0.0, 3.0])])  # both range edges, outside it
    w, one = torch.rand(44), torch.tensor([2.0, 2.0])
    module, args = _Histogram(), (x, w, one)
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _FractionalMaxPools(torch.nn.Module):
    def forward(self, x, s, v, s3, u, su):
        f = torch.nn.functional
        return (*f.fractional_max_pool2d(x, 3, output_size=(4, 5), return_indices=True, _random_samples=s),
                *f.fractional_max_pool3d(v, (2, 3, 2), output_size=(3, 2, 4), return_indices=True,
                                         _random_samples=s3),
                *f.fractional_max_pool2d(u, 2, output_size=(1, 3), return_indices=True,
                                         _random_samples=su))  # fmt: skip


def test_fractional_max_pooling_places_windows_from_the_samples_as_aten_does():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 11)
    x[0, 0, 2:5, :] = float("nan")  # windows holding NaNs: the last NaN wins
    x[1, 1] = 1.0  # every window a tie: the first position wins
    args = (x, torch.rand(2, 3, 2), torch.randn(2, 2, 6, 7, 9), torch.rand(2, 2, 3),
            torch.randn(3, 5, 6), torch.rand(1, 3, 2))  # unbatched, and one window along a dim  # fmt: skip
    module = _FractionalMaxPools()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=0, atol=0)  # fmt: skip


class _Multinomial(torch.nn.Module):
    def forward(self, w, v):
        return (torch.multinomial(w, 1, replacement=True), torch.multinomial(w, 2),
                torch.multinomial(v, 4000, replacement=True), torch.multinomial(v[0], 2))  # fmt: skip


@pytest.mark.parametrize("backend", ["reference", "onnxruntime"])
def test_multinomial_draws_in_proportion_never_a_zero_weight_and_without_repeats(backend):
    w = torch.tensor([0.1, 0.2, 0.0, 0.7]).repeat(4000, 1)
    v = torch.tensor([[0.0, 3.0, 1.0, 0.0], [2.0, 0.0, 0.0, 2.0]])
    model = irforge.optimize(from_torch(_Multinomial(), (w, v)), "-O2")
    assert sum(n.op_type.startswith("Random") for n in model.graph) == 4  # never folded
    picked, unique, many, row = irforge.compile(model, backend)(w.numpy(), v.numpy())
    assert picked.shape == (4000, 1) and picked.dtype == np.int64
    np.testing.assert_allclose(np.bincount(picked.ravel(), minlength=4) / 4000, [0.1, 0.2, 0.0, 0.7], atol=0.03)
    assert (unique[:, 0] != unique[:, 1]).all() and not (unique == 2).any()
    # the first of the draws without replacement follows the weights; the pair holds 0 with
    # probability 0.1 + 0.2 * 0.1 / 0.8 + 0.7 * 0.1 / 0.3
    np.testing.assert_allclose(np.bincount(unique[:, 0], minlength=4) / 4000, [0.1, 0.2, 0.0, 0.7], atol=0.03)
    assert abs((unique == 0).any(axis=1).mean() - 0.3583) < 0.03
    np.testing.assert_allclose(np.bincount(many[0], minlength=4) / 4000, [0, 0.75, 0.25, 0], atol=0.03)
    np.testing.assert_allclose(np.bincount(many[1], minlength=4) / 4000, [0.5, 0, 0, 0.5], atol=0.03)
    assert sorted(row.tolist()) == [1, 2]  # the only two categories with weight


class _MaxPoolsWithIndices(torch.nn.Module):
    def forward(self, x, v, c):
        f = torch.nn.functional
        return (*f.max_pool2d(x, 3, stride=2, padding=1, return_indices=True, ceil_mode=True),
                *f.max_pool1d(v, 2, return_indices=True, dilation=2),
                *f.max_pool3d(c, 2, stride=1, return_indices=True))  # fmt: skip


def test_max_pooling_indices_match_eager_in_one_two_and_three_dims_on_every_backend():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 8)
    x[0, 0, :4, :4] = 1.0  # ties: the first position wins
    args = (x, torch.randn(2, 3, 11), torch.randint(0, 3, (1, 2, 4, 5, 3)).float())
    module = _MaxPoolsWithIndices()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=0, atol=0)  # fmt: skip


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_matches_eager_in_every_mode_and_padding_on_every_backend(mode, padding):
    # coordinates well outside [-1, 1] and exactly on its ends: every padding rule is exercised
    class GridSample(torch.nn.Module):
        def forward(self, x, g, v, h):
            f = torch.nn.functional
            out = [f.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=c) for c in (False, True)]
            if mode != "bicubic":  # 3-D sampling has no cubic mode
                out.append(f.grid_sample(v, h, mode=mode, padding_mode=padding, align_corners=False))
            return tuple(out)

    torch.manual_seed(0)
    g, h = torch.rand(2, 4, 7, 2) * 3.2 - 1.6, torch.rand(2, 3, 4, 2, 3) * 3.2 - 1.6
    g[0, 0, :4] = torch.tensor([[-1.0, 1.0], [1.0, -1.0], [0.0, 1.0], [-1.0, -1.0]])
    args = (torch.randn(2, 3, 5, 6), g, torch.randn(2, 2, 4, 5, 3), h)
    module = GridSample()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-5)  # fmt: skip


class _Histogramdd(torch.nn.Module):
    def forward(self, x, w, one, v):
        a = torch.histogramdd(x, bins=[3, 4], weight=w)
        b = torch.histogramdd(x, bins=[2, 5], range=[-1.0, 1.0, -0.5, 2.0], density=True)  # points outside too
        c = torch.histogramdd(one, bins=[2, 2])  # one point: each range widened by 0.5
        d = torch.histogram(v, bins=6, density=True)
        return (a.hist, *a.bin_edges, b.hist, *b.bin_edges, c.hist, *c.bin_edges, d.hist, d.bin_edges)


def test_histogramdd_bins_points_over_the_grid_of_each_coordinate_s_edges():
    torch.manual_seed(0)
    x = torch.randn(40, 2)
    x[1] = x[2]
    args = (x, torch.rand(40), torch.tensor([[1.0, 2.0], [1.0, 2.0]]), torch.randn(30))
    module = _Histogramdd()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-6)  # fmt: skip


class _Spectral(torch.nn.Module):
    """Every torch.fft family on real signals, complex arithmetic and a complex parameter (a learned
    spectral filter, as in Fourier neural operators); complex results leave as view_as_real."""

    def __init__(self):
        super().__init__()
        self.filter = torch.nn.Parameter(torch.randn(3, 5, dtype=torch.complex64))

    def forward(self, x, s):
        real = torch.view_as_real
        spectrum = torch.fft.rfft2(x, norm="ortho")  # (2, 3, 5) complex
        filtered = torch.fft.irfft2(spectrum * self.filter, s=(3, 8), norm="ortho")
        full = torch.fft.fft(x, n=10, dim=1)  # zero-padded, over the middle axis
        back = torch.fft.ifftn(full + 1.5 * full.conj(), dim=(1, 2), norm="forward")
        odd = torch.fft.irfft(torch.fft.rfft(s, n=9), n=9)  # odd length: no Nyquist term
        z = torch.view_as_complex(s.reshape(2, 4, 2))
        stft = torch.stft(s, n_fft=4, hop_length=2, window=torch.hann_window(4), return_complex=True)
        moved = torch.cat([stft.transpose(1, 2).flip(1)[:, 1:3], s[:, :3].unsqueeze(1)], dim=1)[1].unsqueeze(0)
        return (real(spectrum), filtered, real(full), real(back), odd, torch.fft.hfft(x, n=6),
                torch.fft.fft(z).abs(), real(torch.fft.ihfft(x, dim=2).resolve_conj()), real(z * z - z),
                stft.abs() ** 2, real(moved.permute(2, 0, 1).reshape(3, 3)))  # fmt: skip


def test_fft_and_complex_arithmetic_match_eager_on_every_backend():
    torch.manual_seed(0)
    args = (torch.randn(2, 3, 8), torch.randn(2, 8))
    module = _Spectral()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), pipeline="-O2", rtol=1e-4, atol=1e-4)  # fmt: skip


def test_complex_values_never_reach_an_op_that_would_take_their_pairs_for_reals():
    class Outside(torch.nn.Module):
        def forward(self, x, z):
            y = torch.fft.fft(x)
            return torch.exp(y).real, y, z.abs()

    x = torch.randn(4, 6)
    with pytest.raises(UnsupportedOpsError) as info:
        from_torch(Outside(), (x, torch.randn(3, dtype=torch.complex64)))
    text = str(info.value)
    for what in ("aten.exp.default on complex numbers", "complex graph output", "complex graph input",
                 "torch.view_as_real"):  # fmt: skip
        assert what in text, text
    with pytest.raises(UnsupportedOpsError):  # kept ops would read pairs as reals: never kept
        from_torch(Outside(), (x, torch.randn(3, dtype=torch.complex64)), keep_unmapped=True)


class _PseudoInverses(torch.nn.Module):
    def forward(self, tall, wide, low_rank, sym, atol):
        pinv = torch.linalg.pinv
        return (pinv(tall), pinv(wide), pinv(low_rank, rtol=1e-4), pinv(low_rank, atol=atol),
                pinv(sym, hermitian=True), torch.pinverse(tall.double()), pinv(tall[:, :, :0]))  # fmt: skip


def test_pseudo_inverse_matches_eager_tall_wide_rank_deficient_batched_and_hermitian():
    torch.manual_seed(0)
    u, v = torch.randn(2, 6, 2), torch.randn(2, 2, 5)
    sym = torch.randn(4, 4)
    sym = sym + sym.T
    sym[0, 3] = 100.0  # upper triangle: not read with hermitian=True
    args = (torch.randn(2, 6, 4), torch.randn(3, 5), u @ v, sym, torch.tensor([0.5, 1e-3]))
    module = _PseudoInverses()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-4, atol=1e-5)  # fmt: skip


class _Hashes(torch.nn.Module):
    def forward(self, f, i, b, u):
        h = torch.hash_tensor
        return h(f), h(f, dim=1), h(f, dim=(0, 2), keepdim=True), h(i), h(i, dim=-1), h(b, dim=0), h(u)


def test_hash_tensor_xors_the_64_bit_patterns_of_every_dtype_over_any_dims():
    torch.manual_seed(0)
    f = torch.randn(3, 7, 5)
    f[0, 0, 0], f[1, 2, 3] = -0.0, float("nan")
    args = (f, torch.randint(-1000, 1000, (4, 9), dtype=torch.int32), torch.rand(5, 3) > 0.5,
            torch.randint(0, 255, (6,), dtype=torch.uint8))  # fmt: skip
    module = _Hashes()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"))  # fmt: skip


class _Airy(torch.nn.Module):
    def forward(self, x):
        return torch.special.airy_ai(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_airy_ai_matches_eager_in_each_of_its_three_forms_and_at_the_edges(dtype):
    x = torch.cat([torch.linspace(-30.0, 30.0, 241), torch.tensor([-2.09, 2.09, 8.3, 8.4, 103.0, 104.0, 0.0,
                   float("inf"), -float("inf"), float("nan")])]).to(dtype)  # fmt: skip
    module = _Airy()
    # float32: the phase 2|x|^1.5/3 reaches 110 at x = -30, where one rounding of it moves Ai by 1e-6
    assert_matches(from_torch(module, (x,)), [x.numpy()], _eager(module, (x,)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5 if dtype == torch.float32 else 1e-10,
                   atol=1e-5 if dtype == torch.float32 else 1e-12)  # fmt: skip


class _Resize(torch.nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def forward(self, x):
        return x.clone().resize_(self.size) * 1, x.clone().resize_as_(x.T)


def test_resize_keeps_the_leading_elements_and_refuses_to_grow():
    x = torch.randn(4, 6)
    for size in [(3, 8), (2, 5), (24,)]:
        module = _Resize(size)
        assert_matches(from_torch(module, (x,)), [x.numpy()], _eager(module, (x,)),
                       backends=("reference", "onnxruntime", "xla"))  # fmt: skip
    with pytest.raises(UnsupportedOpsError, match="uninitialized"):
        from_torch(_Resize((5, 6)), (x,))


class _Ldl(torch.nn.Module):
    def forward(self, a, b, d):
        ld, pivots, info = torch.linalg.ldl_factor_ex(a)
        ld64, pivots64, _ = torch.linalg.ldl_factor_ex(d)
        return ld, pivots, info, torch.linalg.ldl_solve(ld, pivots, b), ld64, pivots64


def test_ldl_factor_pivots_as_lapack_does_and_its_solve_matches_eager():
    """Bunch-Kaufman's three cases all occur (1x1 in place, 1x1 after an interchange, 2x2 blocks),
    one matrix is singular (info), only the lower triangle is read."""
    torch.manual_seed(0)
    a = torch.randn(6, 7, 7)
    a = a + a.transpose(-1, -2)
    a[1] = torch.diag(torch.tensor([0.0, 1.0, 2.0, 0.0, 3.0, 1.0, 1.0])) + torch.diag(torch.ones(6), -1) * 5
    a[2].diagonal().mul_(1e-3)  # small diagonal: 2x2 pivots
    a[3, :, 2] = 0.0  # singular: a zero pivot column (info)
    a[3, 2, :] = 0.0
    a[4] = torch.triu(torch.randn(7, 7), 1) * 100 + torch.eye(7)  # the upper triangle is not read
    b = torch.randn(6, 7, 3)
    args = (a, b, a[:2].double())
    module = _Ldl()
    want = _eager(module, args)
    assert (want[1] < 0).any() and want[2][3] > 0  # 2x2 blocks and a zero pivot
    finite = np.isfinite(want[3]).all(axis=(-2, -1))
    for backend in ("reference", "onnxruntime", "xla"):
        got = run_on(from_torch(module, args), backend, [t.numpy() for t in args])
        np.testing.assert_array_equal(got[1], want[1], err_msg=backend)
        np.testing.assert_array_equal(got[2], want[2], err_msg=backend)
        np.testing.assert_array_equal(got[5], want[5], err_msg=backend)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4, err_msg=backend)
        np.testing.assert_allclose(got[4], want[4], rtol=1e-10, atol=1e-10, err_msg=backend)
        np.testing.assert_allclose(got[3][finite], want[3][finite], rtol=1e-3, atol=1e-4, err_msg=backend)


class _CoreLeftovers(torch.nn.Module):
    def forward(self, x, cols, cols1, src):
        f = torch.nn.functional
        folded = f.fold(cols, output_size=(8, 6), kernel_size=(2, 3), dilation=(2, 1), padding=(1, 0), stride=(2, 1))
        return (folded, f.fold(cols1, (4, 5), 2), torch.ops.aten.fill.Scalar(x, 2.5),
                torch.select_scatter(x, src, 1, -2), x.stride(0) * x, torch.randperm(9).sort().values)  # fmt: skip


def test_fold_fill_select_scatter_stride_and_randperm_match_eager():
    torch.manual_seed(0)
    cols = torch.randn(2, 3 * 6, 4 * 4)  # 3 channels, 2x3 blocks, 4x4 positions (the last row of 8 uncovered)
    cols1 = torch.randn(4, 12)  # unbatched: 1 channel, 2x2 blocks, 3x4 positions
    args = (torch.randn(3, 4, 5), cols, cols1, torch.randn(3, 5))
    module = _CoreLeftovers()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-5)  # fmt: skip


def test_grouped_transposed_convolution_runs_on_the_reference_interpreter_too():
    # ONNX's reference kernel mixes up the groups' channels; irforge's interpreter runs each group alone
    torch.manual_seed(0)
    module = torch.nn.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1, output_padding=1, groups=2).eval()
    x = torch.randn(2, 4, 5, 4)
    assert_matches(from_torch(module, (x,)), [x.numpy()], _eager(module, (x,)),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-5, atol=1e-5)  # fmt: skip


class _Backward(torch.nn.Module):
    """The core ATen backward ops of a training step, called as a joint graph holds them."""

    def forward(self, x, w, g_conv, g_pool, g_avg, ln_x, ln_w, ln_b, g_ln, gn_x, gn_w, gn_b, idx, g_emb):
        a = torch.ops.aten
        conv = a.convolution_backward(g_conv, x, w, [4], [2, 1], [1, 0], [1, 2], False, [0, 0], 2, [True, True, True])
        pool = a._adaptive_avg_pool2d_backward(g_pool, x)
        avg = a.avg_pool2d_backward(g_avg, x, [3, 2], [2, 2], [1, 1], False, False, None)
        _, mean, rstd = a.native_layer_norm(ln_x, [5], ln_w, ln_b, 1e-5)
        ln = a.native_layer_norm_backward(g_ln, ln_x, [5], mean, rstd, ln_w, ln_b, [True, True, True])
        _, gmean, grstd = a.native_group_norm(gn_x, gn_w, gn_b, 2, 6, 12, 3, 1e-5)
        gn = a.native_group_norm_backward(g_ln.new_ones(1) * gn_x, gn_x, gmean, grstd, gn_w, 2, 6, 12, 3,
                                          [True, True, True])  # fmt: skip
        emb = a.embedding_dense_backward(g_emb, idx, 7, 2, True)
        return (*conv, pool, avg, *ln, *gn, emb)


def test_backward_ops_of_a_training_step_match_eager():
    torch.manual_seed(0)
    x, w = torch.randn(2, 4, 9, 8), torch.randn(4, 2, 3, 3)  # 2 groups of 2 channels
    args = (x, w, torch.randn(2, 4, 5, 4), torch.randn(2, 4, 3, 5), torch.randn(2, 4, 5, 5), torch.randn(3, 4, 5),
            torch.randn(5), torch.randn(5), torch.randn(3, 4, 5), torch.randn(2, 6, 3, 4), torch.randn(6),
            torch.randn(6), torch.tensor([[1, 2, 3], [2, 2, 6]]), torch.randn(2, 3, 4))  # fmt: skip
    module = _Backward()
    assert_matches(from_torch(module, args), [a.numpy() for a in args], _eager(module, args),
                   backends=("reference", "onnxruntime", "xla"), rtol=1e-4, atol=1e-4)  # fmt: skip
