"""Timing engines side by side: each round runs every engine in turn, with a pause between
engines, so that idle worker threads of one engine (onnxruntime, torch, XLA spin on this 2-core
machine) do not steal a core from the next, and drift in the machine's speed hits all alike."""

from __future__ import annotations

import time
from collections.abc import Callable


def time_in_rounds(engines: dict[str, Callable[[], object]], runs: int, rounds: int, pause: float,
                   budget_s: float | None = None) -> dict[str, list[float]]:  # fmt: skip
    """Seconds per call of each engine, ``runs`` calls at least, spread over ``rounds``; with
    ``budget_s`` an engine stops once its calls took that long (and at least 3 ran)."""
    times: dict[str, list[float]] = {e: [] for e in engines}
    per_round = max(1, -(-runs // rounds))
    for _ in range(rounds):
        for engine, fn in engines.items():
            for _ in range(per_round):
                if budget_s is not None and len(times[engine]) >= 3 and sum(times[engine]) > budget_s:
                    break
                t = time.perf_counter()
                fn()
                times[engine].append(time.perf_counter() - t)
            time.sleep(pause)
    return times


def ort_session(path: str, enable: bool = True, threads: int = 2):
    """An onnxruntime CPU session for timing: ``ORT_ENABLE_ALL`` (or ``ORT_DISABLE_ALL``),
    ``threads`` intra-op threads that do not spin when idle."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    level = ort.GraphOptimizationLevel
    so.graph_optimization_level = level.ORT_ENABLE_ALL if enable else level.ORT_DISABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.intra_op_num_threads = threads
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
