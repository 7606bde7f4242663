"""Decoder-only language models for generation, built from ``transformers`` configs with random
weights (fixed seed): GPT-2, Llama (grouped-query attention 8/2, RoPE, RMSNorm, SwiGLU) and Qwen2
(grouped-query attention with biased projections).  ``small=True`` is the tests' size (2 layers,
hidden 64); ``small=False`` the benchmark's (GPT-2 small, 124M parameters; a ~100M Llama).

End-of-sequence is switched off so every run makes the tokens asked for, as a benchmark must."""

from __future__ import annotations

import torch


def _ready(model):
    model.eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def gpt2(small: bool = True):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    c = GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=256, vocab_size=128) if small else GPT2Config()
    return _ready(GPT2LMHeadModel(c))


def _grouped_query(config_cls, model_cls, small: bool):
    """A Llama-shaped model (GQA, RoPE, RMSNorm, SwiGLU): the tests' 2-layer size or ~100M parameters."""
    torch.manual_seed(0)
    size = dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                intermediate_size=128, max_position_embeddings=256) if small else \
        dict(vocab_size=32000, hidden_size=768, num_hidden_layers=8, num_attention_heads=12, num_key_value_heads=4,
             intermediate_size=2048, max_position_embeddings=1024)  # fmt: skip
    return _ready(model_cls(config_cls(**size)))


def llama(small: bool = True):
    from transformers import LlamaConfig, LlamaForCausalLM

    return _grouped_query(LlamaConfig, LlamaForCausalLM, small)


def qwen2(small: bool = True):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return _grouped_query(Qwen2Config, Qwen2ForCausalLM, small)


LMS = {"gpt2": gpt2, "llama": llama, "qwen2": qwen2}


def prompt(length: int, vocab: int, seed: int = 1) -> torch.Tensor:
    """A ``[1, length]`` prompt of random token ids."""
    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(seed))
