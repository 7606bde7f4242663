"""JAX's PRNG primitives: key arrays as their ``uint32`` key data, and each random primitive
traced through the key implementation's own functions, exactly as JAX lowers them.

A key array ``key<fry>[n]`` is held as its physical ``uint32[n, 2]`` (``jax.random.key_data``),
so ``random_wrap``/``random_unwrap`` are identities.  ``random_seed``, ``random_split``,
``random_fold_in`` and ``random_bits`` are rebuilt the way JAX's lowering rules build them — the
PRNG implementation's ``seed``/``split``/``fold_in``/``random_bits`` vmapped over the key array's
dims — traced to a jaxpr and inlined; ``threefry2x32`` inlines JAX's own unrolled lowering (20
rounds of add, rotate, xor on ``uint32``).  The bits are therefore the ones ``jax.jit`` computes,
on every backend.  Implementations built on XLA's ``rng_bit_generator`` (``rbg``) are refused
by that primitive, which has no ONNX form.

Ops that only move key arrays (``slice``, ``squeeze``, ``reshape``, ``broadcast_in_dim``,
``select_n``, ...) work on the key data once their parameters cover its trailing dims
(:func:`physical_params`).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..core_ir.types import TensorType
from .common import NotMapped

RANDOM_PRIMITIVES = frozenset({"random_seed", "random_split", "random_fold_in", "random_bits", "random_wrap",
                               "random_unwrap", "random_clone", "threefry2x32", "iota_2x32_shape",
                               "random_gamma"})  # fmt: skip


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
