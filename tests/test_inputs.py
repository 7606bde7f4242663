"""Bad calls of compiled models: every backend (and a plugin's, through the base class) refuses
each with one irforge error line naming the input, before its engine runs; runtimes' own errors
come back as irforge errors naming the node; the commands that run models say what is wrong with
``--dim`` and ``--inputs`` in one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import irforge
from irforge.backends import Backend, BackendError, Executable, InputError, UnsupportedError

BACKENDS = ["reference", "onnxruntime", "xla", "tvm", "plugin"]


def _model() -> irforge.Model:
    """y = x + b, with x and b both [batch,3,4] and an int64 count beside them."""
    nodes = [h.make_node("Add", ["x", "b"], ["y"], name="add"), h.make_node("Identity", ["n"], ["m"])]
    ins = [h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 4]),
           h.make_tensor_value_info("b", T.FLOAT, ["batch", 3, 4]), h.make_tensor_value_info("n", T.INT64, [])]
    outs = [h.make_tensor_value_info("y", T.FLOAT, ["batch", 3, 4]), h.make_tensor_value_info("m", T.INT64, [])]
    proto = h.make_model(h.make_graph(nodes, "g", ins, outs), opset_imports=[h.make_opsetid("", 17)])
    return irforge.from_onnx(proto)  # fmt: skip


class _NumpyBackend(Backend):
    """A plugin's backend: its executable declares nothing; irforge.compile fills the interface in."""

    name = "plugin"

    def unsupported(self, model):
        return []

    def compile(self, model, device="cpu"):
        def run(arrays):
            x, b, n = arrays
            return [x + b, n]

        return Executable(self.name, run, ["x", "b", "n"], ["y", "m"])


@pytest.fixture
def compiled(request, monkeypatch):
    name = request.param
    if name == "plugin":
        real = irforge.api.backend
        monkeypatch.setattr(irforge.api, "backend", lambda n: _NumpyBackend() if n == "plugin" else real(n))
    return irforge.compile(_model(), name)


X = np.ones((2, 3, 4), np.float32)
N = np.array(7, np.int64)
BAD = {
    "int64-for-float32": (dict(x=X.astype(np.int64), b=X, n=N),
                          r"input %x expects f32\[batch,3,4\], given i64\[2,3,4\]: the element types differ"),
    "float64-for-float32": (dict(x=X.astype(np.float64), b=X, n=N), r"input %x .* given f64\[2,3,4\]"),
    "float32-for-int64": (dict(x=X, b=X, n=N.astype(np.float32)), r"input %n expects i64\[\], given f32\[\]"),
    "wrong-rank": (dict(x=X[0], b=X, n=N),
                   r"input %x expects f32\[batch,3,4\] \(rank 3\), given f32\[3,4\] \(rank 2\)"),
    "wrong-static-dim": (dict(x=np.ones((2, 3, 5), np.float32), b=X, n=N), r"given f32\[2,3,5\]: dim 2 must be 4"),
    "image-too-small": (dict(x=np.ones((2, 3, 2), np.float32), b=X, n=N), r"dim 2 must be 4"),
    "batch-differs": (dict(x=X, b=np.ones((5, 3, 4), np.float32), n=N), r"input %b .* dim 0 is 'batch', which %x "
                      r"gave as 2"),
    "missing-name": (dict(x=X, b=X), r"inputs missing 'n'; the model takes x, b, n"),
    "unknown-name": (dict(x=X, b=X, n=N, z=X), r"inputs unknown 'z'"),
    "too-few-by-position": ((X, X), r"the model takes 3 input\(s\) \(x, b, n\), given 2"),
    "too-many-by-position": ((X, X, N, N), r"given 4"),
}  # fmt: skip


@pytest.mark.parametrize("compiled", BACKENDS, indirect=True)
@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_call_is_one_irforge_error_naming_the_input(compiled, case):
    given, message = BAD[case]
    with pytest.raises(InputError, match=message) as info:
        compiled(given) if isinstance(given, dict) else compiled(*given)
    assert str(info.value).startswith(f"{compiled.backend}: ") and "\n" not in str(info.value)
    assert isinstance(info.value, irforge.IrforgeError)


@pytest.mark.parametrize("compiled", BACKENDS, indirect=True)
def test_a_good_call_runs_by_position_by_name_and_from_python_numbers(compiled):
    want = 2 * X
    assert np.array_equal(compiled(X, X, N)[0], want)
    assert np.array_equal(compiled(x=X, b=X, n=N)[0], want)
    y, m = compiled(X.tolist(), X, 7)  # Python numbers have no dtype of their own: they take the declared one
    assert np.array_equal(y, want) and int(m) == 7
    y, _ = compiled.run({"x": X.astype(np.float64), "b": X, "n": N}, cast=True)  # an explicit cast is allowed
    assert y.dtype == np.float32 and np.array_equal(y, want)
    one = np.ones((1, 3, 4), np.float32)  # another batch in every input that names it
    assert compiled(one, one, N)[0].shape == (1, 3, 4)


