"""Uses of an op that no compiled backend can run exactly, read off the node before anything is
lowered.  Every backend's up-front checks share these, so each refuses them with one message."""

from __future__ import annotations

import numpy as np

from ..core_ir.node import Node
from ..core_ir.pattern import constant_value


def _constant(node: Node, index: int) -> np.ndarray | None:
    v = node.inputs[index] if index < len(node.inputs) else None
    return None if v is None else constant_value(v)


def _given(node: Node, index: int) -> bool:
    return index < len(node.inputs) and node.inputs[index] is not None


def dropout_draws(node: Node) -> str | None:
    """Why a Dropout may draw random numbers, or ``None`` where it surely drops nothing: no
    ``training_mode``, a constant false one, or a constant ratio of 0.  A compiled model returns
    the same numbers every call, so a Dropout that draws is refused, as is one whose training
    mode or ratio is only known at the call."""
    if not _given(node, 2):
        return None
    training = _constant(node, 2)
    if training is not None and not bool(training.reshape(-1)[0]):
        return None
    ratio = _constant(node, 1) if _given(node, 1) else np.asarray(0.5)
    if ratio is not None and float(ratio.reshape(-1)[0]) == 0.0:
        return None
    if training is None:
        return "Dropout whose training_mode is a graph input (in training it draws random numbers): make it a constant"
    return "Dropout in training mode draws random numbers"


def scan_problem(node: Node) -> str | None:
    """Why a Scan cannot be lowered: only the opset-8 form, with its batch axis and
    ``sequence_lens`` (one more input than its body takes), is not."""
    body = node.attr("body")
    if body is not None and len(node.inputs) != len(body.inputs):
        return "Scan of opset 8 (with a batch axis and sequence_lens): convert the model to opset 9 or later"
    return None


__all__ = ["dropout_draws", "scan_problem"]
