"""The guides run: every code block in docs/*.md is executed, in order, in a fresh folder beside
a copy of the examples, so a guide that drifts from the code fails here.

A ```python block runs in one namespace per page; a block whose info string names a file
(```toml file=PATH) is written to PATH instead; a ```bash block runs under ``bash -e`` with this
environment's commands first on PATH; a block without a language is grammar, not code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(page: Path) -> list[tuple[str, dict[str, str], str]]:
    out = []
    for m in FENCE.finditer(page.read_text(encoding="utf-8")):
        words = m.group(1).split()
        lang = words[0] if words else ""
        opts = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        out.append((lang, opts, m.group(2)))
    return out


def test_the_guides_are_there():
    assert {p.name for p in PAGES} >= {"writing-a-pass.md", "pipelines.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_code_block_runs(page, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("irforge-example-plugin"))
    monkeypatch.chdir(work)
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    module = types.ModuleType(f"docs_{page.stem.replace('-', '_')}")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look their module up
    namespace = module.__dict__
    ran = 0
    for i, (lang, opts, code) in enumerate(blocks(page)):
        where = f"{page.name}, block {i + 1} ({lang or 'text'})"
        if "file" in opts:
            target = work / opts["file"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code, encoding="utf-8")
        elif lang == "python":
            exec(compile(code, where, "exec"), namespace)
            ran += 1
        elif lang == "bash":
            proc = subprocess.run(["bash", "-e", "-c", code], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=300, check=False)  # fmt: skip
            assert proc.returncode == 0, f"{where} failed:\n{code}\n{proc.stdout}\n{proc.stderr}"
            ran += 1
        elif lang:
            raise AssertionError(f"{where}: a {lang!r} block must name a file (file=PATH) or be python/bash")
    assert ran > 0
