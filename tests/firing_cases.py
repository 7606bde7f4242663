"""Small models on which each built-in pass fires: the cases that prove a pass does something,
and that a broken pass changes some number.

Each case is IR text with random, seeded weights filled in by :func:`model` (``RANDOM`` marks
a payload to draw), so a rewrite that gets one weight wrong changes the outputs.  The node-suite
grid and the rollback tests both use them; ``test_every_pass_fires_on_its_cases`` holds each
pass to its cases.
"""

from __future__ import annotations

import re

import numpy as np

import irforge
from irforge.core_ir import Model, parse_model

_HEAD = 'model {\n  opset "" = 21\n'

CONV_BN = """  graph @conv_bn(%x: f32[2,3,8,8]) {
    init %w = RANDOM<f32[4,3,3,3]>
    init %b = RANDOM<f32[4]>
    init %scale = RANDOM<f32[4]>
    init %bias = RANDOM<f32[4]>
    init %mean = RANDOM<f32[4]>
    init %var = POSITIVE<f32[4]>
    init %k = RANDOM<f32[4,1,1]>
    %c = Conv(%x, %w, %b) <pads = ints[1, 1, 1, 1]>
    %n = BatchNormalization(%c, %scale, %bias, %mean, %var) <epsilon = 0.001>
    %s = Mul(%n, %k)
    %y = Relu(%s)
    return %y
  }
"""

PAD_CONV = """  graph @pad_conv(%x: f32[2,3,7,6]) {
    init %w = RANDOM<f32[4,3,3,3]>
    init %b = RANDOM<f32[4]>
    init %pads = dense<i64[8]>[0, 0, 1, 2, 0, 0, 0, 1]
    %p = Pad(%x, %pads)
    %c = Conv(%p, %w, %b) <pads = ints[1, 0, 1, 0]>
    return %c
  }
"""

MATMUL_ADD = """  graph @linear(%x: f32[2,5,8]) {
    init %w1 = RANDOM<f32[8,6]>
    init %b1 = RANDOM<f32[6]>
    init %w2 = RANDOM<f32[6,4]>
    init %b2 = RANDOM<f32[4]>
    %h = MatMul(%x, %w1)
    %hb = Add(%h, %b1)
    %g = Tanh(%hb)
    %o = MatMul(%g, %w2)
    %y = Add(%o, %b2)
    return %y
  }
"""

FOLD = """  graph @fold(%x: f32[4]) {
    init %a = RANDOM<f32[4]>
    init %b = RANDOM<f32[4]>
    %c = Add(%a, %b)
    %d = Exp(%c)
    %s = Shape(%x)
    %e = Mul(%x, %d)
    %y = Reshape(%e, %s)
    return %y
  }
"""

CANONICAL = """  graph @canon(%x: f32[3,4]) {
    init %one = dense<f32[]>[1.0]
    %i = Identity(%x)
    %n1 = Neg(%i)
    %n2 = Neg(%n1)
    %m = Mul(%n2, %one)
    %t1 = Transpose(%m) <perm = ints[1, 0]>
    %t2 = Transpose(%t1) <perm = ints[1, 0]>
    %y = Relu(%t2)
    return %y
  }
"""

CSE = """  graph @cse(%x: f32[3,4], %z: f32[3,4]) {
    %a = Sigmoid(%x)
    %b = Sigmoid(%x)
    %c = Add(%a, %z)
    %d = Add(%b, %z)
    %y = Mul(%c, %d)
    return %y
  }
"""

DEAD = """  graph @dead(%x: f32[3,4]) {
    init %unused = RANDOM<f32[3]>
    %a = Exp(%x)
    %dead1 = Log(%a)
    %dead2 = Abs(%dead1)
    %y = Relu(%a)
    return %y
  }
"""

SHAPES = """  graph @shapes(%x: f32[2,3]) {
    init %w = RANDOM<f32[3,5]>
    %a = MatMul(%x, %w)
    %b = Softmax(%a) <axis = 1>
    %y = Transpose(%b) <perm = ints[1, 0]>
    return %y
  }
"""

