"""ONNX in and out: every source kind, every attribute kind, functions, sparse initializers,
metadata, external data (lazy, confined to the model's folder) and models over 2 GiB."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnx.version_converter
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import irforge
from irforge.backends.onnx import save, to_proto
from irforge.core_ir import ExternalDataError, ExternalTensor, LoadError, ProtoTensor, interpret, models_equal
from irforge.core_ir.serde import model_from_proto

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "small_cnn.onnx")


def _model_with_everything() -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Add", ["x", "outer"], ["y"])], "body", [], [helper.make_tensor_value_info("y", 1, [2])]
    )
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "sp"),
        numpy_helper.from_array(np.array([0, 3], np.int64), "idx"),
        [2, 2],
    )
    node = helper.make_node("If", ["c"], ["out"], name="if0", then_branch=body, else_branch=body, doc_string="node doc")
    custom = helper.make_node(
        "Custom",
        ["x"],
        ["cust"],
        domain="my.ops",
        i=1,
        f=0.5,
        s=b"\xff\xfe bytes",
        t=numpy_helper.from_array(np.arange(3, dtype=np.int8)),
        ints=[1, 2],
        floats=[0.25],
        strings=[b"a", b"b"],
        tensors=[numpy_helper.from_array(np.zeros(2, np.float16))],
        graphs=[body],
        sparse_tensor=sparse,
        tp=helper.make_tensor_type_proto(1, ["n"]),
    )
    custom.metadata_props.add(key="source", value="here")
    outer_init = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "outer")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["outer"], ["x"]), node, custom],
        "everything",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("out", 1, [2]), helper.make_tensor_value_info("cust", 1, None)],
        [outer_init],
        sparse_initializer=[
            helper.make_sparse_tensor(
                numpy_helper.from_array(np.array([5.0], np.float32), "sparse_w"),
                numpy_helper.from_array(np.array([1], np.int64)),
                [3],
            )
        ],
        doc_string="graph doc",
    )
    fn = helper.make_function(
        "my.ops", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])], [helper.make_opsetid("", 21)]
    )
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("my.ops", 1)],
        functions=[fn],
        producer_name="tests",
        doc_string="model doc",
    )
    helper.set_model_props(m, {"author": "someone"})
    return m


def test_everything_survives_proto_roundtrip():
    proto = _model_with_everything()
    m = irforge.from_onnx(proto)
    again = model_from_proto(to_proto(m))
    assert models_equal(m, again) is None
    custom = m.graph.nodes[2]
    assert custom.attr("s").encode("utf-8", "surrogateescape") == b"\xff\xfe bytes"
    assert custom.metadata == {"source": "here"}
    assert m.metadata == {"author": "someone"} and m.doc_string == "model doc"
    assert m.graph.initializers["sparse_w"].const_value.numpy().tolist() == [0.0, 5.0, 0.0]
    assert ("my.ops", "Twice", "") in m.functions
    # the subgraph reads the outer initializer through the very same Value
    then = m.graph.nodes[1].attributes["then_branch"].value
    assert then.nodes[0].inputs[1] is m.graph.initializers["outer"]


def test_the_callers_proto_is_not_modified():
    proto = _model_with_everything()
    before = proto.SerializeToString()
    m = irforge.from_onnx(proto)
    m.graph.nodes[0].name = "changed"
    assert proto.SerializeToString() == before


def test_load_from_path_bytes_and_proto_agree():
    a = irforge.load(EXAMPLE)
    with open(EXAMPLE, "rb") as f:
        b = irforge.load(f.read())
    c = irforge.from_onnx(onnx.load(EXAMPLE))
    assert models_equal(a, b) is None and models_equal(a, c) is None


def test_save_writes_a_checked_model_and_payloads_are_reused(tmp_path):
    m = irforge.load(EXAMPLE)
    assert all(isinstance(v.const_value, ProtoTensor) for v in m.graph.initializers.values())
    out = tmp_path / "out.onnx"
    irforge.save(m, out)
    onnx.checker.check_model(str(out), full_check=True)
    assert models_equal(m, irforge.load(out)) is None


def test_old_opset_is_upgraded():
    m = helper.make_model(
        helper.make_graph(
            [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
            "old",
            [helper.make_tensor_value_info("x", 1, [2, 3, 4])],
            [helper.make_tensor_value_info("y", 1, [2, 3, 4])],
        ),
        opset_imports=[helper.make_opsetid("", 9)],
    )
    model = irforge.from_onnx(m)
    assert model.opset_imports[""] == 13
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    flat = x.reshape(2, 12)
    want = (np.exp(flat) / np.exp(flat).sum(1, keepdims=True)).reshape(2, 3, 4)
    np.testing.assert_allclose(interpret(model, [x])[0], want, rtol=1e-6)


def _old_cnn_ops(opset: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("ReduceSum", ["p"], ["s"], axes=[2, 3], keepdims=0),
        helper.make_node("Unsqueeze", ["s"], ["u"], axes=[0, 3]),
        helper.make_node("Squeeze", ["u"], ["q"], axes=[0]),
        helper.make_node("Concat", ["q", "q"], ["y"], axis=2),
    ]
    graph = helper.make_graph(nodes, "old", [helper.make_tensor_value_info("x", 1, [2, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", 1, [2, 4, 2])], [w])  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [9, 11, 12])
def test_old_opset_is_upgraded_on_the_ir_where_every_step_is_safe(monkeypatch, opset):
    original = _old_cnn_ops(opset)

    def refuse(*args, **kwargs):
        raise AssertionError("the version converter ran")

    monkeypatch.setattr(onnx.version_converter, "convert_version", refuse)
    for source in (original.SerializeToString(), original):
        model = irforge.load(source)
        assert model.opset_imports[""] == 13
        assert all("axes" not in n.attributes for n in model.graph)  # moved to inputs at 13
        x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
        want = ort.InferenceSession(original.SerializeToString()).run(None, {"x": x})[0]
        upgraded = to_proto(model)
        onnx.checker.check_model(upgraded, full_check=True)
        np.testing.assert_allclose(ort.InferenceSession(upgraded.SerializeToString()).run(None, {"x": x})[0],
                                   want, rtol=1e-5, atol=1e-6)  # fmt: skip
        np.testing.assert_allclose(interpret(model, [x])[0], want, rtol=1e-5, atol=1e-5)


def test_an_unsafe_step_takes_the_version_converter(monkeypatch):
    calls = []
    convert = onnx.version_converter.convert_version

    def spy(*args, **kwargs):
        calls.append(args[1])
        return convert(*args, **kwargs)

    monkeypatch.setattr(onnx.version_converter, "convert_version", spy)
    old = _old_cnn_ops(9)
    old.graph.node.append(helper.make_node("Softmax", ["y"], ["z"], axis=1))  # its axis means another thing at 13
    old.graph.output[0].name = "z"
    assert irforge.load(old.SerializeToString()).opset_imports[""] == 13
    assert calls == [13]


# -- external data ------------------------------------------------------------------------------


def _external_model(folder, location="weights.bin", data=None, offset=0, length=None):
    data = np.arange(12, dtype=np.float32).reshape(3, 4) if data is None else data
    raw = data.tobytes()
    target = os.path.join(folder, location)
    if not os.path.isabs(location) and ".." not in location and not os.path.islink(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(b"\0" * offset + raw)
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=data.shape)
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    w.external_data.add(key="offset", value=str(offset))
    w.external_data.add(key="length", value=str(len(raw) if length is None else length))
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "ext",
        [helper.make_tensor_value_info("x", 1, list(data.shape))],
        [helper.make_tensor_value_info("y", 1, list(data.shape))],
        [w],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    path = os.path.join(folder, "model.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


def test_external_data_is_lazy_and_memory_mapped(tmp_path):
    path = _external_model(str(tmp_path), "sub/weights.bin", offset=4096)
    m = irforge.load(path)
    w = m.graph.initializers["w"].const_value
    assert isinstance(w, ExternalTensor)
    assert "_array" not in w.__dict__  # nothing read yet
    arr = w.numpy()
    assert not arr.flags.owndata and not arr.flags.writeable  # a view onto the mapped file
    np.testing.assert_array_equal(arr, np.arange(12, dtype=np.float32).reshape(3, 4))
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(interpret(m, [x])[0], arr + 1)


def test_external_data_saved_inline_and_external(tmp_path):
    path = _external_model(str(tmp_path))
    m = irforge.load(path)
    inline = tmp_path / "inline.onnx"
    save(m, inline)
    assert not onnx.external_data_helper.uses_external_data(onnx.load(str(inline)).graph.initializer[0])
    ext = tmp_path / "ext.onnx"
    save(m, ext, external_data=True, size_threshold=16)
    loaded = onnx.load(str(ext), load_external_data=False)
    onnx.checker.check_model(str(ext), full_check=True)
    assert onnx.external_data_helper.uses_external_data(loaded.graph.initializer[0])
    np.testing.assert_array_equal(
        irforge.load(ext).graph.initializers["w"].const_value.numpy(), np.arange(12).reshape(3, 4)
    )


@pytest.mark.parametrize(
    "location, message",
    [
        ("/etc/passwd", "absolute"),
        ("../outside.bin", "leaves the model's folder"),
        ("sub/../../outside.bin", "leaves the model's folder"),
        ("missing.bin", "not found"),
    ],
)
def test_external_data_outside_folder_or_missing_is_refused(tmp_path, location, message):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(b"\0" * 48)
    path = _external_model(str(folder), location) if location != "missing.bin" else None
    if path is None:
        path = _external_model(str(folder), "present.bin")
        proto = onnx.load(path, load_external_data=False)
        proto.graph.initializer[0].external_data[0].value = "missing.bin"
        with open(path, "wb") as f:
            f.write(proto.SerializeToString())
    before = open(path, "rb").read()  # noqa: SIM115
    with pytest.raises(ExternalDataError, match=message):
        irforge.load(path)
    assert open(path, "rb").read() == before  # noqa: SIM115


def test_external_data_symlink_out_of_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(12, dtype=np.float32).tobytes())
    os.symlink(secret, folder / "link.bin")
    path = _external_model(str(folder), "link.bin")
    with pytest.raises(ExternalDataError, match="outside the model's folder"):
        irforge.load(path)


def test_truncated_external_data_is_refused(tmp_path):
    path = _external_model(str(tmp_path), length=4096)
    with pytest.raises(ExternalDataError, match="length"):
        irforge.load(path)


def test_external_data_from_bytes_needs_a_path(tmp_path):
    path = _external_model(str(tmp_path))
    with open(path, "rb") as f, pytest.raises(LoadError, match="load it from its path"):
        irforge.load(f.read())


def test_model_over_2gib_saves_with_external_data_and_loads_back(tmp_path):
    from irforge.core_ir import Builder, Graph, Model, TensorType
    from irforge.core_ir.dtypes import DataType

    g = Graph(name="big")
    b = Builder(g)
    x = b.input("x", TensorType(DataType.UINT8, (1,)))
    chunks = [b.constant(np.zeros(2**30 + 2**20, np.uint8) + i, name=f"w{i}") for i in range(2)]
    y = b.op.Add(x, chunks[0])
    z = b.op.Add(y, chunks[1])
    z.type = TensorType(DataType.UINT8, (2**30 + 2**20,))
    g.set_outputs([z])
    model = Model(g, opset_imports={"": 21})
    path = tmp_path / "big.onnx"
    irforge.save(model, path)  # over 2 GiB: external data chosen automatically
    assert os.path.getsize(path) < 2**20
    assert os.path.getsize(str(path) + ".data") > 2**31
    loaded = irforge.load(path)
    ws = [loaded.graph.initializers[f"w{i}"].const_value for i in range(2)]
    assert all(isinstance(w, ExternalTensor) for w in ws)
    assert ws[1].numpy()[-1] == 1 and ws[0].numpy()[0] == 0
    onnx.checker.check_model(str(path))
