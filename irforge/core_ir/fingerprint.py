"""A structural hash of a model: equal for graphs that print the same, cheap on big graphs.

The pass manager compares fingerprints to tell a fixed-point group that went back to an earlier
state and a pass that said ``changed=False`` but changed something.  Values are identified by
where they are defined (not by object identity), so two clones hash alike; small constants by
their bytes; large ones by dtype, shape and payload object (payloads are immutable and shared
by clones, so a pass that rebuilds an equal large constant counts as a change).
"""

from __future__ import annotations

import hashlib

from .gcpause import paused_gc
from .graph import Graph
from .model import Model
from .tensors import is_tensor_data, nbytes

_HASHED_BYTES = 4096


def model_fingerprint(model: Model) -> str:
    h = hashlib.blake2b(digest_size=16)
    with paused_gc():
        ids: dict = {}
        types: dict = {None: 0}
        _graph(model.graph, h, ids, types)
        for key, fn in sorted(model.functions.items()):
            h.update(repr((key, fn.attributes, sorted(fn.attribute_defaults))).encode())
            _graph(fn.graph, h, ids, types)
        h.update(repr(list(types)).encode())
        h.update(repr(sorted(model.opset_imports.items())).encode())
    return h.hexdigest()


def _graph(g: Graph, h, ids: dict, types: dict) -> None:
    """Types are numbered in order of first appearance (their list is hashed at the end)."""
    parts: list = [g.name]
    tid = types.setdefault
    for v in g._inputs:
        ids[v] = len(ids)
        parts.append(("in", v.name, tid(v.type, len(types))))
    for name, v in g._initializers.items():
        ids.setdefault(v, len(ids))
        parts.append(("init", name, tid(v.type, len(types)), _payload(v.const_value)))
    for n in g:
        attrs = None
        if n._attrs:
            attrs = []
            for a in n._attrs.values():
                for sub in a.graphs:
                    _graph(sub, h, ids, types)
                value = _payload(a.value) if is_tensor_data(a.value) else a.value
                attrs.append((a.name, a.kind, a.ref, None if a.graphs else repr(value)))
        parts.append(
            (n.op_type, n.domain, n.overload, attrs, [None if v is None else ids.get(v, v.name) for v in n._inputs])
        )
        for o in n._outputs:
            if o is not None:
                ids[o] = len(ids)
                parts.append((o.name, tid(o.type, len(types))))
    parts.append([ids.get(v, v.name) for v in g._outputs])
    h.update(repr(parts).encode())


def _payload(t) -> object:
    if not is_tensor_data(t):
        return repr(t)
    if nbytes(t) <= _HASHED_BYTES:
        encoded = getattr(t, "encoded", None)  # a payload still in its file's bytes: hash those
        data = encoded() if encoded is not None else t.numpy().tobytes()
        return (int(t.dtype), tuple(t.shape), hashlib.blake2b(data, digest_size=8).hexdigest())
    return (int(t.dtype), tuple(t.shape), id(t))

