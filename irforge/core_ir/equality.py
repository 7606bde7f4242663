"""Structural equality of graphs: same ops, wiring, names, types, attributes and payloads.

Compared object by object (not through the printer), so the text format's round-trip tests
check the printer and the parser against an independent oracle.
"""

from __future__ import annotations

from .attributes import AttrKind, SparseTensor
from .graph import Graph
from .model import Model
from .tensors import tensors_equal
from .value import Value


class _Diff(Exception):
    pass


def structural_diff(a: Graph, b: Graph) -> str | None:
    """``None`` when the graphs are structurally equal, else the first difference found."""
    try:
        _graph(a, b, {}, "graph")
    except _Diff as d:
        return str(d)
    return None


def graphs_equal(a: Graph, b: Graph) -> bool:
    """Whether two graphs are structurally equal (see :func:`structural_diff` for the difference)."""
    return structural_diff(a, b) is None


def models_equal(a: Model, b: Model) -> str | None:
    """``None`` when equal, else the first difference (models compare metadata and functions too)."""
    for field in ("ir_version", "producer_name", "producer_version", "domain", "model_version",
                  "doc_string", "metadata", "opset_imports"):  # fmt: skip
        if getattr(a, field) != getattr(b, field):
            return f"model {field}: {getattr(a, field)!r} != {getattr(b, field)!r}"
    if list(a.functions) != list(b.functions):
        return f"functions: {list(a.functions)} != {list(b.functions)}"
    try:
        for key, fa in a.functions.items():
            fb = b.functions[key]
            if (fa.attributes, fa.overload, fa.doc_string, fa.metadata) != (
                fb.attributes,
                fb.overload,
                fb.doc_string,
                fb.metadata,
            ):
                raise _Diff(f"function {key}: header differs")
            _attrs(fa.attribute_defaults, fb.attribute_defaults, {}, f"function {key} defaults")
            _graph(fa.graph, fb.graph, {}, f"function {key}")
        _graph(a.graph, b.graph, {}, "graph")
    except _Diff as d:
        return str(d)
    return None


def _check(cond: bool, where: str, what: str, x, y) -> None:
    if not cond:
        raise _Diff(f"{where}: {what} differs: {x!r} != {y!r}")


def _value(a: Value, b: Value, where: str) -> None:
    _check(a.name == b.name, where, "name", a.name, b.name)
    _check(a.type == b.type, where, f"type of %{a.name}", a.type, b.type)
    _check(a.doc_string == b.doc_string, where, f"doc of %{a.name}", a.doc_string, b.doc_string)
    _check((a.metadata or None) == (b.metadata or None), where, f"metadata of %{a.name}",
           a.metadata, b.metadata)  # fmt: skip


def _ref(a: Value | None, b: Value | None, vmap: dict, where: str) -> None:
    if a is None or b is None:
        _check(a is None and b is None, where, "input presence", a, b)
        return
    mapped = vmap.get(a)
    if mapped is None:  # defined outside the compared graphs: compare by name
        _check(a.name == b.name, where, "outer reference", a.name, b.name)
    else:
        _check(mapped is b, where, "wiring", a.name, b.name)


