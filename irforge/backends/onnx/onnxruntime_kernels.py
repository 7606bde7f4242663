"""Which nodes onnxruntime's CPU provider has no kernel for, asked of onnxruntime itself.

An ONNX file is valid whatever its ops, so ``emit --target onnx`` writes any model; whether
onnxruntime can *run* it is another question, answered before a session is made: by its kernel
registry (op, domain and opset version), and for ONNX ops with typed inputs by opening a session
on a one-node model at those types, as :mod:`.onnxruntime_dtypes` does.  An op without a kernel
whose ONNX schema has a function body still runs (onnxruntime expands it), as does a call of one
of the model's own functions (onnxruntime inlines it; its body is checked instead).  Errors that
onnxruntime raises anyway, at session creation or at run time, come back as :class:`BackendError`
naming the node onnxruntime names.
"""

from __future__ import annotations

import functools
import re

import onnx

from ...core_ir.dtypes import short_name
from ...core_ir.errors import first_line
from ...core_ir.model import Model
from ...core_ir.node import Node
from ...core_ir.types import TensorType
from ..base import BackendError, Unsupported, collect_unsupported
from .onnxruntime_dtypes import for_onnxruntime, probe_model, session_opens

_ONNX = ("", "ai.onnx")
_NO_KERNEL_NEEDED = {"Constant"}
"""ONNX ops onnxruntime turns into initializers as it loads the model, rather than running."""


@functools.lru_cache(maxsize=1)
def _registry() -> dict[tuple[str, str], list[tuple[int, int]]]:
    """(domain, op) -> the opset version ranges onnxruntime's CPU provider has kernels for."""
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    out: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for k in C.get_all_opkernel_def():
        if k.provider == "CPUExecutionProvider":
            out.setdefault(("" if k.domain == "ai.onnx" else k.domain, k.op_name), []).append(tuple(k.version_range))
    return out


def _why(n: Node, opsets: dict[str, int], probe: bool) -> str | None:
    registry = _registry()
    domain = "" if n.domain in _ONNX else n.domain
    version = opsets.get(domain, opsets.get("ai.onnx", 1) if domain == "" else 1)
    ranges = registry.get((domain, n.op_type))
    if domain == "":
        try:
            schema = onnx.defs.get_schema(n.op_type, version, "")
        except onnx.defs.SchemaError:
            return f"not an ONNX op at opset {version}"
        if not any(lo <= schema.since_version <= hi for lo, hi in ranges or ()):
            if schema.has_function or schema.has_context_dependent_function:
                return None  # onnxruntime expands the schema's function body
            return f"onnxruntime has no CPU kernel for it at opset {version}"
        given = [v for v in n.inputs if v is not None]
        if not probe or n.subgraphs() or not given or not all(isinstance(v.type, TensorType) for v in given):
            return None  # an input of unknown type: nothing to ask onnxruntime
        types = {v.name: v.type.dtype for v in given}
        if not session_opens(probe_model(n, types, version)):
            shown = ", ".join(short_name(t) for t in dict.fromkeys(types.values()))
            return f"onnxruntime has no CPU kernel for it at input types {shown} (opset {version})"
        return None
    if ranges is None:
        known = {d for d, _ in registry}
        if domain not in known:
            return f"domain {domain!r} is not one onnxruntime has kernels for, and the model defines no such function"
        return f"onnxruntime has no CPU kernel {domain}::{n.op_type}"
    if not any(lo <= version <= hi for lo, hi in ranges):
        return f"onnxruntime's {domain}::{n.op_type} kernels are for other opset versions than {version}"
    return None


def missing_kernels(model: Model) -> list[Unsupported]:
    """Every node onnxruntime cannot run, grouped by op and reason, once the backend has widened
    the narrow dtypes it can widen; empty when onnxruntime is not installed (the ONNX file itself
    needs no runtime)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return []
    model = for_onnxruntime(model)[0]  # the nodes onnxruntime cannot run narrow are widened first
    local = {(f.domain, f.name) for f in model.functions.values()}
    opsets = dict(model.opset_imports)
    findings = []
    graphs = [(model.graph, True)] + [(f.graph, False) for f in model.functions.values()]
    for graph, typed in graphs:  # function bodies: by registry only (their types come with the call)
        for n in graph.all_nodes():
            if (n.domain, n.op_type) in local or (n.domain in _ONNX and n.op_type in _NO_KERNEL_NEEDED):
                continue
            why = _why(n, opsets, typed)
            if why:
                findings.append((n, f"{n.domain}::{n.op_type}" if n.domain else n.op_type, why))
    return collect_unsupported(findings)


_NODE_NAME = re.compile(r"(?:Name:'|node with name ')([^']*)'")


def runtime_error(e: Exception, model: Model, when: str) -> BackendError:
    """onnxruntime's exception ``e`` as one irforge error: its status line without the
    ``[ONNXRuntimeError]`` codes, and the irforge node it names, where it names one."""
    text = re.sub(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*[A-Z_]+\s*:\s*", "", first_line(e))
    text = re.sub(r"\S+\.(?:h|cc|cpp):\d+ \S+\(.*?\) ", "", text)  # the C++ source line and function
    found = _NODE_NAME.search(text)
    node = None
    if found and found.group(1):
        node = next((n for n in model.graph.all_nodes() if n.name == found.group(1)), None)
    at = f" at {node.describe()}" if node is not None else ""
    return BackendError(f"onnxruntime failed {when}{at}: {text}")


__all__ = ["missing_kernels", "runtime_error"]