def test_derived_dims_are_checked_once_their_names_are_bound():
    nodes = [h.make_node("Concat", ["x", "x"], ["c"], axis=0), h.make_node("Add", ["c", "z"], ["y"])]
    ins = [h.make_tensor_value_info("x", T.FLOAT, ["batch", 2]), h.make_tensor_value_info("z", T.FLOAT, ["2*batch", 2])]
    proto = h.make_model(h.make_graph(nodes, "g", ins, [h.make_tensor_value_info("y", T.FLOAT, None)]),
                         opset_imports=[h.make_opsetid("", 17)])  # fmt: skip
    exe = irforge.compile(irforge.from_onnx(proto), "reference")
    x = np.ones((3, 2), np.float32)
    assert exe(x, np.ones((6, 2), np.float32))[0].shape == (6, 2)
    with pytest.raises(InputError, match=r"input %z .* dim 0 is 2\*batch = 6"):
        exe(x, np.ones((5, 2), np.float32))


def _reshape_model() -> irforge.Model:
    nodes = [h.make_node("Reshape", ["x", "s"], ["y"], name="the-reshape")]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [2, 3]), h.make_tensor_value_info("s", T.INT64, [2])]
    proto = h.make_model(h.make_graph(nodes, "g", ins, [h.make_tensor_value_info("y", T.FLOAT, None)]),
                         opset_imports=[h.make_opsetid("", 17)])  # fmt: skip
    return irforge.from_onnx(proto)


@pytest.mark.parametrize("backend", ["onnxruntime", "xla", "tvm", "reference"])
def test_a_runtime_error_is_an_irforge_error_naming_the_node(backend):
    exe = irforge.compile(_reshape_model(), backend)
    assert exe(np.ones((2, 3), np.float32), np.array([3, 2]))[0].shape == (3, 2)
    with pytest.raises(irforge.IrforgeError, match='Reshape "the-reshape"') as info:
        exe(np.ones((2, 3), np.float32), np.array([4, 4]))
    said = str(info.value)
    assert "[ONNXRuntimeError]" not in said and ".cc:" not in said and ".h:" not in said and "\n" not in said


def _foreign(domain: str, op: str, dtype=T.FLOAT) -> irforge.Model:
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node(op, ["r"], ["y"], domain=domain, name="foreign")]
    proto = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", dtype, [2])],
                                      [h.make_tensor_value_info("y", dtype, None)]),
                         opset_imports=[h.make_opsetid("", 17), h.make_opsetid(domain, 1)])  # fmt: skip
    return irforge.from_onnx(proto)


@pytest.mark.parametrize(("domain", "op", "why"), [
    ("com.example", "Frob", "domain 'com.example' is not one onnxruntime has kernels for"),
    ("com.microsoft", "Frob", "onnxruntime has no CPU kernel com.microsoft::Frob"),
])  # fmt: skip
def test_onnxruntime_refuses_up_front_what_it_has_no_kernel_for(domain, op, why):
    model = _foreign(domain, op)
    problems = irforge.backend("onnxruntime").unsupported(model)
    assert [p.first_node for p in problems] == [f'{domain}::{op} "foreign"'] and why in problems[0].why
    with pytest.raises(UnsupportedError, match=why):
        irforge.compile(model, "onnxruntime")


def _one_node(op: str, dtype: int, shape: list[int]) -> irforge.Model:
    graph = h.make_graph([h.make_node(op, ["x"], ["y"])], "g", [h.make_tensor_value_info("x", dtype, shape)],
                         [h.make_tensor_value_info("y", dtype, None)])  # fmt: skip
    return irforge.from_onnx(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))


def test_onnxruntime_kernel_check_asks_about_the_input_types_and_passes_what_it_runs():
    (problem,) = irforge.backend("onnxruntime").unsupported(_one_node("Det", T.INT32, [2, 2]))
    assert "at input types i32 (opset 17)" in problem.why
    # no bfloat16 Exp kernel, but the backend computes it widened: not refused, and it runs
    exp = _one_node("Exp", T.BFLOAT16, [2])
    assert irforge.backend("onnxruntime").unsupported(exp) == []
    import ml_dtypes

    (y,) = irforge.compile(exp, "onnxruntime")(np.zeros(2, ml_dtypes.bfloat16))
    assert y.tolist() == [1.0, 1.0]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irforge.cli", *args], capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


def _archives(folder) -> dict[str, str]:
    paths = {}
    for name, arrays in {"ok": dict(image=np.ones((2, 3, 32, 32), np.float32)),
                         "small": dict(image=np.ones((1, 3, 16, 16), np.float32)),
                         "int64": dict(image=np.ones((1, 3, 32, 32), np.int64)),
                         "renamed": dict(input=np.ones((1, 3, 32, 32), np.float32))}.items():  # fmt: skip
        paths[name] = str(folder / f"{name}.npz")
        np.savez(paths[name], **arrays)
    paths["text"] = str(folder / "text.npz")
    (folder / "text.npz").write_text("not an archive")
    paths["pickle"] = str(folder / "pickle.npz")
    (folder / "pickle.npz").write_bytes(b"\x80\x04\x95" + b"\0" * 64)  # a pickle's first bytes
    paths["npy"] = str(folder / "one.npy")
    np.save(paths["npy"], np.ones(3))
    return paths


