"""Run a frontend over the framework's own op test suites and check the imported graphs against
the framework's eager results.

- PyTorch: the OpInfo database (``torch.testing._internal.common_methods_invocations.op_db``),
  float32 CPU samples, each wrapped in a module and exported with ``torch.export``.
- JAX: the primitive harnesses of ``jax._src.internal_test_util.test_harnesses``.

Each sample ends in one of :data:`OUTCOMES`, per backend: ``pass`` (every output within
tolerance), ``wrong`` (it ran and a number is off: the one outcome that must never happen),
``unmapped`` (the frontend refused the program, naming the op), ``error`` (import or run failed
another way), ``not-exported`` (the framework itself could not export the sample: not counted
against anyone) and ``nondeterministic`` (two eager runs differ: RNG ops, compared on shape and
dtype only).  A peer exporter is measured on the same samples when asked.
"""

from __future__ import annotations

import collections
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

OUTCOMES = ("pass", "wrong", "unmapped", "error", "not-exported", "nondeterministic")
RTOL, ATOL = 1e-4, 1e-4


@dataclass
class SampleResult:
    op: str
    index: int
    outcomes: dict[str, str] = field(default_factory=dict)  # engine → outcome
    details: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _compare(got: Sequence, expected: Sequence, shape_only: bool = False, rtol: float = RTOL,
             atol: float = ATOL) -> str | None:  # fmt: skip
    """None when ``got`` matches ``expected``; else what differs."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        g, e = np.asarray(g), np.asarray(e)
        if g.shape != e.shape:
            return f"output {i}: shape {g.shape}, expected {e.shape}"
        if g.dtype != e.dtype:
            return f"output {i}: dtype {g.dtype}, expected {e.dtype}"
        if shape_only:
            continue
        if e.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):  # ml_dtypes floats: compare in float32
            g, e = g.astype(np.float32), e.astype(np.float32)
        if e.dtype.kind in "fc":
            if not np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True):
                bad = ~np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
                return f"output {i}: {int(bad.sum())} of {e.size} values off (first {g[bad][:3]} vs {e[bad][:3]})"
        elif not np.array_equal(g, e):
            return f"output {i}: values differ"
    return None


TORCH_SIGN_FREE = {"linalg.eigh": (1, None, False), "linalg.svd": (0, 2, True), "svd": (0, 2, False)}
JAX_SIGN_FREE = {"eigh": (0, None, False), "svd": (1, 2, True)}
"""Ops whose vectors are unique only up to sign: (output of the eigen- or left singular vectors,
output of the right singular vectors, whether those are rows).  Neither framework promises
LAPACK's signs (both document that they vary by platform and library), so every engine's vectors,
the peer's too, are compared after :func:`align_vectors`."""


def align_vectors(got: Sequence, expected: Sequence, spec: tuple) -> list:
    """``got`` with each of its vectors given the sign of the framework's where they span the same
    line (a left singular vector and its right one flip together), and a null-space basis
    (``full_matrices``' extra vectors) replaced by the framework's where both span the same space.
    Any other difference is left for the comparison to find."""
    left, right, rows = spec
    out = [np.array(g) for g in got]
    if max(left, right or 0) >= min(len(out), len(expected)):
        return out
    u, want_u = out[left], np.asarray(expected[left])
    if u.shape != want_u.shape or u.dtype.kind != "f" or u.ndim < 2:
        return out
    pairs = [(u, want_u)]
    if right is not None:
        v, want_v = out[right], np.asarray(expected[right])
        if v.shape != want_v.shape or v.ndim < 2:
            return out
        if rows:
            v, want_v = np.swapaxes(v, -1, -2), np.swapaxes(want_v, -1, -2)  # views: columns
        pairs.append((v, want_v))
    k = min(u.shape[-2], pairs[-1][0].shape[-2]) if right is not None else u.shape[-1]
    signs = np.sign(np.sum(u[..., :k] * want_u[..., :k], axis=-2, keepdims=True))
    signs[signs == 0] = 1
    for g, want in pairs:
        g[..., :k] *= signs
        if g.shape[-1] > k:  # a basis of the null space: unique only as a space
            extra, want_extra = g[..., k:], want[..., k:]
            same = np.allclose(extra @ np.swapaxes(extra, -1, -2), want_extra @ np.swapaxes(want_extra, -1, -2),
                               rtol=RTOL, atol=ATOL)  # fmt: skip
            if same:
                g[..., k:] = want_extra
    return out


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0][:300] if text else ''}"


