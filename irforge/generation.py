"""Greedy decoding of a ``transformers`` causal language model, imported and compiled once.

A language model is used one token at a time: a *prefill* step reads the prompt and fills the
key/value cache, then a *decode* step reads one token and the cache and returns the next logits
and the cache grown by one position.  :func:`compile_causal_lm` imports both steps through
:func:`irforge.from_torch` (the cache passed as ``transformers``' own cache object), optimizes
and compiles them for a backend, and :meth:`CausalLM.generate` runs the loop, each step's
``new_<input>`` outputs fed back as the next step's inputs.

Two caches, because the engines compile differently:

- ``"static"``: a ``StaticCache`` of ``max_length`` positions, written in place at its filled
  length.  Every decode step has the same shapes, so XLA and TVM compile it once.
- ``"dynamic"``: a ``DynamicCache`` that grows by concatenation, its length a named dim
  ``past``.  onnxruntime runs any length without recompiling; XLA would compile each length.

``cache="auto"`` takes the dynamic cache on onnxruntime and the static one elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .core_ir.errors import IrforgeError
from .core_ir.model import Model

CACHES = ("auto", "static", "dynamic")
"""The kinds of key/value cache :func:`compile_causal_lm` takes."""

__all__ = ["CACHES", "CausalLM", "GenerationError", "compile_causal_lm"]


class GenerationError(IrforgeError, ValueError):
    """A generation request the compiled model cannot serve (a prompt longer than its cache, ...)."""


@dataclass
class CausalLM:
    """A causal LM's prefill and decode steps, compiled for one backend.

    ``prefill``/``decode`` are the imported (optimized) models, ``prefill_exe``/``decode_exe``
    their executables; ``max_length`` bounds prompt plus new tokens for a static cache."""

    backend: str
    cache: str
    max_length: int
    prefill: Model
    decode: Model
    prefill_exe: Any
    decode_exe: Any
    start: dict[str, np.ndarray] = field(default_factory=dict)
    """The cache inputs of the prefill step as they start (zeros and a filled length of 0)."""

    @property
    def compilations(self) -> int:
        """Engine compilations so far, both steps together: a decode loop adds none."""
        return self.prefill_exe.compilations + self.decode_exe.compilations

    def generate(self, input_ids, max_new_tokens: int, *, eos_token_id: int | None = None) -> np.ndarray:
        """``input_ids`` (``[1, prompt]``) followed by up to ``max_new_tokens`` tokens chosen
        greedily (the argmax of each step's logits, as ``generate(do_sample=False)``), stopping
        after ``eos_token_id`` when one is given."""
        ids = np.asarray(input_ids)
        if ids.ndim != 2 or ids.shape[0] != 1 or ids.shape[1] < 1:
            raise GenerationError(f"input_ids must be one prompt of shape [1, length], given shape {list(ids.shape)}")
        if ids.dtype.kind not in "iu":
            raise GenerationError(f"input_ids must be integer token ids, given {ids.dtype}")
        ids = ids.astype(np.int64)
        if max_new_tokens < 0:
            raise GenerationError(f"max_new_tokens must be 0 or more, given {max_new_tokens}")
        total = ids.shape[1] + max_new_tokens
        if self.cache == "static" and total > self.max_length:
            raise GenerationError(f"a prompt of {ids.shape[1]} tokens and {max_new_tokens} new ones need {total} "
                                  f"cache positions; this model was compiled with max_length={self.max_length}: "
                                  "compile with a larger max_length, or ask for fewer tokens")  # fmt: skip
        if max_new_tokens == 0:
            return ids
        outputs = self.prefill_exe({"input_ids": ids, **self.start})
        state = _carried(self.prefill_exe.output_names, outputs, self.decode_exe.input_names)
        tokens = [int(np.argmax(outputs[0][0, -1]))]
        while len(tokens) < max_new_tokens and tokens[-1] != eos_token_id:
            outputs = self.decode_exe({"input_ids": np.asarray([[tokens[-1]]], np.int64), **state})
            state = _carried(self.decode_exe.output_names, outputs, self.decode_exe.input_names)
            tokens.append(int(np.argmax(outputs[0][0, -1])))
        return np.concatenate([ids, np.asarray([tokens], np.int64)], axis=1)


def _carried(output_names: list[str], outputs: list, input_names: list[str]) -> dict[str, Any]:
    """The decode step's cache inputs from a step's outputs: ``new_<name>`` (or ``<name>``) for each."""
    by_name = dict(zip(output_names, outputs, strict=True))
    carried = {}
    for name in input_names:
        if name == "input_ids":
            continue
        value = by_name.get(f"new_{name}", by_name.get(name))
        if value is None:
            raise GenerationError(f"the step returns no value for the decode input {name!r}; its outputs are "
                                  f"{', '.join(output_names)}")  # fmt: skip
        carried[name] = value
    return carried


def compile_causal_lm(model, backend: str = "onnxruntime", *, cache: str = "auto", max_length: int = 256,
                      pipeline: str = "-O2") -> CausalLM:  # fmt: skip
    """Import ``model`` (a ``transformers`` causal LM, e.g. ``GPT2LMHeadModel``,
    ``LlamaForCausalLM``) as a prefill step and a decode step, optimize both with ``pipeline``
    and compile them for ``backend``.  ``cache`` is ``"static"`` (``max_length`` positions,
    compiled once on every engine), ``"dynamic"`` (any length; suits onnxruntime) or ``"auto"``."""
    import torch
    from torch.export import Dim
    from transformers import DynamicCache, StaticCache

    from . import api
    from .frontends.torch.caches import register_cache_pytrees

    register_cache_pytrees()
    api.backend(backend)  # an unknown backend is refused before the (slow) import
    if not hasattr(getattr(model, "config", None), "get_text_config") or not hasattr(model, "generate"):
        raise GenerationError(f"compile_causal_lm takes a transformers causal LM (GPT2LMHeadModel, LlamaForCausalLM, "
                              f"...), got {type(model).__name__}")  # fmt: skip
    if cache not in CACHES:
        raise GenerationError(f"unknown cache {cache!r}; choose one of {', '.join(CACHES)}")
    if cache == "auto":
        cache = "dynamic" if backend == "onnxruntime" else "static"
    if max_length < 2:
        raise GenerationError(f"max_length must be 2 or more, given {max_length}")
    config = model.config.get_text_config(decoder=True)
    model = model.eval()
    example = torch.zeros((1, 2), dtype=torch.int64)
    prompt = Dim("prompt", min=2, max=max_length)
    step = torch.zeros((1, 1), dtype=torch.int64)
    with torch.no_grad():
        if cache == "static":
            kv = StaticCache(config=config, max_cache_len=max_length)
            heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
            head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
            dtype = next(model.parameters()).dtype
            kv.early_initialization(1, heads, head_dim, dtype, torch.device("cpu"))
            zeros = torch.utils._pytree.tree_leaves(kv)
            shapes = [None] * len(zeros)
            prefill = api.from_torch(model, example_kwargs=dict(input_ids=example, cache=kv, use_cache=True,
                                                                logits_to_keep=1),
                                     dynamic_shapes=dict(input_ids={1: prompt}, cache=shapes, use_cache=None,
                                                         logits_to_keep=None))  # fmt: skip
            decode = api.from_torch(model, example_kwargs=dict(input_ids=step, cache=kv, use_cache=True,
                                                               logits_to_keep=1))  # fmt: skip
        else:
            filled = model(torch.zeros((1, 2), dtype=torch.int64), use_cache=True).past_key_values
            if not isinstance(filled, DynamicCache):
                raise GenerationError(f"{type(model).__name__} returns a {type(filled).__name__}, not a "
                                      "DynamicCache: use cache='static'")  # fmt: skip
            spec = torch.utils._pytree.tree_structure(filled)  # [key_cache list, value_cache list]
            shapes = [[{2: Dim.DYNAMIC}] * child.num_children for child in spec.children()]
            prefill = api.from_torch(model, example_kwargs=dict(input_ids=example, use_cache=True, logits_to_keep=1),
                                     dynamic_shapes=dict(input_ids={1: prompt}, use_cache=None,
                                                         logits_to_keep=None))  # fmt: skip
            decode = _import_decode(model, dict(input_ids=step, cache=filled, use_cache=True, logits_to_keep=1),
                                    dict(input_ids=None, cache=shapes, use_cache=None, logits_to_keep=None))
    prefill = api.optimize(prefill, pipeline, target=backend) if pipeline else prefill
    decode = api.optimize(decode, pipeline, target=backend) if pipeline else decode
    start = {}
    if cache == "static":
        names = [v.name for v in prefill.graph.inputs if v.name != "input_ids"]
        start = {n: np.zeros_like(z.numpy()) for n, z in zip(names, zeros, strict=True)}
    return CausalLM(backend, cache, max_length, prefill, decode, api.compile(prefill, backend),
                    api.compile(decode, backend), start)  # fmt: skip


def _import_decode(model, kwargs: dict, dynamic_shapes: dict) -> Model:
    """The dynamic-cache decode step, its cache length named ``past``.  Exported with
    ``Dim.DYNAMIC`` rather than a named ``Dim``: grouped-query attention makes torch emit a guard
    (``min(16+16*past, 32+32*past) == 16+16*past``) its solver cannot prove for a named dim, and
    each cache tensor then gets a symbol of its own, all of which are the one length ``past``."""
    import torch

    from .frontends.torch import _export_failed, import_program

    try:
        ep = torch.export.export(model, (), kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as e:
        raise _export_failed(model, e) from e
    names = {}
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder" and node.name.startswith("cache_") and getattr(val, "ndim", 0) == 4:
            expr = getattr(getattr(val.shape[2], "node", None), "expr", None)
            if getattr(expr, "is_Symbol", False):
                names[str(expr)] = "past"
    return import_program(ep, dim_names=names)
