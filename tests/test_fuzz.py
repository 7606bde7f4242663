"""Fuzzing the two readers of untrusted bytes, the ONNX loader and the IR text parser: mutated
seed inputs (byte flips, cuts, splices, repeated spans) must load, or fail with an irforge
error; anything else (an IndexError, a RecursionError, a hang) is a bug, and a crash found here
becomes a case of tests/hostile/corpus.py.

CI runs a fixed, derandomized budget; ``IRFORGE_FUZZ_EXAMPLES=100000 pytest tests/test_fuzz.py``
runs a long campaign."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import irforge
from irforge.core_ir import IrforgeError, parse_model, print_model, verify_model

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "hostile"))
import corpus

EXAMPLES = int(os.environ.get("IRFORGE_FUZZ_EXAMPLES", "400"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip


def _seeds(tmp: str) -> list[bytes]:
    out = [corpus._example()]
    for case in corpus.CASES:
        if case.name.startswith(("external-", "concat-", "if-nested-", "2gib", "random", "truncated")):
            continue  # big, or needing files beside them: the corpus test has them
        folder = os.path.join(tmp, case.name)
        os.makedirs(folder, exist_ok=True)
        with open(case.build(folder), "rb") as f:
            out.append(f.read())
    return out


SEEDS: list[bytes] = []
TEXTS: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _seeded(tmp_path_factory):
    SEEDS[:] = _seeds(str(tmp_path_factory.mktemp("seeds")))  # a global: a failure prints the edits, not the seeds
    for i, seed in enumerate(SEEDS):  # the text seeds: the models that are valid, the example in full
        try:
            model = irforge.from_onnx(seed)
        except IrforgeError:
            continue
        if not verify_model(model, raise_on_error=False):
            TEXTS.append(print_model(model, elide_above=None if i == 0 else 8))
    assert len(TEXTS) >= 3


def _mutations(seed_count: int):
    """A seed and a list of edits: (kind, position as a fraction, length, byte)."""
    edit = st.tuples(st.sampled_from(["flip", "cut", "insert", "repeat", "truncate"]), st.floats(0, 1),
                     st.integers(1, 64), st.integers(0, 255))  # fmt: skip
    return st.tuples(st.integers(0, seed_count - 1), st.lists(edit, min_size=1, max_size=6))


def _mutate(data: bytes, edits) -> bytes:
    buf = bytearray(data)
    for kind, where, length, byte in edits:
        if not buf:
            break
        i = min(int(where * len(buf)), len(buf) - 1)
        if kind == "flip":
            buf[i] ^= byte or 1
        elif kind == "cut":
            del buf[i : i + length]
        elif kind == "insert":
            buf[i:i] = bytes([byte]) * length
        elif kind == "repeat":
            buf[i:i] = buf[i : i + length] * 3
        else:
            del buf[i:]
    return bytes(buf)


def _must_load_or_refuse(data: bytes) -> None:
    try:  # a model that loads can be checked and printed, or is refused with an irforge error
        model = irforge.from_onnx(data)
        verify_model(model, raise_on_error=False)
        print_model(model, elide_above=8)
    except IrforgeError:
        return


@FUZZ
@given(st.data())
def test_the_onnx_loader_loads_or_refuses_mutated_models(data):
    index, edits = data.draw(_mutations(len(SEEDS)))
    _must_load_or_refuse(_mutate(SEEDS[index], edits))


def _must_parse_or_refuse(text: str) -> None:
    try:
        model = parse_model(text)
        verify_model(model, raise_on_error=False)
        print_model(model)
    except IrforgeError:
        return


@FUZZ
@given(st.data())
def test_the_text_parser_parses_or_refuses_mutated_text(data):
    index, edits = data.draw(_mutations(len(TEXTS)))
    text = _mutate(TEXTS[index].encode(), edits).decode("utf-8", "replace")
    _must_parse_or_refuse(text)
