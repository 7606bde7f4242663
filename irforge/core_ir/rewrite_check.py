"""Rewrites checked by running them: what ``irforge optimize --validate-rewrites`` and
``irforge bisect`` stand on.

Every rewrite, whichever pass makes it, ends in ``old.replace_all_uses_with(new)``: from then on
``new`` stands for ``old``.  While a :class:`RewriteChecker` watches, each replacement is checked
just before it happens, while both sides still exist.  The nodes that compute ``old`` and the
nodes that compute ``new`` are cut out of the graph down to the values the two sides share (their
*cones*), run by the reference interpreter on the same inputs, and compared with the tolerance of
the least precise float type either side computes in (:data:`~irforge.core_ir.dtypes.TOLERANCES`),
times the longer side's node count (each op rounds once, and the errors of a chain add up; a
wrong rewrite is off by the size of the numbers themselves).

- **Random mode** (the default): the cones' inputs get random values, then two more trials mix in
  the edge values of each float type (:data:`TRIALS`); constants keep their payloads.  A
  replacement that changes a number is refused (:class:`RewriteRejected`).
- **Known mode** (``known=``): the cones start from values of a real run of the model, so the
  first replacement that changes a number is the first wrong rewrite of a pass (bisecting).

A replacement is counted as *unchecked*, with the reason, when its cones cannot be run (an input
without a shape, a subgraph reading outer values, a kernel that refuses the random data) or grow
past ``cone_limit`` nodes without meeting and then disagree: a difference found on a cut cone may
come from the cut, so it is not blamed on the rewrite.
"""

from __future__ import annotations

import warnings
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import value as _value
from .dtypes import TOLERANCES, to_numpy
from .errors import InterpreterError, IrforgeError
from .graph import Graph
from .model import Function, Model
from .node import Node
from .printer import Printer
from .types import TensorType
from .value import Value

FunctionSource = Callable[[Node, Model], "Function | None"]
"""Where a checker finds the function of a call that a pass made but has not defined yet."""

TRIALS = ("random values", "special values", "extreme values")
"""The trials of random mode, in order: normal values; a quarter of them replaced by 0, -0, ±1,
±inf, NaN and denormals; a quarter replaced by the type's largest and smallest normal values."""


@dataclass
class Rejection:
    """A replacement that changed numbers: where it was made and the two sides, as text."""

    pass_name: str
    old: str
    new: str
    before: list[str]
    after: list[str]
    inputs: list[str]
    detail: str
    pattern: str = ""
    """``name (file:line)`` of the pattern that made it, when the pattern driver did."""
    index: int = 0
    """Which replacement of the pass it was (from 1)."""

    def __str__(self) -> str:
        nothing = ["(nothing: the value is an input of both)"]
        made_by = f"pattern {self.pattern} in pass {self.pass_name!r}" if self.pattern else f"pass {self.pass_name!r}"
        lines = [f"{made_by}: replacing %{self.old} by %{self.new} changes the numbers: {self.detail}",
                 "  inputs:", *(f"    {s}" for s in self.inputs),
                 "  matched:", *(f"    {s}" for s in self.before or nothing),
                 "  replacement:", *(f"    {s}" for s in self.after or nothing)]  # fmt: skip
        return "\n".join(lines)


class RewriteRejected(IrforgeError):
    """A rewrite changed what the graph computes; it was not applied."""

    def __init__(self, rejection: Rejection):
        self.rejection = rejection
        super().__init__(rejection.pass_name)

    def __str__(self) -> str:
        return str(self.rejection)


class _Unchecked(Exception):
    """This replacement cannot be checked; the message says why."""


@dataclass
class _Cone:
    nodes: list[Node] = field(default_factory=list)
    """Topological order."""
    leaves: list[Value] = field(default_factory=list)
    cut: bool = False


