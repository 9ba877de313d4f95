"""Read training logs into :class:`grpofit.core.runs.Run` objects.

``read_path(path)`` takes a file, a run folder or ``-`` (stdin) and returns every run in it;
``read_bytes(data, name)`` does the same for content already in memory. The container is
sniffed from the content, never trusted from the suffix alone (see :mod:`.sniff`); each
container has one small reader module, and every reader ends with ``grpofit.core.runs.make_run``.
``discover(paths)`` lists the run containers under paths for ``grpofit diagnose``.

The formats, how each is recognised, read and found in folders, are the rows of one table:
:data:`grpofit.readers.registry.FORMATS_TABLE`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Callable

from grpofit.core.errors import MetricNotFound, ReadError, UnknownFormat
from grpofit.readers.discover import RunSource, dir_kind, discover, newest_checkpoint
from grpofit.readers.registry import FORMATS
from grpofit.readers.sniff import sniff
from grpofit.readers.source import PEEK, SUPPORTED_HINT, Source

if TYPE_CHECKING:
    from grpofit.core.runs import Run

__all__ = [
    "FORMATS",
    "RunSource",
    "discover",
    "inspect_run",
    "read_bytes",
    "read_path",
    "read_source",
    "require_column",
    "sniff",
]


def read_path(path: str, *, step: str | None = None) -> list[Run]:
    """Every run in a log file or run folder; ``-`` reads standard input.

    ``step`` names the step column (``--step``). Raises a :class:`ReadError` subclass naming
    the file and the fix for anything unreadable.
    """
    import stat

    from grpofit.readers.discover import check_exists
    from grpofit.readers.source import read_stream

    path = str(path)
    from grpofit.readers.selection import select_runs, split_selector

    base, selector = split_selector(path)
    if selector is not None:  # FILE::RUN: that run of the file
        return select_runs(read_path(base, step=step), selector, base, option="::")
    if path == "-":
        stdin = sys.stdin.buffer if sys.stdin is not None else None
        if stdin is None:
            raise ReadError("standard input is closed", path="-", fix="pipe a log into grpofit or pass a file")
        try:
            data = read_stream(stdin, "-")
        except OSError as exc:
            raise ReadError(
                f"standard input cannot be read ({exc.strerror or exc})",
                path="-",
                fix="pipe a log into grpofit or pass a file",
            ) from None
        return read_bytes(data, "-", step=step)
    mode = check_exists(path).st_mode  # one stat for every check below
    if stat.S_ISDIR(mode):
        return _read_dir(path, step)
    if not os.access(path, os.R_OK):
        raise ReadError("is not readable (permission denied)", path=path, fix="check the file's permissions")
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):  # a named pipe, <(...), /dev/stdin: one read, bounded
        try:
            with open(path, "rb") as f:
                data = read_stream(f, path)
        except OSError as exc:
            raise ReadError(f"cannot be read ({exc.strerror or exc})", path=path, fix="check the path") from None
        return read_bytes(data, path, step=step)
    if not stat.S_ISREG(mode):
        raise ReadError("is a socket or device, not a log file", path=path, fix="point at a log file")
    return _read(Source(path, path=path), step)


def read_bytes(data: bytes, name: str, *, step: str | None = None) -> list[Run]:
    """Every run in in-memory content (e.g. stdin), the format sniffed from the content."""
    return _read(Source(name, data=bytes(data)), step)


def read_source(source: RunSource, *, step: str | None = None) -> list[Run]:
    """Read one :class:`RunSource` found by :func:`discover`."""
    if source.kind == "stdin":
        return read_path("-", step=step)
    return read_path(source.path, step=step)


def _read(src: Source, step: str | None) -> list:
    try:
        src = src.small_in_memory(PEEK)
        head = src.head(PEEK)
        if len(head) == PEEK and head.count(b"\n") < 2:  # a header wider than the peek
            from grpofit.readers.source import MAX_HEADER

            head = _head_with_rows(src, MAX_HEADER)
        tail = src.tail(PEEK)
    except OSError as exc:
        raise ReadError(
            f"cannot be read ({exc.strerror or exc})", path=src.name, fix="check the path and permissions"
        ) from None
    fmt = sniff(head, src.name, tail)
    reader = _reader(fmt)
    try:
        return reader(src, fmt, step=step)
    except (ReadError, MetricNotFound):
        raise
    except MemoryError:
        raise ReadError(
            "is too large to read into memory", path=src.name, fix="split the log or read it on a larger machine"
        ) from None
    except UnicodeDecodeError as exc:
        raise UnknownFormat(
            f"is not text ({exc.reason})", path=src.name, fix=f"grpofit reads {SUPPORTED_HINT}"
        ) from None


def _head_with_rows(src: Source, cap: int) -> bytes:
    """The start of the content through its first few lines (at most ``cap`` bytes)."""
    size = PEEK
    head = src.head(size)
    while len(head) == size and head.count(b"\n") < 4 and size < cap:
        size = min(cap, size * 4)
        head = src.head(size)
    return head


def _reader(fmt: str) -> Callable:
    from grpofit.readers.registry import get

    row = get(fmt)
    if row is None or row.reader is None:
        raise UnknownFormat(f"has an unsupported format {fmt!r}", fix=f"grpofit reads {SUPPORTED_HINT}")
    return row.load()


def _read_wandb_history(src: Source, fmt: str, *, step: str | None = None) -> list:
    """W&B API history saved as JSONL (the JSONL reader names it wandb-history) or CSV."""
    if src.head(PEEK).lstrip()[:1] == b"{":
        from grpofit.readers.jsonl import read_jsonl

        return read_jsonl(src, "jsonl", step=step)
    from grpofit.readers.delimited import read_delimited

    return read_delimited(src, fmt, step=step)


def _materialise(src: Source) -> tuple[str, Callable[[], None]]:
    """A path on disk for readers that need one (binary readers given stdin bytes)."""
    if src.path is not None:
        return src.path, lambda: None
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix="grpofit-", suffix=".bin")
    with os.fdopen(fd, "wb") as f:
        f.write(src.data)
    return tmp, lambda: os.unlink(tmp)


def _named(src: Source, path: str, fn: Callable) -> tuple:
    """``fn(path)`` with a temporary file's name replaced by what the user called the input
    (``-`` for stdin) in its error and warnings."""
    if src.path is not None:
        return fn(path)
    tmp = os.path.basename(path)
    try:
        table, warnings = fn(path)
    except ReadError as exc:
        exc.path = src.name
        exc.message = exc.message.replace(path, src.name).replace(tmp, src.name)
        raise
    return table, [w.replace(path, src.name).replace(tmp, src.name) for w in warnings]


def _read_tensorboard(src: Source, fmt: str, *, step: str | None = None) -> list:
    from grpofit.readers.tensorboard import read_tfevents

    return _read_binary(src, "tensorboard", read_tfevents, step)


def _read_wandb_binary(src: Source, fmt: str, *, step: str | None = None) -> list:
    from grpofit.readers.wandb_binary import read_wandb_file

    return _read_binary(src, "wandb-binary", read_wandb_file, step)


def _read_binary(src: Source, fmt: str, read_file: Callable, step: str | None) -> list:
    """A binary container read by ``read_file(path) -> (table, warnings)`` (stdin via a temp file)."""
    from grpofit.readers.common import build_run
    from grpofit.runtime.interrupts import deferred

    cleanup = None
    try:
        with deferred():  # a signal here is raised once cleanup is known, so no copy is left
            path, cleanup = _materialise(src)
        table, warnings = _named(src, path, read_file)
    finally:
        if cleanup is not None:
            cleanup()
    return [build_run(src, fmt, table, step=step, warnings=list(warnings))]


def _read_parquet(src: Source, fmt: str, *, step: str | None = None) -> list:
    import pandas as pd

    from grpofit.readers.common import build_run
    from grpofit.readers.delimited import numeric_table

    try:
        df = pd.read_parquet(src.path if src.path is not None else src.open())
    except ImportError:
        raise ReadError(
            "is a parquet file (e.g. a W&B history artifact) and no parquet engine is installed",
            path=src.name,
            fix="install the optional extra from grpofit's checkout: pip install '.[parquet]' (pyarrow), or save the history as CSV",
        ) from None
    except Exception as exc:  # noqa: BLE001 - any engine failure is a read error
        raise ReadError(f"is not a readable parquet file ({exc})", path=src.name, fix="re-export it") from None
    table, warnings, dropped = numeric_table(df)
    fmt = "wandb-history" if "_step" in table and ("_runtime" in table or "_timestamp" in table) else "parquet"
    return [build_run(src, fmt, table, step=step, warnings=warnings, stats={"dropped_columns": dropped})]


def _read_dir(path: str, step: str | None) -> list:
    from grpofit.readers.registry import folder

    shape = folder(dir_kind(path) or "")
    if shape is not None:
        return shape.reader()(path, step)
    runs: list = []
    for source in discover([path]):
        runs.extend(read_source(source, step=step))
    return runs


def _read_wandb_run_folder_path(path: str, step: str | None) -> list:
    from grpofit.readers.wandb_binary import read_wandb_run_dir

    return _wandb_run_dir(read_wandb_run_dir, path, step)


def _read_hf_output(path: str, step: str | None) -> list:
    if os.path.isfile(os.path.join(path, "trainer_state.json")):
        return _read(Source(path, path=os.path.join(path, "trainer_state.json")), step)
    return _read_checkpoint(newest_checkpoint(path), step)


def _read_tensorboard_dir(path: str, step: str | None) -> list:
    from grpofit.readers.config import config_in_dir

    runs = _read_tensorboard(Source(path, path=path), "tensorboard", step=step)
    cfg, cfg_src = config_in_dir(path)
    for r in runs:
        if cfg and not r.config:
            r.config, r.config_source = cfg, cfg_src
    return runs


def _wandb_run_dir(fn: Callable, path: str, step: str | None) -> list:
    import inspect

    if step is not None and "step" in inspect.signature(fn).parameters:
        runs = fn(path, step=step)
    else:
        runs = fn(path)
        if step is not None:
            for r in runs:
                if r.step_column != step:
                    raise MetricNotFound(
                        f"--step {step!r} cannot be applied to a W&B run folder (its reader chose {r.step_column!r})",
                        path=path,
                        columns=r.numeric_columns(),
                        fix="omit --step for W&B run folders",
                    )
    if not runs:
        raise ReadError("holds no history", path=path, fix="the run may not have logged a step yet")
    return runs


def _read_checkpoint(folder: str, step: str | None) -> list:
    state = os.path.join(folder, "trainer_state.json")
    runs = _read(Source(folder, path=state), step)
    return runs


def require_column(run, role_or_name: str, *, overrides: dict | None = None) -> str:
    """The column for a role (``reward``, ``eval_reward``, ...) or an explicit column name.

    Raises :class:`MetricNotFound` listing the run's numeric columns when it is absent.
    """
    from grpofit.core.roles import ROLES, detect_roles

    numeric = run.numeric_columns()
    if role_or_name in run.metrics and role_or_name not in ROLES:
        return role_or_name
    if role_or_name in ROLES:
        col = detect_roles(numeric, overrides).get(role_or_name)
        if col is not None and col in run.metrics:
            return col
        flag = "--eval-metric" if role_or_name == "eval_reward" else "--metric"
        message = f"no column {col!r}" if col is not None else f"no {role_or_name.replace('_', ' ')} column found"
        raise MetricNotFound(
            message, path=run.name, columns=numeric, fix=f"pass {flag} with one of: " + _short(numeric)
        )
    if role_or_name in run.metrics:
        return role_or_name
    raise MetricNotFound(
        f"no column {role_or_name!r}",
        path=run.name,
        columns=numeric,
        fix="pass --metric with one of: " + _short(numeric),
    )


def _short(columns: list[str], limit: int = 25) -> str:
    if not columns:
        return "(no numeric columns)"
    shown = ", ".join(columns[:limit])
    return shown + (f" ... ({len(columns) - limit} more)" if len(columns) > limit else "")


def inspect_run(run) -> dict:
    """What was detected in a run, JSON-safe (see :func:`grpofit.readers.inspect.inspect_run`)."""
    from grpofit.readers.inspect import inspect_run as _inspect

    return _inspect(run)
