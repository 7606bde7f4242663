"""irviz's page in a real browser (headless Chromium): it renders, search finds a node, a click
shows its attributes and provenance, a step's diff marks added and removed nodes, overlays
colour nodes, the SVG export holds the view, big graphs open collapsed into chunks, and the page
asks the network for nothing.  Screenshots go to test-artifacts/.  The time budgets are measured
by benchmarks/bench_irviz.py."""

from __future__ import annotations

import io
import os
import xml.etree.ElementTree as ET

import onnx
import pytest
from browser import console_errors, open_page, requested_urls, screenshot, start_chromium, stop_chromium
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

import irforge
from irforge import irviz

MINUS = "\N{MINUS SIGN}"  # how the page writes a count of removed nodes
LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_squeezenet.onnx")


@pytest.fixture(scope="module")
def browser():
    b = start_chromium()
    yield b
    stop_chromium(b)


def _ids(browser, selector: str) -> set[str]:
    """The ``data-id`` of every element matching ``selector``, read in one go (the page redraws)."""
    return set(browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => e.getAttribute('data-id'))", selector))


def _only_local(urls: list[str]) -> None:
    assert any(u.startswith("file://") for u in urls), f"the page's own load is not in the network log: {urls}"
    assert not [u for u in urls if u.split(":", 1)[0] in ("http", "https", "ws", "wss", "ftp")], urls


def test_a_light_model_renders_and_search_and_click_work(browser, tmp_path):
    data = irviz.report(irforge.load(LIGHT), title="squeezenet")
    path = irviz.write_html(data, tmp_path / "squeezenet.html")
    open_page(browser, path)
    _only_local(requested_urls(browser))
    records = [data["records"][i] for i in data["steps"][0]["items"]]
    nodes = browser.find_elements(By.CSS_SELECTOR, "#nodes .node")
    assert {n.get_attribute("data-id") for n in nodes} == {r["id"] for r in records}  # 109 nodes + in/out
    shown = [n.is_displayed() for n in nodes]
    assert shown.count(True) >= 20  # the first screenful, at a readable scale
    browser.execute_script("irviz.fit(false)")
    assert all(n.is_displayed() for n in nodes)
    assert int(browser.find_element(By.ID, "graph").get_attribute("data-edges")) > len(records) - 3

    conv = next(r for r in records if r["op"] == "Conv" and ["kernel_shape", "ints[3, 3]"] in r["attrs"])
    box = browser.find_element(By.ID, "search")
    box.send_keys(conv["out"][0][0], Keys.ENTER)
    browser.implicitly_wait(2)
    assert conv["id"] in _ids(browser, "#nodes .node.match")  # and its reader, which takes the value
    assert _ids(browser, "#nodes .node.selected") == {conv["id"]}  # Enter goes to the first match
    assert f"%{conv['out'][0][0]}:" in browser.find_element(By.ID, "panel").text

    browser.find_element(By.CSS_SELECTOR, f'#nodes .node[data-id="{conv["id"]}"]').click()
    panel = browser.find_element(By.ID, "panel").text
    assert "Conv" in panel and "kernel_shape" in panel and "ints[3, 3]" in panel and "ATTRIBUTES" in panel.upper()
    assert f"%{conv['in'][0][0]}" in panel and "in the input model" in panel
    assert _ids(browser, "#nodes .node.selected") == {conv["id"]}
    screenshot(browser, "irviz-squeezenet.png")
    assert not console_errors(browser)


def _bert_encoder():
    import torch
    import torch_models

    model, args, _ = torch_models.bert(layers=2)
    buffer = io.BytesIO()
    torch.onnx.export(model, args, buffer, input_names=["ids", "mask"], dynamo=False)
    return irforge.from_onnx(onnx.load_from_string(buffer.getvalue()))


