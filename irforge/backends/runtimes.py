"""The two engines every result is checked against, as backends: ``reference`` (irforge's own
interpreter over ONNX's reference kernels) and ``onnxruntime`` (the model written back to ONNX)."""

from __future__ import annotations

import time

import numpy as np

from ..core_ir.errors import MissingExtraError
from ..core_ir.interpreter import Interpreter
from ..core_ir.model import Model
from .base import Artifact, Backend, Executable, Unsupported, kept_framework_ops


def _names(model: Model) -> tuple[list[str], list[str]]:
    ins = [v.name for v in model.graph.inputs if not v.is_initializer()]
    return ins, [v.name for v in model.graph.outputs]


class ReferenceBackend(Backend):
    """Runs any model the interpreter has kernels for: slow, and the semantic oracle."""

    name = "reference"
    lowering = "lower-fused{target=reference},cse,dce"

    def unsupported(self, model: Model) -> list[Unsupported]:
        return kept_framework_ops(model)

    def compile(self, model: Model, device: str = "cpu") -> Executable:
        t0 = time.perf_counter()
        interp = Interpreter(model)  # the model: its local functions run too
        ins, outs = _names(model)

        def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
            return [np.asarray(o) for o in interp.run(dict(zip(ins, arrays, strict=True)))]

        return Executable(self.name, run, ins, outs, time.perf_counter() - t0)


class OnnxRuntimeBackend(Backend):
    """onnxruntime's CPU provider with all of its graph optimizations, threads not spinning."""

    name = "onnxruntime"
    lowering = "lower-fused{target=onnxruntime},cse,dce"
    targets = ("onnx",)

    def unsupported(self, model: Model) -> list[Unsupported]:
        return kept_framework_ops(model)

    def lower(self, model: Model, target: str | None = None) -> Artifact:
        from .onnx import to_bytes

        return Artifact("onnx", to_bytes(model))

    def compile(self, model: Model, device: str = "cpu") -> Executable:
        try:
            import onnxruntime as ort
        except ImportError:
            raise MissingExtraError("onnxruntime", "ort", "the onnxruntime backend") from None
        from .onnxruntime_dtypes import for_onnxruntime, to_bfloat16, to_float32

        t0 = time.perf_counter()
        ins, outs = _names(model)
        model, fed, returned = for_onnxruntime(model)
        fed = {ins.index(name) for name in fed}
        returned = {outs.index(name) for name in returned}
        so = ort.SessionOptions()
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        session = ort.InferenceSession(self.lower(model).data, so, providers=["CPUExecutionProvider"])

        def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
            feed = {name: to_float32(a) if i in fed else a for i, (name, a) in enumerate(zip(ins, arrays, strict=True))}
            got = session.run(None, feed)
            return [to_bfloat16(o) if i in returned else np.asarray(o) for i, o in enumerate(got)]

        return Executable(self.name, run, ins, outs, time.perf_counter() - t0)
