"""The in-memory form of one training run, shared by every reader and every command.

A reader turns a container (CSV, JSONL, event file, ...) into raw columns; :func:`make_run`
normalises them into a :class:`Run`: one float step axis, sorted and unique, with every metric
aligned to it (NaN where a row has no value). Recoveries (duplicated steps after a resume,
unsorted steps, infinite values) are applied here, once, and recorded in ``Run.warnings``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

#: step column names, in order of preference (docs/formats.md); ``train/global_step`` beats ``_step``
STEP_NAMES = (
    "step",
    "train/global_step",
    "training/global_step",
    "global_step",
    "trainer/global_step",
    "grpo_step",
    "optimizer_step",
    "Step",
    "_step",
    "iteration",
    "iter",
)

ROW_INDEX = "(row index)"


@dataclass
class Run:
    """One run: a step axis and named metric columns aligned to it."""

    name: str  #: display name: the path, or ``path::run name`` for a file holding several runs
    source: str  #: the file or folder it was read from
    format: str  #: the container, e.g. ``csv``, ``jsonl``, ``tensorboard``, ``wandb-export``
    steps: np.ndarray  #: float64, strictly increasing
    step_column: str  #: the column the steps came from, or ``(row index)``
    metrics: dict[str, np.ndarray]  #: each float64, ``len(steps)`` long, NaN where absent
    config: dict[str, Any] = field(default_factory=dict)  #: hyperparameters, flattened keys
    config_source: str | None = None  #: where ``config`` came from
    warnings: list[str] = field(default_factory=list)  #: recoveries made while reading
    stats: dict[str, int] = field(default_factory=dict)  #: rows read, duplicates, dropped...

    @property
    def columns(self) -> list[str]:
        return list(self.metrics)

    def numeric_columns(self) -> list[str]:
        """Columns with at least one finite value."""
        return [k for k, v in self.metrics.items() if has_finite(v)]

    def series(self, column: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one column, finite points only (read-only views of the run's
        own arrays when every value is finite: a long run is not copied)."""
        values = self.metrics[column]
        keep = np.isfinite(values)
        if keep.all():
            steps, values = self.steps.view(), values.view()
            steps.flags.writeable = values.flags.writeable = False
            return steps, values
        return self.steps[keep], values[keep]


def has_finite(values: np.ndarray) -> bool:
    """Whether a float column holds a finite value (``count_nonzero`` skips ``any``'s Python
    wrapper: a 20-column run is checked in half the time)."""
    return bool(np.count_nonzero(np.isfinite(values)))


def to_float_array(values: Sequence[Any] | np.ndarray) -> np.ndarray:
    """Convert a column to float64; anything that is not a number becomes NaN."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiub":
        return values.astype(np.float64, copy=False)
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        out[i] = _to_float(v)
    return out


def _to_float(v: Any) -> float:
    if v is None:
        return np.nan
    if isinstance(v, (int, float, np.integer, np.floating)):
        try:
            return float(v)
        except OverflowError:  # an integer beyond float range (>= 1e309): infinite, dropped later
            return np.inf if v > 0 else -np.inf
    if isinstance(v, str):
        parsed = parse_number(v.strip().strip('"').strip("'"))
        return np.nan if parsed is None else parsed
    return np.nan


def parse_number(text: str) -> float | None:
    """A number from log text: ``0.1``, ``1e-3``, ``nan``, ``inf``, ``True``/``False``; else None."""
    try:
        return float(text)
    except ValueError:
        low = text.lower()
        if low in ("true", "false"):
            return float(low == "true")
        return None


def pick_step_column(columns: Sequence[str], preferred: str | None = None) -> str | None:
    """The step column by docs/formats.md's order of preference, or ``preferred`` when given."""
    if preferred is not None:
        return preferred if preferred in columns else None
    present = set(columns)
    for name in STEP_NAMES:
        if name in present:
            return name
    return None


