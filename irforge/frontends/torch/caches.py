"""``transformers``' key/value caches as ``torch.export`` inputs.

``torch.export`` flattens its inputs with torch's pytree, which knows nothing of
``DynamicCache`` or ``StaticCache``: without a registration, exporting a decode step fails with
"Unsupported input type DynamicCache".  :func:`register_cache_pytrees` teaches it both:
``DynamicCache`` through ``transformers``' own executorch helper (its inputs come out as
``cache_key_cache_0``, ``cache_value_cache_0``, ...), ``StaticCache`` here, as its per-layer
keys, values and filled lengths (``cache_keys_0``, ``cache_values_0``, ``cache_length_0``, ...).
A static cache is written in place (``index_copy_`` at the filled length); the importer turns
each such write into an output (``cache_keys_0.updated``), which the next step takes as its input.
"""

from __future__ import annotations

import sys

_REGISTERED = False


def register_cache_pytrees() -> None:
    """Make ``DynamicCache`` and ``StaticCache`` valid ``torch.export`` inputs and outputs; a no-op
    when ``transformers`` is not imported (nothing can be a cache then) or already registered."""
    global _REGISTERED
    if _REGISTERED or "transformers" not in sys.modules:
        return
    import torch.utils._pytree as pytree
    from transformers.cache_utils import StaticCache
    from transformers.integrations.executorch import register_dynamic_cache_export_support

    register_dynamic_cache_export_support()
    if StaticCache not in pytree.SUPPORTED_NODES:
        pytree.register_pytree_node(StaticCache, _flatten_static, _unflatten_static,
                                    serialized_type_name="transformers.cache_utils.StaticCache",
                                    flatten_with_keys_fn=_flatten_static_with_keys)  # fmt: skip
    _REGISTERED = True


_FIELDS = ("keys", "values", "length")


def _static_leaves(cache) -> tuple[list, list[str], list]:
    layers = cache.layers
    if any(not getattr(layer, "is_initialized", False) for layer in layers):
        raise ValueError("a StaticCache exports once its buffers exist: call cache.early_initialization(batch_size, "
                         "num_heads, head_dim, dtype, device) or run a prefill step through it first")  # fmt: skip
    leaves, keys = [], []
    for field, attr in zip(_FIELDS, ("keys", "values", "cumulative_length"), strict=True):
        for i, layer in enumerate(layers):
            leaves.append(getattr(layer, attr))
            keys.append(f"{field}_{i}")
    context = [(type(layer), layer.max_cache_len, getattr(layer, "sliding_window", None)) for layer in layers]
    return leaves, keys, context


def _flatten_static(cache):
    leaves, keys, context = _static_leaves(cache)
    return leaves, (keys, context)


def _flatten_static_with_keys(cache):
    from torch.utils._pytree import MappingKey

    leaves, keys, context = _static_leaves(cache)
    return [(MappingKey(k), leaf) for k, leaf in zip(keys, leaves, strict=True)], (keys, context)


def _unflatten_static(leaves, context):
    from transformers.cache_utils import Cache, StaticCache

    _, layers_context = context
    n = len(layers_context)
    layers = []
    for i, (kind, max_len, window) in enumerate(layers_context):
        layer = kind(max_cache_len=max_len, **({"sliding_window": window} if window is not None else {}))
        keys, values, length = leaves[i], leaves[n + i], leaves[2 * n + i]
        layer.keys, layer.values, layer.cumulative_length = keys, values, length
        layer.device = keys.device
        layer.batch_size, layer.num_heads = keys.shape[:2]
        layer.k_head_dim, layer.v_head_dim = keys.shape[-1], values.shape[-1]
        layer.is_initialized = True
        layers.append(layer)
    cache = StaticCache.__new__(StaticCache)
    Cache.__init__(cache, layers=layers)
    return cache