RESHAPES = """  graph @reshapes(%x: f32[2,3,4]) {
    init %flat = dense<i64[2]>[6, 4]
    init %back = dense<i64[3]>[2, 3, 4]
    init %half = dense<f32[]>[0.5]
    %f = Reshape(%x, %flat)
    %r = Relu(%f)
    %m = Mul(%r, %half)
    %y = Reshape(%m, %back)
    return %y
  }
"""

FUNCTION = """  opset "local" = 1
  func local::@scaled_tanh(%a) with {opsets = {"": 21}} {
    %t = Tanh(%a)
    %b = Add(%t, %a)
    return %b
  }
  graph @calls(%x: f32[3]) {
    %u = local::scaled_tanh(%x)
    %y = local::scaled_tanh(%u)
    return %y
  }
"""

COMPOSED = """  graph @composed(%x: f32[2,3,8]) {
    init %scale = RANDOM<f32[8]>
    init %bias = RANDOM<f32[8]>
    %n = LayerNormalization(%x, %scale, %bias) <axis = -1>
    %g = Gelu(%n)
    %h = HardSwish(%g)
    %y = Softmax(%h) <axis = 1>
    return %y
  }
"""

ACTIVATIONS = """  graph @activations(%x: f32[2,3,8,8], %v: f32[2,5,8]) {
    init %w1 = RANDOM<f32[4,3,3,3]>
    init %b1 = RANDOM<f32[4]>
    init %w2 = RANDOM<f32[4,4,1,1]>
    init %lo = dense<f32[]>[0.0]
    init %hi = dense<f32[]>[0.5]
    init %w3 = RANDOM<f32[4,2,3,3]>
    init %b3 = RANDOM<f32[4]>
    init %wg = RANDOM<f32[6,4]>
    init %bg = RANDOM<f32[6]>
    init %wm = RANDOM<f32[8,3]>
    init %wt = RANDOM<f32[8,2]>
    %c1 = Conv(%x, %w1, %b1) <pads = ints[1, 1, 1, 1]>
    %r1 = Relu(%c1)
    %c2 = Conv(%r1, %w2)
    %r2 = Clip(%c2, %lo, %hi)
    %c3 = Conv(%r2, %w3, %b3) <strides = ints[2, 2], pads = ints[1, 1, 1, 1], group = 2>
    %r3 = HardSigmoid(%c3) <alpha = 0.3, beta = 0.4>
    %p = GlobalAveragePool(%r3)
    %f = Flatten(%p)
    %g = Gemm(%f, %wg, %bg) <transB = 1, alpha = 0.5>
    %y1 = LeakyRelu(%g) <alpha = 0.2>
    %m = MatMul(%v, %wm)
    %s = Sigmoid(%m)
    %y2 = Mul(%m, %s)
    %t = MatMul(%v, %wt)
    %y3 = Gelu(%t) <approximate = "tanh">
    return %y1, %y2, %y3
  }
"""

GELUS = """  graph @gelus(%x: f32[2,8]) {
    init %root2 = dense<f32[]>[1.4142135]
    init %one = dense<f32[]>[1.0]
    init %half = dense<f32[]>[0.5]
    init %three = dense<f32[]>[3.0]
    init %cubic = dense<f32[]>[0.044715]
    init %sqrt2pi = dense<f32[]>[0.7978846]
    %d = Div(%x, %root2)
    %e = Erf(%d)
    %a = Add(%e, %one)
    %m = Mul(%x, %a)
    %y1 = Mul(%m, %half)
    %c = Pow(%x, %three)
    %s = Mul(%c, %cubic)
    %i = Add(%x, %s)
    %k = Mul(%i, %sqrt2pi)
    %t = Tanh(%k)
    %u = Add(%t, %one)
    %h = Mul(%x, %half)
    %y2 = Mul(%h, %u)
    return %y1, %y2
  }
"""

