"""The -O2 fusions match what irforge's JAX frontend writes for the same layers: GELU (erf via
erfc, and tanh), layer and RMS norms (means as sums over counts, weights as [1, 1, hidden]),
attention (softmax in pieces, projections as dense dot_generals) and a dense layer + SiLU.  The
fused model computes what the jaxpr does on the reference interpreter and xla."""

from __future__ import annotations

from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import irforge
from irforge.core_ir import interpret
from irforge.testing import assert_close

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 6, 32)).astype(np.float32)
W = [(RNG.standard_normal((32, 32)) * 0.2).astype(np.float32) for _ in range(4)]
SCALE, SHIFT = RNG.standard_normal(32).astype(np.float32), RNG.standard_normal(32).astype(np.float32)


def _layer_norm(x):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * SCALE + SHIFT


def _rms_norm(x):
    return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * SCALE


def _attention(x):
    def heads(t):
        return t.reshape(2, 6, 4, 8).transpose(0, 2, 1, 3)

    q, k, v = (heads(x @ W[i]) for i in range(3))
    p = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(8.0), axis=-1)
    return (p @ v).transpose(0, 2, 1, 3).reshape(2, 6, 32) @ W[3]


LAYERS = {
    "gelu (erf)": (lambda x: jax.nn.gelu(x, approximate=False), {"::Gelu": 1}),
    "gelu (tanh)": (lambda x: jax.nn.gelu(x, approximate=True), {"::Gelu": 1}),
    "layer norm": (_layer_norm, {"::LayerNormalization": 1}),
    "rms norm": (_rms_norm, {"irforge::RMSNormalization": 1}),
    "attention": (_attention, {"irforge::Attention": 1, "::Split": 1}),
    "dense + silu": (lambda x: jax.nn.silu(x @ W[0]), {"irforge::FusedMatMul": 1}),
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_jax_layers_fuse_at_o2(layer):
    fn, fused = LAYERS[layer]
    model = irforge.from_jax(fn, X)
    want = [np.asarray(fn(X))]
    irforge.optimize(model, "-O2")
    ops = Counter(f"{n.domain}::{n.op_type}" for n in model.graph)
    assert all(ops[op] == count for op, count in fused.items()), ops
    assert not {"::Softmax", "::Erf", "::ReduceSum", "::ReduceMean", "::Einsum"} & set(ops), ops
    assert_close(want, interpret(model, [X]), f"{layer} (reference interpreter)")
    assert_close(want, irforge.compile(model, "xla")(X), f"{layer} (xla)")
