"""What the command modules share: format choices, common options, and output helpers
(warnings and errors on stderr, JSON on stdout, terminal-safe documents, option parsing)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import typer

from grpofit.core.errors import UsageError
from grpofit.core.safetext import printable  # imported up front: an error met at the memory limit is still shown


class TableOrJson(str, Enum):
    table = "table"
    json = "json"


class DiagnoseFormat(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


METRIC = typer.Option(None, "--metric", help="Reward column (auto-detected from common names).")
STEP = typer.Option(None, "--step", help="Step column (auto-detected: step, train/global_step, _step, ...).")


class _Debug:
    """Whether this invocation was given ``--debug`` (at the root or on its command): set by the
    option's callback while typer parses the command line, reset by the entry point before each
    invocation. The entry point reads it to let an error show its traceback."""

    on = False


def debugging() -> bool:
    """Whether ``--debug`` was given to the command being run."""
    return _Debug.on


def reset_debug() -> None:
    """Before an invocation: no ``--debug`` yet (numpy's overflow notes hidden, see the entry)."""
    import warnings

    _Debug.on = False
    # numpy's overflow/invalid-value notes on extreme logs are not for users: results carry
    # their own notes, and stderr keeps its one line per problem (--debug shows them)
    warnings.filterwarnings("ignore", category=RuntimeWarning)


def _debug_given(value: bool) -> bool:
    """``--debug``'s callback (eager: it is seen before any other option can fail)."""
    if value:
        import warnings

        _Debug.on = True
        warnings.filterwarnings("default", category=RuntimeWarning)
    return value


#: ``--debug``, accepted at the root (``grpofit --debug fit ...``) and on every command
DEBUG = typer.Option(False, "--debug", help="Show a traceback on errors.", callback=_debug_given, is_eager=True)
RUN_PATTERN = typer.Option(
    None,
    "--run",
    help="Only the runs whose name matches this glob (e.g. '*GRPO*'); FILE::RUN also picks one run of a file.",
)


def warn(lines) -> None:
    for line in lines:
        echo_err(f"warning: {line}")


def echo_err(line: str) -> None:
    """One line on stderr, control characters and undecodable bytes escaped (names in it come
    from the user's files); a closed or full stderr is not an error of its own."""
    try:
        typer.echo(printable(line, one_line=True), err=True)
    except (OSError, ValueError, AttributeError):
        pass


def shown(doc):
    """A document for the terminal (table, markdown): control characters in names escaped."""
    from grpofit.core.safetext import printable_doc

    return printable_doc(doc)


def print_json(doc: dict) -> None:
    from grpofit.core.jsonout import dumps

    typer.echo(dumps(doc))


def split_modes(text: str | None):
    from grpofit.core.vocabulary import parse_modes

    return parse_modes(text)


def parse_thresholds(items: list[str]) -> dict[str, float]:
    """``--threshold NAME=VALUE`` items as a dict; a bad form or unknown name is one line naming
    the option and the valid names (value ranges are checked where the thresholds are built)."""
    if not items:
        return {}
    from grpofit.cli.helptext import threshold_names

    known = threshold_names()
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if sep and known and name not in known:
            raise UsageError(f"--threshold: unknown name {name!r}", fix="valid names: " + ", ".join(known))
        try:
            if not sep:
                raise ValueError
            out[name] = float(value)
        except ValueError:
            raise UsageError(f"--threshold {item!r} is not NAME=NUMBER", fix="e.g. --threshold rise_fail=8") from None
    return out


def check_out_folder(out: Path) -> None:
    """``--out`` must name a file in a folder that exists (checked before minutes of work)."""
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(
            f"the folder {str(folder)!r} of --out does not exist",
            path=str(out),
            fix="create it first or choose another --out",
        )
    if out.is_dir():
        raise UsageError("--out is a folder", path=str(out), fix="name a .csv or .jsonl file")


def write_text(path: Path, text: str) -> None:
    """Write ``text`` atomically: a reader (or an interrupt) never sees a partial file."""
    from grpofit.runtime.atomic import write_text as atomic_write

    atomic_write(path, text)


def check_writable(path: Path, option: str, *, folder: bool = False) -> None:
    """A :class:`UsageError` before any work when ``option``'s ``path`` cannot be written: it is a
    folder (or, for ``folder``, a file), or its nearest existing parent is not a writable folder
    (missing parents are created when writing). Nothing is created here."""
    import os

    p = Path(path)
    from grpofit.runtime.atomic import is_special

    if not folder and p.exists() and is_special(p):  # /dev/null, /dev/stdout, a FIFO: written in place
        if not os.access(p, os.W_OK):
            raise UsageError(f"{option} {path}: cannot be written (permission denied)", fix="choose a writable path")
        return
    if p.exists() and p.is_dir() != folder:
        what = "a folder" if p.is_dir() else "a file"
        raise UsageError(
            f"{option} {path}: is {what}", fix="choose " + ("a folder" if folder else "a file name") + " there"
        )
    parent = p if folder else p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: {parent} is not a folder", fix="choose a path in a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: cannot write in {parent} (permission denied)", fix="choose a writable path")