NORMS = """  graph @norms(%x: f32[2,3,8], %r: f32[2,3,8]) {
    init %axes = dense<i64[1]>[-1]
    init %two = dense<f32[]>[2.0]
    init %eps = dense<f32[]>[1e-05]
    init %gamma = RANDOM<f32[8]>
    init %beta = RANDOM<f32[8]>
    %mean = ReduceMean(%x, %axes)
    %d = Sub(%x, %mean)
    %sq = Pow(%d, %two)
    %var = ReduceMean(%sq, %axes)
    %ve = Add(%var, %eps)
    %std = Sqrt(%ve)
    %n = Div(%d, %std)
    %s = Mul(%n, %gamma)
    %y1 = Add(%s, %beta)
    %sum = Add(%y1, %r)
    %y2 = LayerNormalization(%sum, %gamma, %beta) <axis = -1>
    return %y2
  }
"""

ATTENTION = """  graph @attention(%q: f32[2,3,5,4], %k: f32[2,3,5,4], %v: f32[2,3,5,4], %mask: f32[2,1,1,5]) {
    init %c = dense<f32[]>[2.0]
    %kt = Transpose(%k) <perm = ints[0, 1, 3, 2]>
    %s = MatMul(%q, %kt)
    %d = Div(%s, %c)
    %a = Add(%d, %mask)
    %p = Softmax(%a) <axis = -1>
    %y = MatMul(%p, %v)
    return %y
  }
"""

RMS_NORM = """  graph @rms_norm(%x: f32[2,3,8]) {
    init %axes = dense<i64[1]>[-1]
    init %two = dense<f32[]>[2.0]
    init %eps = dense<f32[]>[1e-06]
    init %w = RANDOM<f32[8]>
    %sq = Pow(%x, %two)
    %ms = ReduceMean(%sq, %axes)
    %ve = Add(%ms, %eps)
    %rt = Sqrt(%ve)
    %inv = Reciprocal(%rt)
    %n = Mul(%x, %inv)
    %y = Mul(%w, %n)
    return %y
  }
"""

ROTARY = """  graph @rotary(%x: f32[1,2,4,8]) {
    init %cos = RANDOM<f32[1,1,4,8]>
    init %sin = RANDOM<f32[1,1,4,8]>
    init %zero = dense<i64[1]>[0]
    init %half = dense<i64[1]>[4]
    init %end = dense<i64[1]>[8]
    init %axis = dense<i64[1]>[-1]
    %first = Slice(%x, %zero, %half, %axis)
    %second = Slice(%x, %half, %end, %axis)
    %neg = Neg(%second)
    %rot = Concat(%neg, %first) <axis = -1>
    %a = Mul(%x, %cos)
    %b = Mul(%rot, %sin)
    %y = Add(%a, %b)
    return %y
  }
"""

MATMUL_SCALE = """  graph @matmul_scale(%x: f32[2,5,8]) {
    init %w1 = RANDOM<f32[8,6]>
    init %w2 = RANDOM<f32[6,4]>
    init %c = dense<f32[]>[0.125]
    init %d = dense<f32[]>[3.0]
    %s = Mul(%x, %c)
    %h = MatMul(%s, %w1)
    %t = Tanh(%h)
    %o = MatMul(%t, %w2)
    %y = Div(%o, %d)
    return %y
  }
"""

PRECISION = """  graph @precision(%x: f32[2,5,8]) {
    init %w1 = RANDOM<f32[8,6]>
    init %b1 = RANDOM<f32[6]>
    init %w2 = RANDOM<f32[6,4]>
    %h = MatMul(%x, %w1)
    %a = Add(%h, %b1)
    %r = Relu(%a)
    %s = Softmax(%r)
    %o = MatMul(%s, %w2)
    %y = Sigmoid(%o)
    return %y
  }
"""

