"""fuse-elementwise: maximal regions of element-wise, broadcast and injective ops, with the
product or reduction they feed or follow, become one ``irforge::FusedGroup`` call each.

The grouping is TVM's FuseOps.  Every op gets a pattern kind (:func:`kind`): element-wise
(broadcasting included), injective (reshapes, transposes, slices, concatenation, gathers),
reduction, out-element-wise-fusable (convolutions and matrix products, whose results an
element-wise epilogue can consume as they are produced) or opaque.  Walking the graph in order,
a node joins the region that ends at its immediate post-dominator (the first node every path from
it to the graph's outputs passes through) when every node of that region fits the node's group:

- a product's group takes element-wise ops only (its epilogue: bias, residual, activation);
- an element-wise or injective group takes element-wise and injective ops, and may end in one
  reduction (whose input the reduction then reads as it computes it);
- opaque ops (softmax, normalizations, control flow, unknown domains) join nothing.

Because a region holds every node on every path between its two ends, merging it cannot create
a cycle, and its intermediate values are read only inside it.  Each group of two or more nodes
becomes one call of a model-local function holding the nodes it replaced (one overload per
distinct body, named after its ops: ``FusedGroup@Conv_Add_Relu_<hash>``), so the model still
runs on every engine, and a compiler that fuses by function sees the groups.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from ..core_ir.clone import clone_node
from ..core_ir.graph import Graph
from ..core_ir.model import Function, Model
from ..core_ir.node import Node
from ..core_ir.value import Value
from ..ops.traits import Kind, ops_of_kind
from .base import Pass, PassContext, PassResult
from .fused_ops import DOMAIN, import_domain

ELEMWISE = ops_of_kind(Kind.ELEMWISE)
INJECTIVE = ops_of_kind(Kind.INJECTIVE)
REDUCTION = ops_of_kind(Kind.REDUCTION)
PRODUCTS = ops_of_kind(Kind.OUT_ELEMWISE_FUSABLE)
FUSED_PRODUCTS = frozenset({"FusedConv", "FusedGemm", "FusedMatMul"})
GROUP_OP = "FusedGroup"
_CAPTURED_ELEMENTS = 64
"""Constants up to this size (axes, shapes, scalars) move into the group's body, where a compiler
needs them known; larger ones (weights) stay inputs of the call, shared and stored once."""


def kind(node: Node) -> Kind:
    """The pattern kind of ``node``: what a fusion group may do with it."""
    if node.subgraphs():
        return Kind.OPAQUE
    if node.domain == DOMAIN:
        return Kind.OUT_ELEMWISE_FUSABLE if node.op_type in FUSED_PRODUCTS else Kind.OPAQUE
    if node.domain not in ("", "ai.onnx") or len([o for o in node.outputs if o is not None]) != 1:
        return Kind.OPAQUE
    if node.op_type in ELEMWISE:
        return Kind.ELEMWISE
    if node.op_type in INJECTIVE:
        return Kind.INJECTIVE
    if node.op_type in REDUCTION:
        return Kind.REDUCTION
    if node.op_type in PRODUCTS:
        return Kind.OUT_ELEMWISE_FUSABLE
    return Kind.OPAQUE


_EXIT = -1


def _post_dominators(nodes: list[Node], graph: Graph) -> dict[int, int]:
    """Immediate post-dominator of each node (by position; ``_EXIT`` for the graph's end)."""
    import networkx as nx

    pos = {n: i for i, n in enumerate(nodes)}
    reverse = nx.DiGraph()
    reverse.add_node(_EXIT)
    for i, n in enumerate(nodes):
        reverse.add_node(i)
        ends = False
        for o in n.outputs:
            if o is None:
                continue
            if o.is_graph_output() or not o.has_uses():
                ends = True
            for user, _ in o.uses():
                j = pos.get(user)
                if j is None:  # read inside a subgraph: the value leaves this graph
                    ends = True
                else:
                    reverse.add_edge(j, i)
        if ends:
            reverse.add_edge(_EXIT, i)
    return nx.immediate_dominators(reverse, _EXIT)


@dataclass
class _Groups:
    """Union-find over node positions, each root knowing its members."""

    nodes: list[Node]
    kinds: list[Kind]
    pos: dict[Node, int]

    def __post_init__(self):
        self.parent = list(range(len(self.nodes)))
        self.members = {i: [i] for i in range(len(self.nodes))}

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def fits(self, start: int, region: set[int]) -> bool:
        """Whether the union of the groups of ``region`` (which starts at ``start``) is one legal
        group.  A product's group grows only from the product's side: ops that compute its
        input or another operand of its epilogue do not join it (TVM's rule too)."""
        roots = {self.find(i) for i in region}
        members = {m for r in roots for m in self.members[r]}
        kinds = [self.kinds[m] for m in members]
        if Kind.OPAQUE in kinds or kinds.count(Kind.OUT_ELEMWISE_FUSABLE) > 1:
            return False
        own = [self.kinds[m] for m in self.members[self.find(start)]]
        if Kind.OUT_ELEMWISE_FUSABLE in kinds and Kind.OUT_ELEMWISE_FUSABLE not in own:
            return False
        if Kind.OUT_ELEMWISE_FUSABLE in kinds:
            return all(k in (Kind.ELEMWISE, Kind.OUT_ELEMWISE_FUSABLE) for k in kinds)
        else:
            reductions = [m for m in members if self.kinds[m] == Kind.REDUCTION]
            if len(reductions) > 1 or (reductions and any(self._reads(m, reductions[0]) for m in members)):
                return False
        return self._convex(members)

    def _convex(self, members: set[int]) -> bool:
        """No path leaves the group and comes back (which would make the call its own input).
        Only nodes before the group's last member can lead back into it."""
        last = max(members)
        seen: set[int] = set()
        stack = [self.pos[u] for m in members for o in self.nodes[m].outputs if o is not None
                 for u, _ in o.uses() if self.pos.get(u, last) < last and self.pos[u] not in members]  # fmt: skip
        while stack:
            i = stack.pop()
            if i in members:
                return False
            if i in seen:
                continue
            seen.add(i)
            stack.extend(self.pos[u] for o in self.nodes[i].outputs if o is not None
                         for u, _ in o.uses() if self.pos.get(u, last + 1) <= last)  # fmt: skip
        return True

    def _reads(self, reader: int, producer: int) -> bool:
        return any(v in self.nodes[producer].outputs for v in self.nodes[reader].inputs if v is not None)

    def merge(self, region: set[int]) -> None:
        roots = sorted({self.find(i) for i in region})
        keep = roots[0]
        for r in roots[1:]:
            self.parent[r] = keep
            self.members[keep] += self.members.pop(r)


def _region(nodes: list[Node], start: int, end: int, pos: dict[Node, int], kinds: list[Kind]) -> set[int] | None:
    """Every node on a path from ``start`` to ``end`` (both included), or ``None`` when an
    opaque node is among them."""
    region, stack = {start, end}, [start]
    while stack:
        i = stack.pop()
        for o in nodes[i].outputs:
            for user, _ in (o.uses() if o is not None else ()):
                j = pos.get(user)
                if j is None or j in region:
                    continue
                if kinds[j] == Kind.OPAQUE or j > end:
                    return None
                region.add(j)
                stack.append(j)
    return region


def find_groups(graph: Graph) -> list[list[Node]]:
    """The fusion groups of ``graph`` with two or more nodes, each in graph order."""
    nodes = list(graph)
    kinds = [kind(n) for n in nodes]
    if sum(k != Kind.OPAQUE for k in kinds) < 2:
        return []
    ipdom = _post_dominators(nodes, graph)
    pos = {n: i for i, n in enumerate(nodes)}
    groups = _Groups(nodes, kinds, pos)
    for i, k in enumerate(kinds):
        end = ipdom.get(i, _EXIT)
        if k in (Kind.OPAQUE, Kind.REDUCTION) or end == _EXIT:
            continue
        region = _region(nodes, i, end, pos, kinds)
        if region is not None and groups.fits(i, region):
            groups.merge(region)
    return [[nodes[m] for m in sorted(ms)] for ms in groups.members.values() if len(ms) > 1]


def _materialize(graph: Graph, members: list[Node], model: Model, opset: dict[str, int]) -> None:
    inside = set(members)
    produced = {o for n in members for o in n.outputs if o is not None}
    inputs = list(dict.fromkeys(v for n in members for v in n.inputs if v is not None and v not in produced))
    outputs = [o for o in produced if o.is_graph_output() or any(u not in inside for u, _ in o.uses())]
    outputs.sort(key=lambda o: (members.index(o.producer()), o.index))
    captured = [v for v in inputs if v.is_constant() and math.prod(v.const_value.shape) <= _CAPTURED_ELEMENTS]
    inputs = [v for v in inputs if v not in captured]
    vmap: dict[Value, Value] = {v: Value(f"c{k}", v.type, v.const_value) for k, v in enumerate(captured)}
    formals = []
    for k, v in enumerate(inputs):
        formal = Value(f"x{k}", v.type)
        vmap[v] = formal
        formals.append(formal)
    body_nodes = [clone_node(n, vmap) for n in members]
    for k, n in enumerate(body_nodes):
        n.name = f"n{k}"
    body = Graph(formals, [vmap[o] for o in outputs], body_nodes, [vmap[v] for v in captured], name=GROUP_OP,
                 opset_imports=dict(opset))  # fmt: skip
    for k, n in enumerate(body_nodes):  # names that depend on the body only, so equal groups share one
        for j, o in enumerate(n.outputs):
            if o is not None and o not in body.outputs:
                o.name = f"t{k}_{j}"
    for k, o in enumerate(body.outputs):
        o.name = f"y{k}"
    from ..core_ir.printer import print_graph

    digest = hashlib.blake2b(print_graph(body).encode(), digest_size=4).hexdigest()
    overload = "_".join(dict.fromkeys(n.op_type for n in members)) + "_" + digest
    if (DOMAIN, GROUP_OP, overload) not in model.functions:
        model.add_function(Function(DOMAIN, GROUP_OP, body, overload=overload))
    last = members[-1]
    call = Node(GROUP_OP, inputs, domain=DOMAIN, outputs=[f"{o.name}__group" for o in outputs], overload=overload,
                output_types=[o.type for o in outputs], name=f"{GROUP_OP}_{last.name}" if last.name else "")
    graph.insert_before(last, call)
    for o, new in zip(outputs, call.outputs, strict=True):
        o.replace_all_uses_with(new)
    graph.remove(members)
    for v in captured:
        if not v.has_uses() and v.is_initializer():
            graph.remove_initializer(v)


@dataclass(frozen=True)
class FuseElementwise(Pass):
    name = "fuse-elementwise"
    summary = "TVM FuseOps-style groups (product + epilogue, element-wise/injective chains) -> irforge::FusedGroup"
    recurse = False

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        model = ctx.model
        if model is None:
            return PassResult(False)
        # a group nobody reads (dead code) would become a call with no results: dce's business, not ours
        groups = [g for g in find_groups(graph) if any(_read_outside(o, g) for n in g for o in n.outputs if o)]
        opset = {**ctx.opset_imports(graph)}
        for members in groups:
            _materialize(graph, members, model, opset)
        if groups:
            import_domain(model, DOMAIN)
            if any(_out_of_order(graph)):
                graph.sort()
        return PassResult(bool(groups), {"groups": len(groups), "nodes": sum(len(g) for g in groups)})


def _read_outside(value: Value, members: list[Node]) -> bool:
    return value.is_graph_output() or any(u not in members for u, _ in value.uses())


def _out_of_order(graph: Graph):
    seen: set[Value] = set(graph.inputs) | set(graph.initializers.values())
    for n in graph:
        yield any(v is not None and v not in seen and v.producer() is not None and v.graph is graph
                  for v in n.inputs)  # fmt: skip
        seen.update(o for o in n.outputs if o is not None)
