"""The folder layout is the architecture (DESIGN.md, "Layout"): these tests read every ``import``
in ``irforge/`` (lazy ones inside functions too) and hold the layers to it."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent / "irforge"
TOP_OF_THE_STACK = {"irforge", "api", "cli", "generation"}
"""``irforge`` (its ``__init__`` re-exports the API), the API module, the CLI and the recipes built
on the API (``generation``: import, compile and run a decoding loop): they may import anything."""
SHARED_BACKEND_MODULES = {"base", "inputs", "table", "static_operands"}
"""What every backend builds on; every other entry of ``irforge/backends/`` is one backend."""


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """module -> the irforge modules it imports (``from x import name`` counts name when it is a module)."""
    modules = {_module(p): p for p in ROOT.rglob("*.py")}
    out: dict[str, set[str]] = {}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                found.add(target)
                found.update(f"{target}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
        out[mod] = {t for t in found if t in modules and t != mod}
    return out


IMPORTS = _imports()


def _layer(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "irforge"


def _backend(mod: str) -> str | None:
    parts = mod.split(".")
    if len(parts) < 3 or parts[1] != "backends" or parts[2] in SHARED_BACKEND_MODULES:
        return None
    return parts[2]


def test_no_import_cycle_spans_two_top_level_subpackages():
    layers = nx.DiGraph()
    for mod, targets in IMPORTS.items():
        for t in targets:
            if _layer(mod) != _layer(t):
                layers.add_edge(_layer(mod), _layer(t), example=(mod, t))
    cycles = list(nx.simple_cycles(layers))
    described = [" -> ".join(f"{a} ({layers.edges[a, b]['example'][0]})"
                             for a, b in zip(c, [*c[1:], c[0]], strict=True)) for c in cycles]  # fmt: skip
    assert not cycles, described


def test_nothing_below_the_api_imports_it():
    wrong = sorted((m, t) for m, ts in IMPORTS.items() for t in ts
                   if _layer(t) in TOP_OF_THE_STACK and _layer(m) not in TOP_OF_THE_STACK | {"testing"})  # fmt: skip
    assert not wrong, wrong


def test_no_backend_imports_another_backend():
    wrong = sorted((m, t) for m, ts in IMPORTS.items() for t in ts
                   if _backend(m) and _backend(t) and _backend(m) != _backend(t))  # fmt: skip
    assert not wrong, wrong
    assert {_backend(m) for m in IMPORTS} - {None} == {"onnx", "reference", "stablehlo", "tvm"}


def test_only_the_api_the_cli_and_the_registry_import_plugins():
    allowed = {"plugins", "api", "cli"}
    wrong = sorted((m, t) for m, ts in IMPORTS.items() for t in ts
                   if _layer(t) == "plugins" and _layer(m) not in allowed)  # fmt: skip
    assert not wrong, wrong


def test_core_ir_and_ops_know_nothing_above_them():
    below = {"core_ir": {"core_ir"}, "ops": {"core_ir", "ops"}}
    wrong = sorted((m, t) for m, ts in IMPORTS.items() for t in ts
                   if _layer(m) in below and _layer(t) not in below[_layer(m)])  # fmt: skip
    assert not wrong, wrong


def test_no_module_is_over_a_thousand_lines():
    long = {str(p.relative_to(ROOT.parent)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 1000}  # fmt: skip
    assert not long, long


def test_frontend_op_tables_are_split_by_family():
    """A converter lives in its family's module (elementwise, nn, linalg, ...), never in the package's
    ``__init__``, which only gathers them."""
    from irforge.frontends.jax import ops as jax_ops
    from irforge.frontends.torch import ops as torch_ops

    tables = {"irforge.frontends.torch.ops": torch_ops.TABLE, "irforge.frontends.jax.ops": jax_ops.TABLE}
    for package, table in tables.items():
        modules = {fn.__module__ for fn in table.values()}
        assert package not in modules and len(modules) >= 8, sorted(modules)
        assert all(m.startswith(package + ".") for m in modules), sorted(modules)


def test_the_test_sees_the_tree():
    """The checks above read real imports: a known edge is there."""
    assert "irforge.backends.table" in IMPORTS["irforge.backends.tvm.rules.common"]
    assert "irforge.plugins" in IMPORTS["irforge.api"]
