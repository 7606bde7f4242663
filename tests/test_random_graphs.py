"""Every built-in pass and every -O level keeps the outputs of random well-typed graphs
(tests/random_graphs.py): on the reference interpreter, and on onnxruntime for the original and
the rewritten model.  A failure shrinks to a small graph, printed in the text form.

CI draws ``IRFORGE_RANDOM_GRAPHS`` graphs per pass (default 100, derandomized);
``IRFORGE_RANDOM_GRAPHS=2000 pytest tests/test_random_graphs.py`` is the long run."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from conftest import COUNTS
from hypothesis import HealthCheck, given, note, settings
from random_graphs import graphs

import irforge
from irforge.core_ir import clone_model, interpret, print_model, verify_model
from irforge.passes.manager import PassManager
from irforge.plugins import build_registry
from irforge.testing import assert_close

REGISTRY = build_registry(discover=False)
ROUNDS = {"convert-precision"}  # rounds to float16 on purpose; held to its tolerance in its own tests
PIPELINES = [*sorted(set(REGISTRY.passes) - ROUNDS), "O1", "O2", "O3", "O3 --target onnxruntime"]
COUNT = int(os.environ.get("IRFORGE_RANDOM_GRAPHS", "100"))


def random_graphs(check):
    """``check`` run on ``COUNT`` derandomized random graphs."""
    return settings(max_examples=COUNT, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])(given(graphs())(check))


def _onnxruntime(proto, feeds):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _run(pipeline: str, model) -> None:
    text, _, target = pipeline.partition(" --target ")
    from irforge.passes.levels import with_target

    PassManager.parse(with_target(text, target or None), REGISTRY.runnable, pipelines=REGISTRY.pipelines).run(model)


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_random_graphs_keep_their_outputs(pipeline):
    @random_graphs
    def check(proto):
        model = irforge.from_onnx(proto)
        note(f"graph:\n{print_model(model)}")
        shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
        feeds = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        want = interpret(model, feeds)
        rewritten = clone_model(model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _run(pipeline, rewritten)
        note(f"after {pipeline}:\n{print_model(rewritten)}")
        verify_model(rewritten)
        assert_close(want, interpret(rewritten, feeds), f"{pipeline} (reference interpreter)")
        if pipeline.endswith("onnxruntime") or not any(n.domain == "irforge" for n in rewritten.graph):
            from irforge.backends.onnx import to_proto

            got = _onnxruntime(to_proto(rewritten), feeds)
            assert_close(_onnxruntime(proto, feeds), got, f"{pipeline} (onnxruntime)")
        COUNTS["random graphs: checked, pass or level by pass or level"] += 1
        COUNTS["random graphs: nodes in them"] += len(proto.graph.node)
        if len(print_model(rewritten)) != len(print_model(model)):
            COUNTS["random graphs: rewritten by the pass under test"] += 1

    check()


@pytest.mark.parametrize("pipeline", ["O3", "O3 --target onnxruntime"])
def test_every_rewrite_of_the_levels_passes_the_rewrite_checker(pipeline):
    """``--validate-rewrites`` on random graphs: each rewrite -O3 makes is run on random, special
    and extreme values, and none may be refused (a refusal is a wrong rewrite, or a false alarm)."""
    from irforge.passes import RewriteChecker

    @random_graphs
    def check(proto):
        model = irforge.from_onnx(proto)
        note(f"graph:\n{print_model(model)}")
        checker = RewriteChecker()
        text, _, target = pipeline.partition(" --target ")
        from irforge.passes.levels import with_target

        pm = PassManager.parse(with_target(text, target or None), REGISTRY.runnable, pipelines=REGISTRY.pipelines,
                               rewrite_checker=checker)  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pm.run(model)
        assert not checker.rejections, "\n\n".join(map(str, checker.rejections))
        COUNTS["random graphs: rewrites validated (--validate-rewrites, -O3)"] += checker.checked
        COUNTS["random graphs: rewrites left unchecked (--validate-rewrites, -O3)"] += sum(checker.unchecked.values())

    check()