class RewriteChecker:
    """Checks every value replacement made while :meth:`watching` a pass.

    ``checked``, ``unchecked`` (reason → count) and ``rejections`` add up over all the passes it
    watched.  With ``known`` (one ``{value: array}`` per trial, from a real run of the model as it
    was before the pass) the cones start from those values instead of random ones.
    """

    def __init__(
        self, *, seed: int = 0, cone_limit: int = 64, known: Sequence[dict[Value, Any]] | None = None
    ) -> None:
        self.seed = seed
        self.cone_limit = cone_limit
        self.known = list(known) if known is not None else None
        self.checked = 0
        self.unchecked: Counter[str] = Counter()
        self.rejections: list[Rejection] = []
        self.pass_name = ""
        self._model: Model | None = None
        self._interpreter: Any = None
        self._state: tuple = ()
        self._pending: dict[tuple[str, str, str], Function] = {}
        self._resolve: FunctionSource | None = None
        self._sizes: dict[str, int] = {}
        self._replacements = 0
        self._rng = np.random.default_rng(seed)

    @contextmanager
    def watching(
        self, model: Model, pass_name: str, functions: FunctionSource | None = None
    ) -> Iterator[RewriteChecker]:
        """Check every ``replace_all_uses_with`` made on ``model`` inside the block.  ``functions``
        gives the function of a call the model does not define yet (``(node, model) -> Function``)."""
        if _value.REPLACE_HOOK is not None:
            raise IrforgeError("a rewrite checker is already watching; checkers do not nest")
        self._model, self.pass_name, self._resolve = model, pass_name, functions
        self._pending, self._replacements = {}, 0
        _value.REPLACE_HOOK = self._on_replace
        try:
            yield self
        finally:
            _value.REPLACE_HOOK = None
            self._model = self._interpreter = self._resolve = None

    def summary(self) -> str:
        """One line: how many replacements were checked, left unchecked (and why), rejected."""
        line = f"{self.checked} rewrites checked, {len(self.rejections)} rejected"
        if self.unchecked:
            reasons = ", ".join(f"{n} {why}" for why, n in self.unchecked.most_common())
            line += f", {sum(self.unchecked.values())} unchecked ({reasons})"
        return line

    # -- the hook --------------------------------------------------------------------------
    def _on_replace(self, old: Value, new: Value) -> None:
        self._replacements += 1
        try:
            self._check(old, new)
        except _Unchecked as e:
            self.unchecked[str(e)] += 1
        else:
            self.checked += 1

    def _shared_cones(self, old: Value, new: Value) -> tuple[_Cone, _Cone]:
        """Both sides, each down to the values the other is computed from too."""
        ancestors_old = _ancestors(old, 4 * self.cone_limit)
        ancestors_new = _ancestors(new, 4 * self.cone_limit)
        if old in ancestors_new:
            raise _Unchecked("replacements that read the value they replace")
        shared: set[Value] = set()

        # a shared value of unknown shape gets no random data: both sides compute it instead
        def stop_before(v: Value) -> bool:
            return v in shared or (v in ancestors_new and _has_shape(v))

        def stop_after(v: Value) -> bool:
            return v in shared or (v in ancestors_old and _has_shape(v))

        before = self._cone(old, stop_before, self.cone_limit)
        after = self._cone(new, stop_after, self.cone_limit)
        for _ in range(4):
            # a value one side reads as an input and the other computes (the ancestor sets are
            # bounded) becomes an input of both, so both sides see the same data
            leaves = {*before.leaves, *after.leaves}
            if leaves <= shared:
                break
            shared.update(leaves)
            before = self._cone(old, stop_before, self.cone_limit)
            after = self._cone(new, stop_after, self.cone_limit)
        return before, after

    def _check(self, old: Value, new: Value) -> None:
        if self.known is not None:
            known = self.known[0]
            before = self._cone(old, lambda v: v in known, limit=None)
            after = self._cone(new, lambda v: v in known, limit=None)
        else:
            before, after = self._shared_cones(old, new)
        rtol, atol = _tolerance([*before.nodes, *after.nodes], [*before.leaves, *after.leaves])
        # each op rounds once, and the errors of a chain add up
        growth = max(1, len(before.nodes), len(after.nodes))
        rtol, atol = rtol * growth, atol * growth
        ran = False
        scale: float | None = None  # the magnitude of the first trial's result
        leaves = list(dict.fromkeys([*before.leaves, *after.leaves]))
        context = self._context(leaves) if self.known is None else _Cone()
        for trial in range(len(self.known) if self.known is not None else len(TRIALS)):
            env: dict[Value, Any] = {}
            guessed = False
            if context.nodes:  # the shared values computed as the graph computes them, when it can be run
                for v in context.leaves:
                    env[v], was_guessed = self._leaf(v, trial)
                    guessed |= was_guessed
                try:
                    env = self._run(context, env)
                except InterpreterError:
                    env, guessed = {}, False
            for v in leaves:
                if v not in env:
                    env[v], was_guessed = self._leaf(v, trial)
                    guessed |= was_guessed
            try:
                expected = self._run(before, env)[old]
            except InterpreterError:
                continue  # the original refuses these inputs (e.g. random indices): nothing to compare
            try:
                actual = self._run(after, env)[new]
            except InterpreterError as e:
                if guessed or before.cut or after.cut:
                    raise _Unchecked("replacements whose inputs' shapes are not known") from None
                self._reject(old, new, before, after, f"the replacement fails where the original runs: {e}")
            ran = True
            if scale is None:
                scale = _scale(expected)
            if trial == 2 and self.known is None:
                # with extreme inputs, rounding error is relative to them, not to what is left
                # after they cancel, and results within a millionth of them (less, the longer the
                # chain that can cancel them) are overflows
                magnitude = max([scale, *(_scale(env[v]) for v in env)])
                found = difference(expected, actual, rtol, atol, magnitude, magnitude * 2**-20 / growth)
            else:
                found = difference(expected, actual, rtol, atol, scale)
            if found is not None:
                if before.cut or after.cut:
                    raise _Unchecked(f"replacements whose cones exceed {self.cone_limit} nodes")
                trial_name = TRIALS[trial] if self.known is None else "the model's own values"
                self._reject(old, new, before, after, f"with {trial_name}, {found}")
        if not ran:
            raise _Unchecked("replacements whose original refuses every trial's inputs")

    def _reject(self, old: Value, new: Value, before: _Cone, after: _Cone, detail: str) -> None:
        if self.known is not None:  # show what was matched, not just the values that were known
            with suppress(_Unchecked):
                before, after = self._shared_cones(old, new)
        p = Printer()
        inputs = [f"{p.decl(v)}" + (" (constant)" if v.const_value is not None else "")
                  for v in dict.fromkeys([*before.leaves, *after.leaves])]  # fmt: skip
        rejection = Rejection(self.pass_name, old.name or "?", new.name or "?",
                              [p.node(n, metadata=False) for n in before.nodes],
                              [p.node(n, metadata=False) for n in after.nodes], inputs, detail,
                              index=self._replacements)  # fmt: skip
        self.rejections.append(rejection)
        raise RewriteRejected(rejection)

    def _context(self, leaves: list[Value], depth: int = 3) -> _Cone:
        """The nodes computing the two sides' shared inputs, ``depth`` producers back: a rewrite
        may rest on what they are (``Abs(Abs(x)) -> Abs(x)`` needs a non-negative input), which
        random values alone would not be.  Costly producers (convolutions, products, pools,
        loops) are not run again: facts such rewrites rest on come from cheaper ops."""
        distance: dict[Value, int] = {v: 0 for v in leaves}
        frontier = list(leaves)
        for d in range(1, depth + 1):
            following = []
            for v in frontier:
                p = v.producer()
                if p is None or v.const_value is not None or p.domain or p.op_type in _COSTLY:
                    distance[v] = depth  # its own value is random: the context stops here
                    continue
                for x in p.inputs:
                    if x is not None and x not in distance:
                        distance[x] = d
                        following.append(x)
            frontier = following
        context = _Cone()
        seen: set[Node] = set()
        for v in leaves:
            def stop(x: Value, leaf: Value = v) -> bool:
                return distance.get(x, depth) >= depth or (x is not leaf and not _has_shape(x))

            cone = self._cone(v, stop, limit=self.cone_limit)
            if not all(_has_shape(x) or x.const_value is not None for x in cone.leaves):
                continue
            for n in cone.nodes:
                if n not in seen:
                    seen.add(n)
                    context.nodes.append(n)
            context.leaves.extend(x for x in cone.leaves if x not in context.leaves)
        return context

    # -- cones -----------------------------------------------------------------------------
    def _cone(self, target: Value, stop, limit: int | None) -> _Cone:
        """The nodes computing ``target`` back to values where ``stop`` holds (or to constants and
        inputs); past ``limit`` nodes the rest are cut off and become inputs."""
        cone = _Cone()
        members: set[Node] = set()
        seen: set[Value] = set()
        stack: list[tuple[Value, bool]] = [(target, False)]
        while stack:
            v, finished = stack.pop()
            p = v.producer()
            if finished:
                cone.nodes.append(p)  # type: ignore[arg-type]
                continue
            if v in seen:
                continue
            seen.add(v)
            constant_node = p is not None and p.op_type == "Constant" and not p.domain
            if p is None or v.const_value is not None or (stop(v) and not constant_node):
                cone.leaves.append(v)
                continue
            if p in members:
                continue
            if limit is not None and len(members) >= limit:
                cone.leaves.append(v)
                cone.cut = True
                continue
            members.add(p)
            stack.append((v, True))
            stack.extend((x, False) for x in reversed(p.inputs) if x is not None)
        return cone

    def _run(self, cone: _Cone, env: dict[Value, Any]) -> dict[Value, Any]:
        interp = self._interpreter_for(cone.nodes)
        env = dict(env)
        # edge values overflow on purpose: numpy's warnings about it are not the user's business
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for node in cone.nodes:
                outs = interp.evaluate(node, [None if x is None else env[x] for x in node.inputs])
                for v, x in zip(node.outputs, outs, strict=False):
                    if v is not None:
                        env[v] = x
        return env

    def _interpreter_for(self, nodes: list[Node]):
        """An interpreter knowing the model's opsets and functions, and the functions of calls a
        pass has made but not yet defined (a fusion pass adds them when it ends)."""
        from .interpreter import Interpreter

        model = self._model
        assert model is not None
        for n in nodes:
            key = (n.domain, n.op_type, n.overload)
            if n.domain and key not in model.functions and key not in self._pending and self._resolve is not None:
                fn = self._resolve(n, model)
                if fn is not None:
                    self._pending[key] = fn
        functions = {**self._pending, **model.functions}
        state = (tuple(map(id, functions.values())), tuple(model.opset_imports.items()))
        if self._interpreter is None or state != self._state:
            opsets = dict(model.opset_imports)
            for domain, _, _ in functions:
                opsets.setdefault(domain, 1)
            shell = Model(Graph(name="check"), opset_imports=opsets, functions=functions)
            self._interpreter, self._state = Interpreter(shell), state
        return self._interpreter

    # -- inputs ----------------------------------------------------------------------------
    def _leaf(self, v: Value, trial: int) -> tuple[Any, bool]:
        """The data of a cone input in ``trial``, and whether its shape had to be guessed."""
        if self.known is not None:
            if v in self.known[trial]:
                return self.known[trial][v], False
            if v.const_value is not None:
                return v.const_value.numpy(), False
            raise _Unchecked("replacements in graphs the model run does not reach")
        if v.const_value is not None:
            return v.const_value.numpy(), False
        t = v.type
        if not _has_shape(v):
            raise _Unchecked("replacements reading values of unknown type or rank")
        guessed = False
        shape = []
        for d in t.shape:
            if isinstance(d, int):
                shape.append(d)
            elif d is None:
                shape.append(3)
                guessed = True
            else:
                shape.append(self._sizes.setdefault(str(d), 2 + len(self._sizes) % 3))
        return _random_array(self._rng, np.dtype(to_numpy(t.dtype)), shape, trial), guessed


