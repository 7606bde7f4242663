"""What the commands that run a model are given: ``--inputs`` archives and ``--dim`` sizes,
each checked against the model so that a typo is one clear line, not an engine's traceback or a
size silently ignored."""

from __future__ import annotations

import difflib
import zipfile

import numpy as np

from ..core_ir.dimexpr import is_dim_expr, symbols
from ..core_ir.errors import IrforgeError, first_line
from ..core_ir.model import Model


def dim_names(model: Model) -> list[str]:
    """The symbolic dims the model's fed inputs name (those of derived dims such as 2*batch too)."""
    out: dict[str, None] = {}
    for v in model.graph.inputs:
        if v.is_initializer():
            continue
        for d in getattr(v.type, "shape", None) or ():
            if isinstance(d, str):
                out.update(dict.fromkeys(symbols(d) if is_dim_expr(d) else [d]))
    return list(out)


def parse_dims(specs: list[str], model: Model | None = None) -> dict[str, int]:
    """``--dim NAME=SIZE`` values; with ``model``, every NAME must be one of its symbolic dims."""
    out = {}
    for s in specs:
        name, _, value = s.partition("=")
        if not name or not value.isdigit():
            raise IrforgeError(f"--dim wants NAME=SIZE (e.g. batch=8), got {s!r}")
        out[name] = int(value)
    if model is not None:
        known = dim_names(model)
        for name in out:
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                has = f"its symbolic dims are {', '.join(known)}" if known else "it has no symbolic dims"
                raise IrforgeError(f"--dim {name}={out[name]}: the model has no dim {name!r} ({has}){hint}")
    return out


def read_feeds(path: str, names: list[str]) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` archive at ``path``, one for each of ``names`` and no others."""
    how = "write one with numpy.savez(path, input_name=array, ...)"
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except FileNotFoundError:
        raise IrforgeError(f"{path}: no such file") from None
    except OSError as e:
        raise IrforgeError(f"{path}: cannot read: {e.strerror}") from None
    if not magic.startswith((b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY")):
        raise IrforgeError(f"{path}: not an .npz archive of arrays by name (not a zip file at all); {how}")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise IrforgeError(f"{path}: not an .npz archive of arrays by name ({first_line(e)}); {how}") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise IrforgeError(f"{path}: one array (.npy), not an .npz archive of arrays by name; {how}")
    try:
        with loaded as data:
            given = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise IrforgeError(f"{path}: an array in the archive cannot be read ({e})") from None
    missing = [n for n in names if n not in given]
    extra = [n for n in given if n not in names]
    if missing or extra:
        pairs = (("has no array for", missing), ("holds arrays the model does not take:", extra))
        said = "; ".join(f"{what} {_few(found)}" for what, found in pairs if found)
        raise IrforgeError(f"{path} {said}; the model takes {', '.join(names) or 'no inputs'}")
    return {n: given[n] for n in names}


def _few(names: list[str], shown: int = 8) -> str:
    return ", ".join(names) if len(names) <= shown else f"{', '.join(names[:shown])}, ... ({len(names)} in all)"


def check_dims(feeds: dict[str, np.ndarray], model: Model, dims: dict[str, int]) -> None:
    """Refuse ``--dim`` sizes that the given arrays contradict."""
    for v in model.graph.inputs:
        for axis, d in enumerate(getattr(v.type, "shape", None) or ()):
            a = feeds.get(v.name)
            if isinstance(d, str) and d in dims and a is not None and a.ndim > axis and a.shape[axis] != dims[d]:
                raise IrforgeError(f"--dim {d}={dims[d]}, but the array given for %{v.name} has {a.shape[axis]} "
                                   f"at dim {axis} ({d})")  # fmt: skip


__all__ = ["check_dims", "dim_names", "parse_dims", "read_feeds"]
