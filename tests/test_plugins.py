"""Plugins: built-ins come through the hooks, duplicates name both plugins, and a separately
installed package is found through its ``irforge.plugins`` entry point."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import irforge
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


def _package(root, name: str, module: str, code: str, entry: str):
    pkg = root / name
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{name}"
        version = "0.2.0"
        [project.entry-points."irforge.plugins"]
        {entry} = "{module}"
        """))  # fmt: skip
    (pkg / f"{module}.py").write_text(textwrap.dedent(code))
    return pkg


@pytest.fixture(scope="module")
def site_with_a_broken_plugin(tmp_path_factory):
    """The example plugin, one that raises on import and one whose hook raises, installed side by side."""
    root = tmp_path_factory.mktemp("plugins")
    broken = _package(root, "irforge-broken-plugin", "broken_plugin", "raise ImportError('no module named foo')\n",
                      "broken")  # fmt: skip
    raising = _package(root, "irforge-raising-plugin", "raising_plugin", """
        from irforge.plugins import hookimpl

        @hookimpl
        def irforge_register_passes():
            raise RuntimeError("registry exploded")
        """, "raising")  # fmt: skip
    site = root / "site"
    for pkg in (EXAMPLE, broken, raising):
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(pkg)],
                       check=True)  # fmt: skip
    return site


def _irforge(site, *args, env=None):
    env = {**os.environ, "PYTHONPATH": str(site), **(env or {})}
    return subprocess.run([sys.executable, "-m", "irforge.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)  # fmt: skip


def test_a_broken_plugin_is_one_warning_and_the_others_still_work(site_with_a_broken_plugin, tmp_path):
    site = site_with_a_broken_plugin
    listing = _irforge(site, "plugins")
    assert listing.returncode == 0, listing.stderr
    assert "example  [irforge-example-plugin 0.1.0]  loaded" in listing.stdout
    assert "broken  [irforge-broken-plugin 0.2.0]  failed" in listing.stdout
    assert "could not be loaded: ImportError: no module named foo" in listing.stdout
    assert "raising  [irforge-raising-plugin 0.2.0]  failed" in listing.stdout
    warnings = listing.stderr.strip().splitlines()
    assert len(warnings) == 2, listing.stderr  # one line per failed plugin, no Python warning format
    assert warnings[0].startswith("irforge: warning: plugin 'broken' (distribution irforge-broken-plugin) could "
                                  "not be loaded: ImportError: no module named foo")  # fmt: skip
    assert "irforge_register_passes raised RuntimeError: registry exploded" in warnings[1]

    example = Path(__file__).resolve().parent.parent / "examples" / "small_cnn.onnx"
    run = _irforge(site, "optimize", str(example), "-o", str(tmp_path / "o.onnx"),
                   "--pipeline", "example-drop-identity,O1")  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "example-drop-identity" not in run.stderr and len(run.stderr.strip().splitlines()) == 2

    passes = _irforge(site, "passes").stdout
    assert "example-drop-identity  [irforge-example-plugin 0.1.0]" in passes and "constant-fold" in passes


def test_plugins_are_turned_off_by_name(site_with_a_broken_plugin):
    site = site_with_a_broken_plugin
    quiet = _irforge(site, "-p", "no:broken", "-p", "no:irforge-raising-plugin", "plugins")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert "broken  [irforge-broken-plugin 0.2.0]  disabled" in quiet.stdout
    by_env = _irforge(site, "passes", env={"IRFORGE_DISABLE_PLUGINS": "example,broken,raising"})
    assert by_env.stderr == "" and "example-drop-identity" not in by_env.stdout


def test_version_names_onnx_onnxruntime_and_every_plugin(site_with_a_broken_plugin):
    out = _irforge(site_with_a_broken_plugin, "--version").stdout
    assert out.startswith(f"irforge {irforge.__version__}\n")
    plugins = ("  plugin example: irforge-example-plugin 0.1.0", "  plugin broken: irforge-broken-plugin 0.2.0")
    for line in ("  onnx ", "  onnxruntime ", "  jax ", "  apache-tvm ", *plugins):
        assert line in out, out


def test_a_failing_plugin_does_not_stop_the_python_api(site_with_a_broken_plugin):
    script = (
        "import warnings, irforge\n"
        "from irforge.plugins import PluginWarning, default_registry\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    reg = default_registry()\n"
        "assert sorted(p.name for p in reg.failed) == ['broken', 'raising'], reg.plugins\n"
        "assert all(issubclass(x.category, PluginWarning) for x in w) and len(w) == 2\n"
        "assert 'example-drop-identity' in reg.passes and 'dce' in reg.passes\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site_with_a_broken_plugin)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False)
    assert proc.stdout.strip() == "ok", proc.stderr
