"""The ``irforge`` and ``irviz`` commands.

Errors a user can cause (bad files, invalid models) print one ``irforge: error:`` line and exit
with status 1; internal tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ..api import load as _load
from ..core_ir.errors import IrforgeError
from ..passes.levels import LEVEL_NAMES


def cmd_print(args: argparse.Namespace) -> int:
    from ..core_ir.printer import write_model

    model = _load(args.model)
    elide = None if args.full else args.elide
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            write_model(model, f, elide_above=elide)
    else:
        write_model(model, sys.stdout, elide_above=elide)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from ..api import registry as default_registry
    from ..core_ir.verifier import verify_model

    default_registry()  # the kernels of custom ops (onnxruntime's contrib ops, plugins' ops) count as known
    model = _load(args.model)
    problems = verify_model(model, raise_on_error=False)
    if problems:
        print(f"{args.model}: {len(problems)} problem{'s' * (len(problems) != 1)}:")
        for p in problems:
            print(f"  {p}")
        return 1
    nodes = sum(1 for _ in model.graph.all_nodes())
    print(f"{args.model}: ok ({nodes} nodes, {len(model.functions)} functions, "
          f"opsets {dict(model.opset_imports)})")  # fmt: skip
    return 0


def _pipeline_text(args: argparse.Namespace) -> str:
    """The pipeline ``-O N`` or ``--pipeline`` names, ending in ``--target``'s lowering."""
    from ..api import pipeline_text

    if args.level is not None and args.pipeline:
        raise IrforgeError("give either -O<level> or --pipeline, not both (a pipeline may name O1, O2, ...)")
    return pipeline_text(args.pipeline or f"O{args.level or 0}", args.target)


def cmd_optimize(args: argparse.Namespace) -> int:
    from ..backends.onnx import save
    from ..core_ir.verifier import verify_model
    from ..passes import PassContext, PassManager
    from ..passes import instrumentation as ins

    text = _pipeline_text(args)
    timing, statistics = ins.Timing(), ins.Statistics()
    instruments: list[ins.Instrument] = [timing]
    if args.statistics:
        instruments.append(statistics)
    if args.verify_each:
        instruments.append(ins.VerifyEach())
    if args.print_ir_after_all or args.print_ir_after:
        names = None if args.print_ir_after_all else frozenset(args.print_ir_after)
        instruments.append(ins.PrintIR(names, only_changed=not args.print_ir_always))
    checker = None
    if args.validate_rewrites:
        from ..core_ir.rewrite_check import RewriteChecker

        checker = RewriteChecker()
    pm = PassManager.parse(text, instruments=instruments, keep_going=args.keep_going,
                           reproducer_dir=args.reproducer_dir, paranoid_rollback=args.paranoid_rollback,
                           pass_timeout=args.pass_timeout, rewrite_checker=checker)  # fmt: skip
    progress = ins.Progress(len(pm.pipeline.passes))
    pm.instruments.append(progress)
    model = _load(args.input)
    recorder = None
    if args.viz:
        from ..irviz import Recorder

        recorder = Recorder(model)
        pm.instruments.insert(0, recorder)
    verify_model(model)
    before = len(model.graph)
    ctx = PassContext(rewrite_log=[] if args.debug_rewrites else None)
    try:
        if pm.pipeline.passes:
            pm.run(model, ctx)
    finally:
        progress.close()
        if args.debug_rewrites and pm.pipeline.passes:
            _print_rewrites(ctx.rewrite_log)
        if recorder is not None:  # a failed run's timeline too: up to the pass that failed
            from ..irviz import write_report

            write_report(recorder, args.viz, title=os.path.basename(args.input))
    if pm.pipeline.passes:
        verify_model(model)
    save(model, args.output)
    spelled = (args.pipeline or f"-O{args.level or 0}") + (f" --target {args.target}" if args.target else "")
    print(f"{args.input} -> {args.output}: {spelled}, {before} -> {len(model.graph)} nodes")
    if args.timing:
        print(timing.report())
    if args.statistics:
        print(statistics.report())
    if checker is not None:
        print(f"validate-rewrites: {checker.summary()}")
        for rejection in checker.rejections:
            print(f"rejected: {rejection}")
        if checker.rejections:
            print(f"{args.output} was written without the {len(checker.rejections)} rejected rewrites", file=sys.stderr)
            return 3
    return 0


