"""Generation with a key/value cache: ``transformers``' cache objects import through
``irforge.from_torch`` with their dims named, and :mod:`irforge.generation` makes exactly the
tokens ``generate(do_sample=False)`` makes, on every engine, compiling each step once."""

from __future__ import annotations

import functools
import os
import sys

import numpy as np
import pytest
import torch
from torch.export import Dim

import irforge
from irforge.backends import InputError
from irforge.frontends import FrontendError
from irforge.generation import GenerationError, compile_causal_lm

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import causal_lms

ENGINES = ["onnxruntime", "xla", "tvm"]
NEW_TOKENS = 32


@functools.cache
def _lm(arch: str):
    return causal_lms.LMS[arch](small=True)


@functools.cache
def _expected(arch: str) -> np.ndarray:
    model = _lm(arch)
    ids = causal_lms.prompt(7, model.config.vocab_size)
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    return out.numpy()


@functools.cache
def _compiled(arch: str, engine: str, cache: str = "auto"):
    return compile_causal_lm(_lm(arch), engine, cache=cache, max_length=64)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("arch", sorted(causal_lms.LMS))
def test_greedy_tokens_are_transformers_tokens(arch, engine):
    expected = _expected(arch)
    lm = _compiled(arch, engine)
    assert lm.cache == ("dynamic" if engine == "onnxruntime" else "static")
    got = lm.generate(expected[:, :7], NEW_TOKENS)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_both_caches_run_on_onnxruntime(cache):
    expected = _expected("llama")
    got = _compiled("llama", "onnxruntime", cache).generate(expected[:, :7], NEW_TOKENS)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("engine", ["xla", "tvm"])
def test_the_decode_loop_never_recompiles(engine):
    lm = _compiled("gpt2", engine)
    prompt = _expected("gpt2")[:, :7]
    lm.generate(prompt, NEW_TOKENS)
    once = lm.compilations
    assert once == 2, f"{engine}: {once} compilations for one prefill and {NEW_TOKENS - 1} decode steps"
    lm.generate(prompt, NEW_TOKENS)
    assert lm.compilations == once
    lm.generate(_expected("gpt2")[:, :5], 8)  # a new prompt length: XLA compiles the prefill for it
    assert lm.compilations - once == (1 if engine == "xla" else 0)


def test_dynamic_cache_imports_with_the_users_dim_names():
    model = _lm("gpt2")
    with torch.no_grad():
        cache = model(torch.zeros((1, 3), dtype=torch.int64), use_cache=True).past_key_values
    past = Dim("past", min=1, max=100)
    step = dict(input_ids=torch.zeros((1, 1), dtype=torch.int64), cache=cache, use_cache=True)
    shapes = dict(input_ids=None, cache=[[{2: past}] * 2] * 2, use_cache=None)
    imported = irforge.from_torch(model, example_kwargs=step, dynamic_shapes=shapes)
    inputs = {v.name: v.type.shape for v in imported.graph.inputs}
    assert inputs["cache_key_cache_0"] == (1, 4, "past", 16)
    assert inputs["cache_value_cache_1"] == (1, 4, "past", 16)
    outputs = {v.name: v.type.shape for v in imported.graph.outputs}
    assert outputs["logits"] == (1, 1, 128)
    assert outputs["new_cache_key_cache_0"] == (1, 4, "past + 1", 16)


def test_dim_names_survive_args_kwargs_and_nesting():
    class Pairs(torch.nn.Module):
        def forward(self, x, pair, *, extra):
            return x.sum(1) + pair[0].sum(1) + pair[1]["v"].sum(1) + extra.sum(1)

    batch, length = Dim("batch"), Dim("length")
    x = torch.randn(3, 4)
    imported = irforge.from_torch(Pairs(), (x, (x, {"v": x})), example_kwargs={"extra": torch.randn(3, 5)},
                                  dynamic_shapes={"x": {0: batch}, "pair": ({0: batch}, {"v": {0: batch, 1: None}}),
                                                  "extra": {0: batch, 1: length}})  # fmt: skip
    assert [v.type.shape for v in imported.graph.inputs] == [("batch", 4)] * 3 + [("batch", "length")]


def test_static_cache_writes_become_outputs():
    lm = _compiled("llama", "xla")
    inputs = [v.name for v in lm.decode.graph.inputs]
    outputs = [v.name for v in lm.decode.graph.outputs]
    caches = [n for n in inputs if n.startswith("cache_")]
    assert len(caches) == 3 * 2  # keys, values and filled length of each of the 2 layers
    assert outputs == ["logits", *(f"new_{n}" for n in caches)]
    shapes = {v.name: v.type.shape for v in lm.decode.graph.inputs}
    assert shapes["cache_keys_0"] == (1, 2, 64, 8)


def test_an_in_place_update_the_caller_never_sees_is_refused():
    class Hidden(torch.nn.Module):
        def forward(self, x, counter):
            counter.add_(1)
            return x * 2

    with pytest.raises(FrontendError, match="in-place update of input 'counter' that the program does not return"):
        irforge.from_torch(Hidden(), (torch.randn(2), torch.zeros((), dtype=torch.int64)), decompose=False)


def test_a_prompt_longer_than_the_static_cache_is_refused_before_running():
    lm = _compiled("gpt2", "xla")
    before = lm.compilations
    with pytest.raises(GenerationError, match="need 70 cache positions; this model was compiled with max_length=64"):
        lm.generate(np.zeros((1, 40), np.int64), 30)
    assert lm.compilations == before


@pytest.mark.parametrize(("ids", "match"), [(np.zeros((2, 3), np.int64), r"one prompt of shape \[1, length\]"),
                                           (np.zeros((1, 3), np.float32), "integer token ids")])  # fmt: skip
def test_a_malformed_prompt_is_refused(ids, match):
    with pytest.raises(GenerationError, match=match):
        _compiled("gpt2", "onnxruntime").generate(ids, 4)


def test_a_cache_of_the_wrong_dtype_or_layer_count_is_refused():
    lm = _compiled("llama", "onnxruntime")
    feeds = {"input_ids": np.zeros((1, 1), np.int64)}
    for name in lm.decode_exe.input_names[1:]:
        feeds[name] = np.zeros((1, 2, 3, 8), np.float64)
    with pytest.raises(InputError, match="cache_key_cache_0 expects f32"):
        lm.decode_exe(feeds)
    fewer = {n: v.astype(np.float32) for n, v in feeds.items() if not n.endswith("_1")}
    with pytest.raises(InputError, match="missing 'cache_key_cache_1'"):
        lm.decode_exe(fewer)


def test_unknown_cache_kind_is_refused():
    with pytest.raises(GenerationError, match="unknown cache 'paged'"):
        compile_causal_lm(_lm("gpt2"), "xla", cache="paged")


def test_an_unknown_backend_or_a_model_that_is_no_language_model_is_refused():
    with pytest.raises(irforge.IrforgeError, match="xlaa"):
        compile_causal_lm(_lm("gpt2"), "xlaa")
    with pytest.raises(GenerationError, match="takes a transformers causal LM"):
        compile_causal_lm(torch.nn.Linear(2, 2), "xla")
