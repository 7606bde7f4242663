"""The ``irforge`` command as a user runs it: print, verify, optimize, through a real subprocess."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import onnx

import irforge
from irforge.core_ir import interpret, models_equal, parse, print_model

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "small_cnn.onnx")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "irforge.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def _digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_print_full_parses_back_to_the_loaded_model():
    proc = _cli("print", "--full", EXAMPLE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == print_model(irforge.load(EXAMPLE))
    assert models_equal(parse(proc.stdout), irforge.load(EXAMPLE)) is None


def test_print_elides_large_constants_by_default_and_on_request():
    default = _cli("print", EXAMPLE).stdout
    assert "elided<" in default and "graph @" in default
    assert default.endswith("}\n")  # a shell prompt after it starts on its own line
    none_elided = _cli("print", "--elide", "1000000000", EXAMPLE).stdout
    assert "elided<" not in none_elided
    everything = _cli("print", "--elide", "0", EXAMPLE).stdout
    assert everything.count("elided<") > default.count("elided<")


def test_print_to_a_file_leaves_the_model_untouched(tmp_path):
    before = _digest(EXAMPLE)
    out = tmp_path / "model.txt"
    proc = _cli("print", "--full", EXAMPLE, "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert models_equal(parse(out.read_text(encoding="utf-8")), irforge.load(EXAMPLE)) is None
    assert _digest(EXAMPLE) == before


def test_print_of_a_bad_file_is_one_error_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x0a\xff\xff\xff")
    proc = _cli("print", str(bad))
    assert proc.returncode == 1
    assert proc.stderr.startswith("irforge: error:") and str(bad) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_optimize_O0_keeps_the_numbers(tmp_path):
    out = tmp_path / "out.onnx"
    proc = _cli("optimize", EXAMPLE, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    onnx.checker.check_model(str(out), full_check=True)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    before, after = irforge.load(EXAMPLE), irforge.load(out)
    (want,), (got,) = interpret(before, [x]), interpret(after, [x])
    np.testing.assert_array_equal(want, got)


def test_passes_lists_every_pass_with_its_plugin():
    proc = _cli("passes")
    assert proc.returncode == 0, proc.stderr
    assert "dce  [irforge (built-in)]" in proc.stdout
    assert "topological-sort  [irforge (built-in)]" in proc.stdout


def test_optimize_runs_a_pipeline_and_keeps_outputs(tmp_path):
    out = str(tmp_path / "out.onnx")
    proc = _cli("optimize", EXAMPLE, "-o", out, "--pipeline", "topological-sort,dce")
    assert proc.returncode == 0, proc.stderr
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    name = irforge.load(EXAMPLE).graph.inputs[0].name
    np.testing.assert_allclose(interpret(irforge.load(out), {name: x})[0],
                               interpret(irforge.load(EXAMPLE), {name: x})[0], rtol=1e-6)  # fmt: skip


def test_optimize_statistics_count_nodes_and_rewrites_per_pass(tmp_path):
    proc = _cli("optimize", EXAMPLE, "-o", str(tmp_path / "out.onnx"), "-O1", "--statistics")
    assert proc.returncode == 0, proc.stderr
    report = proc.stdout.split("pass statistics:\n")[1]
    sections = {}
    for line in report.splitlines():
        if not line.startswith("    "):
            name = line.strip()
            sections[name] = {}
        else:
            count, key = line.split(maxsplit=1)
            sections[name][key] = int(count)
    # the example's Conv with bias and its BatchNormalization become one Conv
    assert sections["fuse-conv-bn"] == {"runs": 1, "changed": 1, "nodes added": 1, "nodes removed": 2,
                                        "conv-bias-batchnorm": 1}  # fmt: skip
    assert sections["cse"]["runs"] == sections["dce"]["runs"] >= 1
    assert "10 -> 9 nodes" in proc.stdout


def test_optimize_debug_rewrites_shows_each_rewrite_and_the_closest_misses(tmp_path):
    proc = _cli("optimize", EXAMPLE, "-o", str(tmp_path / "out.onnx"), "-O1", "--debug-rewrites")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("rewrites:\n")[1].splitlines()
    applied = [line for line in lines if line.startswith("  [fuse-conv-bn] conv-bias-batchnorm (")]
    assert len(applied) == 1
    assert "fuse_conv_bn.py:" in applied[0]
    assert ': BatchNormalization "bn", Conv "conv1" -> Conv "conv1+bn"' in applied[0]  # named after what it replaced
    # the bias-less variant explains why it did not apply to the same two nodes
    assert ('  [fuse-conv-bn] conv-batchnorm did not match; closest at BatchNormalization "bn": '
            'Conv "conv1" has 3 inputs, the pattern 2') in lines  # fmt: skip


def test_optimize_with_an_unknown_pass_names_it_and_writes_nothing(tmp_path):
    out = tmp_path / "out.onnx"
    proc = _cli("optimize", EXAMPLE, "-o", str(out), "--pipeline", "dce,no-such-pass")
    assert proc.returncode == 1
    assert "unknown pass 'no-such-pass'" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists()


def test_print_into_a_reader_that_stops_early_is_not_an_error(tmp_path):
    body = "".join(f"  %r{i + 1} = Relu(%r{i})\n" for i in range(3000))  # more text than a pipe holds
    model = parse(f'model {{\n opset "" = 21\n graph @long(%r0: f32[4]) {{\n{body}  return %r3000\n }}\n}}\n')
    path = tmp_path / "long.onnx"
    irforge.save(model, str(path))
    proc = subprocess.Popen([sys.executable, "-m", "irforge.cli", "print", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout.read(100).startswith(b"model")
    proc.stdout.close()  # as `| head` does
    assert proc.wait(timeout=120) == 0
    assert proc.stderr.read() == b""


def test_optimize_for_a_target_writes_its_kernels_and_keeps_outputs(tmp_path):
    out = str(tmp_path / "out.onnx")
    proc = _cli("optimize", EXAMPLE, "-o", out, "-O3", "--target", "onnxruntime")
    assert proc.returncode == 0, proc.stderr
    assert "-O3 --target onnxruntime" in proc.stdout
    saved = onnx.load(out)
    assert {(n.domain, n.op_type) for n in saved.graph.node} >= {("com.microsoft", "FusedConv")}
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    name = irforge.load(EXAMPLE).graph.inputs[0].name
    want = interpret(irforge.load(EXAMPLE), {name: x})[0]
    np.testing.assert_allclose(irforge.compile(irforge.load(out), "onnxruntime")(x)[0], want, rtol=1e-5, atol=1e-6)
    bad = _cli("optimize", EXAMPLE, "-o", str(tmp_path / "bad.onnx"), "-O2", "--target", "gpu")
    assert bad.returncode == 2 and "invalid choice: 'gpu'" in bad.stderr
