"""Import speed and memory of the frontends against the peers, side by side.

- PyTorch, BERT-base (seq 128, random weights, ``bert.py``): ``irforge.from_torch`` against
  ``torch.onnx.export(dynamo=True)`` followed by ``irforge.load`` of the bytes it wrote (the way
  to reach the IR without the frontend).  Time is the median of several runs in one process,
  each engine in turn with a pause between; memory is the peak resident-set growth of a fresh
  process doing one import, over the size of the weights (each engine in its own process).
- JAX, a BERT-base-sized encoder written in jax.numpy: ``irforge.from_jax`` against
  ``jax.jit(fn).lower(*args)`` (tracing and lowering to StableHLO, what jax itself does first),
  each run on a new function object so neither reuses a cached trace.

Run:  python benchmarks/bench_frontends.py [--runs 5]
Writes benchmarks/results/frontends.json and frontends.md.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
PAUSE = 1.0


def _bert_inputs():
    import torch

    torch.manual_seed(0)
    return torch.randint(0, 30522, (1, 128)), torch.ones(1, 128, dtype=torch.int64)


def torch_from_torch(module, args):
    import irforge

    return irforge.from_torch(module, args)


def torch_peer(module, args):
    import torch

    import irforge

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(module, args, dynamo=True, verbose=False)
    buffer = io.BytesIO()
    program.save(buffer)
    return irforge.load(buffer.getvalue())


def _jax_bert(layers: int = 12, d: int = 768, heads: int = 12, ffn: int = 3072, seq: int = 128):
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)

    def dense(i, o):
        return {"w": (rng.standard_normal((i, o)) * 0.02).astype(np.float32), "b": np.zeros(o, np.float32)}

    params = [{"q": dense(d, d), "k": dense(d, d), "v": dense(d, d), "o": dense(d, d), "up": dense(d, ffn),
               "down": dense(ffn, d), "g1": np.ones(d, np.float32), "g2": np.ones(d, np.float32)}
              for _ in range(layers)]  # fmt: skip

    def norm(x, g):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-12) * g

    def encoder(params, x):
        b, n, _ = x.shape
        for p in params:
            def heads_of(t):
                return t.reshape(b, n, heads, d // heads).transpose(0, 2, 1, 3)

            q, k, v = (heads_of(x @ p[name]["w"] + p[name]["b"]) for name in ("q", "k", "v"))
            a = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / jnp.sqrt(d // heads), -1) @ v
            x = norm(x + a.transpose(0, 2, 1, 3).reshape(b, n, d) @ p["o"]["w"] + p["o"]["b"], p["g1"])
            h = jax.nn.gelu(x @ p["up"]["w"] + p["up"]["b"]) @ p["down"]["w"] + p["down"]["b"]
            x = norm(x + h, p["g2"])
        return x

    return encoder, params, rng.standard_normal((1, seq, d)).astype(np.float32)


def jax_from_jax(fn, params, x):
    import irforge

    return irforge.from_jax(lambda p, h: fn(p, h), params, x)  # a new function: JAX caches traces per function


def jax_lower(fn, params, x):
    import jax

    return jax.jit(lambda p, h: fn(p, h)).lower(params, x)


def _timed(fn, *args) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _memory_child(engine: str) -> None:
    """In a fresh process: build BERT-base, then import it once while a thread samples the
    resident set every millisecond; print the peak growth over the RSS before, and the weight bytes."""
    import threading

    from bert import build_module

    module = build_module()
    args = _bert_inputs()
    weights = sum(p.numel() * p.element_size() for p in module.state_dict().values())
    gc.collect()
    base = _rss()
    peak, done = [base], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    model = (torch_from_torch if engine == "from_torch" else torch_peer)(module, args)
    done.set()
    sampler.join()
    kept = _rss() - base
    del model
    print(json.dumps({"growth": peak[0] - base, "kept": kept, "weights": weights}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        _memory_child(args.memory_child)
        return
    import jax
    import torch

    torch.set_num_threads(2)
    from bert import build_module

    module = build_module()
    inputs = _bert_inputs()
    fn, params, x = _jax_bert()
    engines = {
        ("torch", "irforge.from_torch"): lambda: torch_from_torch(module, inputs),
        ("torch", "torch.onnx.export(dynamo=True) + irforge.load"): lambda: torch_peer(module, inputs),
        ("jax", "irforge.from_jax"): lambda: jax_from_jax(fn, params, x),
        ("jax", "jax.jit(fn).lower"): lambda: jax_lower(fn, params, x),
    }
    for make in engines.values():  # warm up: first-use imports are not what is measured
        make()
    times = {k: [] for k in engines}
    for _ in range(args.runs):
        for key, make in engines.items():
            times[key].append(_timed(make))
            time.sleep(PAUSE)
    memory = {}
    for engine in ("from_torch", "peer"):
        out = subprocess.run([sys.executable, __file__, "--memory-child", engine], capture_output=True, text=True,
                             check=True).stdout.strip().splitlines()[-1]  # fmt: skip
        memory[engine] = json.loads(out)
    rows = {f"{fw}: {name}": statistics.median(ts) for (fw, name), ts in times.items()}
    result = {"runs": args.runs, "median_seconds": rows, "memory": memory,
              "versions": {"torch": torch.__version__, "jax": jax.__version__}}  # fmt: skip
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "frontends.json"), "w") as f:
        json.dump(result, f, indent=1)
    t_ft = rows["torch: irforge.from_torch"]
    t_peer = rows["torch: torch.onnx.export(dynamo=True) + irforge.load"]
    t_fj, t_low = rows["jax: irforge.from_jax"], rows["jax: jax.jit(fn).lower"]
    lines = [f"BERT-base import, median of {args.runs} runs (torch {torch.__version__}, jax {jax.__version__}):", "",
             "| framework | irforge | peer | peer / irforge |", "|---|---:|---:|---:|",
             f"| torch | from_torch {t_ft:.2f} s | export(dynamo=True) + load {t_peer:.2f} s | {t_peer / t_ft:.2f}x |",
             f"| jax | from_jax {t_fj:.2f} s | jit(fn).lower {t_low:.2f} s | {t_low / t_fj:.2f}x |", "",
             "Memory of one import in a fresh process, over the weights' size "
             f"({memory['from_torch']['weights'] / 2**20:.0f} MiB), peak during the import / kept after it: "
             f"from_torch {memory['from_torch']['growth'] / memory['from_torch']['weights']:.2f}x / "
             f"{memory['from_torch']['kept'] / memory['from_torch']['weights']:.2f}x, export(dynamo=True) + load "
             f"{memory['peer']['growth'] / memory['peer']['weights']:.2f}x / "
             f"{memory['peer']['kept'] / memory['peer']['weights']:.2f}x."]  # fmt: skip
    text = "\n".join(lines) + "\n"
    with open(os.path.join(HERE, "results", "frontends.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
