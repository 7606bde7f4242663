"""The hostile-input corpus, written by code rather than kept as binary blobs: every case is a
model file (and, for external data, the files beside it) that a stranger could hand irforge,
with the command to run on it and what must come out: a specific irforge error, or a correct
result.  ``python tests/hostile/corpus.py DIR`` writes the corpus to DIR for a look by hand.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "small_cnn.onnx")


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[str], str]  # folder -> the model's path
    command: tuple[str, ...]  # irforge's arguments; {model} is the model's path, {out} a file to write
    expect: str  # a substring of the one error line, or "ok" for a run that must succeed


def _model(nodes, inputs=(), outputs=(), inits=(), functions=(), opsets=(("", 17),)) -> onnx.ModelProto:
    graph = h.make_graph(list(nodes), "hostile", list(inputs), list(outputs), list(inits))
    return h.make_model(graph, functions=list(functions), opset_imports=[h.make_opsetid(d, v) for d, v in opsets])


def _save(folder: str, model: onnx.ModelProto | bytes, name: str = "model.onnx") -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(model if isinstance(model, bytes) else model.SerializeToString())
    return path


def _vec(name: str, dtype=T.FLOAT, shape=(2,)):
    return h.make_tensor_value_info(name, dtype, list(shape))


def _with_init(tensor: onnx.TensorProto) -> Callable[[str], str]:
    def build(folder: str) -> str:
        return _save(folder, _model([h.make_node("Identity", ["w"], ["y"], name="id")],
                                    outputs=[_vec("y", tensor.data_type, ())], inits=[tensor]))  # fmt: skip

    return build


def _external(
    location: str,
    length: int = 8,
    prepare: Callable[[str], None] = lambda folder: None,
    extra: tuple[tuple[str, str], ...] = (),
):
    def build(folder: str) -> str:
        prepare(folder)
        w = onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[2], data_location=onnx.TensorProto.EXTERNAL)
        for key, value in (("location", location), ("offset", "0"), ("length", str(length)), *extra):
            w.external_data.add(key=key, value=value)
        return _save(folder, _model([h.make_node("Add", ["x", "w"], ["y"], name="add")], [_vec("x")], [_vec("y")],
                                    inits=[w]))  # fmt: skip

    return build


def _with_feeds(data: bytes | None) -> Callable[[str], str]:
    """The Neg model with ``model.onnx.npz`` beside it: ``data``, or an archive of 10,000 arrays
    under names the model does not take."""

    def build(folder: str) -> str:
        path = _save(folder, _model([h.make_node("Neg", ["x"], ["y"])], [_vec("x")], [_vec("y")]))
        if data is None:
            np.savez(path + ".npz", x=np.ones(2, np.float32), **{f"a{i}": np.zeros(1) for i in range(10_000)})
        else:
            with open(path + ".npz", "wb") as f:
                f.write(data)
        return path

    return build


def _outside_file(folder: str) -> str:
    """A file next to the model's folder: what a link must not reach."""
    outside = os.path.join(os.path.dirname(folder), os.path.basename(folder) + "-secret.bin")
    with open(outside, "wb") as f:
        f.write(np.arange(2, dtype=np.float32).tobytes())
    return outside


def _symlink_out(folder: str) -> None:
    os.symlink(_outside_file(folder), os.path.join(folder, "weights.bin"))


def _hardlink_out(folder: str) -> None:
    os.link(_outside_file(folder), os.path.join(folder, "weights.bin"))


def _fifo(folder: str) -> None:
    os.mkfifo(os.path.join(folder, "weights.bin"))  # opening it for reading would wait forever


def _short_file(folder: str) -> None:
    with open(os.path.join(folder, "weights.bin"), "wb") as f:
        f.write(b"\0\0\0")


def _recursive(names: tuple[str, ...]) -> Callable[[str], str]:
    def build(folder: str) -> str:
        opsets = [h.make_opsetid("", 17), h.make_opsetid("local", 1)]
        functions = [h.make_function("local", name, ["x"], ["y"],
                                     [h.make_node(names[(i + 1) % len(names)], ["x"], ["y"], domain="local")], opsets)
                     for i, name in enumerate(names)]  # fmt: skip
        return _save(folder, _model([h.make_node(names[0], ["x"], ["y"], domain="local", name="call")], [_vec("x")],
                                    [_vec("y")], functions=functions, opsets=(("", 17), ("local", 1))))  # fmt: skip

    return build


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _nested_if(depth: int) -> Callable[[str], str]:
    """If inside If, ``depth`` deep, written at the wire level: protobuf's own builders stop at
    its nesting limit, which is the point."""

    def graph(nodes: bytes, output: str) -> bytes:  # GraphProto: node = 1, name = 2, output = 12
        return nodes + _field(2, b"g") + _field(12, _field(1, output.encode()))

    def node(op: str, inputs: list[str], output: str, attrs: bytes = b"") -> bytes:  # NodeProto
        return (
            b"".join(_field(1, i.encode()) for i in inputs)
            + _field(2, output.encode())
            + _field(4, op.encode())
            + attrs
        )

    def branch(name: str, g: bytes) -> bytes:  # AttributeProto: name = 1, g = 6, type = 20 (GRAPH = 5)
        return _field(5, _field(1, name.encode()) + _field(6, g) + _varint(20 << 3) + _varint(5))

    def build(folder: str) -> str:
        body = graph(_field(1, node("Identity", ["x"], "t")), "t")
        for i in range(depth):
            leaf = graph(_field(1, node("Identity", ["x"], f"t{i}")), f"t{i}")
            branches = branch("then_branch", body) + branch("else_branch", leaf)
            body = graph(_field(1, node("If", ["c"], f"t{i}", branches)), f"t{i}")
        outer = _model([], [_vec("x"), h.make_tensor_value_info("c", T.BOOL, [])], [_vec("y")])
        top = node("If", ["c"], "y", branch("then_branch", body) + branch("else_branch", graph(
            _field(1, node("Identity", ["x"], "y")), "y")))  # fmt: skip
        data = outer.SerializeToString() + _field(7, _field(1, top))  # a second graph field merges into the first
        return _save(folder, data)

    return build


