"""What every text reader does last: attach hyperparameters, call ``make_run``, check it."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from grpofit.errors import ReadError
from grpofit.readers.source import SUPPORTED_HINT, Source
from grpofit.runs import Run, make_run


#: rows ``wandb.Api().run(...).history()`` samples by default
HISTORY_SAMPLE = 500


def rows_to_columns(rows: Sequence[Mapping[str, Any]], convert=None) -> dict[str, list]:
    """Row dicts as equal-length columns, keys in first-seen order (a missing cell is None).

    ``convert`` is applied to every present cell (e.g. unwrapping a one-element list).
    """
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    if convert is None:
        return {k: [r.get(k) for r in rows] for k in keys}
    return {k: [convert(r.get(k)) for r in rows] for k in keys}


def build_run(
    src: Source,
    fmt: str,
    table: Mapping[str, Sequence[Any] | np.ndarray],
    *,
    step: str | None,
    warnings: list[str] | None = None,
    stats: Mapping[str, int] | None = None,
    name: str | None = None,
    config: Mapping[str, Any] | None = None,
    config_source: str | None = None,
) -> Run:
    """``make_run`` plus the run's hyperparameters (found next to the file) and reader stats.

    Raises :class:`ReadError` when no column holds a single number.
    """
    if config is None and src.path is not None:
        from grpofit.readers.config import config_near

        config, config_source = config_near(src.path)
    run = make_run(
        name or src.name,
        src.name,
        fmt,
        table,
        step=step,
        config=config,
        config_source=config_source,
        warnings=warnings,
    )
    if stats:
        run.stats.update({k: int(v) for k, v in stats.items() if v})
    if fmt == "wandb-history" and run.stats.get("rows") == HISTORY_SAMPLE:
        run.warnings.append(
            f"exactly {HISTORY_SAMPLE} rows: W&B's run.history() returns a {HISTORY_SAMPLE}-row sample by "
            "default; save run.scan_history() for every step"
        )
    if not run.steps.size and run.stats.get("rows_without_step"):
        raise ReadError(
            f"no row has a number in the step column {run.step_column!r}",
            path=src.name,
            fix="pass --step with a numeric column, or check that this is a training log",
        )
    if not run.numeric_columns():
        raise ReadError(
            "holds no numeric metric values (every cell is empty, text, NaN or infinite)",
            path=src.name,
            fix=f"check that this is a training log ({SUPPORTED_HINT})",
        )
    return run
