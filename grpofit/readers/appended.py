"""Several runs written into one log, one after another, read as separate runs.

A script rerun with the same output file appends its new run to the old one. Sorted and merged
on the step, they would read as one series stitched from several runs (the "duplicated steps
after a resume" of a run that never resumed). Two marks separate them:

- a **run id** field (:data:`RUN_KEYS`) holding text: each id is a run, in the order it first
  appears (:class:`RunIds` codes it while the rows are read);
- a **step reset**: the step falls back to the start of the current run (at most one median
  step interval above its first step). A run that went back only part of the way (a resume from
  a checkpoint) is not split, and neither is a run that logged fewer than :data:`MIN_ROWS` rows
  before the step fell back (a false start, which the restarted rows then replace as duplicated
  steps: rasbt's 7_3 log restarts after 5 steps).
"""

from __future__ import annotations

import numpy as np

#: fields that name the run a row belongs to (their value must be text)
RUN_KEYS = ("run_id", "run_name", "run")
#: the per-row run code column while reading
RUN_COLUMN = "\x1frun"
#: a part of a file shorter than this many rows is not a run of its own
MIN_ROWS = 10


class RunIds:
    """Run ids seen so far, coded in the order of first appearance."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.field: str | None = None

    def mark(self, row: dict) -> dict:
        """``row`` with its run id field replaced by the run's code (unchanged without one)."""
        for key in RUN_KEYS:
            value = row.get(key)
            if isinstance(value, str) and value:
                break
        else:
            return row
        self.field = self.field or key
        out = {k: v for k, v in row.items() if k != key}
        out[RUN_COLUMN] = float(self.codes.setdefault(value, len(self.codes)))
        return out


def split_runs(
    table: dict[str, np.ndarray], step: str | None, ids: RunIds | None = None, *, piece: bool = False
) -> tuple[list[tuple[str | None, dict[str, np.ndarray]]], list[str]]:
    """``table`` (rows in file order) cut into runs: ``([(name suffix or None, table)], warnings)``.

    One run whose rows are all of the table is ``[(None, table)]``. ``piece``: the table is a
    piece of a file being followed (``grpofit watch``): a run id stays its name even when it is
    the piece's only one (the file may hold others), and the follower numbers the runs cut at
    step resets across pieces itself."""
    from grpofit.core.runs import pick_step_column

    codes = table.pop(RUN_COLUMN, None)
    warnings: list[str] = []
    groups: list[tuple[str | None, np.ndarray | None]] = [(None, None)]
    if codes is not None and ids is not None and ids.codes:
        names = {c: name for name, c in ids.codes.items()}
        present = [int(c) for c in dict.fromkeys(codes[np.isfinite(codes)].tolist())]
        groups = [(names[c], np.flatnonzero(codes == c)) for c in present]
        unmarked = np.flatnonzero(~np.isfinite(codes))
        if unmarked.size:
            groups.append((None, unmarked))
        if len(present) > 1:
            warnings.append(
                f"holds {len(present)} runs told apart by {ids.field!r} ("
                + ", ".join(names[c] for c in present[:5])
                + (", ..." if len(present) > 5 else "")
                + "); read them as separate runs"
            )
    step_col = pick_step_column(list(table), step)
    out: list[tuple[str | None, dict[str, np.ndarray]]] = []
    resets = 0
    for name, rows in groups:
        part = table if rows is None else {k: v[rows] for k, v in table.items()}
        starts = reset_starts(part[step_col], min_rows=0 if piece else MIN_ROWS) if step_col is not None else []
        resets += len(starts)
        bounds = [0, *starts, len(part[step_col]) if step_col is not None else 0]
        if len(bounds) == 2:
            out.append((name, part))
            continue
        for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]), 1):
            suffix = f"run{k}" if name is None else f"{name}/run{k}"
            out.append((suffix, {key: v[a:b] for key, v in part.items()}))
    if resets:
        warnings.append(appended_note(len(out), resets))
    if not piece and len(out) == 1 and out[0][0] is not None and (codes is None or len(groups) == 1):
        out = [(None, out[0][1])]  # one run id only: the file's own name
    return out, warnings


def appended_note(runs: int, resets: int) -> str:
    """What a reader (and ``watch``) says about a file it split at step resets."""
    return (
        f"holds {runs} runs appended one after another (the step falls back to its start "
        f"{resets} time(s)); read them as separate runs ::run1, ::run2, ..."
    )


def reset_starts(steps: np.ndarray, *, min_rows: int = MIN_ROWS) -> list[int]:
    """Row indices where a new run starts: the step falls back to the current run's start,
    after at least ``min_rows`` rows of it (file order). A piece of a followed file is cut with
    ``min_rows=0`` (its first rows may end a run begun in an earlier piece): ``grpofit watch``
    then checks each cut against the whole run with this rule."""
    try:
        steps = np.asarray(steps, dtype=np.float64)
    except (TypeError, ValueError):
        return []
    idx = np.flatnonzero(np.isfinite(steps))
    if idx.size <= min_rows or idx.size < 2:
        return []
    s = steps[idx]
    back = np.flatnonzero(s[1:] < s[:-1]) + 1
    if not back.size:
        return []
    starts: list[int] = []
    first = 0  # position (in idx) of the current run's first row
    for j in back:
        seg = s[first:j]
        gaps = np.diff(seg)
        interval = float(np.median(gaps[gaps > 0])) if np.any(gaps > 0) else 1.0
        if s[j] <= seg[0] + interval and j - first >= min_rows:
            starts.append(int(idx[j]))
            first = j
    return starts
