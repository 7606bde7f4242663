"""The hostile-input corpus (tests/hostile/corpus.py): each case runs the irforge command in a
subprocess under a time limit and an address-space limit, and must end in its specific
one-line irforge error (or succeed, where the right answer is a result), never a hang, a crash
or a traceback; every file of the case is byte-for-byte the same afterwards."""

from __future__ import annotations

import hashlib
import os
import resource
import stat
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "hostile"))
from corpus import CASES

SECONDS = 120
MEMORY = 6 * 2**30  # address space: a case that tries to allocate its declared terabytes fails fast


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _digests(folder: str) -> dict[str, str]:
    out = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        mode = os.lstat(path).st_mode
        if stat.S_ISREG(mode) and not stat.S_ISLNK(mode):
            with open(path, "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
        else:
            out[name] = f"mode {mode:o}"
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_input_gets_its_error_and_is_left_as_it_was(case, tmp_path):
    folder = tmp_path / case.name
    folder.mkdir()
    model = case.build(str(folder))
    before = _digests(str(folder))
    args = [a.format(model=model, out=str(tmp_path / "out.onnx")) for a in case.command]
    done = subprocess.run([sys.executable, "-m", "irforge.cli", *args], capture_output=True, text=True,
                          timeout=SECONDS, preexec_fn=_limits, check=False)  # fmt: skip
    output = done.stdout + done.stderr
    assert "Traceback" not in output and "RecursionError" not in output, output[-3000:]
    if case.expect == "ok":
        assert done.returncode == 0, output[-3000:]
    else:
        assert done.returncode == 1, output[-3000:]
        errors = [line for line in output.splitlines() if line.startswith("irforge: error:") or "problem" in line]
        assert errors, output[-3000:]
        assert case.expect in output, output[-3000:]
    assert _digests(str(folder)) == before
