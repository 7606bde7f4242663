"""The XLA backend: the StableHLO module compiled by XLA through jaxlib's PJRT client.

The model is lowered once (dynamic dims stay dynamic: that module is what ``emit`` writes); each
new set of input shapes refines it to static shapes (the lowering traced again at those shapes)
and compiles that, and the executable is cached per (module fingerprint, device, input shapes),
so a model with a dynamic batch dim compiles once per batch size it meets.
``device="gpu"`` uses jaxlib's CUDA PJRT plugin where one is installed.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np

from ...core_ir.errors import first_line
from ...core_ir.model import Model
from ..base import Artifact, Backend, BackendError, Executable, Unsupported, static_input_shapes
from ..inputs import input_specs
from ..static_operands import static_inputs
from .lowering import ShapeDependentError, find_unsupported, jax_context, lower
from .rules import RULES

_CACHE: dict[tuple, Any] = {}
_LOCK = threading.Lock()


class XLABackend(Backend):
    name = "xla"
    lowering = "lower-fused{target=xla},cse,dce"
    targets = ("hlo", "hlo-optimized")
    devices = ("cpu", "gpu")
    expands_functions = True

    def supported_ops(self) -> set[tuple[str, str]]:
        return RULES.supported_ops()

    def unsupported(self, model: Model) -> list[Unsupported]:
        return find_unsupported(model)

    def lower(self, model: Model, target: str | None = None, dims: dict[str, int] | None = None) -> Artifact:
        """HLO text at the model's static input shapes (``dims`` sets symbolic ones): before
        XLA's passes (``hlo``) or after them (``hlo-optimized``)."""
        target = target or "hlo"
        if target not in self.targets:
            raise BackendError(f"the xla backend writes {', '.join(self.targets)}, not {target!r}")
        lowered = lower(model, self.name)
        specs = _concrete_specs(lowered, model, dims or {})
        import jax

        with jax_context():
            jitted = jax.jit(lowered.function).lower(*specs)
            text = jitted.as_text(dialect="hlo") if target == "hlo" else jitted.compile().as_text()
        return Artifact(target, text, lowered)

    def compile(self, model: Model, device: str = "cpu") -> Executable:
        """An executable of ``model``.  Inputs whose values fix shapes (:func:`static_inputs`)
        are compile-time constants: each new set of their values lowers and compiles anew."""
        t0 = time.perf_counter()
        jax_device = _device(device)
        names = [v.name for v in model.graph.inputs if not v.is_initializer()]
        static = {v.name for v in static_inputs(model)}
        lowerings: dict[bytes, Any] = {}
        per_shape = False  # True: a shape computed from symbolic dims: lower once per set of input shapes
        if not static:
            try:
                lowerings[b""] = lower(model, self.name)
            except ShapeDependentError:
                per_shape = True

        def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
            nonlocal per_shape
            values = {n: a for n, a in zip(names, arrays, strict=True) if n in static}
            key = b"".join(n.encode() + a.dtype.str.encode() + repr(a.shape).encode() + a.tobytes()
                           for n, a in values.items())  # fmt: skip
            shapes = None
            if per_shape:
                shapes = {n: a.shape for n, a in zip(names, arrays, strict=True) if n not in static}
                key += repr(sorted(shapes.items())).encode()
            lowered = lowerings.get(key)
            if lowered is None:
                try:
                    lowered = lower(model, self.name, values, shapes)
                except ShapeDependentError:
                    if shapes is not None:
                        raise
                    per_shape = True
                    shapes = {n: a.shape for n, a in zip(names, arrays, strict=True) if n not in static}
                    key += repr(sorted(shapes.items())).encode()
                    lowered = lower(model, self.name, values, shapes)
                lowerings[key] = lowered
            traced = [a for n, a in zip(names, arrays, strict=True) if n not in static]
            outs, compiled = _run(lowered, traced, device, jax_device)
            exe.compilations += compiled
            return outs

        exe = Executable(
            self.name, run, names, [v.name for v in model.graph.outputs], device=device, inputs=input_specs(model)
        )
        exe.compile_seconds = time.perf_counter() - t0
        exe.compilations = 0  # XLA compiles at the first call for each set of input shapes
        return exe


def _run(lowered, arrays: list[np.ndarray], device: str, jax_device) -> tuple[list[np.ndarray], int]:
    """Run ``lowered`` on ``arrays``, compiling it for their shapes on first use; the outputs and
    how many compilations that took (0 or 1)."""
    import hashlib  # here, as jax is: registering this backend must not load them

    import jax

    fingerprint = lowered.__dict__.get("fingerprint")
    if fingerprint is None:  # once per lowering: the module holds the weights, hashing it is not free
        fingerprint = lowered.__dict__["fingerprint"] = hashlib.sha256(lowered.bytecode).hexdigest()
    if lowered.random:  # a fresh key at every call: the model draws new numbers each time
        arrays = [np.frombuffer(os.urandom(8), np.uint32), *arrays]
    arrays = [_as_input(a, s) for a, s in zip(arrays, lowered.input_specs, strict=True)]
    key = (fingerprint, device, tuple((a.shape, a.dtype.str) for a in arrays))
    with jax_context():
        with _LOCK:
            compiled = _CACHE.get(key)
        fresh = int(compiled is None)
        placed = [jax.device_put(a, jax_device) for a in arrays]
        if compiled is None:
            try:
                # the lowering re-traced at these static shapes: the refined module XLA optimizes
                # best (calling the shape-polymorphic export instead runs BERT-base 4.5x slower)
                compiled = jax.jit(lowered.function).lower(*placed).compile()
            except Exception as e:
                shapes = [a.shape for a in arrays]
                raise BackendError(f"xla could not compile the model for inputs {shapes}: {e}") from e
            with _LOCK:
                _CACHE[key] = compiled
        try:
            outs = compiled(*placed)
        except Exception as e:  # XLA's runtime errors (out of memory, a failed check) as one line
            raise BackendError(f"xla failed to run the model: {first_line(e)}") from e
    return [np.asarray(o) for o in outs], fresh


def _device(device: str):
    import jax

    kind = {"cpu": "cpu", "gpu": "gpu", "cuda": "gpu"}.get(device)
    if kind is None:
        raise BackendError(f"unknown device {device!r}; the xla backend runs on cpu or gpu")
    try:
        return jax.devices(kind)[0]
    except RuntimeError:
        found = sorted({d.platform for d in jax.devices()})
        raise BackendError(
            f"no {kind.upper()} is available to XLA here (jax sees only {', '.join(found)}): install jaxlib's "
            "CUDA plugin (pip install 'jax[cuda12]') on a machine with an NVIDIA GPU, or use --device cpu"
        ) from None


def _as_input(a: np.ndarray, spec) -> np.ndarray:
    want = np.dtype(spec.dtype)
    if a.dtype != want:
        if np.can_cast(a.dtype, want, casting="same_kind"):
            return a.astype(want)
        raise BackendError(f"an input of dtype {a.dtype} was given where the model takes {want}")
    return a


def _concrete_specs(lowered, model: Model, dims: dict[str, int]):
    import jax

    from ...core_ir.dtypes import to_numpy

    shapes = static_input_shapes(model, dims, "HLO")
    types = {v.name: v.type for v in model.graph.inputs}
    key = [jax.ShapeDtypeStruct((2,), np.uint32)] if lowered.random else []
    return key + [jax.ShapeDtypeStruct(shapes[n], to_numpy(types[n].dtype)) for n in lowered.input_names]
