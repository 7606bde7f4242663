"""``irforge emit`` and ``irforge run``: a model out to a compiler's input, and run on a backend."""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from ..core_ir.errors import IrforgeError
from ..passes.levels import LEVEL_NAMES
from .feeds import check_dims, parse_dims, read_feeds


def _prepare(args: argparse.Namespace):
    from ..api import load as _load
    from ..passes import PassManager

    model = _load(args.model)
    if args.level:
        PassManager.parse(f"O{args.level}").run(model)
    return model


def cmd_emit(args: argparse.Namespace) -> int:
    import irforge

    model = _prepare(args)
    if args.check_only:
        from ..api import registry as default_registry

        owner = next((b for b in default_registry().backends.values() if args.target in b.targets), None)
        if owner is None:
            print(f"{args.model}: the onnx target takes every model")
            return 0
        problems = owner.unsupported(irforge.prepare(model, owner))
        if not problems:
            print(f"{args.model}: the {owner.name} backend can lower every op of this model")
            return 0
        print(f"{args.model}: the {owner.name} backend cannot take {len(problems)} op kind(s):")
        for p in problems:
            print(f"  {p}")
        return 1
    dims = parse_dims(args.dim, model)
    static = ("hlo", "hlo-optimized", "relax")
    if dims and args.target not in static:
        raise IrforgeError(f"--dim sizes the static shapes of {', '.join(static)}; {args.target} keeps dims symbolic")
    options = {"dims": dims} if dims else {}
    artifact = irforge.emit(model, args.target, **options)
    if args.output:
        artifact.save(args.output)
        unit = "bytes" if isinstance(artifact.data, bytes) else "characters"
        print(f"{args.model} -> {args.output}: {args.target}, {len(artifact.data)} {unit}")
    elif isinstance(artifact.data, bytes):
        raise IrforgeError(f"{args.target} is binary: give -o FILE")
    else:
        sys.stdout.write(artifact.data if artifact.data.endswith("\n") else artifact.data + "\n")
    return 0