JAX_REDUCTIONS = """  graph @jax_reductions(%x: f32[2,3,8]) {
    init %axes = dense<i64[1]>[2]
    init %n = dense<f32[]>[8.0]
    %s: f32[2,3] = ReduceSum(%x, %axes) <keepdims = 0>
    %u: f32[2,3,1] = Unsqueeze(%s, %axes)
    %m: f32[2,3,1] = Div(%u, %n)
    %d: f32[2,3,8] = Sub(%x, %m)
    %e: f32[2,3,8] = Exp(%d)
    %t: f32[2,3] = ReduceSum(%e, %axes) <keepdims = 0>
    %v: f32[2,3,1] = Unsqueeze(%t, %axes)
    %y: f32[2,3,8] = Div(%e, %v)
    return %y
  }
"""

PAD_POOLS = """  graph @pad_pools(%x: f32[2,3,8,8]) {
    init %pads = dense<i64[8]>[0, 0, 1, 1, 0, 0, 1, 1]
    init %low = dense<f32[]>[-inf]
    %p = Pad(%x, %pads)
    %a = AveragePool(%p) <kernel_shape = ints[3, 3]>
    %q = Pad(%a, %pads, %low)
    %y = MaxPool(%q) <kernel_shape = ints[3, 3], strides = ints[2, 2]>
    return %y
  }
"""

STANDALONE_BN = """  graph @standalone_bn(%x: f32[2,4,5,5]) {
    init %scale = RANDOM<f32[4]>
    init %bias = RANDOM<f32[4]>
    init %mean = RANDOM<f32[4]>
    init %var = POSITIVE<f32[4]>
    %r: f32[2,4,5,5] = Relu(%x)
    %n = BatchNormalization(%r, %scale, %bias, %mean, %var) <epsilon = 0.001>
    %y = Sigmoid(%n)
    return %y
  }
"""

PROJECTIONS = """  graph @projections(%x: f32[2,5,8]) {
    init %wq = RANDOM<f32[8,8]>
    init %wk = RANDOM<f32[8,8]>
    init %wv = RANDOM<f32[8,4]>
    init %bq = RANDOM<f32[8]>
    init %bk = RANDOM<f32[8]>
    init %bv = RANDOM<f32[4]>
    %q0 = MatMul(%x, %wq)
    %q = Add(%q0, %bq)
    %k0 = MatMul(%x, %wk)
    %k = Add(%k0, %bk)
    %v0 = MatMul(%x, %wv)
    %v = Add(%v0, %bv)
    %s = Mul(%q, %k)
    return %s, %v
  }
"""

LAYOUT = """  graph @layout(%x: f32[2,3,8,8]) {
    init %w = RANDOM<f32[4,3,3,3]>
    init %b = RANDOM<f32[4]>
    init %k = RANDOM<f32[4,1,1]>
    %c: f32[2,4,8,8] = Conv(%x, %w, %b) <pads = ints[1, 1, 1, 1]>
    %r: f32[2,4,8,8] = Relu(%c)
    %s: f32[2,4,8,8] = Mul(%r, %k)
    %m: f32[2,4,4,4] = MaxPool(%s) <kernel_shape = ints[2, 2], strides = ints[2, 2]>
    %g: f32[2,4,1,1] = GlobalAveragePool(%m)
    %y: f32[2,4] = Flatten(%g)
    return %y
  }
"""

TRANSPOSES = """  graph @transposes(%x: f32[2,3,4,5], %z: f32[2,3,4,5]) {
    init %k = RANDOM<f32[5,1,1]>
    %t = Transpose(%x) <perm = ints[0, 3, 1, 2]>
    %u = Transpose(%z) <perm = ints[0, 3, 1, 2]>
    %a = Add(%t, %u)
    %s = Mul(%a, %k)
    %r = Relu(%s)
    %y = Transpose(%r) <perm = ints[0, 2, 3, 1]>
    return %y
  }
"""