def _deep_text(depth: int) -> Callable[[str], str]:
    """If inside If, ``depth`` deep, in the text form (unindented, so the file grows linearly)."""

    def build(folder: str) -> str:
        lines = ["model {", 'opset "" = 17', "graph @deep(%x: f32[2], %c: bool[]) {"]
        lines += [f"%t{i}: f32[2] = If(%c) <then_branch = graph @g{i}() {{" for i in range(depth)]
        lines += ["%leaf: f32[2] = Identity(%x)", "return %leaf"]
        for i in reversed(range(depth)):
            lines += [f"}}, else_branch = graph @e{i}() {{", f"%z{i}: f32[2] = Identity(%x)", f"return %z{i}", "}>"]
            if i:
                lines.append(f"return %t{i}")
        lines += ["return %t0", "}", "}"]
        path = os.path.join(folder, "model.irf")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        return path

    return build


def _concat(n: int) -> Callable[[str], str]:
    def build(folder: str) -> str:
        node = h.make_node("Concat", ["x"] * n, ["y"], axis=0, name="wide")
        return _save(folder, _model([node], [_vec("x", shape=(1,))], [_vec("y", shape=(n,))]))

    return build


def _huge_fold(folder: str) -> str:
    shape = numpy_helper.from_array(np.array([1_000_000, 1_000_000], np.int64), "shape")
    nodes = [h.make_node("ConstantOfShape", ["shape"], ["big"], value=h.make_tensor("v", T.FLOAT, [1], [1.0])),
             h.make_node("ReduceSum", ["big"], ["s"], keepdims=0), h.make_node("Add", ["x", "s"], ["y"])]  # fmt: skip
    return _save(folder, _model(nodes, [_vec("x")], [_vec("y")], inits=[shape]))


def _nan_inf_fold(folder: str) -> str:
    a = numpy_helper.from_array(np.array([np.nan, np.inf], np.float32), "a")
    b = numpy_helper.from_array(np.array([1.0, -np.inf], np.float32), "b")
    nodes = [h.make_node("Add", ["a", "b"], ["c"]), h.make_node("Mul", ["x", "c"], ["y"])]
    return _save(folder, _model(nodes, [_vec("x")], [_vec("y")], inits=[a, b]))


def _bytes(data: Callable[[], bytes]) -> Callable[[str], str]:
    return lambda folder: _save(folder, data())


def _example() -> bytes:
    with open(EXAMPLE, "rb") as f:
        return f.read()


def _cycle(folder: str) -> str:
    nodes = [h.make_node("Add", ["x", "b"], ["a"], name="first"), h.make_node("Neg", ["a"], ["b"], name="second")]
    return _save(folder, _model(nodes, [_vec("x")], [_vec("b")]))


