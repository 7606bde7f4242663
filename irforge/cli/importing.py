"""``irforge import``: a PyTorch module or JAX function, named as ``package.module:factory``,
imported into the IR and saved as ONNX (optionally optimized on the way)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

import numpy as np

from ..core_ir.errors import IrforgeError


def _factory(spec: str):
    """``module:attr`` → the attribute (the current folder is importable, as for ``python -m``)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise IrforgeError(f"expected MODULE:FACTORY (e.g. models.resnet:build), got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise IrforgeError(f"cannot import {module_name!r} ({e}); run from the folder that holds it") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise IrforgeError(f"{module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in text.split(",") if d.strip())
    except ValueError:
        raise IrforgeError(f"--example-shape wants sizes like 1,3,224,224, got {text!r}") from None


def _example(rng, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    try:
        kind = np.dtype(dtype)
    except TypeError:
        raise IrforgeError(f"--dtype wants a numpy dtype name (float32, int64, ...), got {dtype!r}") from None
    if kind.kind in "iub":
        return rng.integers(0, 2 if kind.kind == "b" else 8, shape).astype(kind)
    return rng.standard_normal(shape).astype(kind)


def _dynamic(specs: list[str], n_inputs: int) -> list[dict[int, str]]:
    """``INPUT:AXIS=NAME`` items → one ``{axis: name}`` per input."""
    out: list[dict[int, str]] = [{} for _ in range(n_inputs)]
    for s in specs:
        where, _, name = s.partition("=")
        index, _, axis = where.partition(":")
        if not (index.isdigit() and axis.isdigit() and name.isidentifier()):
            raise IrforgeError(f"--dynamic wants INPUT:AXIS=NAME (e.g. 0:0=batch), got {s!r}")
        if int(index) >= n_inputs:
            raise IrforgeError(f"--dynamic {s}: the model has {n_inputs} example input(s)")
        out[int(index)][int(axis)] = name
    return out


def cmd_import(args: argparse.Namespace) -> int:
    import irforge

    made = _factory(args.factory)
    made = made() if callable(made) and not _is_model(made, args.framework) else made
    examples = None
    if isinstance(made, tuple) and len(made) == 2:  # (model, example_args) from the factory
        made, examples = made
    if args.example_shape:
        dtypes = args.dtype or ["float32"] * len(args.example_shape)
        if len(dtypes) != len(args.example_shape):
            raise IrforgeError("give one --dtype per --example-shape (or none: float32)")
        rng = np.random.default_rng(0)
        examples = [_example(rng, _shape(s), d) for s, d in zip(args.example_shape, dtypes, strict=True)]
    if examples is None:
        raise IrforgeError("give the example input shapes (--example-shape 1,3,224,224), or make the factory "
                           "return (model, example_args)")  # fmt: skip
    dims = _dynamic(args.dynamic, len(examples))
    if args.framework == "torch":
        import torch

        tensors = tuple(torch.from_numpy(np.asarray(e)) if isinstance(e, np.ndarray) else e for e in examples)
        dynamic = None
        if any(dims):
            names = {}
            dynamic = tuple({a: names.setdefault(n, torch.export.Dim(n)) for a, n in d.items()} or None for d in dims)
        model = irforge.from_torch(made, tensors, dynamic_shapes=dynamic, keep_unmapped=args.keep_unmapped)
    else:
        model = irforge.from_jax(made, *examples, abstracted_axes=[d or None for d in dims],
                                 keep_unmapped=args.keep_unmapped)  # fmt: skip
    if args.level and args.level != "0":
        irforge.optimize(model, f"-O{args.level}")
    irforge.save(model, args.output)
    n = sum(1 for _ in model.graph)
    shapes = ", ".join(f"{v.name}: {v.type}" for v in model.graph.inputs)
    print(f"{args.factory} -> {args.output}: {n} nodes; inputs {shapes}")
    fixed = [i for i, (e, d) in enumerate(zip(examples, dims, strict=True))
             if len(np.shape(e)) > 1 and 0 not in d]  # fmt: skip
    if fixed:  # said once, after the result: the import worked, but only for this batch size
        batch = np.shape(examples[fixed[0]])[0]
        note = (f"note: every input dim is fixed at the example's size (a batch of {batch}); to take other batch "
                f"sizes, name the dim: --dynamic {fixed[0]}:0=batch")  # fmt: skip
        if args.framework == "torch" and batch == 1:
            note += ", with an example of size 2 or more along it (torch.export treats a dim of size 1 as a constant)"
        print(note, file=sys.stderr)
    return 0


def _is_model(obj, framework: str) -> bool:
    if framework == "torch":
        import torch

        return isinstance(obj, torch.nn.Module)
    return False  # a JAX factory is called; a JAX function is named with a factory that returns it


def add_parsers(sub) -> None:
    im = sub.add_parser("import", help="import a PyTorch module or JAX function and save it as ONNX")
    im.add_argument("factory", help="MODULE:FACTORY: a function returning the nn.Module / JAX function (or "
                                    "a (model, example_args) pair); a torch Module may be named directly")  # fmt: skip
    im.add_argument("--framework", required=True, choices=["torch", "jax"])
    im.add_argument("--example-shape", action="append", default=[], metavar="1,3,224,224",
                    help="an example input's shape, one per input (random data)")  # fmt: skip
    im.add_argument("--dtype", action="append", metavar="float32", help="an example input's dtype (default float32)")
    im.add_argument("--dynamic", action="append", default=[], metavar="INPUT:AXIS=NAME",
                    help="keep that dim symbolic under NAME (e.g. 0:0=batch); as dynamic_shapes / abstracted_axes")
    im.add_argument("--keep-unmapped", action="store_true", help="keep unmapped ops as torch.aten / jax.lax nodes")
    im.add_argument("-O", dest="level", default="0", choices=["0", "1", "2", "3"], help="optimize before saving")
    im.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    im.set_defaults(func=cmd_import)
