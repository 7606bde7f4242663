"""The predefined pipelines behind ``-O0`` … ``-O3`` (registered as the pipelines ``O0`` … ``O3``).

- ``O0``: nothing; the model is only loaded, verified and saved.
- ``O1``: the cleanup every model wants and no result can notice: in models older than IR 4,
  initializers leave the graph inputs (callers could never feed them), inline model-local functions,
  fold constants (results up to 1 MiB), infer shapes on what is left and fold what they make known
  (``Shape``, ``Size``), fold zero Pads into the Conv after them, fuse linear layers
  (MatMul + bias Add) into Gemm, fold BatchNormalization and per-channel scale/shift into the
  Conv, Gemm, MatMul or ConvTranspose before them and drop the Reshape pairs the linear layers
  leave around element-wise activations, then canonicalize,
  fold, merge common subexpressions and drop dead code until nothing changes; finally a
  topological order.
- ``O2``: ``O1``, then shapes are inferred again on the simplified graph (folding often makes
  shapes static that were not) and the simplification round runs once more to use them; then
  the fusions: GELU, layer norm (with a residual Add), RMS norm, rotary embeddings and attention
  written in primitives become one op each, constant scalar factors join the MatMul weights next to them, and
  every Conv, Gemm and MatMul absorbs the activation after it (each fused op is of domain
  ``irforge`` and carries its decomposition as a model-local function, so every runtime still
  runs it); a last simplification round cleans up after them.
- ``O3``: ``O2`` with a 16 MiB folding limit: fewer nodes for larger files.

A target (``irforge optimize --target onnxruntime``, ``irforge.optimize(..., target=...)``) adds
its lowering at the end: ``lower-fused{target=X},dce`` swaps fused ops for the target's own
kernels; at ``O3``, a target whose ``preferred_layout`` is not NCHW first gets ``convert-layout``
and ``cancel-transposes`` (no built-in one).
"""

from __future__ import annotations

_FUSE = "fuse-pad-conv,fuse-matmul-add,fuse-conv-bn,cancel-reshapes"
_SIMPLIFY = "fixpoint(canonicalize,constant-fold,cse,dce){max-iterations=8}"
_FUSE_OPS = ("normalize-reductions,dce,fuse-gelu,fuse-layer-norm,fuse-rms-norm,fuse-rotary,fuse-attention,"
             "fold-matmul-scale,"
             "fuse-activation,combine-parallel-matmul")
"""The -O2 fusions, in order: JAX's reductions in pieces first become the ops the fusions match;
GELU's own 0.5 must be inside its fused op before ``fold-matmul-scale`` could move it into the next
layer's weights; the projections combine last, once an activation after one of them is fused with
it (a gated MLP's gate keeps its fused activation)."""

LEVELS: dict[str, str] = {
    "O0": "",
    "O1": f"freeze-initializers,inline-functions,constant-fold,shape-inference,constant-fold,{_FUSE},{_SIMPLIFY},"
    "topological-sort",
    "O2": f"O1,shape-inference,{_SIMPLIFY},{_FUSE_OPS},{_SIMPLIFY},topological-sort",
    "O3": (
        "freeze-initializers,inline-functions,constant-fold{size-limit=16777216},shape-inference,"
        "constant-fold{size-limit=16777216},"
        f"{_FUSE},"
        "fixpoint(canonicalize,constant-fold{size-limit=16777216},cse,dce){max-iterations=8},"
        "shape-inference,fixpoint(canonicalize,constant-fold{size-limit=16777216},cse,dce){max-iterations=8},"
        f"{_FUSE_OPS},fixpoint(canonicalize,constant-fold{{size-limit=16777216}},cse,dce){{max-iterations=8}},"
        "topological-sort"
    ),
}


LEVEL_NAMES = tuple(name.removeprefix("O") for name in LEVELS)
"""The levels ``-O`` takes, on every command: ``0`` to ``3``."""


def with_target(pipeline: str, target) -> str:
    """``pipeline`` followed by ``target``'s lowering of the fused ops (nothing without a target).

    ``target`` is a registered backend (:class:`irforge.backends.Backend`: its ``lowering`` is
    the pipeline text that ends a level for it, and at ``O3`` a ``preferred_layout`` other than
    NCHW first converts the layout), or the name of a built-in one.  Built-in layouts stay NCHW:
    XLA's CPU convolutions are faster channels-last one by one, but ``convert-layout{to=NHWC}``
    measured no gain on whole networks here (MobileNetV2 1.08x, ResNet-50 0.89x against ``-O1``;
    docs/benchmarks.md, "Latency"), so it is a pass to ask for, not part of a level.
    """
    if not target:
        return pipeline
    if isinstance(target, str):
        lowering, layout = f"lower-fused{{target={target}}},cse,dce", "NCHW"
    else:
        lowering, layout = target.lowering, target.preferred_layout
    steps = [pipeline] if pipeline else []
    if pipeline == "O3" and layout != "NCHW":
        steps.append(f"convert-layout{{to={layout}}},fixpoint(cancel-transposes,dce){{max-iterations=8}}")
    if lowering:
        steps.append(lowering)
    return ",".join(steps)
