"""Greedy decoding, side by side: ``transformers``' eager ``generate`` against
:mod:`irforge.generation` on onnxruntime (dynamic cache) and XLA (static cache), on GPT-2 small
(124M parameters) and a ~100M-parameter Llama, random weights; every engine's tokens checked
against eager's.  Decoding one token reads every weight once, so the table also gives the floor
that memory bandwidth sets: the weights' bytes over the speed of a 1 GiB copy measured here.

Each engine generates ``--new`` tokens after a ``--prompt``-token prompt, in rounds with a pause
between engines (``rounds.py``); per-token latency is (time for prompt+new - time for prompt+1)
/ (new - 1), prefill the time for prompt+1, both medians of the rounds.

Run:  python benchmarks/bench_generate.py [--models gpt2,llama] [--engines ...] [--small]
      (writes benchmarks/results/generate.{json,md,png})
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import causal_lms

from irforge.generation import compile_causal_lm

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")


def copy_bandwidth(gib: float = 1.0, runs: int = 5) -> float:
    """Memory traffic a second of a ``gib`` GiB numpy copy (the best of ``runs``; a copy reads
    and writes each byte, so twice its size moves): what reading the weights once costs at best."""
    src = np.ones(int(gib * 2**30) // 4, np.float32)
    dst = np.empty_like(src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(runs))
    return 2 * src.nbytes / best


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _engines(model, names: list[str], max_length: int) -> dict:
    """name → (generate(ids, n) → tokens, compiled LM or None)."""
    engines = {}
    for name in names:
        if name == "eager":
            def run(ids, n):
                with torch.no_grad():
                    return model.generate(torch.from_numpy(ids), max_new_tokens=n, min_new_tokens=n,
                                          do_sample=False).numpy()  # fmt: skip
            engines[name] = (run, None)
        else:
            backend, _, cache = name.partition(":")
            lm = compile_causal_lm(model, backend, cache=cache or "auto", max_length=max_length)
            engines[name] = (lm.generate, lm)
    return engines


def bench_model(arch: str, small: bool, names: list[str], prompt: int, new: int, rounds: int, pause: float,
                bandwidth: float) -> dict:  # fmt: skip
    torch.set_num_threads(2)
    model = causal_lms.LMS[arch](small=small)
    ids = causal_lms.prompt(prompt, model.config.vocab_size).numpy()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    t0 = time.perf_counter()
    engines = _engines(model, names, prompt + new)
    build = time.perf_counter() - t0
    expected = engines["eager"][0](ids, new) if "eager" in engines else None
    for gen, _ in engines.values():  # warm: compilations and first-call allocations out of the timings
        gen(ids, 1)
        gen(ids, new)
    rows = {}
    full = {n: [] for n in engines}
    first = {n: [] for n in engines}
    for _ in range(rounds):
        for name, (gen, _) in engines.items():
            first[name].append(_timed(lambda gen=gen: gen(ids, 1)))
            t = time.perf_counter()
            tokens = gen(ids, new)
            full[name].append(time.perf_counter() - t)
            if expected is not None and not np.array_equal(tokens, expected):
                raise SystemExit(f"{arch} on {name}: tokens differ from eager generate")
            time.sleep(pause)
    config = model.config
    layers, heads = config.num_hidden_layers, getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    for name, (_, lm) in engines.items():
        prefill = statistics.median(first[name])
        per_token = statistics.median((f - p) / (new - 1) for f, p in zip(full[name], first[name], strict=True))
        length = lm.max_length if lm is not None and lm.cache == "static" else prompt + new
        rows[name] = {"prefill_ms": prefill * 1e3, "per_token_ms": per_token * 1e3,
                      "cache_mb": 2 * layers * heads * length * head_dim * 4 / 1e6,
                      "compilations": lm.compilations if lm else None, "same_tokens": expected is not None}  # fmt: skip
    return {"model": arch, "parameters": sum(p.numel() for p in model.parameters()), "weights_mb": weights / 1e6,
            "floor_ms": weights / bandwidth * 1e3, "build_s": build, "rows": rows}  # fmt: skip


def _table(results: list[dict], bandwidth: float, prompt: int, new: int) -> str:
    lines = [f"Greedy decoding, prompt {prompt}, {new} new tokens, batch 1, 2 threads, fp32, random weights; "
             f"every engine's tokens equal eager `generate`'s. Copy bandwidth {bandwidth / 1e9:.1f} GB/s.", "",
             "| model | weights | engine | prefill | per token | vs eager | vs floor | cache | compilations |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        eager = r["rows"].get("eager", {}).get("per_token_ms")
        for name, row in r["rows"].items():
            speed = f"{eager / row['per_token_ms']:.2f}× faster" if eager else "–"
            lines.append(f"| {r['model']} ({r['parameters'] / 1e6:.0f}M) | {r['weights_mb']:.0f} MB | {name} | "
                         f"{row['prefill_ms']:.1f} ms | {row['per_token_ms']:.1f} ms | {speed} | "
                         f"{row['per_token_ms'] / r['floor_ms']:.2f}× ({r['floor_ms']:.1f} ms) | "
                         f"{row['cache_mb']:.1f} MB | {row['compilations'] if row['compilations'] else '–'} |")
    return "\n".join(lines) + "\n"


def _plot(results: list[dict]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.5 * len(results), 3.2), squeeze=False)
    for ax, r in zip(axes[0], results, strict=True):
        names = list(r["rows"])
        ax.bar(names, [r["rows"][n]["per_token_ms"] for n in names], color="#4c72b0")
        ax.axhline(r["floor_ms"], color="#c44e52", linestyle="--", label="bandwidth floor")
        ax.set_title(f"{r['model']} ({r['parameters'] / 1e6:.0f}M)")
        ax.set_ylabel("ms per token")
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(RESULTS, "generate.png")
    fig.savefig(path, dpi=90)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--engines", default="eager,onnxruntime,xla")
    ap.add_argument("--small", action="store_true", help="the tests' 2-layer configs (a quick check)")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=1.0)
    args = ap.parse_args()
    bandwidth = copy_bandwidth()
    results = [bench_model(m, args.small, args.engines.split(","), args.prompt, args.new, args.rounds, args.pause,
                           bandwidth) for m in args.models.split(",")]  # fmt: skip
    table = _table(results, bandwidth, args.prompt, args.new)
    print(table)
    if not args.small:
        os.makedirs(RESULTS, exist_ok=True)
        with open(os.path.join(RESULTS, "generate.json"), "w") as f:
            json.dump({"bandwidth": bandwidth, "date": time.strftime("%Y-%m-%d"), "results": results}, f, indent=1)
        with open(os.path.join(RESULTS, "generate.md"), "w") as f:
            f.write(table)
        print(_plot(results))


if __name__ == "__main__":
    main()