EXAMPLE = "examples/small_cnn.onnx"
CLI = {
    "dim-typo": (["--dim", "bach=1"], "--dim bach=1: the model has no dim 'bach' (its symbolic dims are batch); "
                 "did you mean 'batch'?"),
    "dim-not-a-size": (["--dim", "batch=two"], "--dim wants NAME=SIZE (e.g. batch=8), got 'batch=two'"),
    "inputs-text": (["--inputs", "{text}"], "text.npz: not an .npz archive of arrays by name (not a zip file at all)"),
    "inputs-pickle": (["--inputs", "{pickle}"], "pickle.npz: not an .npz archive of arrays by name"),
    "inputs-npy": (["--inputs", "{npy}"], "one.npy: one array (.npy), not an .npz archive"),
    "inputs-missing-file": (["--inputs", "{missing}"], "nothing.npz: no such file"),
    "inputs-renamed": (["--inputs", "{renamed}"], "renamed.npz has no array for image; holds arrays the model does "
                       "not take: input; the model takes image"),
    "inputs-small-image": (["--inputs", "{small}"], "input %image expects f32[batch,3,32,32], given f32[1,3,16,16]: "
                           "dim 2 must be 32"),
    "inputs-int64": (["--inputs", "{int64}"], "given i64[1,3,32,32]: the element types differ"),
    "inputs-contradict-dim": (["--inputs", "{ok}", "--dim", "batch=1"], "--dim batch=1, but the array given for "
                              "%image has 2 at dim 0 (batch)"),
}  # fmt: skip


@pytest.mark.parametrize("backend", ["xla", "onnxruntime"])
@pytest.mark.parametrize("case", list(CLI))
def test_cli_run_says_what_is_wrong_in_one_line(case, backend, tmp_path):
    args, message = CLI[case]
    paths = {**_archives(tmp_path), "missing": str(tmp_path / "nothing.npz")}
    done = _cli("run", EXAMPLE, "--backend", backend, "--repeat", "1", *(a.format(**paths) for a in args))
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr and done.stdout == "", done
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("irforge: error: ") and message in line, line


def test_cli_emit_refuses_dims_it_would_ignore():
    typo = _cli("emit", EXAMPLE, "--target", "hlo", "--dim", "bach=1")
    assert typo.returncode == 1 and "the model has no dim 'bach'" in typo.stderr, typo
    symbolic = _cli("emit", EXAMPLE, "--target", "stablehlo", "--dim", "batch=1")
    assert symbolic.returncode == 1 and "stablehlo keeps dims symbolic" in symbolic.stderr, symbolic


def test_cli_check_only_for_onnx_asks_onnxruntime(tmp_path):
    path = tmp_path / "foreign.onnx"
    onnx.save(irforge.to_onnx(_foreign("com.example", "Frob")), str(path))
    checked = _cli("emit", str(path), "--target", "onnx", "--check-only")
    assert checked.returncode == 1 and 'com.example::Frob (1 node, first com.example::Frob "foreign")' in checked.stdout
    ran = _cli("run", str(path), "--backend", "onnxruntime")
    assert ran.returncode == 1 and "Traceback" not in ran.stderr and "com.example::Frob" in ran.stderr, ran


IRVIZ = "import sys; from irforge.cli import irviz_main; sys.exit(irviz_main())"


@pytest.mark.parametrize(("args", "prefix"), [
    (["irforge.cli", "optimize", EXAMPLE, "-o", "/dev/null", "--pipeline", "dce,cse{x=1}"], "pipeline 'dce,cse{x=1}'"),
    (["irviz", EXAMPLE, "--step", "7", "--format", "dot", "-o", "/dev/null"], "irviz:"),
])  # fmt: skip
def test_no_message_repeats_its_prefix(args, prefix):
    command = ["-c", IRVIZ, *args[1:]] if args[0] == "irviz" else ["-m", *args]
    done = subprocess.run([sys.executable, *command], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done
    assert done.stderr.count(prefix) == 1, done.stderr


def test_a_failed_tvm_lowering_leaves_no_native_warning():
    code = ("import numpy as np, irforge, sys; sys.path.insert(0, 'tests'); from test_inputs import _reshape_model\n"
            "exe = irforge.compile(_reshape_model(), 'tvm')\n"
            "try: exe(np.ones((2, 3), np.float32), np.array([4, 4]))\n"
            "except irforge.IrforgeError as e: print('refused:', e)\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "refused: lowering Reshape" in done.stdout, done
    assert "BlockBuilder" not in done.stderr and "Warning" not in done.stderr, done.stderr


def test_backend_error_and_input_error_are_irforge_errors():
    assert issubclass(InputError, irforge.IrforgeError) and issubclass(BackendError, irforge.IrforgeError)
