"""The verifier's fast paths: use lists checked by count, scopes shared with subgraphs, names listed once."""

from __future__ import annotations

from irforge.core_ir import parse_graph, verify

WIDE = 40  # readers of one value: beyond Value._SMALL, so its use list is a dict


def _wide_graph():
    body = "\n".join(f"  %r{i} = Relu(%x)" for i in range(WIDE))
    outs = ", ".join(f"%r{i}" for i in range(WIDE))
    return parse_graph(f"graph @wide(%x: f32[2]) {{\n{body}\n  return {outs}\n}}\n")


def _rules(problems):
    return [(p.rule, p.message) for p in problems]


def test_many_readers_verify_clean():
    g = _wide_graph()
    assert type(g.inputs[0]._uses) is dict
    assert verify(g, raise_on_error=False) == []


def test_stale_use_in_a_large_use_list_is_found():
    g = _wide_graph()
    gone = g.nodes[-1]
    g.set_output(WIDE - 1, g.inputs[0])
    g.remove(gone)
    g.inputs[0]._add_use(gone, 0)  # behind the API's back: a removed node still listed
    problems = _rules(verify(g, raise_on_error=False))
    assert problems == [("use-list", f"%x lists a use by {gone.describe()}, which does not read it")]


def test_stale_use_in_a_small_use_list_is_found():
    g = parse_graph("graph @g(%x: f32[2]) {\n  %y = Relu(%x)\n  %z = Neg(%y)\n  return %y\n}\n")
    neg = g.nodes[1]
    g.remove(neg)
    g.nodes[0].outputs[0]._add_use(neg, 0)
    assert [r for r, _ in _rules(verify(g, raise_on_error=False))] == ["use-list"]


IF_READS_OUTER = """\
graph @main(%c: bool[], %x: f32[2]) {
  %z = Neg(%x)
  %y = If(%c) <then_branch = graph @then() {
      %t = Relu(%z)
      return %t
    }, else_branch = graph @else() {
      return %z
    }>
  return %y
}
"""


def test_subgraph_sees_outer_values_defined_before_it():
    assert verify(parse_graph(IF_READS_OUTER), raise_on_error=False) == []


def test_subgraph_reading_an_outer_value_defined_after_it_is_refused():
    g = parse_graph(IF_READS_OUTER)
    neg, if_node = g.nodes
    g.move_after(if_node, neg)  # %z is now defined after the If whose branches read it
    problems = _rules(verify(g, raise_on_error=False))
    assert ("ssa", "input 0 %z is not defined in this graph or an enclosing one") in problems
    assert ("ssa", "subgraph else_branch output 0 %z is not defined") in problems


def test_a_name_defined_in_a_subgraph_and_outside_is_found():
    g = parse_graph(IF_READS_OUTER.replace("%t", "%z2").replace("%y = If", "%t = If").replace("return %y", "return %t"))
    g.nodes[1].attributes["then_branch"].value.nodes[0].outputs[0].name = "t"
    problems = _rules(verify(g, raise_on_error=False))
    assert problems == [("ssa", "the name %t is defined twice")]


def test_unnamed_values_are_not_duplicates():
    g = _wide_graph()
    for n in g.nodes[: WIDE // 2]:
        n.outputs[0].name = None
    g.set_outputs(g.nodes[-1].outputs)
    assert [p for p in verify(g, raise_on_error=False) if "twice" in p.message] == []


def _tensor_model(tensor, as_constant=False):
    import onnx
    from onnx import helper

    import irforge

    if as_constant:
        nodes = [helper.make_node("Constant", [], ["y"], value=tensor, name="const")]
        inits = []
    else:
        nodes, inits = [helper.make_node("Identity", ["w"], ["y"], name="id")], [tensor]
    out = helper.make_tensor_value_info("y", tensor.data_type, None)
    proto = helper.make_model(helper.make_graph(nodes, "g", [], [out], inits),
                              opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
    return irforge.from_onnx(onnx.load_from_string(proto.SerializeToString()))


def test_payloads_must_fit_their_dtype_and_shape_without_being_decoded():
    from onnx import TensorProto

    from irforge.core_ir import verify_model

    def problems(tensor, as_constant=False):
        return [str(p) for p in verify_model(_tensor_model(tensor, as_constant), raise_on_error=False)]

    assert problems(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2], raw_data=b"\0" * 8)) == []
    assert problems(TensorProto(name="w", data_type=TensorProto.INT4, dims=[3], int32_data=[1, 2])) == []
    assert problems(TensorProto(name="w", data_type=TensorProto.COMPLEX64, dims=[1], float_data=[1, 2])) == []
    assert problems(TensorProto(name="w", data_type=TensorProto.STRING, dims=[2], string_data=[b"a", b"b"])) == []
    short = problems(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1000], raw_data=b"\0" * 4))
    assert short and "initializer %w has 4 bytes of raw_data, but a FLOAT[1000] tensor needs 4000" in short[0]
    packed = problems(TensorProto(name="w", data_type=TensorProto.INT64, dims=[4], int64_data=[1, 2**40, 3]))
    assert "has 3 entries in int64_data, but a INT64[4] tensor needs 4" in packed[0]
    constant = problems(TensorProto(name="v", data_type=TensorProto.FLOAT, dims=[-1]), as_constant=True)
    assert "tensor attribute 'value' has a negative dim -1" in constant[0] and 'Constant "const"' in constant[0]
    huge = problems(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**32, 2**32]))
    assert "overflow int64" in huge[0]
    assert problems(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[0])) == []


def test_functions_that_call_themselves_through_others_are_named_in_order():
    from irforge.core_ir import Function, Graph, Model, Node, Value, verify_model

    def function(name, callee):
        x = Value("x")
        g = Graph([x], [], name=name)
        call = Node(callee, [x], domain="local")
        g.append(call)
        g.set_outputs([call.output])
        return Function("local", name, g)

    fns = [function("A", "B"), function("B", "C"), function("C", "A"), function("D", "A")]
    x = Value("x")
    main = Graph([x], [], name="main")
    main.append(Node("D", [x], domain="local"))
    main.set_outputs([next(iter(main)).output])
    model = Model(main, opset_imports={"": 17, "local": 1}, functions={f.key: f for f in fns})
    problems = [p for p in verify_model(model, raise_on_error=False) if p.rule == "function"]
    assert [p.message for p in problems] == [  # one problem for the cycle; D only calls into it
        "function local::A calls itself: local::A -> local::B -> local::C -> local::A; no runtime can expand it"]
