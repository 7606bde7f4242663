"""JAX's PRNG primitives: key arrays as their ``uint32`` key data, and each random primitive
traced through the key implementation's own functions, exactly as JAX lowers them.

A key array ``key<fry>[n]`` is held as its physical ``uint32[n, 2]`` (``jax.random.key_data``),
so ``random_wrap``/``random_unwrap`` are identities.  ``random_seed``, ``random_split``,
``random_fold_in`` and ``random_bits`` are rebuilt the way JAX's lowering rules build them — the
PRNG implementation's ``seed``/``split``/``fold_in``/``random_bits`` vmapped over the key array's
dims — traced to a jaxpr and inlined; ``threefry2x32`` inlines JAX's own unrolled lowering (20
rounds of add, rotate, xor on ``uint32``).  The bits are therefore the ones ``jax.jit`` computes,
on every backend.  ``rng_bit_generator`` (XLA's own bit generator, which the ``rbg`` key
implementations call) is rebuilt the same way from XLA's ``prng.cc``: ThreeFry or Philox (the CPU
default) over XLA's counter layout, in ``uint32`` arithmetic.

Ops that only move key arrays (``slice``, ``squeeze``, ``reshape``, ``broadcast_in_dim``,
``select_n``, ...) work on the key data once their parameters cover its trailing dims
(:func:`physical_params`).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ...core_ir.types import TensorType
from ..common import NotMapped

RANDOM_PRIMITIVES = frozenset({"random_seed", "random_split", "random_fold_in", "random_bits", "random_wrap",
                               "random_unwrap", "random_clone", "threefry2x32", "iota_2x32_shape",
                               "random_gamma", "rng_bit_generator"})  # fmt: skip


def _prng():
    try:
        from jax._src.random import prng, threefry2x32
    except ImportError:  # before JAX 0.8 the modules sat at the top of jax._src
        from jax._src import prng

        threefry2x32 = prng
    return prng, threefry2x32


def is_key(aval) -> bool:
    import jax

    dtype = getattr(aval, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def physical(aval):
    """The aval of a key array's data (``key<fry>[n]`` → ``uint32[n, 2]``); other avals as they are."""
    if not is_key(aval):
        return aval
    from jax._src import core

    return core.physical_aval(aval)


def _trace(fn, *avals):
    import jax

    return jax.make_jaxpr(fn)(*(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals))


def _inline(cx, fn, args, avals):
    outs = cx.inline(_trace(fn, *avals), list(args))
    return outs if len(cx.eqn.outvars) != 1 else outs[0]


def _impl(aval):
    return aval.dtype._impl


def convert_random(cx, name: str, args: list, params: dict):
    """The ONNX form of random primitive ``name`` (one of :data:`RANDOM_PRIMITIVES`)."""
    prng, threefry = _prng()
    ins = [v.aval for v in cx.eqn.invars]
    phys = [physical(a) for a in ins]
    if name in ("random_wrap", "random_unwrap", "random_clone"):
        return cx.typed("Identity", cx.value(args[0]))
    if name == "random_seed":
        impl = params["impl"]
        return _inline(cx, prng.iterated_vmap_unary(len(ins[0].shape), impl.seed), args, phys)
    if name == "random_split":
        impl, shape = _impl(ins[0]), params["shape"]
        return _inline(cx, prng.iterated_vmap_unary(len(ins[0].shape), lambda k: impl.split(k, shape)), args, phys)
    if name == "random_fold_in":
        impl = _impl(ins[0])
        fold = prng.iterated_vmap_binary_bcast(ins[0].shape, ins[1].shape, impl.fold_in)
        return _inline(cx, fold, args, phys)
    if name == "random_bits":
        impl, width, shape = _impl(ins[0]), params["bit_width"], params["shape"]
        bits = prng.iterated_vmap_unary(len(ins[0].shape), lambda k: impl.random_bits(k, width, shape))
        return _inline(cx, bits, args, phys)
    if name == "threefry2x32":
        return _inline(cx, partial(threefry._threefry2x32_lowering, use_rolled_loops=False), args, ins)
    if name == "iota_2x32_shape":
        return _iota_2x32(cx, params["shape"])
    if name == "rng_bit_generator":
        return _rng_bit_generator(cx, args, ins, params)
    if name == "random_gamma":  # Marsaglia and Tsang's rejection loop, as JAX lowers it
        from jax._src.random.core import _gamma_impl

        return _inline(cx, partial(_gamma_impl, log_space=params["log_space"], use_vmap=True), args, ins)
    raise NotMapped(f"random primitive {name}")


