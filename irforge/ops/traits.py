"""What kind of work each ONNX op does, declared once for every pass, backend and viewer.

MLIR keeps traits on the op and TVM one ``OpPatternKind`` per op; irforge keeps both here, in one
table: a fusion pass asks :func:`kind`, a layout pass whether an op is element-wise and of which
arity, irviz which colour family it belongs to.  An op missing from the table is opaque: no pass
may assume anything of it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.IntEnum):
    """TVM's op pattern kinds, in its order: a fusion group may take ops of its kind or a lower one."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


@dataclass(frozen=True)
class Traits:
    """The facts a rewrite may rely on without reading the op's schema."""

    kind: Kind
    category: str
    """irviz's colour family: product, activation, normalization, attention, pooling, reduction,
    shape, control, constant, elementwise."""
    arity: int | None = None
    """For element-wise ops: 1 or 2 operands, or ``None`` for three or any number."""
    axis_free: bool = False
    """Element-wise with broadcasting, and no attribute names an axis: the op commutes with any
    Reshape or Transpose applied to all its operands alike (layout-agnostic)."""


_TABLE: dict[str, Traits] = {}


def _declare(kind: Kind, category: str, ops: str, arity: int | None = None, axis_free: bool = False) -> None:
    for op in ops.split():
        _TABLE[op] = Traits(kind, category, arity, axis_free)


_E, _I, _R, _P, _O = Kind.ELEMWISE, Kind.INJECTIVE, Kind.REDUCTION, Kind.OUT_ELEMWISE_FUSABLE, Kind.OPAQUE
# element-wise, layout-agnostic
_declare(_E, "elementwise", "Abs Acos Acosh Asin Asinh Atan Atanh BitwiseNot Ceil Cos Cosh Erf Exp Floor "
         "IsInf IsNaN Log Neg Not Reciprocal Round Sign Sin Sinh Sqrt Tan", 1, True)
_declare(_E, "shape", "Identity Cast", 1, True)
_declare(_E, "activation", "Relu LeakyRelu Elu Selu Celu Sigmoid HardSigmoid HardSwish Tanh Softplus Softsign "
         "Gelu Mish ThresholdedRelu Shrink", 1, True)
_declare(_E, "elementwise", "Add Sub Mul Div Pow Mod BitShift BitwiseAnd BitwiseOr BitwiseXor And Or Xor Equal "
         "Greater GreaterOrEqual Less LessOrEqual", 2, True)
_declare(_E, "shape", "CastLike", 2, True)
_declare(_E, "elementwise", "Max Min Sum Mean", None, True)
_declare(_E, "shape", "Where", None, True)
_declare(_E, "activation", "Clip", None, True)
_declare(_E, "activation", "PRelu", 2, False)  # its slope broadcasts along the channel axis by rule
# data movement
_declare(_I, "shape", "Reshape Transpose Squeeze Unsqueeze Flatten Concat Slice Expand Gather Tile Pad "
         "DepthToSpace SpaceToDepth")
_declare(_O, "shape", "Split GatherElements GatherND Shape Size ConstantOfShape Range ScatterND "
         "ScatterElements Resize Compress NonZero Trilu OneHot")
_declare(_R, "reduction", "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceSumSquare "
         "ReduceLogSum ReduceLogSumExp ArgMax ArgMin")
_declare(_O, "reduction", "TopK CumSum CumProd")
_declare(_P, "product", "Conv ConvTranspose MatMul Gemm")
_declare(_O, "product", "ConvInteger MatMulInteger QLinearConv QLinearMatMul Einsum")
_declare(_O, "normalization", "BatchNormalization LayerNormalization InstanceNormalization GroupNormalization "
         "RMSNormalization SkipLayerNormalization SimplifiedLayerNormalization LpNormalization "
         "MeanVarianceNormalization Softmax LogSoftmax Hardmax")
_declare(_O, "activation", "Swish FastGelu BiasGelu QuickGelu")
_declare(_O, "attention", "Attention MultiHeadAttention GroupQueryAttention")
_declare(_O, "pooling", "MaxPool AveragePool GlobalAveragePool GlobalMaxPool LpPool MaxRoiPool RoiAlign")
_declare(_O, "control", "If Loop Scan SequenceMap")
_declare(_O, "constant", "Constant")

FUSED_DOMAINS = ("irforge", "com.microsoft")
"""Domains of fused kernels (irforge's own, onnxruntime's contrib ops)."""


def traits(op_type: str, domain: str = "") -> Traits | None:
    """The traits of an ONNX op (``None`` for ops of other domains and ops nobody declared)."""
    return _TABLE.get(op_type) if domain in ("", "ai.onnx") else None


def kind(op_type: str, domain: str = "") -> Kind:
    """The op's pattern kind; ``OPAQUE`` for ops nobody declared."""
    t = traits(op_type, domain)
    return Kind.OPAQUE if t is None else t.kind


def is_elementwise(op_type: str, domain: str = "") -> bool:
    """Whether the op computes each output element from the same element of its inputs."""
    return kind(op_type, domain) == Kind.ELEMWISE


def elementwise_ops(arity: int | str | None = "any", axis_free: bool = True) -> frozenset[str]:
    """The element-wise ops of ``arity`` (1, 2, None for three or more, ``"any"``), by default only
    the layout-agnostic ones."""
    return frozenset(op for op, t in _TABLE.items() if t.kind == Kind.ELEMWISE
                     and (arity == "any" or t.arity == arity) and (t.axis_free or not axis_free))  # fmt: skip


def ops_of_kind(k: Kind) -> frozenset[str]:
    """Every declared op of pattern kind ``k`` (what a fusion group of that kind may take)."""
    return frozenset(op for op, t in _TABLE.items() if t.kind == k)


def category(op_type: str, domain: str = "") -> str:
    """irviz's colour family: fused and contrib ops by domain, the rest by the kind of work."""
    t = _TABLE.get(op_type)
    if domain in FUSED_DOMAINS and t is None:
        return "fused"
    if t is None:
        return "elementwise" if not domain else "custom"
    return t.category


TYPE_ONLY_REVISIONS = frozenset({
    "Constant", "Cast", "CastLike", "Identity", "Reshape", "Shape", "Size", "Squeeze", "Unsqueeze", "Transpose",
    "Flatten", "Pad", "ConstantOfShape", "If", "Loop", "Scan",
})  # fmt: skip
"""Ops whose schema revisions from opset 19 on only admit more element types (float8, 4-bit,
float4, 2-bit): a function body written at one of those opsets means the same at a later one."""

TYPE_ONLY_SINCE = 19


def same_meaning(op_type: str, since_a: int, since_b: int) -> bool:
    """Whether two revisions of ``op_type`` (their ``since_version``) compute the same on the
    types both admit."""
    return since_a == since_b or (op_type in TYPE_ONLY_REVISIONS and min(since_a, since_b) >= TYPE_ONLY_SINCE)


__all__ = ["FUSED_DOMAINS", "TYPE_ONLY_REVISIONS", "Kind", "Traits", "category", "elementwise_ops",
           "is_elementwise", "kind", "ops_of_kind", "same_meaning", "traits"]  # fmt: skip
