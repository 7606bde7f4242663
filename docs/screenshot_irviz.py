"""The README's picture of irviz: a BERT encoder's ``-O2`` timeline, at the step that fuses
attention, with the fused node selected (its provenance in the side panel).

    python docs/screenshot_irviz.py        # writes docs/irviz-timeline.png
"""

from __future__ import annotations

import io
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    import onnx
    import torch
    import torch_models
    from browser import open_page, start_chromium, stop_chromium

    import irforge
    from irforge import irviz

    module, args, _ = torch_models.bert(layers=2)
    buffer = io.BytesIO()
    torch.onnx.export(module, args, buffer, input_names=["ids", "mask"], dynamo=False)
    data = irviz.report(irforge.from_onnx(onnx.load_from_string(buffer.getvalue())), "-O2", title="BERT encoder")
    step = next(k for k, s in enumerate(data["steps"]) if s["pass"] == "fuse-attention")
    fused = next(data["records"][i]["id"] for i in data["steps"][step]["items"]
                 if data["records"][i]["op"] == "Attention")  # fmt: skip
    browser = start_chromium(1600, 1000)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            open_page(browser, irviz.write_html(data, os.path.join(tmp, "bert.html")))
            browser.execute_script(f"irviz.showStep({step})")
            browser.execute_async_script(f"irviz.focus({fused!r}).then(arguments[0])")
            browser.execute_script("irviz.select(arguments[0])", fused)
            browser.save_screenshot(os.path.join(HERE, "irviz-timeline.png"))
    finally:
        stop_chromium(browser)


if __name__ == "__main__":
    main()
