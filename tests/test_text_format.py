"""The text form: readable, and parse(print(g)) is structurally equal to g for every feature."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from irforge.core_ir import (
    AttrKind,
    Builder,
    DataType,
    Graph,
    Model,
    ParseError,
    SparseTensor,
    TensorType,
    Value,
    graphs_equal,
    models_equal,
    parse,
    parse_graph,
    parse_model,
    print_graph,
    print_model,
    structural_diff,
)
from irforge.core_ir.model import Function
from irforge.core_ir.tensors import NumpyTensor
from irforge.core_ir.types import MapType, OptionalType, SequenceType, SparseTensorType

SIMPLE = """\
graph @main(%x: f32[batch,3], %w: f32[3]) {
  %y: f32[batch,3] = Add(%x, %w) with {name = "add0"}
  %z = com.microsoft::Gelu(%y)
  return %z
}
"""


def roundtrip(g: Graph) -> Graph:
    text = print_graph(g)
    again = parse_graph(text)
    diff = structural_diff(g, again)
    assert diff is None, f"{diff}\n{text}"
    assert print_graph(again) == text
    return again


def test_simple_text_is_stable():
    g = parse_graph(SIMPLE)
    assert print_graph(g) == SIMPLE
    add, gelu = g.nodes
    assert add.op_type == "Add" and add.name == "add0"
    assert gelu.domain == "com.microsoft"
    assert add.outputs[0].type == TensorType(DataType.FLOAT, ("batch", 3))
    assert gelu.inputs[0] is add.outputs[0]
    assert add.outputs[0].uses() == [(gelu, 0)]


def test_types_roundtrip():
    g = Graph(name="types")
    types = [
        TensorType(DataType.FLOAT, None),
        TensorType(DataType.BFLOAT16, ()),
        TensorType(DataType.FLOAT8E4M3FN, (1, "N", None)),
        TensorType(DataType.INT4, ("weird dim!",)),
        TensorType(DataType.STRING, (2,)),
        SequenceType(TensorType(DataType.INT64, (3,))),
        OptionalType(SequenceType(None)),
        MapType(DataType.STRING, TensorType(DataType.FLOAT, None)),
        SparseTensorType(DataType.FLOAT, (4, 4)),
        None,
    ]
    for i, t in enumerate(types):
        g.append_input(Value(f"in{i}", t))
    g.set_outputs(list(g.inputs))
    again = roundtrip(g)
    assert [v.type for v in again.inputs] == types


ALL_DTYPES = [dt for dt in DataType if dt != DataType.STRING]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("count", [0, 1, 5, 100])
def test_tensor_payloads_roundtrip_every_dtype(dtype, count):
    from irforge.core_ir.dtypes import to_numpy

    npdt = to_numpy(dtype)
    rng = np.random.default_rng(count)
    if npdt.kind == "c":
        data = (rng.standard_normal(count) + 1j * rng.standard_normal(count)).astype(npdt)
    elif npdt.kind == "b":
        data = rng.integers(0, 2, count).astype(bool)
    else:
        data = rng.integers(0, 2, count).astype(np.float32).astype(npdt)
        if count > 2 and npdt.kind == "f":
            data = (rng.standard_normal(count) * 3).astype(npdt)
    b = Builder(Graph(name="t"))
    c = b.constant(data.reshape((count,)) if count != 1 else data.reshape(()), name="c")
    b.graph.set_outputs([c])
    roundtrip(b.graph)


def test_strings_and_nan_payloads():
    b = Builder(Graph(name="t"))
    s = b.constant(np.array(["a", 'quote"d', "ünï", "line\nbreak"], dtype=object), name="s")
    nan = b.constant(np.array([np.nan, -np.inf, 0.0, -0.0], dtype=np.float32), name="nan")
    weird_nan = np.frombuffer(np.array([0x7FC00001, 0xFFC00000], dtype=np.uint32).tobytes(), np.float32)
    w = b.constant(weird_nan, name="w")
    b.graph.set_outputs([s, nan, w])
    again = roundtrip(b.graph)
    assert again.initializers["w"].const_value.numpy().view(np.uint32).tolist() == [0x7FC00001, 0xFFC00000]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=64))
def test_float32_lists_roundtrip_exactly(values):
    b = Builder(Graph(name="f"))
    c = b.constant(np.array(values, dtype=np.float32), name="c")
    b.graph.set_outputs([c])
    again = roundtrip(b.graph)
    assert again.initializers["c"].const_value.numpy().tobytes() == np.array(values, np.float32).tobytes()


def test_every_attribute_kind_roundtrips():
    g = Graph(name="attrs")
    x = g.append_input(Value("x", TensorType(DataType.FLOAT, (2,))))
    body = parse_graph("graph @body(%a: f32[2]) {\n  %b = Neg(%a)\n  return %b\n}\n")
    body2 = parse_graph("graph @body2() {\n  %c = Constant() <value_float = 1.0>\n  return %c\n}\n")
    sparse = SparseTensor(NumpyTensor(np.array([1.0, 2.0], np.float32)), NumpyTensor(np.array([0, 3])), (2, 2))
    b = Builder(g)
    node = b.add_node(
        "Custom",
        [x, None],
        {
            "i": 3,
            "f": 0.1,
            "s": "text",
            "t": np.arange(6, dtype=np.int32).reshape(2, 3),
            "g": body,
            "ints": [1, -2],
            "floats": [0.5, 1e-7],
            "strings": ["a", "b"],
            "tensors": [np.ones(2, np.float16)],
            "graphs": [body2],
            "sparse": sparse,
            "tp": TensorType(DataType.INT8, ("n",)),
        },
        domain="my.domain",
        num_outputs=2,
    )
    node.set_attribute("empty_ints", [], kind=AttrKind.INTS)
    node.set_attribute("empty_strings", [], kind=AttrKind.STRINGS)
    node.set_attribute("types", [TensorType(DataType.FLOAT, None)], kind=AttrKind.TYPE_PROTOS)
    node.set_attribute("sparses", [sparse], kind=AttrKind.SPARSE_TENSORS)
    g.set_outputs([node.outputs[0]])
    again = roundtrip(g)
    kinds = {a.name: AttrKind(a.kind).name for a in again.nodes[0].attributes.values()}
    assert kinds["empty_ints"] == "INTS" and kinds["sparse"] == "SPARSE_TENSOR" and kinds["tp"] == "TYPE_PROTO"


def test_subgraph_reads_outer_values():
    text = """\
