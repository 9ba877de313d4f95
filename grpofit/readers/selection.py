"""Choosing runs inside a file that holds several: ``FILE::RUN`` and ``--run PATTERN``.

A W&B panel export or a sweep CSV holds several runs, each named ``FILE::RUN``. Every command
that reads a path accepts ``FILE::RUN`` (that run only; exact name, else a glob pattern) and
``--run PATTERN`` filters whatever was read (a glob, matched against the run's own name and
against its full ``FILE::RUN`` name). A selection that matches nothing is an error that lists
the runs there are.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase


def split_selector(path: str) -> tuple[str, str | None]:
    """``("FILE", "RUN")`` for ``FILE::RUN`` (when no file is literally called that), else ``(path, None)``."""
    path = str(path)
    if "::" not in path or path == "-" or os.path.exists(path):
        return path, None
    base, _, run = path.partition("::")
    return base, run


def run_label(run) -> str:
    """A run's own name: the part after ``::``, or its whole name."""
    name = getattr(run, "name", str(run))
    return name.split("::", 1)[1] if "::" in name else name


def matches(run, pattern: str | None) -> bool:
    """Whether ``run`` passes ``--run PATTERN`` (always, without a pattern)."""
    if not pattern:
        return True
    name = getattr(run, "name", str(run))
    return (
        run_label(run) == pattern
        or name == pattern
        or fnmatchcase(run_label(run), pattern)
        or fnmatchcase(name, pattern)
    )


def select_runs(runs: list, pattern: str | None, source: str, *, option: str = "--run") -> list:
    """The runs whose name matches ``pattern`` (exact name first, else a glob); all when None.

    Raises :class:`~grpofit.core.errors.UsageError` naming ``option`` and the runs available.
    """
    if not pattern:
        return runs
    exact = [r for r in runs if run_label(r) == pattern or getattr(r, "name", None) == pattern]
    if exact:
        return exact
    hits = [r for r in runs if fnmatchcase(run_label(r), pattern) or fnmatchcase(getattr(r, "name", ""), pattern)]
    if hits:
        return hits
    from grpofit.core.errors import UsageError

    names = [run_label(r) for r in runs]
    shown = ", ".join(names[:12]) + (f", ... ({len(names) - 12} more)" if len(names) > 12 else "")
    what = f"no run {pattern!r} in {source}" if option == "::" else f"{option} {pattern!r} matches no run in {source}"
    raise UsageError(what, fix=f"runs there: {shown}" if names else "it holds no run")


def read_selected(path: str, *, step: str | None = None, run: str | None = None) -> list:
    """:func:`grpofit.readers.read_path` with ``FILE::RUN`` and ``--run PATTERN`` applied."""
    from grpofit.readers import read_path

    return select_runs(read_path(path, step=step), run, str(path))


def no_match(pattern: str, paths: list):
    """The error for a ``--run PATTERN`` that kept no run of ``paths``."""
    from grpofit.core.errors import UsageError

    where = ", ".join(str(p) for p in paths[:3]) + (" ..." if len(paths) > 3 else "")
    return UsageError(
        f"--run {pattern!r} matches no run in {where}",
        fix="check the run names with grpofit inspect, or use a glob such as '*GRPO*'",
    )


def expand_argument(spec: str) -> list[str]:
    """Paths of one command-line argument: itself when it exists (or is '-' or ``FILE::RUN``), else
    the files its glob matches (``compare`` and ``rank`` take globs the shell did not expand)."""
    import glob

    from grpofit.core.errors import UsageError

    if spec == "-" or os.path.exists(spec):
        return [spec]
    base, sep, _ = spec.partition("::")
    if sep and os.path.isfile(base):
        return [spec]
    if any(ch in spec for ch in "*?["):
        hits = sorted(glob.glob(spec, recursive=True))
        if not hits:
            raise UsageError(
                f"{spec}: the pattern matches no file", fix="check the glob pattern (quote it for the shell)"
            )
        return hits
    raise UsageError(
        f"{spec}: no such file or directory", fix="check the path, or use FILE::RUN to pick one run of a file"
    )
