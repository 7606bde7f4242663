"""irviz's data: every node and edge of the model, the provenance of rewritten nodes, diffs
between steps from stable identities, overlays, the neighbourhood view, DOT/SVG/PNG and the
commands.  The page itself is checked in a real browser in test_irviz_browser.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import onnx
import pytest

import irforge
from irforge import irviz
from irforge.core_ir import Model, Node, parse_graph
from irforge.core_ir.fingerprint import model_fingerprint
from irforge.passes import PassManager
from irforge.passes.base import Pass, PassResult

sys.path.insert(0, os.path.dirname(__file__))
import zoo

HERE = os.path.dirname(os.path.abspath(__file__))
SMALL_CNN = os.path.join(HERE, "..", "examples", "small_cnn.onnx")
TEXT = """graph @g(%x: f32[3]) {
  %a = Neg(%x) with {name = "neg"}
  %b = Abs(%a) with {name = "abs"}
  %c = Relu(%b) with {name = "relu"}
  %d = Sigmoid(%c) with {name = "sig"}
  return %d
}
"""


def _by_name(data, step):
    records = data["records"]
    return {records[i]["name"]: records[i] for i in data["steps"][step]["items"] if records[i]["cat"] != "io"}


def test_every_node_and_edge_of_the_model_is_in_the_data():
    model = irforge.load(SMALL_CNN)
    data = irviz.report(model)
    assert len(data["steps"]) == 1
    nodes = _by_name(data, 0)
    assert sorted(nodes) == sorted(n.name for n in model.graph)
    sid = {name: r["id"] for name, r in nodes.items()}
    for n in model.graph:
        r = nodes[n.name]
        assert r["op"] == n.op_type
        for value, entry in zip(n.inputs, r["in"], strict=True):
            assert entry[0] == value.name
            producer = value.producer()
            if producer is not None:
                assert entry[2] == sid[producer.name]  # the edge, by the producer's identity
            elif value.is_initializer():
                assert entry[3] == "const" and entry[2] is None
            else:
                assert entry[2] == f"in:{value.name}"
        assert [o[0] for o in r["out"]] == [o.name for o in n.outputs]
    ios = {r["id"] for r in data["records"] if r["cat"] == "io"}
    assert ios == {"in:image", "out:probs"}
    attrs = dict(nodes["conv1"]["attrs"])
    assert attrs["pads"] == "ints[1, 1, 1, 1]"
    assert nodes["conv1"]["out"][0][1] == "" or "f32" in nodes["conv1"]["out"][0][1]


def test_the_input_model_is_not_changed_by_a_recorded_pipeline():
    model = irforge.load(SMALL_CNN)
    before = model_fingerprint(model)
    data = irviz.report(model, "-O2")
    assert model_fingerprint(model) == before
    assert data["steps"][-1]["nodes"] < data["steps"][0]["nodes"] == len(model.graph)


@dataclass(frozen=True)
class HandEdit(Pass):
    """Adds a node after ``abs``, removes ``sig``, changes ``relu``'s op and rebuilds ``neg``
    as a new object with the same name and op: one of each kind of change."""

    name = "hand-edit"
    summary = "test: one edit of each kind"

    def run(self, graph, ctx):
        nodes = {n.name: n for n in graph}
        added = Node("Neg", [nodes["abs"].output], name="added")
        graph.insert_after(nodes["abs"], added)
        nodes["relu"].set_input(0, added.output)
        nodes["relu"].op_type = "Elu"
        nodes["sig"].output.replace_all_uses_with(nodes["relu"].output)
        graph.remove(nodes["sig"])
        rebuilt = Node("Neg", [nodes["neg"].inputs[0]], name="neg")
        graph.insert_before(nodes["neg"], rebuilt)
        nodes["neg"].output.replace_all_uses_with(rebuilt.output)
        graph.remove(nodes["neg"])
        return PassResult(True)


@dataclass(frozen=True)
class Nothing(Pass):
    name = "nothing"
    summary = "test: changes nothing"

    def run(self, graph, ctx):
        return PassResult(False)


def test_a_step_diff_classifies_added_removed_and_rewritten_nodes_by_identity():
    model = Model(parse_graph(TEXT))
    recorder = irviz.Recorder(model)
    PassManager.from_passes([Nothing(), HandEdit(), Nothing()], instruments=[recorder]).run(model)
    data = irviz.report(recorder)
    assert [s["title"] for s in data["steps"]] == ["input", "hand-edit"]
    assert data["steps"][1]["folded"] == [["nothing", pytest.approx(0, abs=1)]]
    assert [t[0] for t in data["trailing"]] == ["nothing"]
    before, after = _by_name(data, 0), _by_name(data, 1)
    diff = irviz.diff_steps(data, 0, 1)
    assert diff["added"] == [after["added"]["id"]]
    assert diff["removed"] == [before["sig"]["id"]]
    # relu changed op and input; neg is a new object but takes over the old identity: it is
    # rewritten, not removed and added (its output has a new name, so its reader abs is too)
    assert diff["rewritten"] == sorted(before[n]["id"] for n in ("neg", "abs", "relu"))
    assert after["neg"]["id"] == before["neg"]["id"]
    assert after["relu"]["op"] == "Elu"
    assert irviz.diff_steps(data, 1, 0) == {"added": diff["removed"], "removed": diff["added"],
                                            "rewritten": diff["rewritten"]}  # fmt: skip


def test_pattern_rewrites_record_pattern_source_line_time_and_ancestry():
    model = irforge.from_onnx(zoo.bert(layers=2, hidden=64, heads=4, ffn=128, seq=16))
    data = irviz.report(model, "-O2")
    records = data["records"]
    fused = [s for s in data["steps"] if s["pass"] == "fuse-attention"]
    assert fused and len(fused[0]["rewrites"]) == 2  # one attention per layer
    k = data["steps"].index(fused[0])
    previous = {records[i]["id"] for i in data["steps"][k - 1]["items"]}
    now = {records[i]["id"]: records[i] for i in fused[0]["items"]}
    for rewrite in fused[0]["rewrites"]:
        path, line = rewrite["at"].rsplit(":", 1)
        assert path.startswith("irforge/passes/"), path  # relative to the installed package's folder
        with open(os.path.join(os.path.dirname(os.path.dirname(irforge.__file__)), path), encoding="utf-8") as f:
            assert len(f.readlines()) >= int(line) > 0
        assert rewrite["seconds"] >= 0
        assert rewrite["matched"] and set(rewrite["matched"]) <= previous
        assert rewrite["created"] and all(now[c]["op"] for c in rewrite["created"])
        for created in rewrite["created"]:
            origin = data["origins"][created]
            assert origin["step"] == k and origin["pass"] == "fuse-attention"
            assert origin["pattern"] == rewrite["pattern"] and origin["from"] == rewrite["matched"]
    attention = [r for r in now.values() if r["op"] == "Attention"]
    assert len(attention) == 2
    assert all(data["origins"][r["id"]]["pattern"].startswith("attention") for r in attention)
    # the fused call carries its body: the function's nodes under the call's identity
    body = [r for r in now.values() if r["id"].startswith(attention[0]["id"] + "/")]
    assert {"MatMul", "Softmax"} <= {r["op"] for r in body}
    assert all(r["scope"][-1] == "#" + attention[0]["id"] for r in body)


def test_steps_count_nodes_and_fold_passes_that_changed_nothing():
    model = irforge.load(SMALL_CNN)
    recorder = irviz.record(model, "-O2")
    data = irviz.report(recorder)
    ran = sum(len(s["folded"]) for s in data["steps"]) + len(data["trailing"]) + len(data["steps"]) - 1
    assert ran > len(data["steps"])  # -O2 has passes that change nothing here, folded away
    for step in data["steps"]:  # nodes of the graph: not inputs and outputs, nor bodies drawn under calls
        records = [data["records"][i] for i in step["items"]]
        assert step["nodes"] == sum(1 for r in records if r["cat"] != "io" and "/" not in r["id"])
    assert data["steps"][-1]["nodes"] == len(irforge.optimize(irforge.load(SMALL_CNN), "-O2").graph)


def test_a_subgraph_body_sits_in_its_node_s_scope():
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    c = onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    then = onnx.helper.make_graph([onnx.helper.make_node("Neg", ["x"], ["t"], name="neg")], "then", [], [
        onnx.helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2])])
    other = onnx.helper.make_graph([onnx.helper.make_node("Abs", ["x"], ["e"], name="abs")], "else", [], [
        onnx.helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, [2])])
    node = onnx.helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)
    proto = onnx.helper.make_model(onnx.helper.make_graph([node], "g", [x, c], [y]),
                                   opset_imports=[onnx.helper.make_opsetid("", 17)])  # fmt: skip
    data = irviz.report(irforge.from_onnx(proto))
    nodes = _by_name(data, 0)
    branch = nodes["branch"]["id"]
    assert nodes["neg"]["scope"] == [f"#{branch}", "then_branch"]
    assert nodes["abs"]["scope"] == [f"#{branch}", "else_branch"]
    assert nodes["neg"]["in"][0][2] == "in:x"  # a value of the enclosing graph: the edge crosses in


def test_name_scopes_come_from_module_paths_and_slash_names():
    from irforge.irviz.snapshot import scope_of

    assert scope_of(Node("MatMul", [], name="/encoder/layer.3/attention/MatMul")) == ["encoder", "layer.3",
                                                                                     "attention"]  # fmt: skip
    n = Node("MatMul", [], name="mm")
    n.metadata = {"module": "encoder.layers.3.self_attn"}
    assert scope_of(n) == ["encoder", "layers.3", "self_attn"]
    assert scope_of(Node("Add", [], name="/a/b/Add+/a/b/Mul")) == ["a", "b"]
    assert scope_of(Node("Add", [], name="add_1")) == []


# -- overlays --------------------------------------------------------------------------------
def _cnn_data():
    return irviz.report(irforge.load(SMALL_CNN))


def test_model_explorer_node_data_is_accepted_as_it_is(tmp_path):
    graph_data = {"name": "latency", "results": {"conv1": {"value": 3.5}, "r1": {"value": 1.0, "bgColor": "#ff0000"}},
                  "gradient": [{"stop": 0, "bgColor": "#00ff00"}, {"stop": 1, "bgColor": "#ff0000"}]}  # fmt: skip
    path = tmp_path / "me.json"
    path.write_text(json.dumps({"small_cnn": graph_data}))  # a model's node data: graphs by id
    data = irviz.report(irforge.load(SMALL_CNN), overlays=[path])
    nodes = _by_name(data, 0)
    overlay = data["overlays"][0]
    assert overlay["name"] == "latency"
    assert overlay["values"] == {nodes["conv1"]["id"]: 3.5, nodes["relu1"]["id"]: 1.0}  # r1: relu1's output
    assert overlay["colors"] == {nodes["relu1"]["id"]: "#ff0000"}
    assert overlay["gradient"] == [[0.0, "#00ff00"], [1.0, "#ff0000"]]
    raw = {"results": {"fc": {"value": 2}}, "thresholds": [{"value": 1, "bgColor": "red"}]}
    thresholds = irviz.normalize_overlay(raw, data["records"])
    assert thresholds["thresholds"] == [[1.0, "red"]] and thresholds["values"] == {nodes["fc"]["id"]: 2.0}


def test_an_onnxruntime_profile_gives_mean_kernel_time_per_node(tmp_path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "profile")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(SMALL_CNN, options, providers=["CPUExecutionProvider"])
    for _ in range(3):
        session.run(None, {"image": np.ones((1, 3, 32, 32), np.float32)})
    profile = session.end_profiling()
    data = irviz.report(irforge.load(SMALL_CNN), overlays=[profile])
    overlay = data["overlays"][0]
    names = {r["id"]: name for name, r in _by_name(data, 0).items()}
    assert overlay["unit"] == "µs"
    assert {names[sid] for sid in overlay["values"]} == set(names.values())  # every node ran
    assert all(v >= 0 for v in overlay["values"].values())


def test_plain_overlays_and_their_errors(tmp_path):
    data = _cnn_data()
    plain = irviz.normalize_overlay({"conv1": 1, "nothing-here": 2}, data["records"], name="error")
    assert list(plain["values"].values()) == [1.0] and plain["unmatched"] == 1
    named = irviz.normalize_overlay({"name": "max error", "values": {"probs": 1e-6}}, data["records"])
    assert named["name"] == "max error" and len(named["values"]) == 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"a": 1, "b": 2}))
    with pytest.raises(irviz.OverlayError, match=r"bad\.json: none of its 2 keys"):
        irviz.report(irforge.load(SMALL_CNN), overlays=[bad])
    with pytest.raises(irviz.OverlayError, match="'conv1' is 'fast', not a number"):
        irviz.normalize_overlay({"conv1": "fast"}, data["records"])
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(irviz.OverlayError, match=r"broken\.json: not a JSON overlay"):
        irviz.report(irforge.load(SMALL_CNN), overlays=[broken])
    with pytest.raises(irviz.OverlayError, match="no onnxruntime node events"):
        irviz.normalize_overlay([{"cat": "Session"}], data["records"])


# -- neighbourhood, DOT, SVG, PNG -----------------------------------------------------------------
def test_focus_keeps_the_neighbourhood_of_a_node():
    data = irviz.report(irforge.load(SMALL_CNN), focus="pool", depth=1)
    assert sorted(_by_name(data, 0)) == ["conv2", "pool", "relu1"]
    data = irviz.report(irforge.load(SMALL_CNN), focus="r1", depth=0)  # by output value name
    assert sorted(_by_name(data, 0)) == ["relu1"]
    with pytest.raises(irforge.IrforgeError, match="--focus nope: no node or value of that name"):
        irviz.report(irforge.load(SMALL_CNN), focus="nope")


def test_dot_has_every_node_edge_and_scope():
    model = irforge.from_onnx(zoo.bert(layers=1, hidden=32, heads=2, ffn=64, seq=8))
    data = irviz.report(model)
    dot = irviz.to_dot(data)
    records = [data["records"][i] for i in data["steps"][0]["items"]]
    for r in records:
        assert f'"{r["id"]}" [label=' in dot
    edges = {(inp[2], r["id"]) for r in records for inp in r["in"] if inp and inp[2]}
    assert len(re.findall(r" -> ", dot)) == len(edges) == len(edges & {tuple(m) for m in re.findall(
        r'"([^"]+)" -> "([^"]+)"', dot)})  # fmt: skip


def test_svg_and_png_come_from_graphviz_and_its_absence_is_named(tmp_path, monkeypatch):
    model = irforge.load(SMALL_CNN)
    svg = irviz.write_report(model, tmp_path / "g.svg", "-O2")
    nodes = len(irforge.optimize(irforge.load(SMALL_CNN), "-O2").graph)
    with open(svg, encoding="utf-8") as f:
        assert f.read().count('class="node"') == nodes + 2  # and the input and output
    png = irviz.write_report(model, tmp_path / "g.png")
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(irforge.IrforgeError, match="Debian package graphviz"):
        irviz.write_report(model, tmp_path / "h.svg")
    with pytest.raises(irforge.IrforgeError, match="no step 5"):
        irviz.write_report(model, tmp_path / "h.dot", step=5)


# -- the page file ---------------------------------------------------------------------------
def test_the_page_is_one_file_that_names_no_network_resource(tmp_path):
    model = Model(parse_graph(TEXT.replace('"neg"', '"</script><script>alert(1)</script>"')))
    path = irviz.write_report(model, tmp_path / "r.html", "canonicalize")
    with open(path, encoding="utf-8") as f:
        page = f.read()
    assert page.count("</script>") == 1  # a node name cannot end the page's script
    assert "default-src 'none'" in page  # the page's policy forbids any fetch
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page)
    assert "dagre" in page and "new Worker(" in page


# -- the commands ----------------------------------------------------------------------------
IRVIZ = "import sys; from irforge.cli import irviz_main; sys.exit(irviz_main())"


def _irviz(*args, cwd=None):
    return subprocess.run([sys.executable, "-c", IRVIZ, *args], capture_output=True, text=True, cwd=cwd)


def test_irviz_command_writes_each_format(tmp_path):
    done = _irviz(SMALL_CNN, "--pipeline", "-O2", "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    assert "dagre" in (tmp_path / "r.html").read_text(encoding="utf-8")
    done = _irviz(SMALL_CNN, "--format", "dot", "--focus", "pool", "--depth", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "small_cnn.dot").read_text().count("fillcolor=") == 3  # pool and its two neighbours
    done = _irviz(SMALL_CNN, "--depth", "1")
    assert done.returncode == 1 and done.stderr.strip() == "irviz: error: --depth needs --focus NODE"
    done = _irviz(str(tmp_path / "missing.onnx"))
    assert done.returncode == 1 and "missing.onnx" in done.stderr and "Traceback" not in done.stderr


def test_optimize_viz_writes_the_timeline_of_the_run(tmp_path):
    done = subprocess.run([sys.executable, "-m", "irforge.cli", "optimize", SMALL_CNN, "-o", str(tmp_path / "o.onnx"),
                           "-O2", "--viz", str(tmp_path / "t.html")], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "t.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r"const IRVIZ_DATA = (.*);\n", page).group(1).replace("<\\/", "</"))
    assert data["steps"][0]["title"] == "input" and len(data["steps"]) > 2
    assert data["steps"][-1]["nodes"] == len(irforge.load(str(tmp_path / "o.onnx")).graph)
    done = subprocess.run([sys.executable, "-m", "irforge.cli", "optimize", SMALL_CNN, "-o", str(tmp_path / "o.onnx"),
                           "--viz", str(tmp_path / "zero.html")], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr  # -O0: no pass, the loaded model as the one step
    assert '"title":"input"' in (tmp_path / "zero.html").read_text(encoding="utf-8")


def test_a_recorder_is_not_given_a_pipeline_again():
    recorder = irviz.record(irforge.load(SMALL_CNN), "dce")
    with pytest.raises(irforge.IrforgeError, match="a Recorder holds the run it recorded"):
        irviz.report(recorder, "-O2")


def test_irforge_run_node_errors_is_an_overlay_irviz_reads(tmp_path):
    errors = tmp_path / "errors.json"
    command = [sys.executable, "-m", "irforge.cli", "run", SMALL_CNN, "-O2", "--backend", "onnxruntime", "--dim",
               "batch=1", "--node-errors", str(errors)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    written = json.loads(errors.read_text())
    optimized = irforge.optimize(irforge.load(SMALL_CNN), "-O2")
    assert set(written["values"]) == {n.outputs[0].name for n in optimized.graph}  # one number per node
    assert all(0 <= v < 1e-4 for v in written["values"].values())
    data = irviz.report(irforge.load(SMALL_CNN), "-O2", overlays=[errors])
    last = {data["records"][i]["id"] for i in data["steps"][-1]["items"]}
    assert set(data["overlays"][0]["values"]) <= last and len(data["overlays"][0]["values"]) == len(optimized.graph)
    done = subprocess.run([sys.executable, "-m", "irforge.cli", "run", SMALL_CNN, "--backend", "reference",
                           "--node-errors", str(errors)], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 1 and "compares a backend with the reference" in done.stderr


def test_ir_text_in_and_show_without_a_browser(tmp_path, monkeypatch):
    import webbrowser

    from irforge.core_ir import print_model

    text = tmp_path / "m.irf"
    text.write_text(print_model(Model(parse_graph(TEXT))))
    done = _irviz(str(text), "-o", str(tmp_path / "m.html"))
    assert done.returncode == 0, done.stderr
    opened = []

    class Browser:
        def open(self, url):
            opened.append(url)

    monkeypatch.setattr(webbrowser, "get", lambda: Browser())
    path = irviz.show(Model(parse_graph(TEXT)), path=tmp_path / "shown.html")
    assert opened == ["file://" + os.path.abspath(path)]

    def no_browser():
        raise webbrowser.Error("could not locate runnable browser")

    monkeypatch.setattr(webbrowser, "get", no_browser)
    path = irviz.show(Model(parse_graph(TEXT)), "canonicalize")
    assert os.path.getsize(path) > 10_000 and path.endswith(".html")
    os.remove(path)
