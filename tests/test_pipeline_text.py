"""Pipeline text: parse and print round-trip, and bad text names what is wrong."""

from dataclasses import dataclass

import pytest

from irforge.passes.base import Pass, PassContext, PassError, PassResult
from irforge.passes.pipeline import Fixpoint, Pipeline


@dataclass(frozen=True)
class Fold(Pass):
    name = "constant-fold"
    summary = "test stand-in"
    size_limit: int = 1 << 20
    fold_shapes: bool = True


@dataclass(frozen=True)
class Simplify(Pass):
    name = "canonicalize"
    summary = "test stand-in"


@dataclass(frozen=True)
class Cse(Pass):
    name = "cse"
    summary = "test stand-in"


REGISTRY = {p.name: p for p in (Fold, Simplify, Cse)}


@pytest.mark.parametrize(
    "text",
    [
        "cse",
        "constant-fold{size-limit=4096}",
        "constant-fold{size-limit=4096 fold-shapes=false},cse",
        "fixpoint(canonicalize,cse){max-iterations=3},constant-fold",
        "fixpoint(fixpoint(cse),canonicalize)",
    ],
)
def test_text_round_trips(text):
    pipeline = Pipeline.parse(text, REGISTRY)
    assert str(pipeline) == text
    assert Pipeline.parse(str(pipeline), REGISTRY) == pipeline


def test_text_and_builder_give_equal_pipelines():
    text = "constant-fold{size-limit=1048577, fold-shapes=0}, fixpoint( canonicalize , cse ){max-iterations=10}"
    built = Pipeline((Fold(size_limit=1048577, fold_shapes=False), Fixpoint((Simplify(), Cse()))))
    assert Pipeline.parse(text, REGISTRY) == built
    assert str(built) == "constant-fold{size-limit=1048577 fold-shapes=false},fixpoint(canonicalize,cse)"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("dce", "unknown pass 'dce'"),
        ("cse,", "expected a pass name"),
        ("constant-fold{limit=3}", "unknown option 'limit'"),
        ("constant-fold{size-limit=big}", "wants int, got 'big'"),
        ("constant-fold{size-limit=3", "never closed"),
        ("fixpoint(cse", "expected ')'"),
        ("cse)", "unexpected ')'"),
    ],
)
def test_bad_text_is_a_pass_error(text, says):
    with pytest.raises(PassError, match="pipeline") as e:
        Pipeline.parse(text, REGISTRY)
    assert says in str(e.value)


def test_context_drops_analyses_a_pass_does_not_preserve():
    ctx = PassContext()
    assert ctx.analysis("shapes", lambda: 1) == 1
    assert ctx.analysis("shapes", lambda: 2) == 1
    ctx.analysis("uses", lambda: 3)
    ctx.invalidate(frozenset({"uses"}))
    assert ctx.analyses == {"uses": 3}


@dataclass(frozen=True)
class FlipAddMul(Pass):
    """Turns every Add into Mul and every Mul into Add: two of these in a row oscillate."""

    name = "flip"
    summary = "test stand-in"

    def run(self, graph, ctx):
        n = 0
        for node in graph:
            if node.op_type in ("Add", "Mul"):
                node.op_type = "Mul" if node.op_type == "Add" else "Add"
                n += 1
        return PassResult(n > 0, {"flipped": n})


def test_fixpoint_stops_on_oscillation_and_names_the_passes():
    from irforge.core_ir import Model, parse_graph
    from irforge.passes.manager import OscillationWarning, PassManager

    model = Model(parse_graph("graph @g(%x: f32[2]) {\n  %y = Add(%x, %x)\n  return %y\n}\n"))
    from irforge.passes import Timing

    timing = Timing()
    pm = PassManager.parse("fixpoint(flip){max-iterations=50}", {"flip": FlipAddMul}, instruments=[timing])
    with pytest.warns(OscillationWarning, match="iteration 4 brought the graph back to its state after iteration 2"):
        assert pm.run(model)
    assert [n.op_type for n in model.graph] == ["Add"]
    assert timing.runs["flip"] == 4  # caught within a cycle of the first remembered state, not after 50


def test_a_negative_window_is_a_pipeline_error():
    from irforge.passes import PassError, PassManager

    with pytest.raises(PassError, match="window must be 0"):
        PassManager.parse("shape-inference{window=-1}")


def test_the_design_page_spells_every_level_as_it_is():
    import os

    from irforge.passes.levels import LEVELS

    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "design.md"), encoding="utf-8") as f:
        readme = f.read()
    for name, text in LEVELS.items():
        if text:
            assert f"  {name}: {text}\n" in readme, f"docs/design.md: the {name} pipeline is stale"


def test_a_target_ends_the_pipeline_with_its_lowering():
    import irforge
    from irforge.core_ir import parse_model
    from irforge.passes.levels import with_target

    assert with_target("O2", "onnxruntime") == "O2,lower-fused{target=onnxruntime},cse,dce"
    assert with_target("", "xla") == "lower-fused{target=xla},cse,dce" and with_target("O1", None) == "O1"
    model = parse_model('model {\n  opset "" = 21\n  graph @g(%x: f32[2]) {\n    %y = Relu(%x)\n    return %y\n  }\n}')
    with pytest.raises(irforge.backends.BackendError, match="no backend named 'gpu'; installed: onnxruntime"):
        irforge.optimize(model, "-O1", target="gpu")
