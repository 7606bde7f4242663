"""Bad input gets a specific irforge error — never a traceback, a crash or a hang — and the
file it came from is never modified."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import irforge
from irforge.core_ir import LoadError, VerificationError, verify_model

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "small_cnn.onnx")


def _write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _model(nodes, inputs=None, outputs=None, inits=(), opsets=(("", 21),)) -> bytes:
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    outputs = outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]
    g = helper.make_graph(nodes, "bad", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    return m.SerializeToString()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "irforge.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def _assert_clean_failure(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 1, proc
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    for needle in needles:
        assert needle in out, out


with open(EXAMPLE, "rb") as _f:
    GOOD = _f.read()

LOAD_ERRORS = {
    "empty": (b"", "the file is empty"),
    "garbage": (b"\x00\xff\x13garbage not a protobuf" * 3, "not a valid ONNX model"),
    "truncated": (GOOD[: len(GOOD) // 2], "not a valid ONNX model"),
    "text": (b"hello world, this is not onnx\n", "not"),
}


@pytest.mark.parametrize("case", sorted(LOAD_ERRORS))
def test_unreadable_files(tmp_path, case):
    data, message = LOAD_ERRORS[case]
    path = _write(tmp_path, f"{case}.onnx", data)
    with pytest.raises(LoadError, match=message) as info:
        irforge.load(path)
    assert path in str(info.value)  # the error names the file
    _assert_clean_failure(_cli("verify", path), path)
    _assert_clean_failure(_cli("print", path), path)
    with open(path, "rb") as f:
        assert f.read() == data


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(LoadError, match="no such file"):
        irforge.load(tmp_path / "nope.onnx")
    with pytest.raises(LoadError, match="folder"):
        irforge.load(tmp_path)


VERIFY_ERRORS = {
    "cycle": (
        _model(
            [helper.make_node("Add", ["x", "b"], ["a"], name="n_add"), helper.make_node("Relu", ["a"], ["b"])],
            outputs=[helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
        ),
        ["[cycle]", "n_add"],
    ),
    "undefined input": (
        _model([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")]),
        ["[ssa]", "adder", "%ghost", "not defined"],
    ),
    "duplicate name": (
        _model([helper.make_node("Relu", ["x"], ["y"], name="r1"), helper.make_node("Neg", ["x"], ["y"], name="r2")]),
        ["[ssa]", "%y", "defined twice"],
    ),
    "type mismatch": (
        _model(
            [helper.make_node("Add", ["x", "i"], ["y"], name="mixed")],
            inputs=[
                helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                helper.make_tensor_value_info("i", TensorProto.INT64, [2]),
            ],
        ),
        ["[type]", "mixed", "%i", "INT64"],
    ),
    "wrong dtype for op": (
        _model(
            [helper.make_node("Relu", ["s"], ["y"], name="relu_str")],
            inputs=[helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
        ),
        ["[type]", "relu_str", "STRING"],
    ),
    "unknown domain": (
        _model(
            [helper.make_node("Frobnicate", ["x"], ["y"], domain="com.nowhere")], opsets=(("", 21), ("com.nowhere", 1))
        ),
        ["[unknown-domain]", "com.nowhere"],
    ),
    "domain not imported": (
        _model([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.nowhere")]),
        ["[opset]", "com.nowhere"],
    ),
    "unknown op": (
        _model([helper.make_node("NotAnOnnxOp", ["x"], ["y"], name="nope")]),
        ["[schema]", "NotAnOnnxOp"],
    ),
    "bad arity": (
        _model([helper.make_node("Add", ["x"], ["y"], name="half_add")]),
        ["[schema]", "half_add", "1 inputs"],
    ),
    "bad attribute": (
        _model([helper.make_node("Relu", ["x"], ["y"], name="r", alpha=1.0)]),
        ["[attribute]", "alpha"],
    ),
    "undefined output": (
        _model([helper.make_node("Relu", ["x"], ["z"])]),
        ["[ssa]", "output 0 %y"],
    ),
}


@pytest.mark.parametrize("case", sorted(VERIFY_ERRORS))
def test_invalid_models_fail_verification_with_specific_errors(tmp_path, case):
    data, needles = VERIFY_ERRORS[case]
    path = _write(tmp_path, "bad.onnx", data)
    model = irforge.load(path)
    with pytest.raises(VerificationError) as info:
        verify_model(model)
    for needle in needles:
        assert needle in str(info.value)
    proc = _cli("verify", path)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    for needle in needles:
        assert needle in proc.stdout
    _assert_clean_failure(_cli("optimize", path, "-o", str(tmp_path / "out.onnx")), needles[0])
    assert not (tmp_path / "out.onnx").exists()
    with open(path, "rb") as f:
        assert f.read() == data


def test_verify_reports_all_problems_at_once(tmp_path):
    data = _model(
        [
            helper.make_node("Add", ["x", "ghost"], ["a"], name="first"),
            helper.make_node("Relu", ["s"], ["y"], name="second"),
        ],
        inputs=[
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("s", TensorProto.STRING, [2]),
        ],
    )
    problems = verify_model(irforge.load(data), raise_on_error=False)
    assert {p.rule for p in problems} == {"ssa", "type"}, problems
    assert any("first" in str(p) for p in problems) and any("second" in str(p) for p in problems)


def test_opset_too_new_is_refused():
    data = _model([helper.make_node("Relu", ["x"], ["y"])], opsets=(("", 999),))
    with pytest.raises(LoadError, match="newer than this onnx package"):
        irforge.load(data)


def test_unconvertible_old_opset_is_a_clear_error():
    # ONNX's version converter has no adapter for Scatter-1 (removed in opset 11)
    data = _model([helper.make_node("Scatter", ["x", "x", "x"], ["y"])], opsets=(("", 1),))
    with pytest.raises(LoadError, match=r"cannot convert opset 1 to 13.*upgrade=False"):
        irforge.load(data)
    assert irforge.load(data, upgrade=False).opset_imports[""] == 1


def test_interpreter_errors_name_the_node():
    from irforge.core_ir import InterpreterError, interpret

    data = _model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshaper")],
        inits=[numpy_helper.from_array(np.array([3], np.int64), "shape")],
    )
    with pytest.raises(InterpreterError, match="reshaper"):
        interpret(irforge.load(data), [np.zeros(2, np.float32)])


def test_unknown_custom_op_in_interpreter_says_how_to_fix():
    from irforge.core_ir import InterpreterError, interpret

    data = _model([helper.make_node("Frob", ["x"], ["y"], domain="com.x")], opsets=(("", 21), ("com.x", 1)))
    with pytest.raises(InterpreterError, match="register_kernel"):
        interpret(irforge.load(data), [np.zeros(2, np.float32)])


def test_cli_without_arguments_prints_help():
    proc = _cli()
    assert proc.returncode == 0 and "usage" in proc.stdout


def test_onnx_checker_agrees_the_example_is_fine():
    onnx.checker.check_model(EXAMPLE, full_check=True)
    proc = _cli("verify", EXAMPLE)
    assert proc.returncode == 0 and "ok" in proc.stdout


@pytest.mark.parametrize("name", [b"relu1", b"probs", b"conv1.w", b"small_cnn"])
def test_strings_that_are_not_utf8_are_refused_with_the_field_named(tmp_path, name):
    """protobuf hands a proto2 string field that is not UTF-8 over as bytes; the loader must
    refuse it there, naming the field, not fail later in the printer or the saver."""
    damaged = GOOD.replace(name, b"\xff" * len(name))
    assert damaged != GOOD
    proc = _cli("print", _write(tmp_path, "bad.onnx", damaged))
    _assert_clean_failure(proc, "is not UTF-8 text", "model.graph.")