def random_inputs(model: Model, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random data for each graph input that is not an initializer (symbolic dims take
    small sizes); an input without a known shape is an error naming it."""
    rng = np.random.default_rng(seed)
    sizes: dict[str, int] = {}
    feeds = {}
    for v in model.graph.inputs:
        if v.is_initializer():
            continue
        if not _has_shape(v):
            raise IrforgeError(f"input %{v.name} has no known type and shape: give the inputs yourself "
                               "(feeds=, or --inputs FEEDS.npz)")  # fmt: skip
        shape = [d if isinstance(d, int) else sizes.setdefault(str(d), 2 + len(sizes) % 3) for d in v.type.shape]
        try:
            feeds[v.name or ""] = _random_array(rng, np.dtype(to_numpy(v.type.dtype)), shape, 0)
        except _Unchecked:
            raise IrforgeError(f"input %{v.name}: no random data for its type; give the inputs yourself "
                               "(feeds=, or --inputs FEEDS.npz)") from None
    return feeds


_COSTLY = frozenset({
    "Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv", "MatMul", "MatMulInteger", "QLinearMatMul",
    "Gemm", "Einsum", "MaxPool", "AveragePool", "LpPool", "MaxRoiPool", "RoiAlign", "LSTM", "GRU", "RNN", "Loop", "If",
    "Scan", "Resize", "GridSample", "Col2Im", "NonMaxSuppression", "Attention",
})  # fmt: skip
"""Ops the context of a rewrite check does not run again (see ``RewriteChecker._context``)."""


def _has_shape(v: Value) -> bool:
    return isinstance(v.type, TensorType) and v.type.shape is not None and v.type.dtype is not None


def _ancestors(v: Value, limit: int) -> set[Value]:
    """``v`` and the values it is computed from, nearest first, up to ``limit`` producers back."""
    seen = {v}
    queue = deque([v])
    visited = 0
    while queue and visited < limit:
        p = queue.popleft().producer()
        if p is None:
            continue
        visited += 1
        for x in p.inputs:
            if x is not None and x not in seen:
                seen.add(x)
                queue.append(x)
    return seen


def _edge_values(dtype: np.dtype, trial: int) -> np.ndarray:
    import ml_dtypes

    info = ml_dtypes.finfo(dtype)
    if trial == 1:
        values = [0.0, -0.0, np.inf, -np.inf, np.nan, float(info.smallest_subnormal), -float(info.smallest_subnormal),
                  1.0, -1.0]  # fmt: skip
    else:
        values = [float(info.max), float(info.min), float(info.tiny), -float(info.tiny)]
    with np.errstate(all="ignore"):
        return np.array(values, dtype=np.float64).astype(dtype)


def _random_array(rng: np.random.Generator, dtype: np.dtype, shape: list[int], trial: int) -> np.ndarray:
    """Normal values for floats (after the first trial, a quarter of them edge values), 0..2 for
    integers (they are often indices or axes), either for bools."""
    if dtype.kind in "iu":
        return rng.integers(0, 3, shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    try:
        data = rng.standard_normal(shape).astype(dtype)
    except (TypeError, ValueError):
        raise _Unchecked(f"replacements reading {dtype} values") from None
    if trial and data.size:
        special = _edge_values(dtype, trial)
        flat = data.reshape(-1)
        chosen = rng.permutation(flat.size)[: max(1, flat.size // 4)]
        flat[chosen] = special[np.arange(chosen.size) % special.size]
    return data


_PRECISION_ORDER = ("bfloat16", "float16", "complex64", "float32", "complex128", "float64")


def _tolerance(nodes: list[Node], leaves: list[Value]) -> tuple[float, float]:
    """The tolerance of the least precise float type the two sides compute in."""
    names = set()
    for v in [*leaves, *(o for n in nodes for o in n.outputs if o is not None)]:
        if isinstance(v.type, TensorType) and v.type.dtype is not None:
            names.add(np.dtype(to_numpy(v.type.dtype)).name)
    for name in _PRECISION_ORDER:
        if name in names:
            return TOLERANCES[name]
    return TOLERANCES["float32"]


def _scale(x: Any) -> float:
    """The largest finite magnitude in ``x`` (0 for non-floats): what rounding error is relative to."""
    x = np.asarray(x)
    if x.dtype.kind in "biuSUO" or x.size == 0:
        return 0.0
    with np.errstate(all="ignore"):
        magnitudes = np.abs(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))
    finite = magnitudes[np.isfinite(magnitudes)]
    return float(finite.max()) if finite.size else 0.0


def difference(
    expected: Any, actual: Any, rtol: float, atol: float, scale: float | None = None, huge: float | None = None
) -> str | None:
    """Why ``actual`` is not ``expected``, or ``None``.

    Floats agree when both are NaN, when they are equal, or when they differ by at most
    ``atol + rtol * max(scale, |expected|)``: rounding error is relative to the magnitudes a
    computation goes through (``scale``: the largest of its random trial; by default the largest
    finite magnitude in ``expected``), not to each result,
    which cancellation can make tiny.  Overflowed values (beyond ``huge``, by default a thousandth
    of the type's largest finite value; infinite; NaN) agree with each other: a reassociated sum meets an
    overflow one step sooner or later, or adds ``inf`` to ``-inf`` in another order, without the
    rewrite being wrong.  A NaN or an infinity where the original is an ordinary number (or the
    reverse) is a difference.
    """
    e, a = np.asarray(expected), np.asarray(actual)
    if scale is None:
        scale = _scale(e)
    if e.shape != a.shape or e.dtype != a.dtype:
        return f"the replacement gives {a.dtype}{list(a.shape)} where the original gives {e.dtype}{list(e.shape)}"
    if e.dtype.kind in "biuSUO":
        bad = e != a
    else:
        import ml_dtypes

        if huge is None:
            huge = float(ml_dtypes.finfo(e.real.dtype if e.dtype.kind == "c" else e.dtype).max) / 1000
        if e.dtype.kind == "c":
            e, a = np.stack([e.real, e.imag]), np.stack([a.real, a.imag])
        x, y = e.astype(np.float64), a.astype(np.float64)
        with np.errstate(all="ignore"):
            close = np.isfinite(x) & np.isfinite(y) & (np.abs(x - y) <= atol + rtol * np.maximum(scale, np.abs(x)))
            overflowed = ~(np.abs(x) < huge) & ~(np.abs(y) < huge)  # NaN compares False
            bad = ~((x == y) | close | overflowed)
    if not np.any(bad):
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(np.count_nonzero(bad))} of {bad.size} elements differ; at {list(where)}: "
            f"{a[where].item()!r} where {e[where].item()!r} is expected "
            f"(rtol {rtol:g} of {max(scale, abs(float(np.real(e[where])))):.3g}, atol {atol:g})")  # fmt: skip


__all__ = ["TRIALS", "Rejection", "RewriteChecker", "RewriteRejected", "difference", "random_inputs"]
