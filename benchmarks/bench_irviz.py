"""irviz's page in headless Chromium: time to first paint, time to switch steps, and what the
Python side costs (recording the pipeline, writing the page), for

- BERT-base (the torch export of ``bert.py``, 12 layers, name scopes) as an ``-O2`` timeline;
- a 5,000-node synthetic chain (no name scopes: the page must chunk it) as an ``-O2`` timeline;
- a 100,000-node synthetic chain, one step (opens collapsed into chunks).

First paint is read from the page (``performance.now()`` at the first frame after layout, which
counts from the start of navigation); a step switch is the time from the call to the second
animation frame after it, so painting is included.  Medians of ``--runs`` fresh page loads.
The budgets (issue 16): first paint < 1 s and step switch < 100 ms at 5,000 nodes; a 100k-node
graph open < 5 s.

    python benchmarks/bench_irviz.py            # writes benchmarks/results/irviz.{json,md}
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SWITCH = """const done = arguments[arguments.length - 1], k = arguments[0], t = performance.now();
irviz.showStep(k);
requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t)));"""


def cases(tmp: str):
    import synthetic

    import irforge

    def bert():
        import bert as bert_model

        path = os.path.join(tmp, "bert.onnx")
        bert_model.export(path)
        return irforge.load(path), "-O2"

    yield "BERT-base, -O2 timeline", bert
    yield "chain 5,000, -O2 timeline", lambda: (irforge.from_onnx(synthetic.build("chain", 5000)), "-O2")
    yield "chain 100,000, one step", lambda: (irforge.from_onnx(synthetic.build("chain", 100_000)), None)


def measure(browser, path: str, steps: int, runs: int) -> dict:
    from browser import open_page

    paints, opens, switches = [], [], []
    for _ in range(runs):
        opens.append(open_page(browser, path, timeout=300))
        paints.append(browser.execute_script("return irviz.metrics.firstPaint") / 1000)
        sample = sorted({round(i * (steps - 1) / 9) for i in range(10)}) if steps > 1 else []
        for k in sample:
            switches.append(browser.execute_async_script(SWITCH, k) / 1000)
        visible = browser.execute_script("return irviz.visibleCount()")
    return {"first_paint_s": statistics.median(paints), "open_s": statistics.median(opens),
            "switch_median_s": statistics.median(switches) if switches else None,
            "switch_max_s": max(switches) if switches else None, "boxes_drawn": visible}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh page loads per case")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "irviz"))
    args = ap.parse_args()
    sys.path[:0] = [HERE, os.path.join(HERE, "..", "tests")]
    from browser import start_chromium, stop_chromium

    from irforge import irviz

    rows = []
    browser = start_chromium()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, build in cases(tmp):
                model, pipeline = build()
                started = time.perf_counter()
                data = irviz.report(model, pipeline, title=name)
                recorded = time.perf_counter() - started
                path = irviz.write_html(data, os.path.join(tmp, "page.html"))
                row = {"case": name, "nodes": data["steps"][0]["nodes"], "steps": len(data["steps"]),
                       "record_s": recorded, "page_mb": os.path.getsize(path) / 1e6}  # fmt: skip
                row.update(measure(browser, path, len(data["steps"]), args.runs))
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        stop_chromium(browser)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w", encoding="utf-8") as f:
        json.dump(rows, f, indent=1)
    lines = ["| case | nodes | steps | record + diff (Python) | page | first paint | switch step (median / max) | "
             "boxes drawn |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        switch = (f"{r['switch_median_s'] * 1000:.0f} / {r['switch_max_s'] * 1000:.0f} ms"
                  if r["switch_median_s"] is not None else "–")  # fmt: skip
        lines.append(f"| {r['case']} | {r['nodes']:,} | {r['steps']} | {r['record_s']:.2f} s | {r['page_mb']:.1f} MB | "
                     f"{r['first_paint_s'] * 1000:.0f} ms | {switch} | {r['boxes_drawn']} |")  # fmt: skip
    with open(args.out + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