graph @main(%c: bool[], %x: f32[2]) {
  %y = If(%c) <then_branch = graph @then() {
      %t = Neg(%x)
      return %t
    }, else_branch = graph @else() {
      return %x
    }>
  return %y
}
"""
    g = parse_graph(text)
    x = g.inputs[1]
    then_neg = g.nodes[0].attributes["then_branch"].value.nodes[0]
    assert then_neg.inputs[0] is x
    assert (then_neg, 0) in x.uses()
    assert g.nodes[0].attributes["else_branch"].value.outputs[0] is x
    assert print_graph(g) == text
    roundtrip(g)


def test_metadata_docs_names_and_odd_identifiers():
    g = parse_graph(
        """graph @"my graph"(%"x:0": f32[1] with {doc = "input doc", metadata = {"k": "v"}}) with {doc = "gdoc"} {
  %"y/1" = "weird op"(%"x:0") with {name = "n 1", doc = "ndoc", metadata = {"source.torch": "model.py:3"}}
  %#0 = Relu(%"y/1")
  _, %z = Split(%#0) <axis = 0>
  return %z
}"""
    )
    assert g.name == "my graph" and g.doc_string == "gdoc"
    assert g.inputs[0].metadata == {"k": "v"} and g.inputs[0].doc_string == "input doc"
    weird = g.nodes[0]
    assert weird.op_type == "weird op" and weird.metadata == {"source.torch": "model.py:3"}
    assert g.nodes[1].outputs[0].name is None
    assert g.nodes[2].outputs[0] is None
    roundtrip(g)


def test_model_with_functions_roundtrips():
    m = parse(
        """model with {ir_version = 10, producer_name = "p", doc = "d", metadata = {"a": "b"}} {
  opset "" = 21
  opset "custom" = 1
  func custom::@Scale(%x, %s) with {attributes = ["alpha"], opsets = {"": 21}, defaults = <beta = 2>} {
    %y = Mul(%x, %s)
    %a = Constant() <value_float = @alpha : float>
    %z = Mul(%y, %a)
    return %z
  }
  graph @main(%x: f32[3], %s: f32[3]) {
    %o = custom::Scale(%x, %s) <alpha = 2.0>
    return %o
  }
}"""
    )
    assert isinstance(m, Model)
    fn = m.functions[("custom", "Scale", "")]
    assert isinstance(fn, Function) and fn.attributes == ["alpha", "beta"]
    assert fn.attribute_defaults["beta"].value == 2
    assert fn.graph.nodes[1].attributes["value_float"].ref == "alpha"
    again = parse(print_model(m))
    assert models_equal(m, again) is None
    assert print_model(again) == print_model(m)


def test_forward_reference_parses_but_cycle_is_reported_by_verifier():
    from irforge.core_ir import VerificationError, verify

    g = parse_graph("graph @c(%x: f32[1]) {\n  %a = Add(%x, %b)\n  %b = Relu(%a)\n  return %b\n}")
    with pytest.raises(VerificationError, match="cycle"):
        verify(g)


@pytest.mark.parametrize(
    "text, message",
    [
        ("graph @g() {\n  return %nope\n}", "never defined"),
        ("graph @g(%x: f99[1]) {\n  return %x\n}", "unknown element type"),
        ("graph @g(%x: f32[1]) {\n  %y = Add(%x,\n}", "expected a value"),
        ("graph @g(%x: f32[1]) {\n  init %c = dense<f32[2]>[1.0]\n  return %x\n}", "needs 2 elements"),
        ("graph @g(%x: f32[1]) {\n  init %c = elided<f32[2]>\n  return %x\n}", "elided"),
        ("graph @g(%x: f32[1]) {\n  %y = Relu(%x)\n", "missing 'return'"),
        ("nonsense", "expected 'graph' or 'model'"),
        ("graph @g() { return } trailing", "unexpected text"),
        ("graph @g() {\n  \x01\n}", "unexpected character"),
    ],
)
def test_parse_errors_name_line_and_column(text, message):
    with pytest.raises(ParseError, match=message) as info:
        parse(text)
    assert info.value.line >= 1 and info.value.column >= 1
    with pytest.raises(ParseError, match=message) as streamed:
        parse(io.StringIO(text))
    assert (streamed.value.line, streamed.value.column) == (info.value.line, info.value.column)


def test_parse_error_position_is_exact():
    with pytest.raises(ParseError) as info:
        parse("graph @g(%x: f32[1]) {\n  %y = Relu(%x)\n  %z = Add(%y, ?)\n  return %z\n}\n")
    assert (info.value.line, info.value.column) == (3, 16)


def test_parse_reads_a_text_stream_a_line_at_a_time():
    text = print_model(parse_model(f'model {{\n  opset "" = 21\n  {SIMPLE}}}\n'))
    lines_read = []

    class Lines:
        def __iter__(self):
            for line in io.StringIO(text):
                lines_read.append(line)
                yield line

    assert models_equal(parse(Lines()), parse(text)) is None
    assert "".join(lines_read) == text


def test_equality_detects_differences():
    a = parse_graph(SIMPLE)
    b = parse_graph(SIMPLE.replace("add0", "add1"))
    assert not graphs_equal(a, b)
    assert "name" in structural_diff(a, b)
    c = parse_graph(SIMPLE.replace("Add(%x, %w)", "Add(%w, %x)"))
    assert "wiring" in structural_diff(a, c)


def test_write_model_streams_the_same_text_as_print_model():
    from irforge.core_ir import write_model

    model = parse_model(
        'model {\n  opset "" = 21\n  func local::@twice(%a) {\n    %b = Add(%a, %a)\n    return %b\n  }\n'
        "  graph @g(%x: f32[2]) {\n    %y = local::twice(%x)\n    return %y\n  }\n}\n"
    )
    chunks: list[str] = []

    class Sink(io.TextIOBase):
        def write(self, s: str) -> int:
            chunks.append(s)
            return len(s)

    write_model(model, Sink())
    assert "".join(chunks) == print_model(model)
    assert len(chunks) > 5  # written as it goes, not as one string