@pytest.fixture(scope="module")
def bert_timeline(tmp_path_factory):
    data = irviz.report(_bert_encoder(), "-O2", title="BERT encoder -O2")
    return data, irviz.write_html(data, tmp_path_factory.mktemp("bert") / "bert.html")


def test_a_bert_o2_timeline_marks_added_and_removed_nodes(browser, bert_timeline):
    data, path = bert_timeline
    open_page(browser, path)
    _only_local(requested_urls(browser))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline .step")) == len(data["steps"])
    k = next(i for i, s in enumerate(data["steps"]) if s["pass"] == "fuse-attention")
    browser.find_element(By.CSS_SELECTOR, f'#timeline .step[data-step="{k}"]').click()
    assert browser.execute_script("return [irviz.current, irviz.base]") == [k, k - 1]
    panel = browser.find_element(By.ID, "panel").text  # the step's own page: every rewrite, where it is defined
    assert f"rewrites ({len(data['steps'][k]['rewrites'])})" in panel.lower()
    for rewrite in data["steps"][k]["rewrites"]:
        assert rewrite["pattern"] in panel and rewrite["at"] in panel
    browser.execute_async_script("irviz.expandAll().then(arguments[0])")
    browser.execute_script(f"irviz.showStep({k})")
    diff = irviz.diff_steps(data, k - 1, k)
    # a node with a body is drawn as its body's box (key "g...#<id>"); the copies of a fused op's
    # body under it ("<call>/<node>") are added too, but the diff counts the graph's own nodes
    added = {key.rsplit("\u001f#", 1)[-1] for key in _ids(browser, "#nodes .node.added, #groups .group.added")}
    assert {a for a in added if "/" not in a} == set(diff["added"])
    assert _ids(browser, "#nodes .node.removed") == set(diff["removed"])
    assert diff["added"] and diff["removed"]
    screenshot(browser, "irviz-bert-timeline.png")
    # the layout is stable: every box drawn in both the first and the last step is in the same place
    both, moved = browser.execute_script("""
        const at = (k) => { irviz.showStep(k, -1); return Object.fromEntries([...document.querySelectorAll(
            '#nodes .node')].map((e) => [e.getAttribute('data-id'), e.getAttribute('transform')])); };
        const first = at(0), last = at(arguments[0]);
        const both = Object.keys(first).filter((key) => key in last);
        return [both.length, both.filter((key) => first[key] !== last[key])];""", len(data["steps"]) - 1)
    assert both > 30 and moved == []
    assert not console_errors(browser)


def test_a_fused_node_shows_its_provenance_and_jumps_to_its_step(browser, bert_timeline):
    data, path = bert_timeline
    open_page(browser, path)
    last = len(data["steps"]) - 1
    records = [data["records"][i] for i in data["steps"][last]["items"]]
    attention = next(r for r in records if r["op"] == "Attention")
    origin = data["origins"][attention["id"]]
    browser.execute_async_script(f"irviz.focus({attention['id']!r}).then(arguments[0])")
    panel = browser.find_element(By.ID, "panel")
    assert origin["pattern"] in panel.text and "fuse-attention" in panel.text and "ancestry" in panel.text.lower()
    assert origin["at"].rsplit("/", 1)[-1] in panel.text  # fuse_attention.py:LINE
    panel.find_element(By.CSS_SELECTOR, f'a[data-step-go="{origin["step"]}"]').click()
    assert browser.execute_script("return irviz.current") == origin["step"]
    # an ancestor: the page goes back to the last step that has it, and selects it
    ancestor = origin["from"][0]
    browser.find_element(By.CSS_SELECTOR, f'#panel a[data-go="{ancestor}"]').click()
    browser.implicitly_wait(2)
    assert browser.execute_script("return irviz.current") == origin["step"] - 1
    assert ancestor in browser.find_element(By.ID, "panel").text
    assert not console_errors(browser)