VERIFY = ("verify", "{model}")
OPTIMIZE = ("optimize", "{model}", "-o", "{out}", "-O2")
CASES = [
    Case("truncated-protobuf", _bytes(lambda: _example()[:700]), VERIFY, "not a valid ONNX model"),
    Case("random-bytes", _bytes(lambda: np.random.default_rng(0).bytes(4096)), VERIFY, "not a valid ONNX model"),
    Case("raw-data-shorter-than-shape", _with_init(onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[1000],
         raw_data=b"\0" * 4)), OPTIMIZE, "initializer %w has 4 bytes of raw_data, but a FLOAT[1000] tensor needs 4000"),
    Case("typed-data-shorter-than-shape", _with_init(onnx.TensorProto(name="w", data_type=T.INT64, dims=[3],
         int64_data=[1])), OPTIMIZE, "has 1 entries in int64_data, but a INT64[3] tensor needs 3"),
    Case("negative-dim", _with_init(onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[-3])), OPTIMIZE,
         "initializer %w has a negative dim -3"),
    Case("element-count-overflows-int64", _with_init(onnx.TensorProto(name="w", data_type=T.FLOAT,
         dims=[2**40, 2**40])), OPTIMIZE, "elements overflow int64"),
    Case("2gib-declared-no-data", _with_init(onnx.TensorProto(name="w", data_type=T.FLOAT, dims=[2**29 + 1])),
         OPTIMIZE, "has 0 entries in any data field, but a FLOAT[536870913] tensor needs 536870913"),
    Case("external-absolute-path", _external("/etc/passwd"), VERIFY, "is absolute"),
    Case("external-dotdot", _external("../weights.bin"), VERIFY, "leaves the model's folder"),
    Case("external-symlink-out", _external("weights.bin", prepare=_symlink_out), VERIFY, "outside the model's folder"),
    Case("external-hardlink-out", _external("weights.bin", prepare=_hardlink_out), VERIFY, "hard link"),
    Case("external-fifo", _external("weights.bin", prepare=_fifo), VERIFY, "not a regular file"),
    Case("external-device", _external("/dev/zero"), VERIFY, "is absolute"),
    Case("external-missing", _external("weights.bin"), VERIFY, "not found"),
    Case("external-short", _external("weights.bin", prepare=_short_file), VERIFY, "the data file is truncated"),
    Case("external-unknown-key", _external("weights.bin", extra=(("__class__", "os.system"),)), VERIFY,
         "keys the ONNX spec does not define ('__class__')"),
    Case("function-calls-itself", _recursive(("F",)), VERIFY, "function local::F calls itself: local::F -> local::F"),
    Case("functions-call-each-other", _recursive(("F", "G")), VERIFY, "local::F -> local::G -> local::F"),
    Case("graph-cycle", _cycle, VERIFY, "cycle"),
    Case("undefined-input", lambda folder: _save(folder, _model([h.make_node("Add", ["x", "ghost"], ["y"])],
         [_vec("x")], [_vec("y")])), VERIFY, "%ghost"),
    Case("value-defined-twice", lambda folder: _save(folder, _model([h.make_node("Neg", ["x"], ["y"]),
         h.make_node("Abs", ["x"], ["y"])], [_vec("x")], [_vec("y")])), VERIFY, "defined twice"),
    Case("if-nested-past-protobuf-limit", _nested_if(120), VERIFY, "protobuf's decoding limit of 100 levels"),
    Case("if-nested-10000-in-text", _deep_text(10_000), ("optimize", "{model}", "-o", "{out}", "-O1"),
         "nest more than 64 deep"),
    Case("if-nested-63-in-text", _deep_text(63), ("optimize", "{model}", "-o", "{out}", "-O2"), "ok"),  # 64 graphs
    Case("concat-of-1m-inputs", _concat(1_000_000), OPTIMIZE, "ok"),
    Case("fold-to-1e12-elements", _huge_fold, OPTIMIZE, "ok"),
    Case("unknown-domain", lambda folder: _save(folder, _model([h.make_node("Frob", ["x"], ["y"],
         domain="com.example")], [_vec("x")], [_vec("y")])), ("run", "{model}", "--backend", "reference"),
         "com.example"),
    Case("unknown-domain-on-onnxruntime", lambda folder: _save(folder, _model([h.make_node("Frob", ["x"], ["y"],
         domain="com.example")], [_vec("x")], [_vec("y")])), ("run", "{model}", "--backend", "onnxruntime"),
         "domain 'com.example' is not one onnxruntime has kernels for"),
    Case("inputs-not-an-archive", _with_feeds(b"\x80\x04\x95 a pickle, not an archive"),
         ("run", "{model}", "--backend", "reference", "--inputs", "{model}.npz"), "not an .npz archive"),
    Case("inputs-zip-bomb-names", _with_feeds(None), ("run", "{model}", "--backend", "reference", "--inputs",
         "{model}.npz"), "holds arrays the model does not take"),
    Case("opset-newer-than-onnx", lambda folder: _save(folder, _model([h.make_node("Neg", ["x"], ["y"])], [_vec("x")],
         [_vec("y")], opsets=(("", 99),))), VERIFY, "opset 99"),
    Case("string-into-add", lambda folder: _save(folder, _model([h.make_node("Add", ["x", "x"], ["y"])],
         [_vec("x", T.STRING)], [_vec("y", T.STRING)])), VERIFY, "Add"),
    Case("complex-into-relu", lambda folder: _save(folder, _model([h.make_node("Relu", ["x"], ["y"])],
         [_vec("x", T.COMPLEX64)], [_vec("y", T.COMPLEX64)])), VERIFY, "Relu"),
    Case("float8-into-matmul", lambda folder: _save(folder, _model([h.make_node("MatMul", ["x", "x"], ["y"])],
         [_vec("x", T.FLOAT8E4M3FN, (2, 2))], [_vec("y", T.FLOAT8E4M3FN, (2, 2))], opsets=(("", 21),))), VERIFY,
         "MatMul"),
    Case("nan-and-inf-through-folding", _nan_inf_fold, OPTIMIZE, "ok"),
]  # fmt: skip


def main(folder: str) -> None:
    for case in CASES:
        where = os.path.join(folder, case.name)
        os.makedirs(where, exist_ok=True)
        path = case.build(where)
        print(f"{case.name}: {path}: irforge {' '.join(case.command)} -> {case.expect}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "hostile-corpus")
