"""The manager's guarantees: a failing pass is rolled back and named, --keep-going skips it, a
dishonest changed=False is caught, instruments run, and the crash reproducer replays the failure."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from irforge.core_ir import Model, graphs_equal, parse_graph, print_model
from irforge.passes.base import Pass, PassResult
from irforge.passes.instrumentation import ChangedCheck, DishonestPassError, PrintIR, Timing, VerifyEach
from irforge.passes.manager import PassFailedError, PassManager, PassSkippedWarning
from irforge.plugins import build_registry, hookimpl

TEXT = "graph @g(%x: f32[3]) {\n  %a = Neg(%x)\n  %b = Abs(%a)\n  return %b\n}\n"


@dataclass(frozen=True)
class HalfThenRaise(Pass):
    """Rewrites the first node, then raises: the rewrite must not survive."""

    name = "half-then-raise"
    summary = "test: fails half-way"

    def run(self, graph, ctx):
        next(iter(graph)).op_type = "Relu"
        raise RuntimeError("deliberately broken")


@dataclass(frozen=True)
class BreakSSA(Pass):
    """Makes the graph invalid (reads a value after it is defined) without raising."""

    name = "break-ssa"
    summary = "test: leaves an invalid graph"

    def run(self, graph, ctx):
        first, second = graph.nodes
        graph.move_after(second, first)
        return PassResult(True)


@dataclass(frozen=True)
class Liar(Pass):
    name = "liar"
    summary = "test: changes the graph and says it did not"

    def run(self, graph, ctx):
        next(iter(graph)).op_type = "Relu"
        return PassResult(False)


@dataclass(frozen=True)
class Hang(Pass):
    """Edits the graph, then never returns: what a pass timeout is for."""

    name = "hang"
    summary = "test: loops forever"

    def run(self, graph, ctx):
        next(iter(graph)).op_type = "Relu"
        while True:
            pass


class _TestPlugin:
    @hookimpl
    def irforge_register_passes(self):
        return [HalfThenRaise, BreakSSA, Liar, Hang]


REG = build_registry(discover=False, plugins=[_TestPlugin()])


def _manager(text: str, **options) -> PassManager:
    return PassManager.parse(text, REG.passes, provider=lambda n: REG.provider("passes", n), **options)


def _model() -> Model:
    return Model(parse_graph(TEXT))


@pytest.mark.parametrize("text", ["half-then-raise", "dce,break-ssa"])
def test_failing_pass_is_rolled_back_and_named_with_its_plugin(text):
    model = _model()
    before = print_model(model)
    with pytest.raises(PassFailedError) as e:
        _manager(text, instruments=[VerifyEach()]).run(model)
    name = text.split(",")[-1]
    assert f"pass {name!r} (from _TestPlugin) failed" in str(e.value)
    assert print_model(model) == before
    assert graphs_equal(model.graph, parse_graph(TEXT))


@dataclass(frozen=True)
class Rename(Pass):
    """An honest change: the first node becomes Relu."""

    name = "rename"
    summary = "test: changes the graph and says so"

    def run(self, graph, ctx):
        next(iter(graph)).op_type = "Relu"
        return PassResult(True)


def test_rollback_after_unchanged_passes_restores_the_state_before_the_failing_pass():
    """Passes that change nothing share one snapshot; a change ends the sharing."""
    reg = build_registry(discover=False, plugins=[_TestPlugin(), _RenamePlugin()])
    model = _model()
    with pytest.raises(PassFailedError, match="half-then-raise"):
        PassManager.parse("dce,rename,dce,topological-sort,half-then-raise", reg.passes).run(model)
    assert [n.op_type for n in model.graph] == ["Relu", "Abs"]
    model = _model()
    with pytest.raises(PassFailedError, match="half-then-raise"):
        PassManager.parse("dce,dce,half-then-raise", reg.passes).run(model)
    assert [n.op_type for n in model.graph] == ["Neg", "Abs"]


class _RenamePlugin:
    @hookimpl
    def irforge_register_passes(self):
        return [Rename]


def test_keep_going_skips_the_failed_pass_and_runs_the_rest():
    model = _model()
    with pytest.warns(PassSkippedWarning, match="half-then-raise"):
        _manager("half-then-raise,topological-sort", keep_going=True).run(model)
    assert [n.op_type for n in model.graph] == ["Neg", "Abs"]


def test_changed_false_is_checked():
    with pytest.raises(PassFailedError, match="liar") as e:
        _manager("liar", instruments=[ChangedCheck()]).run(_model())
    assert isinstance(e.value.__cause__, DishonestPassError)
    _manager("dce,topological-sort", instruments=[ChangedCheck()]).run(_model())  # honest passes pass


def test_timing_and_print_ir_instruments(capsys):
    import io

    timing, out = Timing(), io.StringIO()
    _manager("dce,topological-sort", instruments=[timing, PrintIR(only_changed=False, stream=out)]).run(_model())
    assert set(timing.runs) == {"dce", "topological-sort"}
    assert "pass timing:" in timing.report()
    assert out.getvalue().count("// ----- IR after") == 2


def _cli_with_test_passes(*args: str) -> subprocess.CompletedProcess:
    """The ``irforge`` command in a fresh process whose installed registry is this file's ``REG``."""
    script = (
        "import sys; sys.path.insert(0, {tests!r});"
        "import test_pass_manager as t, irforge.plugins.registry as r;"
        "r.default_registry.cache_clear();"
        "r.default_registry = lambda: t.REG;"
        "import irforge.plugins as p; p.default_registry = r.default_registry;"
        "from irforge.cli import irforge_main;"
        "sys.exit(irforge_main({args!r}))"
    ).format(tests=str(__import__("pathlib").Path(__file__).parent), args=list(args))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)