def _inputs(args: argparse.Namespace, model) -> dict[str, np.ndarray]:
    from ..core_ir.dtypes import to_numpy

    inputs = [v for v in model.graph.inputs if not v.is_initializer()]
    dims = parse_dims(args.dim, model)
    if args.inputs:
        feeds = read_feeds(args.inputs, [v.name for v in inputs])
        check_dims(feeds, model, dims)
        return feeds
    rng = np.random.default_rng(args.seed)
    out = {}
    for v in inputs:
        shape = []
        for d in v.type.shape or ():
            shape.append(d if isinstance(d, int) else dims.get(d, 1) if isinstance(d, str) else 1)
        dtype = to_numpy(v.type.dtype)
        if np.issubdtype(dtype, np.floating):
            out[v.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            out[v.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            out[v.name] = rng.integers(0, 10, shape).astype(dtype)
    return out


def cmd_run(args: argparse.Namespace) -> int:
    import irforge

    model = _prepare(args)
    feeds = _inputs(args, model)
    t0 = time.perf_counter()
    exe = irforge.compile(model, args.backend, args.device)
    outs = exe(feeds)  # the first call compiles for these shapes where the backend compiles lazily
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        exe(feeds)
        times.append(time.perf_counter() - t)
    reference = None
    if args.backend != "reference" and not args.no_check:
        reference = irforge.compile(model, "reference")(feeds)
    for name, out in zip(exe.output_names, outs, strict=True):
        flat = np.asarray(out).reshape(-1)
        print(f"{name}: {out.dtype}{list(out.shape)} {np.array2string(flat[:6], precision=5)}"
              f"{' ...' if flat.size > 6 else ''}")  # fmt: skip
    if reference is not None:
        diff = max((_max_diff(a, b) for a, b in zip(outs, reference, strict=True)), default=0.0)
        print(f"max |{args.backend} - reference|: {diff:.3g}")
    if args.node_errors:
        _write_node_errors(model, args, feeds)
    print(f"compile: {first * 1000:.1f} ms (first call included)")
    if times:
        print(f"latency: median {statistics.median(times) * 1000:.3f} ms over {len(times)} runs "
              f"(min {min(times) * 1000:.3f} ms)")  # fmt: skip
    return 0


def _write_node_errors(model, args: argparse.Namespace, feeds: dict[str, np.ndarray]) -> None:
    """Every node's largest |backend - reference| over its outputs, as an irviz overlay keyed by
    output value name.  The model is run with every typed node output made a graph output, so
    the backend computes each value as it stands (the fusions it would make across them are off)."""
    import json

    import irforge

    from ..core_ir.clone import clone_model

    if args.backend == "reference":
        raise IrforgeError("--node-errors compares a backend with the reference: give --backend")
    probe = clone_model(model)
    outputs = {v.name for v in probe.graph.outputs}
    owner: dict[str, str] = {}
    for node in probe.graph:
        for v in node.outputs:
            if v is not None and v.type is not None and v.name not in outputs:
                probe.graph.append_output(v)
                outputs.add(v.name)
            if v is not None:
                owner[v.name] = next(o.name for o in node.outputs if o is not None)
    backend, reference = irforge.compile(probe, args.backend, args.device), irforge.compile(probe, "reference")
    got = dict(zip(backend.output_names, backend(feeds), strict=True))
    want = dict(zip(reference.output_names, reference(feeds), strict=True))
    errors: dict[str, float] = {}
    for name, value in got.items():
        if name in owner:
            key = owner[name]
            errors[key] = max(errors.get(key, 0.0), _max_diff(value, want[name]))
    overlay = {"name": f"max |{args.backend} - reference|", "values": errors}
    try:
        with open(args.node_errors, "w", encoding="utf-8") as f:
            json.dump(overlay, f)
    except OSError as e:
        raise IrforgeError(f"{args.node_errors}: cannot write: {e.strerror}") from None
    worst = max(errors, key=errors.get) if errors else None
    print(f"node errors: {len(errors)} nodes -> {args.node_errors}"
          + (f" (largest {errors[worst]:.3g}, at %{worst})" if worst else ""))  # fmt: skip


def _max_diff(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("inf")
    if a.dtype == bool or b.dtype == bool:
        return float(np.count_nonzero(a != b))
    with np.errstate(invalid="ignore"):
        d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    both_nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return float(np.max(np.where(both_nan, 0, d), initial=0))


def _emit_targets() -> list[str]:
    from ..api import emit_targets

    return emit_targets()


def _backend_names() -> list[str]:
    from ..api import backend_names

    return backend_names()


def add_parsers(sub) -> None:
    from .main import LazyChoices

    em = sub.add_parser("emit", help="write a model as a compiler's input (StableHLO, HLO, ONNX)")
    em.add_argument("model", help="an .onnx file (or .irf text)")
    em.add_argument("--target", default="stablehlo", choices=LazyChoices(_emit_targets),
                    help="what to write (default stablehlo); a plugin backend adds its own")  # fmt: skip
    em.add_argument("-o", "--output", help="write here (default: text to stdout)")
    em.add_argument("-O", dest="level", default=None, choices=LEVEL_NAMES, help="optimize first")
    em.add_argument("--check-only", action="store_true",
                    help="list every op the target cannot take (exit 1 if any), write nothing")  # fmt: skip
    em.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE",
                    help="a size for a symbolic dim (HLO and Relax are written at static shapes)")  # fmt: skip
    em.set_defaults(func=cmd_emit)
    rn = sub.add_parser("run", help="compile a model for a backend, run it, compare with the reference")
    rn.add_argument("model", help="an .onnx file (or .irf text)")
    rn.add_argument("--backend", default="xla", choices=LazyChoices(_backend_names),
                    help="the backend to compile for (default xla); a plugin's is one of them")  # fmt: skip
    rn.add_argument("--device", default="cpu", help="cpu or gpu (xla)")
    rn.add_argument("-O", dest="level", default=None, choices=LEVEL_NAMES, help="optimize first")
    given = rn.add_mutually_exclusive_group()
    given.add_argument("--inputs", metavar="FILE.npz", help="the inputs, one array per input name")
    given.add_argument("--random", action="store_true", help="seeded random inputs (the default)")
    rn.add_argument("--seed", type=int, default=0)
    rn.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE", help="size of a symbolic dim")
    rn.add_argument("--repeat", type=int, default=10, help="timed runs after the first (default 10)")
    rn.add_argument("--no-check", action="store_true", help="do not run the reference interpreter to compare")
    rn.add_argument("--node-errors", metavar="FILE.json",
                    help="also write each node's largest |backend - reference| (an irviz --overlay)")  # fmt: skip
    rn.set_defaults(func=cmd_run)
