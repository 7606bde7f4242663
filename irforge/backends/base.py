"""The one interface every backend implements, built-in or from a plugin.

A backend *lowers* an IR model to an artifact (text or bytes a compiler takes) and *compiles* it to
an :class:`Executable`, a callable on numpy arrays, so that every number it produces can be checked
against the reference interpreter.  Before lowering, :meth:`Backend.unsupported` lists everything
in the model the backend cannot take; lowering such a model raises :class:`UnsupportedError`
naming each op, how often, where first and why.  A backend never guesses: unsupported is an error,
never a wrong number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core_ir.dimexpr import evaluate, is_dim_expr, symbols
from ..core_ir.errors import IrforgeError
from ..core_ir.model import Model
from ..core_ir.node import Node
from .inputs import InputError, InputSpec, check_inputs


class BackendError(IrforgeError):
    """A backend could not lower, compile or run a model; the message names the node or step."""


@dataclass(frozen=True)
class Unsupported:
    """One op (or op/dtype/attribute combination) a backend cannot take."""

    op: str
    count: int
    first_node: str
    why: str

    def __str__(self) -> str:
        times = f"{self.count} node{'s' if self.count != 1 else ''}"
        return f"{self.op} ({times}, first {self.first_node}): {self.why}"


class UnsupportedError(BackendError):
    """The model holds ops a backend cannot lower; ``problems`` lists each, grouped by op and reason."""

    def __init__(self, backend: str, problems: Sequence[Unsupported]):
        self.backend, self.problems = backend, list(problems)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"the {backend} backend cannot take {len(self.problems)} op kind(s) of this model:\n{lines}")


FRAMEWORK_DOMAINS = ("torch.aten", "jax.lax")
"""Domains where a frontend keeps ops it could not map (``keep_unmapped=True``): no engine runs them."""


def kept_framework_ops(model: Model) -> list[Unsupported]:
    """The framework ops a frontend kept unmapped, each refused by name until a pass lowers it."""
    return collect_unsupported(
        (n, f"{n.domain}::{n.op_type}", "a framework op kept unmapped by the frontend; lower it with a plugin pass")
        for n in model.graph.all_nodes() if n.domain in FRAMEWORK_DOMAINS
    )  # fmt: skip


def collect_unsupported(reasons: Iterable[tuple[Node, str, str]]) -> list[Unsupported]:
    """Group ``(node, op label, why)`` findings by (op label, why), in first-seen order."""
    groups: dict[tuple[str, str], list[Node]] = {}
    for node, op, why in reasons:
        groups.setdefault((op, why), []).append(node)
    return [Unsupported(op, len(nodes), nodes[0].describe(), why) for (op, why), nodes in groups.items()]


@dataclass
class Artifact:
    """What a lowering produces: ``data`` is the text or bytes written by ``irforge emit``;
    ``module`` the toolchain's own object where there is one (an MLIR module, a Relax IRModule)."""

    target: str
    data: str | bytes
    module: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def save(self, path: str) -> None:
        mode = "wb" if isinstance(self.data, bytes) else "w"
        with open(path, mode) as f:
            f.write(self.data)

    def __str__(self) -> str:
        return self.data if isinstance(self.data, str) else f"<{self.target}: {len(self.data)} bytes>"


class Executable:
    """A compiled model: call it with arrays (by position or name), get a list of numpy arrays.

    Each call is checked against ``inputs``, the model's declared interface
    (:mod:`irforge.backends.inputs`), before the engine runs: a wrong name, count, element type,
    rank or dim is one :class:`InputError`, never an engine's traceback or a silent cast.
    ``inputs`` is ``None`` only for an executable built outside :func:`irforge.compile`, which
    fills it in from the model."""

    def __init__(
        self,
        backend: str,
        run: Callable[[list[np.ndarray]], list[np.ndarray]],
        input_names: Sequence[str],
        output_names: Sequence[str],
        compile_seconds: float = 0.0,
        device: str = "cpu",
        inputs: Sequence[InputSpec] | None = None,
    ):
        self.backend, self._run = backend, run
        self.input_names, self.output_names = list(input_names), list(output_names)
        self.compile_seconds, self.device = compile_seconds, device
        self.inputs = list(inputs) if inputs is not None else None
        self.compilations = 1
        """Times the engine compiled this model: 1 for engines that compile it once, ahead of the
        first call; XLA counts each compilation (one per new set of input shapes)."""

    def __call__(self, *args: Any, **named: Any) -> list[np.ndarray]:
        if len(args) == 1 and isinstance(args[0], Mapping) and not named:
            return self.run(args[0])
        if named and args:
            raise InputError(f"{self.backend}: give the inputs by position or by name, not both")
        return self.run(named if named else args)

    def run(self, inputs: Mapping[str, Any] | Sequence[Any], *, cast: bool = False) -> list[np.ndarray]:
        """Run on ``inputs`` (in order, or by name); ``cast=True`` converts arrays of another
        element type to the declared one instead of refusing them."""
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            extra = [n for n in inputs if n not in self.input_names]
            if missing or extra:
                pairs = (("missing", missing), ("unknown", extra))
                said = "; ".join(f"{what} {', '.join(map(repr, names))}" for what, names in pairs if names)
                raise InputError(f"{self.backend}: inputs {said}; the model takes {', '.join(self.input_names)}")
            inputs = [inputs[n] for n in self.input_names]
        if len(inputs) != len(self.input_names):
            raise InputError(f"{self.backend}: the model takes {len(self.input_names)} input(s) "
                             f"({', '.join(self.input_names)}), given {len(inputs)}")  # fmt: skip
        specs = self.inputs if self.inputs is not None else [InputSpec(n) for n in self.input_names]
        return self._run(check_inputs(specs, inputs, self.backend, cast))


