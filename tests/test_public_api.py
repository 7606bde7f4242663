"""The public API is a promise to plugin authors and scripts: this pins it.

Adding a name means adding it here too (a deliberate act); removing or renaming one breaks
users and must not happen by accident.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest

import irforge
import irforge.core_ir

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "small_cnn.onnx")

TOP_LEVEL = {
    "Builder", "Graph", "IrforgeError", "Model", "Node", "Value", "__version__", "backend", "compile", "emit",
    "from_jax", "from_onnx", "from_torch", "interpret", "load", "optimize", "parse", "prepare", "save", "to_onnx",
    "unsupported", "verify",
}  # fmt: skip

FRONTENDS = {
    "FRAMEWORK_OP", "MODULE", "SOURCE", "Emitter", "FrontendError", "NotMapped", "UnmappedOp", "UnsupportedOpsError",
    "from_exported_program", "from_jax", "from_jaxpr", "from_torch", "load",
}  # fmt: skip

BACKENDS = {
    "Artifact", "Backend", "BackendError", "Executable", "InputError", "InputSpec", "Lowering", "NotStatic",
    "Refused", "RuleTable", "Unsupported", "UnsupportedError", "collect_unsupported", "input_specs", "static",
}  # fmt: skip

API = {
    "backend", "backend_names", "compile", "emit", "emit_targets", "from_jax", "from_onnx", "from_torch", "load",
    "optimize", "pipeline_text", "prepare", "registry", "save", "to_onnx", "unsupported",
}  # fmt: skip

GENERATION = {"CACHES", "CausalLM", "GenerationError", "compile_causal_lm"}

OPS = {
    "Kind", "Traits", "category", "decompose", "elementwise_ops", "fused", "geometry", "is_elementwise", "kind",
    "ops_of_kind", "traits",
}  # fmt: skip

CORE_IR = {
    "Attr", "AttrKind", "Builder", "DataType", "Dim", "ExportError", "ExternalDataError",
    "ExternalTensor", "Function", "Graph", "IRError", "InjectedFailure", "InterpreterError", "IrforgeError", "Journal",
    "LoadError", "MapType", "MissingExtraError", "Model", "NameGenerator", "Node", "NumpyTensor",
    "OptionalType", "ParseError", "Problem", "ProtoTensor", "SequenceType", "Shape",
    "SparseTensor", "SparseTensorType", "TensorData", "TensorType", "Type", "Value",
    "VerificationError", "clone_graph", "clone_model", "graphs_equal", "infer_attr",
    "interpret", "models_equal", "parse", "parse_graph", "parse_model", "print_graph",
    "print_model", "register_kernel", "structural_diff", "verify", "verify_model", "write_model",
}  # fmt: skip

PASSES = {
    "BisectResult", "ChangedCheck", "DishonestPassError", "Fixpoint", "Instrument", "Match", "OscillationWarning",
    "Pass", "PassContext", "PassError", "PassFailedError", "PassManager", "PassResult",
    "PassSkippedWarning", "PassTimeoutError", "Pattern", "PatternBuilder", "Pipeline", "PrintIR", "Rejection",
    "RewriteChecker", "RewriteRejected", "RewriteRejectedWarning", "Statistics", "Timing", "VerifyEach", "bisect",
    "pattern", "run_patterns",
}  # fmt: skip

PLUGINS = {
    "PluginError", "PluginInfo", "PluginWarning", "Registry", "build_registry", "default_registry",
    "hookimpl", "hookspec",
}  # fmt: skip

TESTING = {
    "TOLERANCES", "SemanticsChangedError", "assert_close", "assert_preserves_semantics", "assert_rewrites",
    "random_feeds",
}  # fmt: skip

IRVIZ = {
    "FORMATS", "OverlayError", "Recorder", "Step", "diff_steps", "normalize_overlay", "record", "render_html",
    "report", "show", "to_dot", "write_html", "write_report",
}  # fmt: skip

GRAPH_METHODS = {
    "append", "insert_before", "insert_after", "remove", "sort", "all_graphs", "all_nodes", "values",
    "inputs", "outputs", "initializers", "append_input", "add_initializer", "set_outputs",
}  # fmt: skip
NODE_METHODS = {"set_input", "set_inputs", "append_input", "replace_input_with", "attributes", "inputs", "outputs"}
VALUE_METHODS = {"uses", "producer", "replace_all_uses_with", "is_graph_output", "is_used_by"}


def test_exported_names_are_pinned():
    assert set(irforge.__all__) == TOP_LEVEL
    assert set(irforge.core_ir.__all__) == CORE_IR
    for name in TOP_LEVEL:
        assert hasattr(irforge, name), name
    for name in CORE_IR:
        assert hasattr(irforge.core_ir, name), name


def test_every_subpackage_pins_its_names_and_documents_them():
    import irforge.api
    import irforge.backends
    import irforge.frontends
    import irforge.generation
    import irforge.irviz
    import irforge.ops
    import irforge.passes
    import irforge.plugins
    import irforge.testing

    for module, names in ((irforge, TOP_LEVEL), (irforge.core_ir, CORE_IR), (irforge.passes, PASSES),
                          (irforge.plugins, PLUGINS), (irforge.testing, TESTING),
                          (irforge.backends, BACKENDS), (irforge.frontends, FRONTENDS),
                          (irforge.irviz, IRVIZ), (irforge.ops, OPS),
                          (irforge.api, API), (irforge.generation, GENERATION)):  # fmt: skip
        assert set(module.__all__) == names, module.__name__
        for name in names:
            obj = getattr(module, name)
            if name.startswith("__") or isinstance(obj, dict | str | int):
                continue
            doc = inspect.getdoc(obj) or ""
            assert doc.strip() and doc != inspect.getdoc(type), f"{module.__name__}.{name} has no docstring"


def test_pass_manager_parse_and_from_passes_build_the_same_pipeline():
    from irforge.passes import Fixpoint, PassError, PassManager
    from irforge.passes.cse import CommonSubexpressionElimination
    from irforge.passes.dce import DeadCodeElimination

    parsed = PassManager.parse("cse,fixpoint(dce){max-iterations=3}")
    built = PassManager.from_passes([CommonSubexpressionElimination(), Fixpoint((DeadCodeElimination(),), 3)])
    assert parsed == built and str(parsed) == str(built) == "cse,fixpoint(dce){max-iterations=3}"
    assert PassManager.parse("-O2") == PassManager.parse("O2")
    with pytest.raises(PassError, match="did you mean constant-fold"):
        PassManager.parse("constant-fld")


def test_optimize_takes_the_command_line_spelling():
    import numpy as np

    model = irforge.load(EXAMPLE)
    feeds = {"image": np.ones((1, 3, 32, 32), np.float32)}
    want = irforge.interpret(model, feeds)
    for spelling in ("-O2", "O2", "O1,dce"):
        m = irforge.optimize(irforge.load(EXAMPLE), spelling)
        np.testing.assert_allclose(irforge.interpret(m, feeds)[0], want[0], rtol=1e-5, atol=1e-6)


def test_ir_classes_keep_their_mutation_api():
    for cls, names in ((irforge.Graph, GRAPH_METHODS), (irforge.Node, NODE_METHODS), (irforge.Value, VALUE_METHODS)):
        missing = {n for n in names if not hasattr(cls, n)}
        assert not missing, f"{cls.__name__} lost {sorted(missing)}"


def test_entry_point_signatures():
    assert list(inspect.signature(irforge.load).parameters) == ["path", "kwargs"]
    assert list(inspect.signature(irforge.save).parameters) == ["model", "path", "kwargs"]
    assert list(inspect.signature(irforge.interpret).parameters)[:2] == ["graph", "inputs"]
    assert issubclass(irforge.core_ir.LoadError, irforge.IrforgeError)
    assert issubclass(irforge.core_ir.VerificationError, irforge.IrforgeError)
    assert issubclass(irforge.backends.InputError, irforge.IrforgeError)
    assert list(inspect.signature(irforge.backends.Executable.run).parameters) == ["self", "inputs", "cast"]


def test_import_irforge_does_not_load_heavy_toolchains():
    code = (
        "import sys, irforge, irforge.core_ir, irforge.frontends; "
        "heavy = ('torch', 'jax', 'tvm', 'onnxruntime', 'onnx.reference', 'networkx'); "
        "heavy = [m for m in heavy if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_new_entry_points_answer_bad_input_with_one_irforge_error(tmp_path):
    from irforge.backends import BackendError

    model = irforge.load(EXAMPLE)
    with pytest.raises(BackendError, match="no backend named 'nope'; installed: onnxruntime"):
        irforge.unsupported(model, "nope")
    with pytest.raises(BackendError, match="no backend named 'nope'"):
        irforge.prepare(model, irforge.backend("nope"))
    with pytest.raises(irforge.IrforgeError, match=r"missing\.irf: cannot read"):
        irforge.load(tmp_path / "missing.irf")
    assert irforge.unsupported(model, "xla") == [] and irforge.prepare(model, irforge.backend("reference")) is model
