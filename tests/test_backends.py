"""The StableHLO and XLA backends: artifacts that verify and round-trip, numbers that match the
reference interpreter, dynamic dims, and unsupported ops refused by name, never run wrong."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
import zoo

import irforge
from irforge.backends import Backend, BackendError, UnsupportedError
from irforge.backends.stablehlo import from_portable_artifact, verify_text
from irforge.plugins import build_registry, hookimpl

HERE = os.path.dirname(__file__)
EXAMPLE = os.path.join(HERE, "..", "examples", "small_cnn.onnx")
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def _example(level: str = "-O2"):
    m = irforge.load(EXAMPLE)
    return irforge.optimize(m, level)


def _image(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 3, 32, 32)).astype(np.float32)


def test_stablehlo_text_verifies_and_the_portable_artifact_round_trips():
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    m = _example()
    text = irforge.emit(m, "stablehlo").data
    assert "func.func public @main" in text and "stablehlo.convolution" in text
    assert verify_text(text)
    data = irforge.emit(m, "stablehlo-bytecode").data
    assert isinstance(data, bytes) and data[:4] == b"ML\xefR"  # MLIR bytecode
    with jmlir.make_ir_context():
        original = ir.Module.parse(text).operation.get_asm(enable_debug_info=False)
        restored = ir.Module.parse(from_portable_artifact(data)).operation.get_asm(enable_debug_info=False)
    assert original == restored


def test_node_names_become_locations():
    text = irforge.emit(_example("-O0"), "stablehlo").data
    for name in ("conv1", "bn", "relu1", "pool"):
        assert f'loc("jit(main)/{name}/' in text, name


def test_a_dynamic_batch_lowers_once_and_runs_at_two_sizes(monkeypatch):
    import irforge.backends.stablehlo.xla as xla

    m = _example()
    assert "tensor<?x3x32x32xf32>" in irforge.emit(m, "stablehlo").data
    calls = []
    real = xla.lower
    monkeypatch.setattr(xla, "lower", lambda *a, **k: calls.append(1) or real(*a, **k))
    exe = irforge.compile(m, "xla")
    reference = irforge.compile(m, "reference")
    for batch in (1, 5):
        x = _image(batch)
        (got,) = exe(x)
        assert got.shape == (batch, 10)
        np.testing.assert_allclose(got, reference(x)[0], rtol=1e-5, atol=1e-6)
    assert len(calls) == 1


def test_compile_never_changes_the_callers_model():
    m = irforge.load(os.path.join(LIGHT, "light_squeezenet.onnx"))
    before = str(m)
    irforge.compile(m, "xla")
    assert str(m) == before


LIGHT_MODELS = ["squeezenet", "shufflenet", "inception_v1", "resnet50"]


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_models_after_o2_match_the_reference(name):
    from real_models import feeds, randomized

    proto = randomized(os.path.join(LIGHT, f"light_{name}.onnx"))
    m = irforge.optimize(irforge.from_onnx(proto), "-O2")
    inputs = feeds(proto)
    want = irforge.compile(m, "reference")(inputs)
    got = irforge.compile(m, "xla")(inputs)
    ort = irforge.compile(m, "onnxruntime")(inputs)
    for w, g, o in zip(want, got, ort, strict=True):
        # 1e-4 of the output's scale, or (inception_v1's peaked softmax, where onnxruntime and XLA
        # agree with each other to 1e-6 and both differ from the float64-accumulating reference
        # by 4e-4) no further from the reference than onnxruntime is
        bound = max(1e-4 * max(1.0, float(np.abs(w).max())), 1.5 * float(np.abs(o - w).max()))
        assert float(np.abs(g - w).max()) <= bound, name
        np.testing.assert_allclose(g, o, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(o).max())))


UNSUPPORTED = """model {
  opset "" = 21
  graph @g(%x: f32[4], %s: str[2]) {
    %u, %i, %inv, %c = Unique(%x)
    %v, %i2, %inv2, %c2 = Unique(%u)
    %n = StringNormalizer(%s) <case_change_action = "LOWER">
    %y = Relu(%v)
    return %y, %n
  }
}
"""


def test_unsupported_ops_are_listed_by_op_count_first_node_and_reason(tmp_path):
    m = irforge.parse(UNSUPPORTED)
    with pytest.raises(UnsupportedError) as info:
        irforge.compile(m, "xla")
    problems = {p.op: p for p in info.value.problems}
    assert problems["Unique"].count == 2 and "lowering rule" in problems["Unique"].why
    assert problems["Unique"].first_node.startswith("Unique")
    assert "StringNormalizer" in problems
    assert any("element type str" in p.why for p in info.value.problems)
    with pytest.raises(UnsupportedError):
        irforge.emit(m, "stablehlo")
    path = tmp_path / "m.onnx"
    irforge.save(m, str(path))
    proc = subprocess.run([sys.executable, "-m", "irforge.cli", "emit", str(path), "--check-only"],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 1
    assert "Unique (2 nodes, first Unique" in proc.stdout and "StringNormalizer" in proc.stdout


def test_the_gpu_is_used_where_there_is_one_and_named_where_there_is_not():
    import jax

    m = _example()
    try:
        has_gpu = bool(jax.devices("gpu"))
    except RuntimeError:
        has_gpu = False
    if has_gpu:
        (got,) = irforge.compile(m, "xla", device="gpu")(_image(2))
        np.testing.assert_allclose(got, irforge.compile(m, "reference")(_image(2))[0], rtol=1e-4, atol=1e-5)
    else:
        with pytest.raises(BackendError, match="no GPU is available to XLA here"):
            irforge.compile(m, "xla", device="gpu")


def test_hlo_before_and_after_xla_passes():
    m = _example()
    before = irforge.emit(m, "hlo", dims={"batch": 2}).data
    after = irforge.emit(m, "hlo-optimized", dims={"batch": 2}).data
    assert before.startswith("HloModule") and after.startswith("HloModule")
    assert "f32[2,3,32,32]" in before and "fusion" in after
    with pytest.raises(BackendError, match="--dim batch=N"):
        irforge.emit(m, "hlo")


def test_inputs_fixing_shapes_specialize_the_executable():
    m = irforge.parse("""model {
  opset "" = 21
  graph @g(%x: f32[2,6], %shape: i64[2]) {
    %y = Reshape(%x, %shape)
    return %y
  }
}
""")
    exe = irforge.compile(m, "xla")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    assert exe(x, np.array([3, 4]))[0].shape == (3, 4)
    assert exe(x, np.array([4, -1]))[0].shape == (4, 3)
    with pytest.raises(UnsupportedError, match="depends on the graph input"):
        irforge.emit(m, "stablehlo")


class _Doubler(Backend):
    name = "doubler"
    targets = ("doubled",)

    def unsupported(self, model):
        return []

    def compile(self, model, device="cpu"):
        from irforge.backends import Executable

        return Executable(self.name, lambda xs: [2 * x for x in xs], ["x"], ["y"])


class _DoublerPlugin:
    @hookimpl
    def irforge_register_backends(self):
        return [("doubler", _Doubler())]


def test_a_plugin_backend_registers_like_any_other():
    reg = build_registry(discover=False, plugins=[_DoublerPlugin()])
    assert {"reference", "onnxruntime", "stablehlo", "xla", "tvm", "doubler"} <= set(reg.backends)
    assert reg.provider("backends", "doubler") == "_DoublerPlugin"
    (y,) = reg.backends["doubler"].compile(None)(np.ones(2))
    assert y.tolist() == [2.0, 2.0]


def test_cli_run_and_emit(tmp_path):
    run = subprocess.run([sys.executable, "-m", "irforge.cli", "run", EXAMPLE, "-O2", "--backend", "xla",
                          "--repeat", "2", "--dim", "batch=3"], capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "probs: float32[3, 10]" in run.stdout and "latency: median" in run.stdout
    diff = float(run.stdout.split("max |xla - reference|: ")[1].split()[0])
    assert diff < 1e-5
    out = tmp_path / "m.mlirbc"
    emit = subprocess.run([sys.executable, "-m", "irforge.cli", "emit", EXAMPLE, "--target", "stablehlo-bytecode",
                           "-o", str(out)], capture_output=True, text=True)  # fmt: skip
    assert emit.returncode == 0, emit.stderr
    assert verify_text(from_portable_artifact(out.read_bytes()))


def test_every_light_model_is_covered():
    names = {os.path.basename(p)[len("light_") : -len(".onnx")] for p in glob.glob(os.path.join(LIGHT, "*.onnx"))}
    assert set(LIGHT_MODELS) <= names


ZOO = {
    "resnet50": lambda: zoo.resnet50(size=64),
    "mobilenet_v2": lambda: zoo.mobilenet_v2(size=64),
    "bert": lambda: zoo.bert(layers=2, hidden=128, heads=4, ffn=256, seq=32, vocab=1000),
}


@pytest.fixture(scope="module", params=sorted(ZOO))
def zoo_model(request):
    proto = ZOO[request.param]()
    return request.param, proto, irforge.optimize(irforge.from_onnx(proto), "-O2")


@pytest.mark.parametrize("backend", ["onnxruntime", "xla", "tvm"])
def test_reference_architectures_after_o2_match_the_reference_at_two_batch_sizes(zoo_model, backend):
    _, proto, m = zoo_model
    exe, reference = irforge.compile(m, backend), irforge.compile(m, "reference")
    for batch in (1, 3):  # the batch dim is symbolic: one lowering (xla) or one build per size (tvm)
        f = zoo.feeds(proto, batch=batch)
        for w, g in zip(reference(f), exe(f), strict=True):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())) / 10)


def test_relax_module_is_emitted_well_formed_and_runs():
    from tvm import relax

    m = _example()
    artifact = irforge.emit(m, "relax", dims={"batch": 2})
    assert "R.nn.conv2d" in artifact.data and "R.Tensor((2, 3, 32, 32)" in artifact.data
    relax.analysis.well_formed(artifact.module)  # raises on a violation
    (got,) = irforge.compile(m, "tvm")(_image(2))
    np.testing.assert_allclose(got, irforge.compile(m, "reference")(_image(2))[0], rtol=1e-5, atol=1e-6)


COMPOSITE = """model {
  opset "" = 21
  opset "irforge" = 1
  func irforge::@tanh_gate(%a) with {opsets = {"": 21}} {
    %t = Tanh(%a)
    %b = Mul(%t, %a)
    return %b
  }
  graph @g(%x: f32[4]) {
    %y = irforge::tanh_gate(%x)
    %z = Relu(%y)
    return %z
  }
}
"""


def test_a_model_local_function_lowers_to_a_composite_with_its_body_as_decomposition():
    m = irforge.parse(COMPOSITE)
    text = irforge.emit(m, "stablehlo").data
    assert 'stablehlo.composite "irforge.tanh_gate"' in text and "decomposition = @" in text
    assert verify_text(text)
    x = np.linspace(-2, 2, 4).astype(np.float32)
    np.testing.assert_allclose(irforge.compile(m, "xla")(x)[0], irforge.compile(m, "reference")(x)[0], rtol=1e-6)


def _random_model() -> onnx.ModelProto:
    from onnx import TensorProto, helper

    shift = helper.make_graph(  # a Loop body drawing one number a step, shifted into a 3-vector
        [helper.make_node("RandomUniform", [], ["u"], shape=[1]),
         helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [1], [1])),
         helper.make_node("Constant", [], ["end"], value=helper.make_tensor("end", TensorProto.INT64, [1], [3])),
         helper.make_node("Slice", ["s", "one", "end"], ["tail"]),
         helper.make_node("Concat", ["tail", "u"], ["s_out"], axis=0),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "shift", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                  helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                  helper.make_tensor_value_info("s", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [3])])  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Bernoulli", ["p"], ["coin"]),
         helper.make_node("Multinomial", ["logits"], ["picks"], sample_size=4000),
         helper.make_node("RandomNormalLike", ["x"], ["normal"], mean=2.0, scale=0.5),
         helper.make_node("RandomUniform", [], ["seeded"], shape=[8], seed=3.0),
         helper.make_node("Constant", [], ["trips"], value=helper.make_tensor("t", TensorProto.INT64, [], [3])),
         helper.make_node("Constant", [], ["go"], value=helper.make_tensor("g", TensorProto.BOOL, [], [True])),
         helper.make_node("Loop", ["trips", "go", "zeros"], ["steps"], body=shift)],
        "draws", [helper.make_tensor_value_info("p", TensorProto.FLOAT, [2000]),
                  helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 3]),
                  helper.make_tensor_value_info("x", TensorProto.FLOAT, [500]),
                  helper.make_tensor_value_info("zeros", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None)
         for n in ("coin", "picks", "normal", "seeded", "steps")])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_random_ops_draw_anew_at_every_call_on_xla_and_a_seed_fixes_them(tmp_path):
    path = tmp_path / "draws.onnx"
    onnx.save(_random_model(), str(path))
    model = irforge.load(str(path))
    assert "tensor<2xui32>" in irforge.emit(model, "stablehlo").data  # the key: the module's first argument
    run = irforge.compile(model, "xla")
    p = np.where(np.arange(2000) < 1000, 0.2, 0.9).astype(np.float32)
    logits = np.log(np.asarray([[0.2, 0.3, 0.5], [0.0, 0.9, 0.1]], np.float32) + 1e-30)
    args = (p, logits, np.zeros(500, np.float32), np.zeros(3, np.float32))
    coin, picks, normal, seeded, steps = run(*args)
    again = run(*args)
    assert abs(coin[:1000].mean() - 0.2) < 0.05 and abs(coin[1000:].mean() - 0.9) < 0.05
    assert picks.shape == (2, 4000) and picks.dtype == np.int32
    np.testing.assert_allclose(np.bincount(picks[0], minlength=3) / 4000, [0.2, 0.3, 0.5], atol=0.03)
    np.testing.assert_allclose(np.bincount(picks[1], minlength=3) / 4000, [0.0, 0.9, 0.1], atol=0.03)
    assert abs(normal.mean() - 2.0) < 0.1 and abs(normal.std() - 0.5) < 0.1
    np.testing.assert_array_equal(seeded, again[3])  # a seed fixes the numbers
    assert len(set(steps.tolist())) == 3 and (steps > 0).all()  # every Loop step drew its own
    assert not np.array_equal(coin, again[0]) and not np.array_equal(steps, again[4])  # a new key each call


def _col2im_model(image, block, **attrs):
    from onnx import TensorProto, helper

    channels, positions = 2, 1
    nd = len(image)
    pads = attrs.get("pads", [0] * 2 * nd)
    for i in range(nd):
        span = image[i] + pads[i] + pads[i + nd] - attrs.get("dilations", [1] * nd)[i] * (block[i] - 1) - 1
        positions *= span // attrs.get("strides", [1] * nd)[i] + 1
    rows = channels * int(np.prod(block))
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], **attrs)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, rows, positions])
    graph = helper.make_graph([node], "col2im", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("image", TensorProto.INT64, [nd], image),
                               helper.make_tensor("block", TensorProto.INT64, [nd], block)])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), (2, rows, positions)


@pytest.mark.parametrize("image,block,attrs", [
    ([5, 5], [2, 2], {}),
    ([8, 6], [2, 3], {"pads": [1, 0, 1, 0], "strides": [2, 1], "dilations": [2, 1]}),
    ([4, 3, 5], [2, 1, 2], {"strides": [1, 2, 1]}),
])  # fmt: skip
def test_col2im_with_constant_shapes_lowers_to_xla_and_matches_the_reference(image, block, attrs):
    proto, shape = _col2im_model(image, block, **attrs)
    model = irforge.load(proto)
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    want = irforge.compile(model, "reference")(x)[0]
    np.testing.assert_allclose(irforge.compile(model, "xla")(x)[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(irforge.compile(model, "onnxruntime")(x)[0], want, rtol=1e-5, atol=1e-5)