def cmd_bisect(args: argparse.Namespace) -> int:
    from ..passes.bisect import bisect

    text = _pipeline_text(args)
    model = _load(args.model)
    feeds = None
    if args.inputs:
        from .feeds import read_feeds

        feeds = read_feeds(args.inputs, [v.name for v in model.graph.inputs if not v.is_initializer()])
    result = bisect(model, text, feeds, seed=args.seed, precision=args.precision)
    print(result.report())
    return 3 if result.differs else 0


def _print_rewrites(log) -> None:
    print("rewrites:")
    for pass_name, result in log:
        for line in result.report():
            print(f"  [{pass_name}] {line}")


def cmd_passes(args: argparse.Namespace) -> int:
    from ..api import registry as default_registry

    reg = default_registry()
    for name in sorted(reg.passes):
        cls = reg.passes[name]
        print(f"{name}  [{reg.provider('passes', name)}]")
        print(f"    {cls.summary}")
        for f in cls.options():
            print(f"    {{{f.name.replace('_', '-')}={f.default}}}  ({f.type})")
    print("\npatterns (each usable by name as a pass):")
    for name in sorted(reg.entries["patterns"]):
        print(f"{name}  [{reg.provider('patterns', name)}]  {reg.entries['patterns'][name].defined_at}")
    print("\npipelines (-O<n> runs O<n>; a pipeline may name them):")
    for name in sorted(reg.pipelines):
        print(f"{name}  [{reg.provider('pipelines', name)}]  {reg.pipelines[name] or '(nothing)'}")
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    from ..api import registry as default_registry
    from ..plugins.registry import DISABLE_ENV

    reg = default_registry()
    if not reg.plugins:
        print("no plugins installed (entry-point group 'irforge.plugins'); built-ins only")
    for info in reg.plugins:
        state = "disabled" if info.disabled else "failed" if info.error else "loaded"
        print(f"{info.name}  [{info.label}]  {state}")
        if info.error:
            print(f"    could not be loaded: {info.error}")
        for kind, names in info.registered.items():
            print(f"    {kind}: {', '.join(names)}")
    print(f"\nturn a plugin off with {DISABLE_ENV}=name,... or `irforge -p no:name ...`")
    return 0


def _versions() -> str:
    import importlib.metadata as md

    from .. import __version__
    from ..plugins.hookspecs import ENTRY_POINT_GROUP

    def version(dist: str) -> str:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "not installed"

    lines = [f"irforge {__version__}"]
    lines += [f"  {dist} {version(dist)}" for dist in ("onnx", "onnxruntime", "jax", "jaxlib", "apache-tvm")]
    for ep in sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist else "unknown distribution"
        lines.append(f"  plugin {ep.name}: {dist}")
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    def __init__(self, option_strings, dest, **kwargs):
        help_ = "print the versions of irforge, its toolchains (onnx, onnxruntime, jax, TVM) and the plugins"
        super().__init__(option_strings, dest, nargs=0, help=help_)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_versions())
        parser.exit()


class _PluginFlag(argparse.Action):
    """``-p no:NAME`` turns a plugin off for this run, as pytest spells it."""

    def __call__(self, parser, namespace, value, option_string=None):
        from ..plugins.registry import DISABLE_ENV

        if not value.startswith("no:") or not value[3:]:
            parser.error(f"-p wants no:NAME (turn plugin NAME off), got {value!r}")
        names = [n for n in os.environ.get(DISABLE_ENV, "").split(",") if n]
        os.environ[DISABLE_ENV] = ",".join([*names, value[3:]])


class LazyChoices(Sequence):
    """Choices read from the plugin registry when argparse first asks (after ``-p no:NAME`` has
    turned plugins off), so that a plugin's backend is a choice like a built-in one."""

    armed = False
    """False while the parser is built (argparse formats choices then): nothing is read before
    the command line is."""

    def __init__(self, read):
        self._read, self._items = read, None

    def _all(self) -> list[str]:
        if not LazyChoices.armed:
            return []
        if self._items is None:
            self._items = list(self._read())
        return self._items

    def __getitem__(self, i):
        return self._all()[i]

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, item) -> bool:
        return item in self._all()


def _backend(name: str):
    from ..api import backend

    return backend(name)


def _backend_names() -> list[str]:
    from ..api import backend_names

    return backend_names()


_BACKEND_NAMES = LazyChoices(_backend_names)