def make_run(
    name: str,
    source: str,
    fmt: str,
    table: Mapping[str, Sequence[Any] | np.ndarray],
    *,
    step: str | None = None,
    config: Mapping[str, Any] | None = None,
    config_source: str | None = None,
    warnings: list[str] | None = None,
) -> Run:
    """Normalise raw equal-length columns into a :class:`Run`.

    ``step`` names the step column (``--step``); otherwise the first of :data:`STEP_NAMES`
    present is used, and failing that the row index. Rows without a finite step are dropped.
    Steps are sorted (stable), duplicated steps keep the *last* row (a resumed run re-logs
    them) and infinite metric values become NaN; each recovery adds a warning.
    """
    from grpofit.core.errors import MetricNotFound

    warnings = list(warnings or [])
    step_col = pick_step_column(list(table), step)
    table = _rebase_big_integer_steps(table, step_col, warnings)
    cols = {k: to_float_array(v) for k, v in table.items()}
    n = len(next(iter(cols.values()))) if cols else 0
    if step is not None and step_col is None:
        raise MetricNotFound(
            f"no step column {step!r}",
            path=source,
            columns=[k for k, v in cols.items() if np.isfinite(v).any()],
            option=f"--step {step!r}",
            fix="pass --step with one of: " + ", ".join(sorted(cols)[:20]),
        )
    if step_col is None:
        steps = np.arange(n, dtype=np.float64)
        step_label = ROW_INDEX
    else:
        steps = cols[step_col]
        step_label = step_col
    stats = {"rows": n}
    keep = np.isfinite(steps)
    if not keep.all():
        stats["rows_without_step"] = int((~keep).sum())
        lost = np.zeros(int((~keep).sum()), dtype=bool)  # dropped rows that carry a value
        for k, v in cols.items():
            if k != step_col:
                lost |= np.isfinite(v[~keep])
        if lost.any() and step_col is not None:
            warnings.append(
                f"{int(lost.sum())} row(s) with values have no finite step in {step_col!r} "
                "(empty, NaN or infinite); dropped them"
            )
        steps = steps[keep]
        cols = {k: v[keep] for k, v in cols.items()}
    if steps.size > 1 and np.any(steps[1:] < steps[:-1]):  # no np.diff: it overflows at +-1e308
        order = np.argsort(steps, kind="stable")
        steps = steps[order]
        cols = {k: v[order] for k, v in cols.items()}
        warnings.append("steps were not in order; sorted them")
        stats["unsorted"] = 1
    if steps.size > 1:
        last = np.ones(steps.size, dtype=bool)
        last[:-1] = steps[1:] != steps[:-1]
        ndup = int((~last).sum())
        if ndup:
            # within a block of equal steps, keep the last finite value of each column
            steps, cols = _merge_duplicates(steps, cols)
            if float(np.max(np.abs(steps))) > FLOAT_EXACT:
                warnings.append(
                    f"{ndup} step(s) above 2^53 fall on the same float as a neighbour; kept the last "
                    f"value of each: count {step_label!r} from 0 (subtract its first value) to keep them apart"
                )
            else:
                warnings.append(f"{ndup} duplicated step(s), e.g. after a resume; kept the last value of each")
            stats["duplicates"] = ndup
    ninf = 0
    metrics: dict[str, np.ndarray] = {}
    for k, v in cols.items():
        if k == step_col:
            continue
        bad = np.isinf(v)
        nbad = np.count_nonzero(bad)
        if nbad:
            ninf += int(nbad)
            v = np.where(bad, np.nan, v)
        metrics[k] = v
    if ninf:
        warnings.append(f"{ninf} infinite value(s) dropped")
        stats["infinite"] = ninf
    return Run(
        name=name,
        source=source,
        format=fmt,
        steps=steps,
        step_column=step_label,
        metrics=metrics,
        config=dict(config or {}),
        config_source=config_source,
        warnings=warnings,
        stats=stats,
    )


#: integers above this are not all distinct as 64-bit floats
FLOAT_EXACT = 2.0**53


def _rebase_big_integer_steps(table, step_col: str | None, warnings: list[str]):
    """``table`` with an integer step column above 2^53 counted from its first value (as floats
    such steps merge: 2^60 and 2^60 + 1 are one float), and a warning naming the offset."""
    raw = table.get(step_col) if step_col is not None else None
    if not isinstance(raw, np.ndarray) or raw.dtype.kind not in "iu" or raw.size == 0:
        return table
    lo, hi = int(raw.min()), int(raw.max())
    if max(abs(lo), abs(hi)) <= FLOAT_EXACT or hi - lo > FLOAT_EXACT:
        return table
    rebased = dict(table)
    rebased[step_col] = (raw.astype(object) - lo).astype(np.int64) if raw.dtype.kind == "u" else raw - lo
    warnings.append(
        f"steps in {step_col!r} are above 2^53 (from {lo}), where floats cannot tell them apart; "
        f"counted them from {lo} (step 0 is {lo})"
    )
    return rebased


def _merge_duplicates(steps: np.ndarray, cols: dict[str, np.ndarray]):
    """Collapse equal consecutive steps; per column the last finite value wins."""
    uniq, start = np.unique(steps, return_index=True)
    # group id of every row
    group = np.searchsorted(uniq, steps)
    out = {}
    for k, v in cols.items():
        merged = np.full(uniq.size, np.nan)
        finite = np.isfinite(v) | np.isinf(v)
        idx = np.nonzero(finite)[0]
        # later rows overwrite earlier ones: assignment order is ascending
        merged[group[idx]] = v[idx]
        out[k] = merged
    return uniq, out


def merge_runs(runs: list[Run]) -> Run:
    """Join several files of one run (e.g. one W&B panel export per metric) on the step axis.

    The first run names the result; a column present in several runs keeps the first's values.
    """
    first = runs[0]
    steps = np.unique(np.concatenate([r.steps for r in runs]))
    metrics: dict[str, np.ndarray] = {}
    for r in runs:
        idx = np.searchsorted(steps, r.steps)
        for k, v in r.metrics.items():
            if k in metrics:
                continue
            col = np.full(steps.size, np.nan)
            col[idx] = v
            metrics[k] = col
    config: dict[str, Any] = {}
    for r in reversed(runs):
        config.update(r.config)
    return Run(
        name=first.name,
        source=first.source,
        format=first.format,
        steps=steps,
        step_column=first.step_column,
        metrics=metrics,
        config=config,
        config_source=first.config_source or next((r.config_source for r in runs if r.config_source), None),
        warnings=[w for r in runs for w in r.warnings],
        stats={"rows": sum(r.stats.get("rows", 0) for r in runs), "files": len(runs)},
    )