def test_overlays_colour_nodes_and_the_svg_export_holds_the_view(browser, tmp_path):
    model = irforge.load(LIGHT)
    names = [o.name for n in model.graph for o in n.outputs if n.op_type == "Conv"]
    values = {name: float(i) for i, name in enumerate(names)}
    data = irviz.report(model, overlays=[{"name": "latency", "values": values}])
    open_page(browser, irviz.write_html(data, tmp_path / "overlay.html"))
    browser.execute_script("irviz.setOverlay(0)")
    coloured = browser.find_elements(By.CSS_SELECTOR, '#nodes .node rect[style*="fill"]')
    assert len(coloured) == len(names)
    assert browser.find_element(By.ID, "legend").is_displayed()
    svg = ET.fromstring(browser.execute_script("return irviz.exportSvg()"))
    ns = {"s": "http://www.w3.org/2000/svg"}
    exported = {g.get("data-id") for g in svg.iterfind(".//s:g[@data-id]", ns) if "node" in g.get("class", "")}
    assert exported == _ids(browser, "#nodes .node") and len(exported) > 100
    assert svg.find("s:style", ns) is not None and svg.get("viewBox")


def _chain(n: int, ops=("Sigmoid", "Neg", "Identity", "Tanh", "Exp")) -> onnx.ModelProto:
    """``n`` element-wise nodes in a row, with unscoped names: the layout must chunk them."""
    h = onnx.helper
    nodes = [h.make_node(ops[i % len(ops)], [f"v{i}"], [f"v{i + 1}"], name=f"node{i}") for i in range(n)]
    graph = h.make_graph(nodes, "chain", [h.make_tensor_value_info("v0", onnx.TensorProto.FLOAT, [4])],
                         [h.make_tensor_value_info(f"v{n}", onnx.TensorProto.FLOAT, [4])])  # fmt: skip
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_a_5000_node_timeline_opens_in_chunks_and_switches_steps(browser, tmp_path):
    data = irviz.report(irforge.from_onnx(_chain(5000)), "canonicalize", title="chain 5000")
    assert [s["nodes"] for s in data["steps"]] == [5000, 4000]  # the Identity nodes go
    open_page(browser, irviz.write_html(data, tmp_path / "chain.html"))
    _only_local(requested_urls(browser))
    groups = browser.execute_script("return irviz.groups()")
    assert sum(g.startswith("chunk") for g in groups) == 42  # 5,002 boxes in chunks of 120
    assert 0 < browser.execute_script("return irviz.visibleCount()") <= 200
    badges = browser.execute_script("return [...document.querySelectorAll('#nodes .badge')].map((b) => b.textContent)")
    removed = [int(part[1:]) for text in badges for part in text.split() if part.startswith(MINUS)]
    ghosts = _ids(browser, "#nodes .node.removed")  # the nodes of chunks opened at first paint
    assert sum(removed) + len(ghosts) == 1000 and len(removed) >= 40  # the rest rolled up into closed chunks
    browser.execute_script("irviz.showStep(0)")
    assert not browser.find_elements(By.CSS_SELECTOR, "#nodes .node .badge")  # step 0 has no base
    browser.find_element(By.CSS_SELECTOR, '#nodes .node[data-id="chunk1"]').click()  # laid out on demand
    browser.implicitly_wait(2)
    assert 120 <= browser.execute_script("return irviz.visibleCount()") <= 200 + 120
    screenshot(browser, "irviz-chain-5000.png")
    assert not console_errors(browser)


def test_a_100k_node_graph_opens_collapsed(browser, tmp_path):
    data = irviz.report(irforge.from_onnx(_chain(100_000, ("Relu", "Neg", "Abs", "Sigmoid"))))
    open_page(browser, irviz.write_html(data, tmp_path / "chain100k.html"), timeout=120)
    assert 0 < browser.execute_script("return irviz.visibleCount()") <= 200
    assert browser.execute_script("return irviz.expanded().length") >= 1
    screenshot(browser, "irviz-chain-100k.png")
    assert not console_errors(browser)
