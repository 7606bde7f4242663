"""The StableHLO backend: the IR as an MLIR module of ``stablehlo`` ops (text and the versioned
portable artifact), built with the MLIR bindings that ship in jaxlib."""

from __future__ import annotations

from ...core_ir.model import Model
from ..base import Artifact, Backend, Executable, Unsupported
from .lowering import Lowered, find_unsupported, jax_context, lower
from .rules import RULES
from .types import DTYPES


class StableHLOBackend(Backend):
    """``lower`` gives the module as text (``stablehlo``) or as the portable artifact
    (``stablehlo-bytecode``, StableHLO's versioned bytecode); ``compile`` runs it with XLA."""

    name = "stablehlo"
    lowering = "lower-fused{target=stablehlo},cse,dce"
    targets = ("stablehlo", "stablehlo-bytecode")
    expands_functions = True

    def supported_ops(self) -> set[tuple[str, str]]:
        return RULES.supported_ops()

    def unsupported(self, model: Model) -> list[Unsupported]:
        return find_unsupported(model)

    def lower(self, model: Model, target: str | None = None) -> Artifact:
        lowered = lower(model, self.name)
        if (target or "stablehlo") == "stablehlo-bytecode":
            return Artifact("stablehlo-bytecode", portable_artifact(lowered.text), lowered)
        return Artifact("stablehlo", lowered.text, lowered)

    def compile(self, model: Model, device: str = "cpu") -> Executable:
        from .xla import XLABackend

        return XLABackend().compile(model, device)


def portable_artifact(text: str) -> bytes:
    """StableHLO's versioned bytecode of ``text``, at the oldest version this jaxlib still reads
    (the most consumers can load it)."""
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir.dialects import stablehlo

    with jmlir.make_ir_context():
        return stablehlo.serialize_portable_artifact_str(text, stablehlo.get_minimum_version())


def from_portable_artifact(data: bytes) -> str:
    """The module text of a portable artifact."""
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo

    with jmlir.make_ir_context():
        return str(ir.Module.parse(stablehlo.deserialize_portable_artifact_str(data)))


def verify_text(text: str) -> bool:
    """Parse ``text`` with the MLIR bindings and run the verifier."""
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    with jmlir.make_ir_context():
        return bool(ir.Module.parse(text).operation.verify())


__all__ = ["DTYPES", "RULES", "Lowered", "StableHLOBackend", "find_unsupported", "from_portable_artifact",
           "jax_context", "lower", "portable_artifact", "verify_text"]  # fmt: skip