def test_reproducer_file_replays_the_failure(tmp_path):
    model = _model()
    with pytest.raises(PassFailedError, match="rerun it with: irforge optimize") as e:
        _manager("dce,half-then-raise", reproducer_dir=str(tmp_path)).run(model)
    path = tmp_path / "half-then-raise.irf"
    assert str(path) in str(e.value)
    # The file holds the IR the pass got; parsing it gives that IR back.
    from irforge.core_ir import parse_model

    assert graphs_equal(parse_model(path.read_text()).graph, model.graph)
    # Replaying through the command line (with the test plugin importable) fails the same way.
    proc = _cli_with_test_passes("optimize", str(path), "-o", str(tmp_path / "o.onnx"), "--pipeline", "half-then-raise")
    assert proc.returncode == 1
    assert "pass 'half-then-raise'" in proc.stderr and "deliberately broken" in proc.stderr


def test_optimize_api_runs_pipeline_text_in_place():
    import numpy as np

    import irforge
    from irforge.core_ir import interpret

    g = parse_graph("graph @g(%x: f32[3]) {\n  %dead = Exp(%x)\n  %b = Abs(%x)\n  return %b\n}\n")
    model = Model(g)
    x = np.array([-1.0, 2.0, -3.0], np.float32)
    expected = interpret(g, {"x": x})[0]
    assert irforge.optimize(model, "topological-sort,dce") is model
    assert [n.op_type for n in model.graph] == ["Abs"]
    np.testing.assert_array_equal(interpret(model.graph, {"x": x})[0], expected)


def test_keep_going_warns_in_one_line_per_failed_pass(tmp_path):
    model_path = tmp_path / "m.irf"
    model_path.write_text(print_model(_model()))
    proc = _cli_with_test_passes("optimize", str(model_path), "-o", str(tmp_path / "o.onnx"), "--keep-going",
                                 "--pipeline", "half-then-raise,dce,half-then-raise")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr  # one line per skipped pass: no file path, no source line
    for line in lines:
        assert line.startswith("irforge: warning: pass 'half-then-raise' (from _TestPlugin) failed")
        assert line.endswith("the pass was rolled back and skipped")


class _FakeTerminal:
    def __init__(self, tty: bool):
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        pass


@dataclass(frozen=True)
class Slow(Pass):
    name = "slow"
    summary = "test: takes a while"

    def run(self, graph, ctx):
        import time

        time.sleep(0.3)
        return PassResult(False)


@pytest.mark.parametrize("tty", [True, False])
def test_progress_shows_on_a_terminal_only(tty):
    from irforge.passes.instrumentation import Progress

    stream = _FakeTerminal(tty)
    progress = Progress(2, stream=stream, delay=0.05, interval=0.02)
    PassManager.parse("slow,slow", {"slow": Slow}, instruments=[progress]).run(_model())
    progress.close()
    if tty:
        assert "irforge: step 2/2 · slow · " in stream.text and stream.text.endswith("\r\033[K")
    else:
        assert stream.text == ""


def test_a_pass_that_hangs_is_stopped_rolled_back_and_named():
    import time

    from irforge.passes import PassTimeoutError

    model = _model()
    started = time.perf_counter()
    with pytest.raises(PassFailedError, match=r"pass 'hang' \(from .*_TestPlugin.*\) failed: PassTimeoutError") as e:
        _manager("dce,hang,topological-sort", pass_timeout=0.3).run(model)
    assert time.perf_counter() - started < 10
    assert isinstance(e.value.__cause__, PassTimeoutError)
    assert [n.op_type for n in model.graph] == ["Neg", "Abs"]  # the edit before the loop is undone
    with pytest.warns(PassSkippedWarning, match="ran past the pass timeout of 0.3 s"):
        _manager("hang,topological-sort", pass_timeout=0.3, keep_going=True).run(model)
    proc = _cli_with_test_passes("optimize", str(_write_example(model)), "-o", os.devnull, "--pipeline", "hang,dce",
                                 "--pass-timeout", "0.5", "--keep-going")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "irforge: warning: pass 'hang'" in proc.stderr and "ran past the pass timeout" in proc.stderr
    proc = _cli_with_test_passes("optimize", str(_write_example(model)), "-o", os.devnull, "--pass-timeout", "-1")
    assert proc.returncode == 1 and proc.stderr.strip() == (
        "irforge: error: pass timeout -1.0 s: give a number of seconds above 0, or none")


def _write_example(model) -> str:
    import tempfile

    path = os.path.join(tempfile.mkdtemp(), "m.irf")
    with open(path, "w", encoding="utf-8") as f:
        f.write(print_model(model))
    return path


def test_running_a_bare_graph_is_a_clear_error():
    from irforge.core_ir import parse_graph
    from irforge.core_ir.errors import IrforgeError

    with pytest.raises(IrforgeError, match=r"takes a Model, not a Graph: wrap a graph as Model\(graph\)"):
        PassManager.parse("dce").run(parse_graph("graph @g(%x: f32[1]) {\n  %y = Neg(%x)\n  return %y\n}"))