def _irforge_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="irforge", description="Graph-level IR rewriting for deep-learning models.")
    p.add_argument("--version", action=_VersionAction)
    p.add_argument("-p", action=_PluginFlag, metavar="no:NAME", help="turn the plugin NAME off (repeatable)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    pr = sub.add_parser("print", help="print a model in the irforge text form")
    pr.add_argument("model", help="an .onnx file")
    pr.add_argument("-o", "--output", help="write the text here instead of stdout")
    pr.add_argument("--elide", type=int, default=64, metavar="N",
                    help="show constants of more than N elements as elided<...> (default 64)")  # fmt: skip
    pr.add_argument("--full", action="store_true", help="print every constant in full (parseable)")
    pr.set_defaults(func=cmd_print)
    ve = sub.add_parser("verify", help="check a model and report every problem found")
    ve.add_argument("model", help="an .onnx file")
    ve.set_defaults(func=cmd_verify)
    op = sub.add_parser("optimize", help="run an optimization level or a pipeline on a model")
    op.add_argument("input", help="an .onnx file")
    op.add_argument("-o", "--output", required=True, help="where to write the result")
    op.add_argument("-O", dest="level", default=None, choices=LEVEL_NAMES,
                    help="optimization level (default 0: load, verify, save; see `irforge passes`)")  # fmt: skip
    op.add_argument("--pipeline", metavar="TEXT", help="passes to run, e.g. 'topological-sort,dce'")
    op.add_argument("--target", choices=_BACKEND_NAMES,
                    help="end with this backend's lowering of the fused ops (lower-fused{target=...})")  # fmt: skip
    op.add_argument("--timing", action="store_true", help="print the time each pass took")
    op.add_argument("--debug-rewrites", action="store_true",
                    help="print every rewrite (pattern, source line, nodes) and why unapplied patterns missed")
    op.add_argument("--statistics", action="store_true",
                    help="print per pass: runs, nodes added and removed, rewrites per pattern")  # fmt: skip
    op.add_argument("--print-ir-after-all", action="store_true", help="print the IR after each pass that changed it")
    op.add_argument("--print-ir-after", action="append", default=[], metavar="NAME",
                    help="print the IR after the named pass (repeatable)")  # fmt: skip
    op.add_argument("--print-ir-always", action="store_true", help="print even when the pass changed nothing")
    op.add_argument("--verify-each", action="store_true", help="run the verifier after every pass")
    op.add_argument("--viz", metavar="REPORT.html",
                    help="also write irviz's timeline of the run: a step per pass that changed the model")  # fmt: skip
    op.add_argument("--keep-going", action="store_true", help="roll back a failing pass, warn, and go on")
    op.add_argument("--pass-timeout", type=float, metavar="SECONDS",
                    help="stop (and roll back) a pass that runs longer than this")  # fmt: skip
    op.add_argument("--reproducer-dir", metavar="DIR", help="on a pass failure, write the IR it got here")
    op.add_argument("--paranoid-rollback", action="store_true",
                    help="also copy the model before each pass and check every rollback against the copy")  # fmt: skip
    op.add_argument("--validate-rewrites", action="store_true",
                    help="run both sides of every rewrite on random, special and extreme values; undo the ones "
                         "that change numbers, report them, and exit with status 3")  # fmt: skip
    op.set_defaults(func=cmd_optimize)
    bi = sub.add_parser("bisect", help="find the first pass, then the first rewrite, after which the outputs differ")
    bi.add_argument("model", help="an .onnx file or irforge IR text (.irf)")
    bi.add_argument("-O", dest="level", default=None, choices=LEVEL_NAMES, help="optimization level")
    bi.add_argument("--pipeline", metavar="TEXT", help="passes to run, e.g. '-O3' or 'fuse-gelu,cse'")
    bi.add_argument("--target", choices=_BACKEND_NAMES, help="end with this backend's lowering of the fused ops")
    bi.add_argument("--inputs", metavar="FEEDS.npz", help="the model's inputs by name (default: seeded random values)")
    bi.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    bi.add_argument("--precision", choices=["float16", "bfloat16", "float32", "float64"],
                    help="compare outputs with this type's tolerance (e.g. after convert-precision)")  # fmt: skip
    bi.set_defaults(func=cmd_bisect)
    ps = sub.add_parser("passes", help="list every registered pass with its summary, options and plugin")
    ps.set_defaults(func=cmd_passes)
    pl = sub.add_parser("plugins", help="list the installed plugins, what each registered, and the ones that failed")
    pl.set_defaults(func=cmd_plugins)
    from .importing import add_parsers as add_frontend_parsers
    from .run import add_parsers

    add_frontend_parsers(sub)
    add_parsers(sub)
    return p


def _one_line_warnings(prog: str) -> None:
    """Warnings reach a command-line user as ``irforge: warning: ...`` lines, not Python's
    ``file:line: Category: message`` with a source line under it."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        text = "; ".join(line.strip() for line in str(message).splitlines() if line.strip())
        print(f"{prog}: warning: {text}", file=file or sys.stderr)

    warnings.showwarning = show
    from ..passes import OscillationWarning, PassSkippedWarning, RewriteRejectedWarning
    from ..plugins import PluginWarning

    for category in (PassSkippedWarning, OscillationWarning, PluginWarning):
        warnings.simplefilter("always", category)  # every skipped pass is worth its own line
    warnings.simplefilter("ignore", RewriteRejectedWarning)  # `optimize --validate-rewrites` prints them whole


def _pipeline_values(argv: Sequence[str]) -> list[str]:
    """``--pipeline -O2`` as ``--pipeline=-O2``: argparse would read a value that starts with a
    dash as an option, and levels are spelled that way."""
    out: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--pipeline":
            value = next(it, None)
            out.append(arg if value is None else f"--pipeline={value}")
        else:
            out.append(arg)
    return out


def _without_prefix(message: str, prog: str) -> str:
    """``message`` without a leading ``prog:`` of its own (the API's messages name their tool)."""
    return message.removeprefix(f"{prog}: ")


def _run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    _one_line_warnings(parser.prog)
    LazyChoices.armed = True
    args = parser.parse_args(_pipeline_values(sys.argv[1:] if argv is None else argv))
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except IrforgeError as e:  # VerificationError among them
        print(f"{parser.prog}: error: {_without_prefix(str(e), parser.prog)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader (`| head`) stopped early: not an error; keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def irforge_main(argv: Sequence[str] | None = None) -> int:
    return _run(_irforge_parser(), argv)


def cmd_irviz(args: argparse.Namespace) -> int:
    from .. import irviz

    if args.level is not None and args.pipeline:
        raise IrforgeError("give either -O<level> or --pipeline, not both (a pipeline may name O1, O2, ...)")
    if args.depth is not None and args.focus is None:
        raise IrforgeError("--depth needs --focus NODE")
    fmt = args.format or os.path.splitext(args.output or "")[1].lstrip(".").lower() or "html"
    output = args.output or os.path.splitext(os.path.basename(args.model))[0] + f".{fmt}"
    pipeline = args.pipeline or (f"O{args.level}" if args.level is not None else None)
    model = _load(args.model)
    written = irviz.write_report(model, output, pipeline, format=fmt, step=args.step,
                                     target=None if args.target is None else _backend(args.target),
                                 title=args.title or os.path.basename(args.model), overlays=args.overlay,
                                 focus=args.focus, depth=2 if args.depth is None else args.depth)  # fmt: skip
    print(f"{args.model} -> {written}")
    return 0


def _irviz_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="irviz",
        description="Draw a model, or every step of a pipeline run on it, as one self-contained HTML page "
        "(graph viewer, pass timeline, diffs, provenance) or as DOT, SVG or PNG through Graphviz.",
    )
    p.add_argument("model", help="an .onnx file or irforge IR text (.irf)")
    p.add_argument("-o", "--output", help="where to write (default: the model's name with the format's extension)")
    p.add_argument("-O", dest="level", default=None, choices=LEVEL_NAMES,
                   help="record this optimization level's passes, step by step")  # fmt: skip
    p.add_argument("--pipeline", metavar="TEXT", help="record these passes, step by step (e.g. '-O2' or 'cse,dce')")
    p.add_argument("--target", choices=_BACKEND_NAMES, help="end with this backend's lowering of the fused ops")
    p.add_argument("--format", choices=["html", "dot", "svg", "png"],
                   help="html (default; or from the output's extension), or one step through Graphviz")  # fmt: skip
    p.add_argument("--step", type=int, default=-1, help="for dot/svg/png: which step (default: the last)")
    p.add_argument("--focus", metavar="NODE", help="only the neighbourhood of this node (name or output value name)")
    p.add_argument("--depth", type=int, default=None, metavar="K", help="with --focus: edges from NODE (default 2)")
    p.add_argument("--overlay", action="append", default=[], metavar="JSON",
                   help="per-node numbers to colour by: Model Explorer node data, an onnxruntime profile, "
                   "or {node: number} (repeatable)")  # fmt: skip
    p.add_argument("--title", help="the page's title (default: the model's file name)")
    p.set_defaults(func=cmd_irviz)
    return p


def irviz_main(argv: Sequence[str] | None = None) -> int:
    return _run(_irviz_parser(), argv)
