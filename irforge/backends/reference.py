"""The reference backend: irforge's own interpreter over ONNX's reference kernels, as a backend.

Slow, and the semantic oracle: every other backend's numbers are checked against it."""

from __future__ import annotations

import time

import numpy as np

from ..core_ir.interpreter import Interpreter
from ..core_ir.model import Model
from .base import Backend, Executable, Unsupported, io_names, kept_framework_ops
from .inputs import input_specs


class ReferenceBackend(Backend):
    """Runs any model the interpreter has kernels for: slow, and the semantic oracle."""

    name = "reference"
    lowering = "lower-fused{target=reference},cse,dce"

    def unsupported(self, model: Model) -> list[Unsupported]:
        return kept_framework_ops(model)

    def compile(self, model: Model, device: str = "cpu") -> Executable:
        t0 = time.perf_counter()
        interp = Interpreter(model)  # the model: its local functions run too
        ins, outs = io_names(model)

        def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
            return [np.asarray(o) for o in interp.run(dict(zip(ins, arrays, strict=True)))]

        return Executable(self.name, run, ins, outs, time.perf_counter() - t0, inputs=input_specs(model))
