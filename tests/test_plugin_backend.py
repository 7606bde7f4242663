"""A backend from a third-party package is a target like a built-in one: it shows up in
``irforge optimize --help``'s ``--target`` choices, in ``emit`` and ``run``, and it refuses what its
rule table cannot take before anything runs."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_plugins import _package

PLUGIN = '''
"""A toy backend: numpy kernels in an irforge rule table, one closure per node."""

import numpy as np

from irforge.backends import Artifact, Backend, Executable, RuleTable
from irforge.core_ir.dtypes import DataType
from irforge.plugins import hookimpl

RULES = RuleTable("toy", "toy", frozenset({DataType.FLOAT}))


@RULES.rule("MatMul")
def _matmul(ctx, node, args):
    return [np.matmul(*args)]


def _gemm_check(node):
    return None if node.attr("transA", 0) == 0 else "Gemm with transA"


@RULES.rule("Gemm", check=_gemm_check)
def _gemm(ctx, node, args):
    b = args[1].T if node.attr("transB", 0) else args[1]
    y = node.attr("alpha", 1.0) * (args[0] @ b)
    return [y + node.attr("beta", 1.0) * args[2] if len(args) > 2 and args[2] is not None else y]


@RULES.rule("Add")
def _add(ctx, node, args):
    return [np.add(*args)]


@RULES.rule("Relu", check=lambda node: None if node.name != "refuse-me" else "a node named refuse-me")
def _relu(ctx, node, args):
    return [np.maximum(args[0], 0)]


class ToyBackend(Backend):
    name = "toy"
    targets = ("toy-text",)
    lowering = "lower-fused{target=toy},cse,dce"  # a pipeline naming the plugin's own target
    inlines_functions = True  # fused ops arrive as their decompositions
    expands_functions = True

    def supported_ops(self):
        return RULES.supported_ops()

    def unsupported(self, model):
        return RULES.unsupported(model)

    def lower(self, model, target=None):
        return Artifact("toy-text", "\\n".join(n.op_type for n in model.graph))

    def compile(self, model, device="cpu"):
        graph = model.graph
        names = [v.name for v in graph.inputs if not v.is_initializer()]

        def run(arrays):
            env = {v: v.const_value.numpy() for v in graph.initializers.values()}
            env.update({v: a for v, a in zip([v for v in graph.inputs if not v.is_initializer()], arrays)})
            for node in graph:
                outs = RULES[node.op_type].fn(None, node, [env[v] for v in node.inputs])
                env.update(zip(node.outputs, outs))
            return [env[v] for v in graph.outputs]

        return Executable(self.name, run, names, [v.name for v in graph.outputs])


@hookimpl
def irforge_register_backends():
    return [("toy", ToyBackend())]
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    pkg = _package(root, "irforge-toy-backend", "irforge_toy_backend", PLUGIN, "toy")
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(pkg)],
                   check=True)  # fmt: skip
    return target


def _model(path, relu_name: str = "relu") -> str:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"], name=relu_name)]  # fmt: skip
    graph = helper.make_graph(nodes, "toy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w, b])  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def _irforge(site, *args):
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([sys.executable, "-m", "irforge.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)  # fmt: skip


def test_a_plugin_backend_is_a_target_of_optimize_and_runs(site, tmp_path):
    helptext = _irforge(site, "optimize", "--help")
    assert helptext.returncode == 0, helptext.stderr
    assert "--target {onnxruntime,reference,stablehlo,toy,tvm,xla}" in helptext.stdout
    model = _model(tmp_path / "m.onnx")
    out = _irforge(site, "optimize", model, "-o", str(tmp_path / "o.onnx"), "-O2", "--target", "toy")
    assert out.returncode == 0, out.stderr
    ran = _irforge(site, "run", str(tmp_path / "o.onnx"), "--backend", "toy", "--repeat", "1")
    assert ran.returncode == 0, ran.stderr
    assert "max |toy - reference|:" in ran.stdout, ran.stdout
    error = float(ran.stdout.split("max |toy - reference|:")[1].split()[0])
    assert error < 1e-5, ran.stdout
    emitted = _irforge(site, "emit", model, "--target", "toy-text")
    assert emitted.returncode == 0 and emitted.stdout.split() == ["MatMul", "Add", "Relu"], emitted


def test_a_plugin_backend_refuses_up_front_what_its_rules_refuse(site, tmp_path):
    model = _model(tmp_path / "r.onnx", relu_name="refuse-me")
    checked = _irforge(site, "emit", model, "--target", "toy-text", "--check-only")
    assert checked.returncode == 1
    assert 'Relu (1 node, first Relu "refuse-me")' in checked.stdout and "a node named refuse-me" in checked.stdout
    ran = _irforge(site, "run", model, "--backend", "toy")
    assert ran.returncode == 1 and "the toy backend cannot take 1 op kind(s)" in ran.stderr, ran


def test_without_the_plugin_the_target_is_a_clear_error(tmp_path):
    model = _model(tmp_path / "m.onnx")
    proc = subprocess.run([sys.executable, "-m", "irforge.cli", "optimize", model, "-o", str(tmp_path / "o.onnx"),
                           "--target", "toy"], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 2 and "invalid choice: 'toy'" in proc.stderr