def _graph(a: Graph, b: Graph, vmap: dict, where: str) -> None:
    where = f"{where} @{a.name}"
    _check(a.name == b.name, where, "graph name", a.name, b.name)
    _check(a.doc_string == b.doc_string, where, "doc", a.doc_string, b.doc_string)
    _check(a.metadata == b.metadata, where, "metadata", a.metadata, b.metadata)
    _check(a.opset_imports == b.opset_imports, where, "opsets", a.opset_imports, b.opset_imports)
    _check(len(a.inputs) == len(b.inputs), where, "input count", len(a.inputs), len(b.inputs))
    for x, y in zip(a.inputs, b.inputs, strict=True):
        _value(x, y, where)
        vmap[x] = y
    ia, ib = a._initializers, b._initializers
    _check(list(ia) == list(ib), where, "initializers", list(ia), list(ib))
    for name, x in ia.items():
        y = ib[name]
        _value(x, y, where)
        _check(tensors_equal(x.const_value, y.const_value), where, f"payload of %{name}", "...", "...")
        vmap[x] = y
    na, nb = list(a), list(b)
    _check(len(na) == len(nb), where, "node count", len(na), len(nb))
    for i, (x, y) in enumerate(zip(na, nb, strict=True)):
        w = f"{where} node #{i} ({x.describe()})"
        for field in ("op_type", "domain", "overload", "name", "doc_string"):
            _check(getattr(x, field) == getattr(y, field), w, field, getattr(x, field), getattr(y, field))
        _check((x.metadata or None) == (y.metadata or None), w, "metadata", x.metadata, y.metadata)
        _check(len(x.inputs) == len(y.inputs), w, "input count", len(x.inputs), len(y.inputs))
        for u, v in zip(x.inputs, y.inputs, strict=True):
            _ref(u, v, vmap, w)
        _attrs(x.attributes, y.attributes, vmap, w)
        _check(len(x.outputs) == len(y.outputs), w, "output count", len(x.outputs), len(y.outputs))
        for u, v in zip(x.outputs, y.outputs, strict=True):
            if u is None or v is None:
                _check(u is None and v is None, w, "output presence", u, v)
                continue
            _value(u, v, w)
            vmap[u] = v
    _check(len(a.outputs) == len(b.outputs), where, "output count", len(a.outputs), len(b.outputs))
    for x, y in zip(a.outputs, b.outputs, strict=True):
        _ref(x, y, vmap, f"{where} outputs")


def _attrs(xa: dict, ya: dict, vmap: dict, w: str) -> None:
    _check(list(xa) == list(ya), w, "attribute names", list(xa), list(ya))
    for name, p in xa.items():
        q = ya[name]
        _check(p.kind == q.kind, w, f"kind of attribute {name}", p.kind, q.kind)
        _check(p.ref == q.ref, w, f"reference of attribute {name}", p.ref, q.ref)
        if p.ref is not None:
            continue
        kind = AttrKind(p.kind)
        if kind == AttrKind.GRAPH:
            _graph(p.value, q.value, vmap, f"{w} attribute {name}")
        elif kind == AttrKind.GRAPHS:
            _check(len(p.value) == len(q.value), w, f"attribute {name} length", len(p.value), len(q.value))
            for s, t in zip(p.value, q.value, strict=True):
                _graph(s, t, vmap, f"{w} attribute {name}")
        elif kind in (AttrKind.TENSOR, AttrKind.SPARSE_TENSOR):
            _check(_tensor_eq(p.value, q.value), w, f"attribute {name}", "tensor", "tensor")
        elif kind in (AttrKind.TENSORS, AttrKind.SPARSE_TENSORS):
            same = len(p.value) == len(q.value) and all(_tensor_eq(s, t) for s, t in zip(p.value, q.value, strict=True))
            _check(same, w, f"attribute {name}", "tensors", "tensors")
        elif kind in (AttrKind.FLOAT, AttrKind.FLOATS):
            _check(_floats_eq(p.value, q.value), w, f"attribute {name}", p.value, q.value)
        else:
            _check(p.value == q.value, w, f"attribute {name}", p.value, q.value)


def _tensor_eq(a, b) -> bool:
    if isinstance(a, SparseTensor) or isinstance(b, SparseTensor):
        return (isinstance(a, SparseTensor) and isinstance(b, SparseTensor) and a.dims == b.dims
                and tensors_equal(a.values, b.values) and tensors_equal(a.indices, b.indices))  # fmt: skip
    return tensors_equal(a, b)


def _floats_eq(a, b) -> bool:
    xs = a if isinstance(a, tuple) else (a,)
    ys = b if isinstance(b, tuple) else (b,)
    return len(xs) == len(ys) and all(x == y or (x != x and y != y) for x, y in zip(xs, ys, strict=True))
