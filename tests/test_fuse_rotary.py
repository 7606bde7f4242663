"""fuse-rotary: rotary position embeddings in primitives (``transformers``' ``apply_rotary_pos_emb``,
hand-written and through torch.export) become one irforge::RotaryEmbedding, which onnxruntime runs
as its RotaryEmbedding kernel.  Near misses stay."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import irforge
from irforge.core_ir import interpret, parse_model
from irforge.testing import assert_close, assert_preserves_semantics

_ANGLES = np.outer(np.arange(5), 1.0 / 10000 ** (np.arange(0, 8, 2) / 8))
_COS = np.cos(np.concatenate([_ANGLES, _ANGLES], -1)).astype(np.float32)
_SIN = np.sin(np.concatenate([_ANGLES, _ANGLES], -1)).astype(np.float32)


def _dense(a: np.ndarray) -> str:
    return f"dense<f32[1,1,5,8]>[{', '.join(repr(float(v)) for v in a.reshape(-1))}]"


_ROPE = """model {{
  opset "" = 18
  graph @g(%x: f32[2,3,5,8]) {{
    init %cos = {cos}
    init %sin = {sin}
    init %zero = dense<i64[1]>[0]
    init %half = dense<i64[1]>[{half}]
    init %end = dense<i64[1]>[{end}]
    init %axis = dense<i64[1]>[-1]
    init %one = dense<i64[1]>[1]
    %first = Slice(%x, %zero, %half, %axis, %one)
    %second = Slice(%x, %half, %end, %axis, %one)
    %neg = Neg(%second)
    %rot = Concat({rotated}) <axis = -1>
    %a = Mul(%x, %cos)
    %b = Mul(%rot, %sin)
    %y = Add(%a, %b)
    return %y{extra}
  }}
}}"""


def _rope(half=4, rotated="%neg, %first", extra="", cos=_COS, sin=_SIN):
    return _ROPE.format(half=half, end=2**63 - 1, rotated=rotated, extra=extra, cos=_dense(cos), sin=_dense(sin))


def test_a_rotary_embedding_in_primitives_becomes_one_op_and_onnxruntime_s_kernel():
    text = _rope()
    model = parse_model(text)
    irforge.optimize(model, "fuse-rotary,dce")
    assert [f"{n.domain}::{n.op_type}" for n in model.graph] == ["irforge::RotaryEmbedding"]
    assert_preserves_semantics("fuse-rotary,dce", text)
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 8)).astype(np.float32)
    want = interpret(parse_model(text), [x])
    irforge.optimize(model, "lower-fused{target=onnxruntime},dce")
    assert [f"{n.domain}::{n.op_type}" for n in model.graph] == ["com.microsoft::RotaryEmbedding"]
    assert_close(want, irforge.compile(model, "onnxruntime")(x), "onnxruntime's RotaryEmbedding")
    assert_close(want, interpret(model, [x]), "its reference kernel")


def test_tables_that_are_not_a_rotary_cache_stay_a_call_on_onnxruntime():
    cos = _COS.copy()
    cos[:, :4] *= 0.5  # halves differ: no cache of half the head dim describes it
    text = _rope(cos=cos)
    model = parse_model(text)
    irforge.optimize(model, "fuse-rotary,lower-fused{target=onnxruntime},dce")
    assert [f"{n.domain}::{n.op_type}" for n in model.graph] == ["irforge::RotaryEmbedding"]
    assert_preserves_semantics("fuse-rotary,lower-fused{target=onnxruntime},dce", text)


@pytest.mark.parametrize("case", [
    {"rotated": "%first, %neg"},  # the halves in the other order: the rotation's inverse
    {"half": 3},  # halves of unequal size
    {"extra": ", %neg"},  # an intermediate is read elsewhere
])  # fmt: skip
def test_near_misses_stay(case):
    text = _rope(**case)
    model = parse_model(text)
    irforge.optimize(model, "fuse-rotary")
    assert "Neg" in {n.op_type for n in model.graph}
    assert_preserves_semantics("fuse-rotary", text)


def _rotate_half(x):
    return torch.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)


class _Rope(torch.nn.Module):
    """Q and K rotated as ``transformers`` does, positions 0 .. seq - 1."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cos", torch.from_numpy(_COS))
        self.register_buffer("sin", torch.from_numpy(_SIN))

    def forward(self, q, k):
        return q * self.cos + _rotate_half(q) * self.sin, k * self.cos + _rotate_half(k) * self.sin


def test_transformers_rotary_embedding_fuses_through_from_torch_and_runs_everywhere():
    q, k = (torch.randn(1, 4, 5, 8, generator=torch.Generator().manual_seed(i)) for i in range(2))
    model = irforge.from_torch(_Rope(), (q, k))
    want = interpret(model, [q.numpy(), k.numpy()])
    fused = irforge.optimize(model, "-O3")
    assert sum(n.op_type == "RotaryEmbedding" for n in fused.graph) == 2
    for backend in ("xla", "tvm", "onnxruntime"):
        got = irforge.compile(fused, backend)(q.numpy(), k.numpy())
        assert_close(want, got, f"fused rotary embedding on {backend}")
    again = irforge.optimize(irforge.from_torch(_Rope(), (q, k)), "-O3")
    assert sum(n.op_type == "RotaryEmbedding" for n in irforge.optimize(again, "-O3").graph) == 2  # its body inlined
    lowered = irforge.optimize(irforge.from_torch(_Rope(), (q, k)), "-O3", target="onnxruntime")
    assert sum(n.op_type == "RotaryEmbedding" and n.domain == "com.microsoft" for n in lowered.graph) == 2
    assert_close(want, irforge.compile(lowered, "onnxruntime")(q.numpy(), k.numpy()), "RotaryEmbedding kernels")
