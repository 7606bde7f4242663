"""The built-in passes, registered through the same hooks as any third-party plugin."""

from __future__ import annotations

from ..passes.cancel_reshapes import CancelReshapes
from ..passes.canonicalize import PATTERNS, Canonicalize
from ..passes.combine_parallel_matmul import CombineParallelMatMul
from ..passes.constant_fold import ConstantFold
from ..passes.convert_layout import BODIES as POOL_BODIES
from ..passes.convert_layout import CancelTransposes, ConvertLayout
from ..passes.convert_precision import ConvertPrecision
from ..passes.cse import CommonSubexpressionElimination
from ..passes.dce import DeadCodeElimination
from ..passes.expand_functions import ExpandFunctions
from ..passes.fold_matmul_scale import FoldMatMulScale
from ..passes.freeze_initializers import FreezeInitializers
from ..passes.fuse_activation import BODIES as ACTIVATION_BODIES
from ..passes.fuse_activation import FuseActivation
from ..passes.fuse_attention import BODIES as ATTENTION_BODIES
from ..passes.fuse_attention import FuseAttention
from ..passes.fuse_conv_bn import PATTERNS as CONV_PATTERNS
from ..passes.fuse_conv_bn import ExpandBatchNorm, FuseConvBatchNorm
from ..passes.fuse_elementwise import FuseElementwise
from ..passes.fuse_gelu import BODIES as GELU_BODIES
from ..passes.fuse_gelu import FuseGelu
from ..passes.fuse_matmul_add import PATTERNS as FUSION_PATTERNS
from ..passes.fuse_matmul_add import FuseMatMulAdd
from ..passes.fuse_norm import BODIES as NORM_BODIES
from ..passes.fuse_norm import FuseLayerNorm
from ..passes.fuse_pad_conv import PATTERNS as PAD_PATTERNS
from ..passes.fuse_pad_conv import FusePadConv
from ..passes.fuse_rms_norm import BODIES as RMS_NORM_BODIES
from ..passes.fuse_rms_norm import FuseRmsNorm
from ..passes.fuse_rotary import BODIES as ROTARY_BODIES
from ..passes.fuse_rotary import FuseRotary
from ..passes.inline_functions import InlineFunctions
from ..passes.levels import LEVELS
from ..passes.lower_fused import KERNELS, LowerFused
from ..passes.normalize_reductions import NormalizeReductions
from ..passes.shape_inference import ShapeInference
from ..passes.topological_sort import TopologicalSort
from .hookspecs import hookimpl


@hookimpl
def irforge_register_passes() -> list[type]:
    return [
        ShapeInference, ConstantFold, InlineFunctions, Canonicalize, CommonSubexpressionElimination,
        DeadCodeElimination, TopologicalSort, FuseMatMulAdd, CancelReshapes, FreezeInitializers,
        FuseConvBatchNorm, ExpandFunctions, FusePadConv, FuseActivation, LowerFused, FuseGelu, FuseLayerNorm,
        FuseAttention, FuseRmsNorm, FoldMatMulScale, ConvertLayout, CancelTransposes, ConvertPrecision,
        FuseElementwise, CombineParallelMatMul, ExpandBatchNorm, NormalizeReductions, FuseRotary,
    ]  # fmt: skip


@hookimpl
def irforge_register_patterns() -> list:
    return [*PATTERNS, *FUSION_PATTERNS, *CONV_PATTERNS, *PAD_PATTERNS]


@hookimpl
def irforge_register_pipelines() -> list[tuple[str, str]]:
    return list(LEVELS.items())


@hookimpl
def irforge_register_backends() -> list[tuple[str, object]]:
    from ..backends.onnx.onnxruntime import OnnxRuntimeBackend
    from ..backends.reference import ReferenceBackend
    from ..backends.stablehlo import StableHLOBackend
    from ..backends.stablehlo.xla import XLABackend
    from ..backends.tvm import TVMBackend

    return [(b.name, b) for b in (ReferenceBackend(), OnnxRuntimeBackend(), StableHLOBackend(), XLABackend(),
                                  TVMBackend())]  # fmt: skip


@hookimpl
def irforge_register_fused_ops() -> list[tuple[str, object]]:
    return [*ATTENTION_BODIES, *ACTIVATION_BODIES, *GELU_BODIES, *NORM_BODIES, *RMS_NORM_BODIES, *ROTARY_BODIES,
            *POOL_BODIES]


@hookimpl
def irforge_register_kernels() -> list[tuple[str, str, object]]:
    return list(KERNELS)
