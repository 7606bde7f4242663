"""``irforge import``: a module or function named as MODULE:FACTORY, saved as ONNX that runs and
matches the framework; bad names and missing shapes are one-line errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import irforge

IRFORGE = [sys.executable, "-m", "irforge.cli"]

MODELS = textwrap.dedent('''
    import jax.numpy as jnp
    import torch


    def cnn():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                   torch.nn.Flatten()).eval()


    def mlp():
        return lambda x: jnp.tanh(x @ jnp.arange(8.0).reshape(4, 2))
''')


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "mymodels.py").write_text(MODELS)
    return tmp_path


def _irforge(folder, *args):
    return subprocess.run([*IRFORGE, *args], cwd=folder, capture_output=True, text=True)


def test_import_a_torch_module_with_a_named_batch_and_run_it(folder):
    done = _irforge(folder, "import", "mymodels:cnn", "--framework", "torch", "--example-shape", "2,3,16,16",
                    "--dynamic", "0:0=batch", "-O", "2", "-o", "cnn.onnx")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "inputs input: f32[batch,3,16,16]" in done.stdout
    model = irforge.load(folder / "cnn.onnx")
    sys.path.insert(0, str(folder))
    try:
        import mymodels
        import torch

        x = np.random.default_rng(0).standard_normal((5, 3, 16, 16)).astype(np.float32)
        with torch.no_grad():
            want = mymodels.cnn()(torch.from_numpy(x)).numpy()
    finally:
        sys.path.remove(str(folder))
    np.testing.assert_allclose(irforge.interpret(model, {"input": x})[0], want, rtol=1e-4, atol=1e-5)


def test_an_import_with_every_dim_fixed_says_how_to_name_the_batch(folder):
    done = _irforge(folder, "import", "mymodels:cnn", "--framework", "torch", "--example-shape", "1,3,16,16",
                    "-o", "cnn.onnx")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "inputs input: f32[1,3,16,16]" in done.stdout
    assert "--dynamic 0:0=batch, with an example of size 2 or more" in done.stderr
    named = _irforge(folder, "import", "mymodels:cnn", "--framework", "torch", "--example-shape", "2,3,16,16",
                     "--dynamic", "0:0=batch", "-o", "cnn.onnx")  # fmt: skip
    assert named.returncode == 0 and "note:" not in named.stderr, named.stderr


def test_import_a_jax_function(folder):
    done = _irforge(folder, "import", "mymodels:mlp", "--framework", "jax", "--example-shape", "3,4",
                    "--dynamic", "0:0=n", "-o", "mlp.onnx")  # fmt: skip
    assert done.returncode == 0, done.stderr
    model = irforge.load(folder / "mlp.onnx")
    x = np.ones((6, 4), np.float32)
    want = np.tanh(x @ np.arange(8.0, dtype=np.float32).reshape(4, 2))
    np.testing.assert_allclose(irforge.interpret(model, {"arg0": x})[0], want, rtol=1e-5)


@pytest.mark.parametrize(("args", "message"), [
    (["nosuch:cnn", "--framework", "torch"], "cannot import 'nosuch'"),
    (["mymodels:cnn", "--framework", "torch"], "give the example input shapes"),
    (["mymodels:cnn", "--framework", "torch", "--example-shape", "1,x"], "--example-shape wants sizes"),
    (["mymodels:cnn", "--framework", "torch", "--example-shape", "1,3,8,8", "--dtype", "floaty"],
     "--dtype wants a numpy dtype name"),
    (["mymodels:cnn", "--framework", "torch", "--example-shape", "1,3,8,8", "--dynamic", "batch"],
     "--dynamic wants INPUT:AXIS=NAME"),
])  # fmt: skip
def test_bad_arguments_are_one_line_errors(folder, args, message):
    done = _irforge(folder, "import", *args, "-o", "out.onnx")
    assert done.returncode != 0
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (Path(folder) / "out.onnx").exists()