def _iota_2x32(cx, shape):
    """The row-major index of every element of ``shape`` as a 64-bit count, split into its high and
    low ``uint32`` halves (the counters threefry hashes)."""
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        raise NotMapped("random bits of a symbolic shape")
    count = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.uint64).reshape(tuple(shape))
    hi = cx.const((count >> np.uint64(32)).astype(np.uint32))
    lo = cx.const((count & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    return [cx.typed("Identity", hi), cx.node_typed("Identity", [lo]).outputs[0]]


def physical_params(name: str, params: dict, in_avals: list, out_avals: list) -> tuple[dict, list[int]]:
    """Parameters of a data-movement primitive on key arrays, extended over the key data's trailing
    dims; also the positions of boolean-selector operands that need those dims appended.  Other
    primitives on key arrays are refused."""
    key = next((a for a in (*in_avals, *out_avals) if is_key(a)), None)
    trailing = tuple(physical(key).shape[len(key.shape) :])
    k = len(trailing)
    p = dict(params)
    if name in ("squeeze", "expand_dims", "concatenate", "rev", "copy", "copy_p", "device_put",
                "optimization_barrier", "pjit", "jit", "closed_call", "core_call", "cond", "while", "scan",
                "custom_jvp_call", "custom_vjp_call", "remat", "checkpoint"):  # fmt: skip
        return p, []
    if name == "slice":
        p["start_indices"] = (*params["start_indices"], *([0] * k))
        p["limit_indices"] = (*params["limit_indices"], *trailing)
        if params.get("strides"):
            p["strides"] = (*params["strides"], *([1] * k))
        return p, []
    if name == "broadcast_in_dim":
        rank = len(params["shape"])
        p["shape"] = (*params["shape"], *trailing)
        p["broadcast_dimensions"] = (*params["broadcast_dimensions"], *range(rank, rank + k))
        return p, []
    if name == "reshape" and params.get("dimensions") is None:
        p["new_sizes"] = (*params["new_sizes"], *trailing)
        return p, []
    if name == "transpose":
        n = len(params["permutation"])
        p["permutation"] = (*params["permutation"], *range(n, n + k))
        return p, []
    if name == "select_n":
        return p, [0]
    raise NotMapped(f"{name} on key arrays")


def key_selector(cx, which, trailing: int):
    """A ``select_n`` selector with the key data's trailing dims appended, so it broadcasts."""
    which = cx.value(which)
    if not which.type.shape:
        return which
    axes = list(range(len(which.type.shape), len(which.type.shape) + trailing))
    out = cx.emit("Unsqueeze", which, cx.const(np.asarray(axes, np.int64)))
    out.type = TensorType(which.type.dtype, (*which.type.shape, *([1] * trailing)))
    return out


def _rng_bit_generator(cx, args, ins, params):
    import jax

    dtype, shape = np.dtype(params["dtype"]), tuple(params["shape"])
    if dtype not in (np.uint8, np.uint16, np.uint32):
        raise NotMapped(f"rng_bit_generator of {dtype} (uint8, uint16 and uint32 are mapped)")
    if ins[0].dtype != np.uint32 or tuple(ins[0].shape) != (4,):
        raise NotMapped("rng_bit_generator with a key other than uint32[4]")
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        raise NotMapped("rng_bit_generator of a symbolic shape")
    algorithm = params["algorithm"]
    philox = algorithm in (jax.lax.RandomAlgorithm.RNG_DEFAULT, jax.lax.RandomAlgorithm.RNG_PHILOX)
    fn = partial(_philox_bits if philox else _threefry_bits, shape=shape, dtype=dtype)
    return _inline(cx, fn, args, ins)


def _add_with_carry(lo, hi, n):
    """The 64-bit count (lo, hi) + n (uint32 arrays; n < 2**32)."""
    new_lo = lo + n
    return new_lo, hi + (new_lo < lo).astype(new_lo.dtype)


def _threefry_bits(key, *, shape, dtype):
    """XLA's ``ThreeFryBitGenerator``: key word 0 (as two uint32) keys the hash, word 1 counts;
    the counters fill half the shape (split on its first even axis, else its largest) and each
    hash's two words sit side by side along that axis."""
    import jax.numpy as jnp

    threefry_2x32 = _prng()[1].threefry_2x32
    split = next((i for i, d in enumerate(shape) if d % 2 == 0), None)
    if split is None and shape:
        split = max(range(len(shape)), key=lambda i: (shape[i], -i))
    half = (1,) if not shape else tuple((d + 1) // 2 if i == split else d for i, d in enumerate(shape))
    count = int(np.prod(half))
    index = jnp.arange(count, dtype=jnp.uint32)
    lo, hi = _add_with_carry(key[2], key[3], index)
    x0, x1 = threefry_2x32(jnp.stack([key[0], key[1]]), jnp.concatenate([lo, hi]))[None].reshape(2, count)
    if not shape:
        bits = x0.reshape(())
    else:
        pair = jnp.stack([x0.reshape(half), x1.reshape(half)], axis=split + 1)
        even = tuple(d + d % 2 if i == split else d for i, d in enumerate(shape))
        bits = pair.reshape(even)[tuple(slice(0, d) for d in shape)]
    new_lo, new_hi = _add_with_carry(key[2], key[3], jnp.uint32(count))
    return jnp.stack([key[0], key[1], new_lo, new_hi]), bits.astype(dtype)


_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _mul_hi_lo(a, m: int):
    """The high and low words of uint32 ``a`` times the constant ``m``, from 16-bit halves."""
    import jax.numpy as jnp

    u32 = jnp.uint32
    a_lo, a_hi = a & u32(0xFFFF), a >> u32(16)
    m_lo, m_hi = u32(m & 0xFFFF), u32(m >> 16)
    ll, lh, hl, hh = a_lo * m_lo, a_lo * m_hi, a_hi * m_lo, a_hi * m_hi
    mid = (ll >> u32(16)) + (lh & u32(0xFFFF)) + (hl & u32(0xFFFF))
    return hh + (lh >> u32(16)) + (hl >> u32(16)) + (mid >> u32(16)), a * u32(m)


def _philox_bits(key, *, shape, dtype):
    """XLA's ``PhiloxBitGenerator`` for a two-word state: key word 0 keys Philox4x32-10 and the
    128-bit counter is (word 1, word 0); four hashes per counter, interleaved in order."""
    import jax.numpy as jnp

    u32 = jnp.uint32
    n = int(np.prod(shape, dtype=np.int64))
    blocks = -(-n // 4)
    words = [key[2], key[3], key[0], key[1]]  # the counter, least significant word first
    step = jnp.arange(blocks, dtype=u32)
    counter = []
    carry = step
    for w in words:
        total = w + carry
        counter.append(total)
        carry = (total < w).astype(u32)
    x = counter
    k0, k1 = key[0], key[1]
    for _ in range(10):
        hi0, lo0 = _mul_hi_lo(x[0], _PHILOX_M[0])
        hi1, lo1 = _mul_hi_lo(x[2], _PHILOX_M[1])
        x = [hi1 ^ x[1] ^ k0, lo1, hi0 ^ x[3] ^ k1, lo0]
        k0, k1 = k0 + u32(_PHILOX_W[0]), k1 + u32(_PHILOX_W[1])
    bits = jnp.stack(x, axis=1).reshape(-1)[:n].reshape(shape)
    new_lo, new_hi = _add_with_carry(key[2], key[3], u32(blocks))
    return jnp.stack([key[0], key[1], new_lo, new_hi]), bits.astype(dtype)
