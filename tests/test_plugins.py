"""Plugins: built-ins come through the hooks, duplicates name both plugins, and a separately
installed package is found through its ``irforge.plugins`` entry point."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from irforge.passes.dce import DeadCodeElimination
from irforge.plugins import PluginError, build_registry, hookimpl
from irforge.plugins.registry import BUILTIN

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "irforge-example-plugin"


def test_builtin_passes_are_registered_through_the_hooks():
    reg = build_registry(discover=False)
    assert reg.passes["dce"] is DeadCodeElimination
    assert reg.provider("passes", "dce") == BUILTIN


class _Duplicate:
    @hookimpl
    def irforge_register_passes(self):
        return [DeadCodeElimination]


def test_a_name_registered_twice_names_both_plugins():
    with pytest.raises(PluginError, match=r"pass 'dce' is registered twice: by irforge \(built-in\) and by \S+"):
        build_registry(discover=False, plugins=[_Duplicate()])


class _Broken:
    @hookimpl
    def irforge_register_passes(self):
        raise RuntimeError("boom")


def test_a_plugin_that_raises_is_named():
    with pytest.raises(PluginError, match="irforge_register_passes raised RuntimeError: boom"):
        build_registry(discover=False, plugins=[_Broken()])


def test_example_plugin_installed_from_examples_is_found_through_its_entry_point(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(EXAMPLE)],
        check=True,
    )
    script = textwrap.dedent(
        """
        import numpy as np
        from irforge.core_ir import Model, interpret, parse_graph
        from irforge.passes.manager import PassManager
        from irforge.plugins import default_registry

        reg = default_registry()
        assert reg.provider("passes", "example-drop-identity") == "irforge-example-plugin 0.1.0", reg.providers
        g = parse_graph(
            "graph @g(%x: f32[3]) {\\n  %a = Identity(%x)\\n  %b = Neg(%a)\\n  %c = Identity(%b)\\n  return %c\\n}\\n"
        )
        model = Model(g)
        x = np.array([1.0, -2.0, 3.0], np.float32)
        before = interpret(g, {"x": x})
        assert PassManager.parse("example-drop-identity,dce", reg.passes).run(model)
        assert [n.op_type for n in g] == ["Neg", "Identity"], [n.op_type for n in g]
        after = interpret(g, {"x": x})
        np.testing.assert_array_equal(after[0], before[0])
        print("found")
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "found"