class Backend:
    """Subclass and register through the ``irforge_register_backends`` hook as ``(name, instance)``.

    ``targets`` are the artifact kinds :meth:`lower` can write (``irforge emit --target``);
    ``devices`` what :meth:`compile` can run on.  Every registered backend is a target of
    ``irforge optimize --target`` and a choice of ``irforge run --backend``: ``lowering`` is the
    pipeline text that ends a level for it, and ``preferred_layout`` (``NCHW`` or ``NHWC``) the
    convolution layout ``-O3`` converts to for it.
    """

    name: str = ""
    targets: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    preferred_layout: str = "NCHW"
    lowering: str = ""
    """Pipeline text run after a level for this backend (``optimize --target``), e.g. the pass
    that swaps fused ops for its own kernels."""
    expands_functions: bool = False
    """Before lowering, ONNX ops this backend has no rule for but whose schema defines a function
    body are expanded to that body (``irforge.compile`` and ``irforge.emit`` do it on a copy)."""
    inlines_functions: bool = False
    """Before lowering, calls of model-local functions (the fused ops of ``irforge``, among
    others) are replaced by the functions' bodies: the backend lowers no call itself."""

    def supported_ops(self) -> set[tuple[str, str]]:
        """``(domain, op_type)`` pairs this backend has a lowering for (some may refuse attributes)."""
        return set()

    def unsupported(self, model: Model) -> list[Unsupported]:
        """Everything in ``model`` this backend cannot take; empty when it can lower all of it."""
        raise NotImplementedError

    def check(self, model: Model) -> None:
        """Raise :class:`UnsupportedError` listing every problem :meth:`unsupported` finds."""
        problems = self.unsupported(model)
        if problems:
            raise UnsupportedError(self.name, problems)

    def lower(self, model: Model, target: str | None = None) -> Artifact:
        raise NotImplementedError

    def compile(self, model: Model, device: str = "cpu") -> Executable:
        raise NotImplementedError


def io_names(model: Model) -> tuple[list[str], list[str]]:
    """The names of the graph inputs a caller feeds (initializers are not fed) and of its outputs."""
    ins = [v.name for v in model.graph.inputs if not v.is_initializer()]
    return ins, [v.name for v in model.graph.outputs]


def type_problem(t, dtypes) -> str | None:
    """Why a value of type ``t`` cannot be lowered by a backend taking element types ``dtypes``."""
    from ..core_ir.dtypes import short_name
    from ..core_ir.types import TensorType

    if t is None:
        return None
    if not isinstance(t, TensorType):
        return f"{type(t).__name__} values (sequences, optionals, maps) are not lowered"
    if t.dtype not in dtypes:
        return f"element type {short_name(t.dtype)}"
    return None


def io_problems(model: Model, dtypes) -> list[Unsupported]:
    """The graph inputs and outputs whose types a backend taking ``dtypes`` cannot pass."""
    out = []
    for v in (*model.graph.inputs, *model.graph.outputs):
        why = type_problem(v.type, dtypes)
        if why:
            out.append(Unsupported("graph input/output", 1, f"%{v.name}", why))
    return out


def static_input_shapes(model: Model, dims: dict[str, int], what: str) -> dict[str, tuple[int, ...]]:
    """Each graph input's shape with the symbolic dims sized from ``dims``; ``what`` (\"HLO\",
    \"the Relax module\") names the artifact that needs static shapes in the error."""
    shapes = {}
    for v in model.graph.inputs:
        if v.is_initializer():
            continue
        shape = []
        for d in getattr(v.type, "shape", None) or ():
            if isinstance(d, int):
                shape.append(d)
            elif isinstance(d, str) and d in dims:
                shape.append(dims[d])
            elif isinstance(d, str) and is_dim_expr(d) and all(n in dims for n in symbols(d)):
                shape.append(evaluate(d, dims))  # a derived dim such as 2*batch
            else:
                raise BackendError(f"input %{v.name} has the symbolic dim {d!r}: {what} is written at static shapes; "
                                   f"give it a size (--dim {d}=N)")  # fmt: skip
        shapes[v.name] = tuple(shape)
    return shapes