def run_backends(model, arrays: Sequence[np.ndarray], backends: Sequence[str]) -> dict[str, list | BaseException]:
    """``model`` on each backend: its outputs, or the exception it raised."""
    import irforge

    results: dict[str, list | BaseException] = {}
    for b in backends:
        try:
            if b == "reference":
                names = [v.name for v in model.graph.inputs if not v.is_initializer()]
                results[b] = [np.asarray(o) for o in irforge.interpret(model, dict(zip(names, arrays, strict=True)))]
            else:
                results[b] = [np.asarray(o) for o in irforge.compile(model, b)(*arrays)]
        except Exception as e:
            results[b] = e
    return results


def _judge(result, expected, shape_only: bool) -> tuple[str, str]:
    if isinstance(result, BaseException):
        return "error", _first_line(result)
    why = _compare(result, expected, shape_only)
    return ("wrong", why) if why else ("pass", "")


# -- PyTorch OpInfo --------------------------------------------------------------------------------


def torch_ops(names: Iterable[str] | None = None) -> list:
    """OpInfos with float32 CPU support (all, or those named ``op`` or ``op.variant``)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    wanted = set(names) if names is not None else None
    out = []
    for op in op_db:
        full = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if wanted is not None and full not in wanted and op.name not in wanted:
            continue
        if torch.float32 in op.supported_dtypes("cpu"):
            out.append(op)
    return out


def torch_op_name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _sample_module(op, sample):
    """A module whose forward calls ``op`` on ``sample``; its tensors become the module's inputs."""
    import torch
    from torch.utils import _pytree as pytree

    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    positions = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    tensors = [leaves[i].detach().clone() for i in positions]
    fn = op.op

    class Sample(torch.nn.Module):
        def forward(self, *xs):
            filled = list(leaves)
            for i, x in zip(positions, xs, strict=True):
                filled[i] = x
            inp, args, kwargs = pytree.tree_unflatten(filled, spec)
            return fn(inp, *args, **kwargs)

    return Sample(), tensors


def _torch_outputs(out) -> list[np.ndarray] | None:
    import torch
    from torch.utils import _pytree as pytree

    leaves = pytree.tree_leaves(out)
    if not leaves or not all(isinstance(x, torch.Tensor) for x in leaves):
        return None
    return [x.detach().cpu().resolve_conj().resolve_neg().numpy().copy() for x in leaves]


def run_torch_sample(op, sample, index: int, backends: Sequence[str], peer: bool = False) -> SampleResult:
    """Export one OpInfo sample, import it, run it on ``backends`` (and the peer exporter)."""
    import torch

    from ..frontends.common import UnsupportedOpsError
    from ..frontends.torch import import_program

    result = SampleResult(torch_op_name(op), index)
    engines = [*backends, *(["peer"] if peer else [])]

    def every(outcome: str, detail: str) -> SampleResult:
        for e in engines:
            result.outcomes[e], result.details[e] = outcome, detail
        return result

    module, tensors = _sample_module(op, sample)
    try:
        with torch.no_grad():
            first, second = module(*tensors), module(*tensors)
        expected = _torch_outputs(first)
        if expected is None or any(x.dtype == object or x.dtype.kind == "c" for x in expected):
            return every("not-exported", "the op returns non-tensors or complex numbers")
        shape_only = _compare(_torch_outputs(second), expected) is not None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(module, tuple(tensors), strict=False)
        shape_only = shape_only or _draws_random(ep)
        arrays = [t.numpy() for t in tensors]
    except Exception as e:
        return every("not-exported", _first_line(e))
    t0 = time.perf_counter()
    try:
        model = import_program(ep)
    except UnsupportedOpsError as e:
        for b in backends:
            result.outcomes[b], result.details[b] = "unmapped", ", ".join(u.op for u in e.ops)
        model = None
    except Exception as e:
        for b in backends:
            result.outcomes[b], result.details[b] = "error", "import: " + _first_line(e)
        model = None
    result.seconds["import"] = time.perf_counter() - t0
    sign_free = TORCH_SIGN_FREE.get(result.op)
    if model is not None:
        for b, got in run_backends(model, arrays, backends).items():
            if sign_free and not isinstance(got, BaseException):
                got = align_vectors(got, expected, sign_free)
            outcome, detail = _judge(got, expected, shape_only)
            result.outcomes[b], result.details[b] = outcome, detail
    if peer:
        got = _torch_peer(module, tensors, arrays)
        if sign_free and not isinstance(got, BaseException):
            got = align_vectors(got, expected, sign_free)
        outcome, detail = _judge(got, expected, shape_only)
        result.outcomes["peer"], result.details["peer"] = outcome, detail
    if shape_only:
        for e in engines:
            if result.outcomes[e] == "pass":
                result.outcomes[e] = "nondeterministic"
    return result


