"""convert-precision{to=float16}: a float32 model computed in float16 or bfloat16, with casts only
where the two precisions meet.

Half-precision halves weights and activations in memory and runs on the tensor cores of GPUs and
the AMX/AVX-512-BF16 units of recent CPUs. The products (:data:`COMPUTE`: convolutions, matrix
products and their fused forms) start low-precision regions, and every other op joins the region of
its inputs: a node converts when its schema accepts the lower type for its float32 operands and it
is a product or reads a value already in low precision. Its float32 inputs become low-precision
values and its outputs are typed so. Constants are converted once (payloads rounded, values beyond
the type's range clamped to its largest finite value, so a ``-1e9`` mask fill stays a large
negative number rather than ``-inf``); other values get one ``Cast`` each, placed after their
producer and shared by every reader. A node that stays in float32 reads its low-precision inputs
through a cast back.

What stays float32:

- with ``keep-io=true`` (the default) the graph's inputs and outputs, so callers feed and read the
  same tensors as before (the outputs keep their names; the casts sit just inside the graph);
- with ``keep-sensitive=true`` (the default) the numerically sensitive ops of :data:`SENSITIVE`:
  softmax, the reductions that sum, and the normalizations, whose statistics lose most in 10 or 7
  bits of mantissa; ``keep-sensitive=false`` converts them too;
- the ops named in ``block`` (``block=Exp,Pow``), in any domain;
- ops whose output type an attribute sets (``ConstantOfShape``, the random ops, ``EyeLike``), ops
  with subgraphs, and ops of other domains than ONNX's and irforge's (whose fused ops carry
  type-generic decompositions).  A ``Cast`` to float32 becomes a cast to the lower type.

The pass looks at the main graph only; a value read inside a subgraph keeps its float32 type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core_ir.attributes import AttrKind
from ..core_ir.builder import Builder, NameGenerator
from ..core_ir.dtypes import DataType, from_short_name, to_numpy
from ..core_ir.graph import Graph
from ..core_ir.node import Node
from ..core_ir.pattern import constant_value
from ..core_ir.tensors import NumpyTensor
from ..core_ir.types import TensorType
from ..core_ir.value import Value
from .base import Pass, PassContext, PassError, PassResult
from .fused_ops import DOMAIN
from .shape_inference import ShapeInference

SENSITIVE = frozenset({
    "Softmax", "LogSoftmax", "CumSum",
    "ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
    "ReduceProd",
    "LayerNormalization", "SkipLayerNormalization", "RMSNormalization", "GroupNormalization",
    "InstanceNormalization", "LpNormalization", "MeanVarianceNormalization", "Attention",
})  # fmt: skip
"""Ops kept in float32 by default: what they sum or normalize over loses most in half precision.
(``Attention`` is irforge's fused attention, whose softmax is inside it.)"""

COMPUTE = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum", "FusedConv", "FusedGemm", "FusedMatMul"})
"""The ops that start a low-precision region: the products, where half precision pays.  Every
other op follows its inputs (converts when one of them already is low precision), so an op the
lower type cannot run in is not wrapped in a pair of casts, and no cast pair is spent on a lone
element-wise op between float32 ones."""

LOW_TYPES = {"float16": DataType.FLOAT16, "bfloat16": DataType.BFLOAT16}
_LARGEST = {DataType.FLOAT16: 65504.0, DataType.BFLOAT16: 3.3895313892515355e38}


def _sets_output_type(name: str) -> bool:
    """Attributes that fix an output's element type (``to``, ``dtype``, ``output_datatype``, a
    ``value``): such ops keep theirs (``Cast`` and ``Constant`` aside)."""
    return name == "to" or name.endswith(("dtype", "datatype")) or name.startswith(("value", "sparse_value"))


def low_type(spelling: str) -> DataType:
    """``float16``/``bfloat16`` (or the text format's ``f16``/``bf16``) as a :class:`DataType`."""
    dtype = LOW_TYPES.get(spelling) or from_short_name(spelling)
    if dtype not in LOW_TYPES.values():
        raise PassError(f"convert-precision: no precision {spelling!r}; use to=float16 or to=bfloat16")
    return dtype


def _dtype(v: Value | None) -> int | None:
    return getattr(v.type, "dtype", None) if v is not None else None


def _allowed(schema, formals, index: int, low: str) -> bool:
    """Whether the ``index``-th input (or output) of ``schema`` may be of tensor type ``low``."""
    if not formals:
        return False
    if index >= len(formals):
        variadic = formals[-1].option.name == "Variadic"
        if not variadic:
            return False
        index = len(formals) - 1
    type_str = formals[index].type_str
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    return f"tensor({low})" in constraints.get(type_str, [type_str])


@dataclass
class _Converter:
    graph: Graph
    low: DataType
    keep_io: bool
    blocked: frozenset[str]
    opset: dict[str, int]
    functions: dict

    def __post_init__(self):
        self.names = NameGenerator(self.graph)
        self.lowered: set[Value] = set()
        self.casts: dict[tuple[Value, int], Value] = {}
        self.replaced_constants: list[Value] = []
        self.bodies: dict[tuple[str, str, str], bool] = {}
        self.stats = {"converted": 0, "kept": 0, "casts": 0}
        self.low_name = "float16" if self.low == DataType.FLOAT16 else "bfloat16"

    # -- what converts -----------------------------------------------------------------------
    def slots(self, node: Node) -> tuple[list[bool], list[bool]] | None:
        """Per input and per output, whether it may be low precision; ``None`` keeps the node."""
        if node.op_type in self.blocked or node.op_type == "Constant":
            return None
        if any(a.kind in (AttrKind.GRAPH, AttrKind.GRAPHS) for a in node.attributes.values()):
            return None
        if any(v is not None and _dtype(v) is None for v in (*node.inputs, *node.outputs)):
            return None
        n_in, n_out = len(node.inputs), len(node.outputs)
        if node.domain == DOMAIN:
            body = self.functions.get((node.domain, node.op_type, node.overload))
            return ([True] * n_in, [True] * n_out) if body is not None and self.body_computes(body) else None
        if node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type == "Cast":
            return ([True], [True]) if node.attr("to") == DataType.FLOAT else None
        import onnx.defs

        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset.get("", 21), "")
        except onnx.defs.SchemaError:
            return None
        if any(_sets_output_type(name) for name in (*node.attributes, *schema.attributes)):
            return None
        outs = [_allowed(schema, schema.outputs, i, self.low_name) for i in range(n_out)]
        if not any(outs):
            return None  # the lower type is not one this op (at this opset) computes in
        return [_allowed(schema, schema.inputs, i, self.low_name) for i in range(n_in)], outs

    def body_computes(self, function) -> bool:
        """A fused op's body is type-generic; it computes in the lower type when each of its
        float-computing ops may (ONNX's Conv, for one, has no bfloat16 before opset 22)."""
        if function.key not in self.bodies:
            import onnx.defs

            opset = function.opset_imports.get("", self.opset.get("", 21))
            # a float constant inside the body (a fusion group's captured weights) keeps its type
            ok = not any(_dtype(v) == DataType.FLOAT for v in function.graph.initializers.values())
            for n in function.graph.all_nodes() if ok else ():
                if n.domain not in ("", "ai.onnx") or n.op_type in ("Constant", "Cast", "CastLike"):
                    continue
                schema = onnx.defs.get_schema(n.op_type, opset, "")
                outs = [_allowed(schema, schema.outputs, i, "float") for i in range(len(n.outputs))]
                if any(outs) and not any(_allowed(schema, schema.outputs, i, self.low_name)
                                         for i in range(len(n.outputs))):  # fmt: skip
                    ok = False
                    break
            self.bodies[function.key] = ok
        return self.bodies[function.key]

    # -- rewriting ---------------------------------------------------------------------------
    def run(self) -> dict[str, int]:
        graph = self.graph
        if not self.keep_io:
            for v in graph.inputs:
                if _dtype(v) == DataType.FLOAT and not v.is_constant():
                    self.retype(v)
        for node in list(graph):
            self.visit(node)
        self.cast_back_outside()
        self.drop_replaced()
        return self.stats

    def visit(self, node: Node) -> None:
        if node.op_type == "Constant" and constant_value(node.outputs[0]) is not None:
            return  # its readers take a converted copy (to_low)
        reads_float = any(_dtype(v) == DataType.FLOAT for v in (*node.inputs, *node.outputs))
        reads_low = any(v in self.lowered for v in node.inputs)
        if not (reads_float or reads_low):
            return
        leads = node.op_type in COMPUTE or reads_low
        slots = self.slots(node) if reads_float and leads else None
        if slots is None:
            if reads_float:
                self.stats["kept"] += 1
            for i, v in enumerate(node.inputs):
                if v in self.lowered:
                    node.set_input(i, self.cast(v, DataType.FLOAT))
            return
        ins, outs = slots
        for i, v in enumerate(node.inputs):
            if v is None:
                continue
            if ins[i] and _dtype(v) == DataType.FLOAT and v not in self.lowered:
                node.set_input(i, self.to_low(v))
            elif not ins[i] and v in self.lowered:
                node.set_input(i, self.cast(v, DataType.FLOAT))
        if node.op_type == "Cast":
            node.set_attribute("to", int(self.low), AttrKind.INT)
        for o, v in zip(outs, node.outputs, strict=True):
            if o and _dtype(v) == DataType.FLOAT:
                self.retype(v)
        self.stats["converted"] += 1

    def retype(self, v: Value) -> None:
        v.type = TensorType(self.low, v.type.shape)
        self.lowered.add(v)

    def to_low(self, v: Value) -> Value:
        payload = constant_value(v)
        if payload is None:
            return self.cast(v, self.low)
        key = (v, int(self.low))
        if key not in self.casts:
            array = payload.astype(np.float64)
            finite = np.isfinite(array)
            array[finite] = np.clip(array[finite], -_LARGEST[self.low], _LARGEST[self.low])
            b = Builder(self.graph, names=self.names)
            self.casts[key] = b.constant(NumpyTensor(array.astype(to_numpy(self.low)), self.low),
                                         name=self.names.fresh(f"{v.name}_{self.low_name}"))  # fmt: skip
            self.replaced_constants.append(v)
        return self.casts[key]

    def cast(self, v: Value, to: int) -> Value:
        key = (v, int(to))
        if key not in self.casts:
            producer = v.producer()
            first = next(iter(self.graph), None)
            if producer is not None and producer.graph is self.graph:
                b = Builder(self.graph, after=producer, names=self.names)
            else:
                b = Builder(self.graph, before=first, names=self.names)
            out = b.op.Cast(v, to=int(to))
            out.type = TensorType(to, getattr(v.type, "shape", None))
            self.casts[key] = out
            self.stats["casts"] += 1
        return self.casts[key]

    def cast_back_outside(self) -> None:
        """Readers in subgraphs and the graph's outputs (with ``keep-io``) get float32 back."""
        for v in list(self.lowered):
            for node, i in v.uses():
                if node.graph is not self.graph:
                    node.set_input(i, self.cast(v, DataType.FLOAT))
        if not self.keep_io:
            return
        for index, v in enumerate(self.graph.outputs):
            if v in self.lowered:
                back = self.cast(v, DataType.FLOAT)
                if back.is_graph_output():  # the same value is an output twice
                    self.graph.set_output(index, back)
                    continue
                name = v.name
                v.name = self.names.fresh(f"{name}_{self.low_name}")
                back.name = name
                self.graph.set_output(index, back)

    def drop_replaced(self) -> None:
        for v in self.replaced_constants:
            if v.has_uses():
                continue
            producer = v.producer()
            if producer is not None:
                self.graph.remove(producer)
            elif v.is_initializer():
                self.graph.remove_initializer(v)


