"""Facts about ops, declared once: what kind of work each op does (:mod:`.traits`), the
arithmetic of windows, pads, slices and resizes (:mod:`.geometry`), irforge's fused-op domain
(:mod:`.fused`) and the decompositions of ops ONNX gives no function body (:mod:`.decompose`).

Passes, backends, frontends and irviz read these; nothing here knows any of them.
"""

from . import decompose, fused, geometry
from .traits import Kind, Traits, category, elementwise_ops, is_elementwise, kind, ops_of_kind, traits

__all__ = ["Kind", "Traits", "category", "decompose", "elementwise_ops", "fused", "geometry", "is_elementwise",
           "kind", "ops_of_kind", "traits"]  # fmt: skip
