"""The onnxruntime backend: the model written back to ONNX and run by onnxruntime's CPU provider,
the engine (with the reference interpreter) every result is checked against."""

from __future__ import annotations

import time

import numpy as np

from ...core_ir.errors import MissingExtraError
from ...core_ir.model import Model
from ..base import Artifact, Backend, Executable, Unsupported, io_names, kept_framework_ops
from ..inputs import input_specs


class OnnxRuntimeBackend(Backend):
    """onnxruntime's CPU provider with all of its graph optimizations, threads not spinning."""

    name = "onnxruntime"
    lowering = "lower-fused{target=onnxruntime},cse,dce"
    targets = ("onnx",)

    def unsupported(self, model: Model) -> list[Unsupported]:
        from .onnxruntime_kernels import missing_kernels

        return kept_framework_ops(model) + missing_kernels(model)

    def lower(self, model: Model, target: str | None = None) -> Artifact:
        from . import to_bytes

        return Artifact("onnx", to_bytes(model))

    def compile(self, model: Model, device: str = "cpu") -> Executable:
        try:
            import onnxruntime as ort
        except ImportError:
            raise MissingExtraError("onnxruntime", "ort", "the onnxruntime backend") from None
        from .onnxruntime_dtypes import for_onnxruntime, to_bfloat16, to_float32
        from .onnxruntime_kernels import runtime_error

        t0 = time.perf_counter()
        ins, outs = io_names(model)
        specs = input_specs(model)
        model, fed, returned = for_onnxruntime(model)
        fed = {ins.index(name) for name in fed}
        returned = {outs.index(name) for name in returned}
        so = ort.SessionOptions()
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 4  # its errors come back as irforge errors; not also printed
        try:
            session = ort.InferenceSession(self.lower(model).data, so, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types, one per status code
            raise runtime_error(e, model, "to load the model") from None

        def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
            feed = {name: to_float32(a) if i in fed else a for i, (name, a) in enumerate(zip(ins, arrays, strict=True))}
            try:
                got = session.run(None, feed)
            except Exception as e:
                raise runtime_error(e, model, "to run the model") from None
            return [to_bfloat16(o) if i in returned else np.asarray(o) for i, o in enumerate(got)]

        return Executable(self.name, run, ins, outs, time.perf_counter() - t0, inputs=specs)