@dataclass(frozen=True)
class ConvertPrecision(Pass):
    name = "convert-precision"
    summary = "float32 computed in float16/bfloat16, casts only at the boundaries; sensitive ops kept float32"
    recurse = False

    to: str = "float16"
    """The precision wanted: float16 or bfloat16."""
    keep_io: bool = True
    """Keep the graph's inputs and outputs float32 (casts just inside the graph)."""
    keep_sensitive: bool = True
    """Keep softmax, summing reductions and normalizations (:data:`SENSITIVE`) in float32."""
    block: tuple[str, ...] = ()
    """More op types to keep in float32, e.g. ``block=Exp,Pow``."""

    def __post_init__(self):
        low_type(self.to)  # an unknown precision is an error when the pipeline is read

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        low = low_type(self.to)
        if "" not in ctx.opset_imports(graph):
            return PassResult(False)  # no ONNX ops to convert (and no Cast to write)
        if any(v is not None and v.type is None for n in graph for v in n.outputs):
            ShapeInference().run(graph, ctx)  # what converts depends on the element types
        blocked = frozenset(self.block) | (SENSITIVE if self.keep_sensitive else frozenset())
        functions = ctx.model.functions if ctx.model is not None else {}
        stats = _Converter(graph, low, self.keep_io, blocked, ctx.opset_imports(graph), functions).run()
        return PassResult(stats["converted"] > 0, stats)
