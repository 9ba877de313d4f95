"""W&B panel exports across files: one export per metric, the runs joined by run name.

A panel export (``<run name> - <key>`` columns) holds every run of one panel; exporting several
panels gives one file per metric, and a run's metrics are joined back by its name (the part after
``::`` in the run's display name).
"""

from __future__ import annotations

import os

from grpofit.core.errors import GrpofitError


def run_key(run) -> str | None:
    """The name that ties one run's metrics across files (the ``::run name`` of a panel export)."""
    if "::" in run.name:
        return run.name.split("::", 1)[1]
    return None


def join_by_run_name(runs: list) -> list:
    """Merge runs that carry the same ``::run name`` (one W&B panel export per metric)."""
    from grpofit.core.roles import find_role
    from grpofit.core.runs import merge_runs

    groups: dict[str, list] = {}
    order: list = []
    for run in runs:
        key = run_key(run)
        if key is None:
            order.append(run)
            continue
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(run)
    out = []
    for item in order:
        if not isinstance(item, str):
            out.append(item)
            continue
        members = groups[item]
        # the file holding the reward names the joined run
        members.sort(key=lambda r: find_role("reward", r.numeric_columns()) is None)
        out.append(members[0] if len(members) == 1 else merge_runs(members))
    return out


def is_panel_export(path: str) -> bool:
    """Whether a file's format joins runs across files (a W&B panel export: its runs may continue
    in another file); the format table's ``joins_across_files`` says which formats do."""
    from grpofit.readers.registry import get
    from grpofit.readers.sniff import sniff

    if not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
            # a panel export's header names its columns "<run> - <key>": a complete first line
            # without " - " settles it (the usual log) without reading and sniffing 64 KB
            first = head.lstrip()
            if b" - " not in head and (b"\n" in first or b"\r" in first):
                return False
            head += f.read(65536 - len(head))
        row = get(sniff(head, path))
        return row is not None and row.joins_across_files
    except (OSError, GrpofitError):
        return False