CASES: dict[str, dict[str, str]] = {
    "fuse-conv-bn": {"conv-bn-scale": CONV_BN},
    "fuse-pad-conv": {"pad-conv": PAD_CONV, "pad-pools": PAD_POOLS},
    "fuse-activation": {"activations": ACTIVATIONS},
    "fuse-gelu": {"gelus": GELUS},
    "fuse-layer-norm": {"norms": NORMS},
    "fuse-attention": {"attention": ATTENTION},
    "fuse-rms-norm": {"rms-norm": RMS_NORM},
    "fuse-rotary": {"rotary": ROTARY},
    "fold-matmul-scale": {"scaled-linear-layers": MATMUL_SCALE},
    "convert-layout": {"small-cnn": LAYOUT},
    "convert-precision": {"mlp-with-softmax": PRECISION},
    "normalize-reductions": {"mean-and-softmax": JAX_REDUCTIONS},
    "expand-batchnorm": {"standalone-bn": STANDALONE_BN},
    "combine-parallel-matmul": {"qkv-projections": PROJECTIONS},
    "fuse-elementwise": {"mlp-with-softmax": PRECISION, "small-cnn": LAYOUT},
    "cancel-transposes": {"transposed-residual": TRANSPOSES},
    "lower-fused": {"fused-activations": ACTIVATIONS},  # fused first
    "fuse-matmul-add": {"linear-layers": MATMUL_ADD},
    "cancel-reshapes": {"reshape-relu-reshape": RESHAPES},
    "constant-fold": {"constants": FOLD},
    "canonicalize": {"identities": CANONICAL},
    "cse": {"duplicates": CSE},
    "dce": {"dead-nodes": DEAD},
    "shape-inference": {"untyped": SHAPES, "linear-layers": MATMUL_ADD},
    "inline-functions": {"function-calls": FUNCTION},
    "freeze-initializers": {"ir3-weights": CONV_BN},  # loaded as IR 3 with weights among the inputs
    "topological-sort": {"out-of-order": DEAD},  # reversed after loading
    "expand-functions": {"ops-with-bodies": COMPOSED},
}
"""Pass name → case name → IR text of the graph (functions and opsets before it)."""


def _fill(text: str, rng: np.random.Generator) -> str:
    def draw(m: re.Match) -> str:
        kind, dtype, dims = m.group(1), m.group(2), m.group(3)
        shape = [int(d) for d in dims.split(",")] if dims else []
        data = rng.standard_normal(shape)
        if kind == "POSITIVE":
            data = np.abs(data) + 0.5
        values = ", ".join(repr(float(np.float32(v))) for v in data.reshape(-1))
        return f"dense<{dtype}[{dims}]>[{values}]"

    return re.sub(r"(RANDOM|POSITIVE)<(\w+)\[([\d,]*)\]>", draw, text)


def model(pass_name: str, case: str, seed: int = 0) -> Model:
    """A fresh model of ``case`` prepared so that ``pass_name`` has work to do."""
    text = _fill(CASES[pass_name][case], np.random.default_rng(seed))
    m = parse_model(_HEAD + text + "}\n")
    if pass_name == "freeze-initializers":
        m.ir_version = 3
        for v in m.graph.initializers.values():
            m.graph.append_input(v)
    if pass_name == "lower-fused":
        irforge.optimize(m, "fuse-gelu,fuse-activation")
    if pass_name == "topological-sort":
        nodes = m.graph.nodes
        for n in nodes[1:]:
            m.graph.move_before(nodes[0], n)
    return m


def all_cases() -> list[tuple[str, str]]:
    return [(p, c) for p, cases in CASES.items() for c in cases]


def random_feeds(m: Model, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in m.graph.inputs:
        if v.is_initializer():
            continue
        shape = [d if isinstance(d, int) else 2 for d in v.type.shape]
        feeds[v.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def to_onnx_bytes(m: Model) -> bytes:
    return irforge.to_onnx(m).SerializeToString()
