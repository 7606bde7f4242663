"""Rewrites checked as they are made (``--validate-rewrites``) and bisecting (``irforge bisect``).

Wrong rewrites are written here on purpose (as patterns and as hand-written passes): each must be
refused, with its pattern or pass and both sides named, and the model must keep computing what
it computed.  The built-in pipelines must pass the same checks on real architectures.
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

from irforge.core_ir import Model, interpret, parse, print_model
from irforge.core_ir.errors import IrforgeError
from irforge.core_ir.fingerprint import model_fingerprint
from irforge.core_ir.rewrite_check import difference, random_inputs
from irforge.frontends.onnx import from_proto
from irforge.passes import (
    Pass,
    PassManager,
    PassResult,
    Pattern,
    RewriteChecker,
    RewriteRejectedWarning,
    bisect,
    pattern,
)
from irforge.passes.apply_pattern import pattern_pass
from irforge.plugins import default_registry

sys.path.insert(0, __import__("os").path.dirname(__file__))
import real_models
import zoo


@pattern("swap-relu-neg", lambda b, m: b.op.Neg(b.op.Relu(m["x"])))
def SWAP_RELU_NEG(p):
    """Wrong on every input: Relu(-x) is not -Relu(x)."""
    return p.op.Relu(p.op.Neg(p.var("x")))


def _model(text: str) -> Model:
    parsed = parse(text)
    return parsed if isinstance(parsed, Model) else Model(parsed)


def _registry(**passes):
    reg = dict(default_registry().runnable)
    reg.update(passes)
    return reg


def _run(model: Model, pipeline: str, **passes) -> RewriteChecker:
    checker = RewriteChecker()
    pm = PassManager.parse(pipeline, _registry(**passes), pipelines=default_registry().pipelines,
                           rewrite_checker=checker)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RewriteRejectedWarning)
        pm.run(model)
    return checker


CHAIN = """graph @g(%x: f32[2, 3]) {
  %a = Neg(%x)
  %b = Relu(%a)
  %c = Neg(%b)
  %d = Neg(%c)
  return %d
}"""


def test_a_wrong_pattern_rewrite_is_undone_alone_and_reported_with_both_sides():
    model = _model(CHAIN)
    x = {"x": np.random.default_rng(1).standard_normal([2, 3]).astype(np.float32)}
    before = interpret(model, x)
    checker = _run(model, "swap-relu-neg,canonicalize", **{"swap-relu-neg": pattern_pass(SWAP_RELU_NEG)})

    assert len(checker.rejections) == 1
    r = checker.rejections[0]
    assert r.pass_name == "swap-relu-neg" and r.pattern.startswith("swap-relu-neg (")
    assert "test_rewrite_check.py:" in r.pattern
    assert r.before == ["%a = Neg(%x)", "%b = Relu(%a)"]
    assert [line.split(" = ")[1] for line in r.after] == ["Relu(%x)", "Neg(%relu_1)"]
    assert "with random values" in r.detail and "elements differ" in r.detail
    text = str(r)
    assert "matched:" in text and "replacement:" in text and "%b = Relu(%a)" in text
    # the rest of the pipeline still ran (canonicalize removed the double negation), the numbers held
    ops = [n.op_type for n in model.graph]
    assert ops == ["Neg", "Relu"], print_model(model)
    np.testing.assert_array_equal(interpret(model, x)[0], before[0])
    assert checker.checked >= 1 and "1 rejected" in checker.summary()


@dataclass(frozen=True)
class _ExpForSigmoid(Pass):
    """A hand-written pass with a wrong rewrite: Sigmoid(x) -> Exp(x) (and a right one first:
    Identity removal), so the rollback must take the whole pass back."""

    name = "wrong-sigmoid"

    def run(self, graph, ctx):
        changed = False
        for node in list(graph):
            if node.op_type == "Identity":
                node.outputs[0].replace_all_uses_with(node.inputs[0])
                graph.remove(node)
                changed = True
        for node in list(graph):
            if node.op_type == "Sigmoid":
                from irforge.core_ir import Builder

                b = Builder(graph, before=node)
                node.outputs[0].replace_all_uses_with(b.op.Exp(node.inputs[0]))
                graph.remove(node)
                changed = True
        return PassResult(changed)


def test_a_wrong_rewrite_in_a_hand_written_pass_rolls_the_pass_back_and_the_pipeline_goes_on():
    model = _model("""graph @g(%x: f32[4]) {
      %i = Identity(%x)
      %s = Sigmoid(%i)
      %n = Neg(%s)
      %m = Neg(%n)
      return %m
    }""")
    original = print_model(model)
    checker = RewriteChecker()
    pm = PassManager.parse("wrong-sigmoid,canonicalize", _registry(**{"wrong-sigmoid": _ExpForSigmoid}),
                           rewrite_checker=checker)  # fmt: skip
    with pytest.warns(RewriteRejectedWarning, match="the pass was rolled back") as caught:
        pm.run(model)
    assert len(caught) == 1
    (r,) = checker.rejections
    assert r.pass_name == "wrong-sigmoid" and r.pattern == "" and r.index == 2
    assert r.before == ["%s = Sigmoid(%x)"] and r.after[0].endswith("= Exp(%x)")
    # the Identity removal went with the pass; canonicalize then ran on the original
    assert original != print_model(model)
    assert [n.op_type for n in model.graph] == ["Sigmoid"]


@pytest.mark.parametrize(
    ("text", "wrong", "trial"),
    [
        # x * 0 -> sign(x) * 0 holds on ordinary numbers, not on inf
        ("%z = Mul(%x, %zero)", lambda b, m: b.op.Mul(b.op.Sign(m["x"]), m["zero"]), "special values"),
        # softmax without subtracting the maximum: a row holding inf is no longer all NaN
        ("%z = Softmax(%x) <axis = -1>",
         lambda b, m: b.op.Div(b.op.Exp(m["x"]), b.op.ReduceSum(b.op.Exp(m["x"]), b.constant(np.array([-1])),
                                                                  keepdims=1)),
         "special values"),
    ],
)  # fmt: skip
def test_edge_values_catch_rewrites_that_only_random_values_miss(text, wrong, trial):
    model = _model(f"""graph @g(%x: f32[3, 4]) {{
      init %zero = dense<f32[]>[0.0]
      {text}
      return %z
    }}""")
    op = text.split("= ")[1].split("(")[0]
    if op == "Mul":
        pat = Pattern("times-zero", lambda p: p.op.Mul(p.var("x"), p.var("zero")), wrong)
    else:
        pat = Pattern("naive-softmax", lambda p: p.op.Softmax(p.var("x")), wrong)
    checker = _run(model, pat.name, **{pat.name: pattern_pass(pat)})
    (r,) = checker.rejections
    assert f"with {trial}" in r.detail, r.detail
    assert [n.op_type for n in model.graph] == [op]


def test_difference_rules():
    nan, inf = float("nan"), float("inf")
    f = np.float32
    assert difference(np.array([1, nan, inf], f), np.array([1.00001, nan, inf], f), 1e-4, 1e-6) is None
    assert "1 of 3 elements differ" in difference(np.array([1, nan, 2], f), np.array([1, nan, inf], f), 1e-4, 1e-6)
    assert difference(np.array([0.0], f), np.array([nan], f), 1e-4, 1e-6) is not None
    # rounding is relative to the computation's magnitude, not to a result cancellation made tiny
    assert difference(np.array([1e-3, 100], f), np.array([1.5e-3, 100], f), 1e-4, 1e-6) is None
    assert difference(np.array([1e-3], f), np.array([1.5e-3], f), 1e-4, 1e-6) is not None
    # overflowed values agree with each other, whichever way they overflowed
    assert difference(np.array([inf, 3e37], f), np.array([nan, inf], f), 1e-4, 1e-6) is None
    assert "gives int64[2] where the original gives int64[3]" in difference(np.arange(3), np.arange(2), 0, 0)


def test_replacements_that_cannot_be_run_are_counted_with_the_reason():
    model = _model("""graph @g(%x) {
      %a = Neg(%x)
      %b = Neg(%a)
      %c = Relu(%b)
      return %c
    }""")
    checker = _run(model, "canonicalize")
    assert checker.checked == 0 and not checker.rejections
    assert "unknown type or rank" in checker.summary(), checker.summary()


def test_checkers_do_not_nest_and_the_hook_is_removed_after_a_pass():
    from irforge.core_ir import value

    model = _model(CHAIN)
    checker = RewriteChecker()
    with checker.watching(model, "p"), pytest.raises(IrforgeError, match="do not nest"), \
            RewriteChecker().watching(model, "q"):
        pass
    assert value.REPLACE_HOOK is None


REAL = ["squeezenet", "inception_v1", "mobilenet", "bert"]


def _real(name: str):
    if name == "mobilenet":
        return zoo.mobilenet_v2(size=32, classes=10)
    if name == "bert":
        return zoo.bert(layers=2, hidden=64, heads=4, ffn=128, seq=16)
    return real_models.randomized(next(p for p in real_models.MODELS if f"light_{name}." in p))


@pytest.mark.parametrize("name", REAL)
def test_the_built_in_pipelines_pass_their_own_checks_on_real_architectures(name):
    """No false alarms: every rewrite -O3 makes (and the onnxruntime lowering) is checked and none
    is refused."""
    for pipeline in ("-O3", "O3,lower-fused{target=onnxruntime}"):
        model = from_proto(_real(name), None)
        checker = _run(model, pipeline)
        assert not checker.rejections, "\n\n".join(map(str, checker.rejections))
        assert checker.checked >= 10, checker.summary()


def test_bisect_finds_the_pass_and_the_rewrite_and_leaves_the_model_alone():
    model = _model(CHAIN.replace("return %d", "%e = Exp(%d)\n  return %e"))
    fingerprint = model_fingerprint(model)
    reg = _registry(**{"swap-relu-neg": pattern_pass(SWAP_RELU_NEG)})
    found = bisect(model, "canonicalize,swap-relu-neg,cse,dce", registry=reg)
    assert found.differs and found.first_pass == "swap-relu-neg" and found.step == 2
    assert found.outputs[0].startswith("output %e: 6 of 6 elements differ")
    assert found.rewrite is not None and found.rewrite.index == 1
    assert found.rewrite.before == ["%a = Neg(%x)", "%b = Relu(%a)"]
    report = found.report()
    assert "after pass run 2 of 'canonicalize,swap-relu-neg,cse,dce': swap-relu-neg" in report
    assert "with the model's own values" in report
    assert model_fingerprint(model) == fingerprint

    agree = bisect(model, "-O3")
    assert not agree.differs and agree.passes_run > 10
    assert agree.report().startswith("the outputs agree after each of the")


def test_bisect_names_a_pass_whose_small_differences_add_up():
    """convert-precision changes every value a little; no single rewrite is beyond float16's
    tolerance, but the float32 outputs differ: bisect names the pass and says so."""
    model = from_proto(zoo.bert(layers=1, hidden=32, heads=2, ffn=64, seq=8), None)
    found = bisect(model, "convert-precision{to=float16}")
    assert found.differs and found.first_pass == "convert-precision"
    assert found.rewrite is None and "add up" in found.report()
    assert "(rtol 0.0001 " in found.outputs[0]
    assert "(rtol 0.01 " in bisect(model, "convert-precision{to=float16}", precision="float16").report()


def test_random_inputs_name_an_input_without_a_shape():
    with pytest.raises(IrforgeError, match="input %x has no known type and shape"):
        random_inputs(_model("graph @g(%x) {\n  %y = Neg(%x)\n  return %y\n}"))


WRONG_PLUGIN = '''
from irforge.core_ir.pattern import pattern
from irforge.plugins import hookimpl


@pattern("wrong-swap", lambda b, m: b.op.Neg(b.op.Relu(m["x"])))
def wrong_swap(p):
    return p.op.Relu(p.op.Neg(p.var("x")))


@hookimpl
def irforge_register_patterns():
    return [wrong_swap]
'''


@pytest.fixture(scope="module")
def cli_site(tmp_path_factory):
    """A plugin with a wrong pattern, installed as a distribution (its metadata by hand), and a
    model it breaks."""
    import irforge

    root = tmp_path_factory.mktemp("wrong")
    site = root / "site"
    (site / "irforge_wrong_plugin-0.1.0.dist-info").mkdir(parents=True)
    (site / "irforge_wrong_plugin.py").write_text(WRONG_PLUGIN)
    (site / "irforge_wrong_plugin-0.1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: irforge-wrong-plugin\nVersion: 0.1.0\n")
    (site / "irforge_wrong_plugin-0.1.0.dist-info" / "entry_points.txt").write_text(
        "[irforge.plugins]\nwrong = irforge_wrong_plugin\n")
    model = root / "chain.onnx"
    irforge.save(_model(CHAIN.replace("return %d", "%e = Exp(%d)\n  return %e")), str(model))
    return site, model


def _cli(site, *args):
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "irforge.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)  # fmt: skip


def test_optimize_validate_rewrites_reports_a_plugins_wrong_rewrite_and_writes_the_rest(cli_site, tmp_path):
    site, model = cli_site
    out = tmp_path / "out.onnx"
    run = _cli(site, "optimize", str(model), "-o", str(out), "--pipeline", "wrong-swap,O1", "--validate-rewrites")
    assert run.returncode == 3, run.stdout + run.stderr
    assert "validate-rewrites: " in run.stdout and ", 1 rejected" in run.stdout
    assert "rejected: pattern wrong-swap (" in run.stdout and "irforge_wrong_plugin.py:" in run.stdout
    assert "    %b = Relu(%a)" in run.stdout and "replacement:" in run.stdout
    assert "written without the 1 rejected rewrites" in run.stderr and "Traceback" not in run.stderr
    x = {"x": np.random.default_rng(0).standard_normal([2, 3]).astype(np.float32)}
    import irforge

    np.testing.assert_allclose(interpret(irforge.load(str(out)), x)[0], interpret(irforge.load(str(model)), x)[0])
    clean = _cli(site, "optimize", str(model), "-o", str(out), "-O3", "--validate-rewrites")
    assert clean.returncode == 0 and ", 0 rejected" in clean.stdout, clean.stdout + clean.stderr


def test_bisect_command_names_the_pass_and_the_rewrite(cli_site, tmp_path):
    site, model = cli_site
    run = _cli(site, "bisect", str(model), "--pipeline", "-O1,wrong-swap,O1")
    assert run.returncode == 3, run.stdout + run.stderr
    assert ": wrong-swap\n  output %e: " in run.stdout
    assert "first rewrite that changes numbers (replacement 1 of the pass):" in run.stdout
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.ones([2, 3], np.float32))
    agree = _cli(site, "bisect", str(model), "-O3", "--inputs", str(feeds))
    assert agree.returncode == 0 and agree.stdout.startswith("the outputs agree after each of the"), agree.stdout
    bad = _cli(site, "bisect", str(model), "-O3", "--inputs", str(tmp_path / "missing.npz"))
    assert bad.returncode == 1 and "missing.npz: no such file" in bad.stderr and "Traceback" not in bad.stderr


def test_the_python_api_spells_it_like_the_command():
    import irforge

    model = from_proto(zoo.mobilenet_v2(size=32, classes=10), None)
    x = {"image": np.random.default_rng(0).standard_normal([1, 3, 32, 32]).astype(np.float32)}
    want = interpret(model, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RewriteRejectedWarning)
        irforge.optimize(model, "-O2", validate_rewrites=True)
    np.testing.assert_allclose(interpret(model, x)[0], want[0], rtol=1e-4, atol=1e-5)
    assert any(n.domain == "irforge" for n in model.graph)  # the fusions happened under the check