_RANDOM = ("rand", "normal", "uniform", "bernoulli", "dropout", "multinomial", "exponential", "cauchy",
           "geometric", "log_normal", "poisson", "empty")  # fmt: skip


def _draws_random(ep) -> bool:
    """Whether the program draws random numbers or returns uninitialised memory (``empty``): no
    engine reproduces those, so such samples are compared on shape and dtype only."""
    return any(n.op == "call_function" and (any(r in str(n.target) for r in _RANDOM) or _rrelu_training(n))
               for n in ep.graph.nodes)  # fmt: skip


def _rrelu_training(n) -> bool:
    """rrelu draws its slopes in training only (in evaluation it is a fixed leaky ReLU)."""
    return "rrelu" in str(n.target) and (True in n.args or n.kwargs.get("training") is True)


def _torch_peer(module, tensors, arrays):
    """``torch.onnx.export(dynamo=True)`` then onnxruntime: the peer the issue measures against."""
    import io

    import torch

    try:

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, tuple(tensors), dynamo=True, verbose=False)
        buffer = io.BytesIO()
        program.save(buffer)
        return _onnxruntime_run(buffer.getvalue(), arrays)
    except Exception as e:
        return e


def _onnxruntime_run(model_bytes: bytes, arrays) -> list[np.ndarray]:
    """A peer's ONNX on onnxruntime's CPU provider, its threads not spinning."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return [np.asarray(o) for o in session.run(None, dict(zip(names, arrays, strict=False)))]


def run_torch_suite(ops: Sequence | None = None, backends: Sequence[str] = ("reference",), *,
                    samples_per_op: int = 3, peer: bool = False,
                    progress: Callable[[SampleResult], None] | None = None) -> list[SampleResult]:  # fmt: skip
    """Every float32 CPU OpInfo sample (up to ``samples_per_op`` an op) through export, import and
    ``backends``."""
    import torch

    results = []
    for op in ops if ops is not None else torch_ops():
        try:
            samples = list(op.sample_inputs("cpu", torch.float32))[:samples_per_op]
        except Exception as e:
            r = SampleResult(torch_op_name(op), 0)
            for b in [*backends, *(["peer"] if peer else [])]:
                r.outcomes[b], r.details[b] = "not-exported", "samples: " + _first_line(e)
            results.append(r)
            continue
        for i, sample in enumerate(samples):
            r = run_torch_sample(op, sample, i, backends, peer)
            results.append(r)
            if progress:
                progress(r)
    return results


def tally(results: Iterable[SampleResult]) -> dict[str, dict[str, int]]:
    """engine → outcome → number of samples."""
    out: dict[str, dict[str, int]] = {}
    for r in results:
        for engine, outcome in r.outcomes.items():
            counts = out.setdefault(engine, dict.fromkeys(OUTCOMES, 0))
            counts[outcome] += 1
    return out


# -- JAX primitive harnesses -----------------------------------------------------------------------

_JAX_TOLERANCES = {"float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def jax_harnesses(groups: Iterable[str] | None = None, per_group: int | None = None) -> list:
    """``test_harnesses.all_harnesses`` that run on CPU without x64 (optionally only ``groups``,
    and at most ``per_group`` of each, the first ones in the suite's order)."""
    import jax
    from jax._src.internal_test_util import test_harnesses

    wanted = set(groups) if groups is not None else None
    x64 = jax.config.jax_enable_x64
    kept = []
    for h in test_harnesses.all_harnesses:
        if wanted is not None and h.group_name not in wanted:
            continue
        if not h.filter("cpu", include_jax_unimpl=False):
            continue
        if not x64 and np.dtype(h.dtype).itemsize == 8 and np.dtype(h.dtype).kind in "fiuc":
            continue
        kept.append(h)
    if per_group is None:
        return kept
    # float32 cases first: the dtype every engine runs (a bfloat16 case mostly measures onnxruntime)
    kept.sort(key=lambda h: np.dtype(h.dtype) != np.float32)
    out, seen = [], collections.Counter()
    for h in kept:
        if seen[h.group_name] < per_group:
            seen[h.group_name] += 1
            out.append(h)
    return out


def run_jax_harness(h, backends: Sequence[str] = ("reference",), peer: bool = False) -> SampleResult:
    """One harness: jit it for the expected outputs, import it with :func:`from_jax`, run ``backends``."""
    import jax

    from ..frontends.common import UnsupportedOpsError
    from ..frontends.jax import from_jax

    result = SampleResult(h.group_name, 0)
    result.details["name"] = h.fullname
    engines = [*backends, *(["peer"] if peer else [])]
    try:
        args = h.dyn_args_maker(np.random.RandomState(0))
        fun = h.dyn_fun
        expected = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fun)(*args))]
        again = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fun)(*args))]
        arrays = [np.asarray(a).astype(jax.dtypes.canonicalize_dtype(np.asarray(a).dtype)) for a in args]
    except Exception as e:
        for b in engines:
            result.outcomes[b], result.details[b] = "not-exported", _first_line(e)
        return result
    if any(e.dtype.kind == "c" for e in expected) or any(a.dtype.kind == "c" for a in arrays):
        for b in engines:
            result.outcomes[b], result.details[b] = "not-exported", "complex numbers"
        return result
    shape_only = _compare(again, expected) is not None
    rtol, atol = _JAX_TOLERANCES.get(str(expected[0].dtype) if expected else "", (RTOL, ATOL))
    t0 = time.perf_counter()
    model = None
    try:
        model = from_jax(fun, *args)
    except UnsupportedOpsError as e:
        for b in backends:
            result.outcomes[b], result.details[b] = "unmapped", ", ".join(u.op for u in e.ops)
    except Exception as e:
        for b in backends:
            result.outcomes[b], result.details[b] = "error", "import: " + _first_line(e)
    result.seconds["import"] = time.perf_counter() - t0

    def judge(engine, got):
        if isinstance(got, BaseException):
            result.outcomes[engine], result.details[engine] = "error", _first_line(got)
            return
        if h.group_name in JAX_SIGN_FREE:
            got = align_vectors(got, expected, JAX_SIGN_FREE[h.group_name])
        why = _compare(got, expected, shape_only, rtol, atol)
        result.outcomes[engine], result.details[engine] = ("wrong", why) if why else ("pass", "")

    if model is not None:
        for b, got in run_backends(model, arrays, backends).items():
            judge(b, got)
    if peer:
        judge("peer", _jax_peer(fun, args, arrays))
    if shape_only:
        for e in engines:
            if result.outcomes[e] == "pass":
                result.outcomes[e] = "nondeterministic"
    return result


def _jax_peer(fun, args, arrays):
    """jax2onnx then onnxruntime, on the same harness."""
    try:
        import jax
        import jax2onnx

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            proto = jax2onnx.to_onnx(fun, [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays])
        return _onnxruntime_run(proto.SerializeToString(), arrays)
    except Exception as e:
        return e


def run_jax_suite(harnesses: Sequence | None = None, backends: Sequence[str] = ("reference",), *, peer: bool = False,
                  progress: Callable[[SampleResult], None] | None = None) -> list[SampleResult]:  # fmt: skip
    """Every harness (default: all that run here) through :func:`from_jax` and ``backends``."""
    results = []
    for h in harnesses if harnesses is not None else jax_harnesses():
        r = run_jax_harness(h, backends, peer)
        results.append(r)
        if progress:
            progress(r)
    return results
