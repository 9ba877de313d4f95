"""No output path may be an input path: ``diagnose run.csv --junit run.csv`` would replace the log
with XML, ``watch run.csv --jsonl run.csv`` would append events to the log it follows.

:func:`check_not_input` is called by every command that writes a file next to what it reads,
before any work; :func:`same_file` is also how ``watch`` leaves its own ``--jsonl`` unfollowed.
"""

from __future__ import annotations

import os

from grpofit.core.errors import UsageError

__all__ = ["check_not_input", "same_file", "file_key"]


def file_key(path: str) -> str:
    """The real path of ``path`` (a ``FILE::RUN`` selector's file): two names of one file agree."""
    base = str(path)
    if "::" in base and not os.path.exists(base):
        base = base.split("::", 1)[0]
    return os.path.realpath(base)


def same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name the same file (by inode when both exist, else by real path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return file_key(a) == file_key(b)


def check_not_input(output, option: str, inputs) -> None:
    """A :class:`UsageError` (exit 2, nothing written) when ``output`` is one of ``inputs``."""
    if output is None:
        return
    out = str(output)
    for item in inputs:
        item = str(item)
        if item == "-":
            continue
        base = file_key(item)
        if os.path.isdir(base):
            continue
        if same_file(out, base):
            raise UsageError(
                f"{option} {out} is also an input: writing it would overwrite the log being read",
                path=out,
                fix=f"choose another path for {option}",
            )
