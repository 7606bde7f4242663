"""from_torch: models of the common architectures compute what eager PyTorch computes, on the
reference interpreter, onnxruntime and XLA, before and after -O2; dims, weights and provenance
come through; ops irforge cannot map are reported whole, kept on request, or mapped by a plugin."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from frontend_check import assert_matches
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
    conv = next(n for n in model.graph if n.op_type == "Conv")
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


class _Special(torch.nn.Module):
    def forward(self, x):
        return torch.special.bessel_j0(x) + torch.special.bessel_j0(x * 2) + torch.special.bessel_j1(x)


def test_every_unmapped_op_is_reported_at_once_with_count_and_line():
    with pytest.raises(UnsupportedOpsError) as info:
        from_torch(_Special(), (torch.randn(3),))
    ops = {u.op: u for u in info.value.ops}
    assert ops["aten.special_bessel_j0.default"].count == 2
    assert "aten.special_bessel_j1.default" in ops
    assert ops["aten.special_bessel_j0.default"].location.startswith(__file__)
    assert "keep_unmapped=True" in str(info.value) and "irforge_register_frontend_ops" in str(info.value)


def test_keep_unmapped_keeps_them_as_torch_aten_nodes():
    model = from_torch(_Special(), (torch.randn(3),), keep_unmapped=True)
    kept = [n for n in model.graph if n.domain == "torch.aten"]
    assert sorted(n.op_type for n in kept) == ["special_bessel_j0.default"] * 2 + ["special_bessel_j1.default"]
    assert all(n.outputs[0].type.shape == (3,) for n in kept)
    for backend in ("reference", "onnxruntime", "xla", "tvm"):  # until a pass lowers them, no engine runs them
        with pytest.raises(UnsupportedError, match=r"torch\.aten::special_bessel_j0\.default"):
            irforge.compile(model, backend)


class _BesselPlugin:
    @hookimpl
    def irforge_register_frontend_ops(self):
        def j0_as_cos(cx, x):  # a deliberately simple stand-in, enough to see the hook used
            return cx.emit_typed("Cos", x)

        return [("torch", "aten.special_bessel_j0.default", j0_as_cos),
                ("torch", "aten.special_bessel_j1.default", j0_as_cos)]  # fmt: skip


def test_a_plugin_maps_an_op_through_the_frontend_hook(monkeypatch):
    registry = build_registry(discover=False, plugins=[_BesselPlugin()])
    monkeypatch.setattr("irforge.plugins.default_registry", lambda: registry)
    x = torch.randn(3)
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
