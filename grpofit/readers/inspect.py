"""What ``grpofit inspect`` shows about one run: format, step axis, gaps, roles, counts."""

from __future__ import annotations

from typing import Any

import numpy as np

from grpofit.core.numbers import finite

MAX_GAPS = 10


def step_gaps(
    steps: np.ndarray, factor: float = 2.0, limit: int = MAX_GAPS
) -> tuple[float | None, list[list[float]], int]:
    """Median step interval and the gaps wider than ``factor`` times it.

    Returns ``(median, [[from, to], ...] (at most ``limit``), total number of gaps)``.
    """
    if steps.size < 2:
        return None, [], 0
    d = np.diff(steps)
    med = float(np.median(d))
    if med <= 0:
        return med, [], 0
    idx = np.nonzero(d > factor * med)[0]
    gaps = [[_num(steps[i]), _num(steps[i + 1])] for i in idx[:limit]]
    return med, gaps, int(idx.size)


def _num(x: float) -> float | int | None:
    return finite(x, whole=True)


def inspect_run(run) -> dict[str, Any]:
    """A JSON-safe description of a run: format, step column and range, interval, gaps,
    duplicates, role -> column (with finite points), numeric columns, hyperparameters, warnings."""
    from grpofit.core.roles import choose_reward, detect_roles
    from grpofit.readers.config import hyperparameters

    steps = run.steps
    med, gaps, ngaps = step_gaps(steps)
    numeric = run.numeric_columns()
    roles = detect_roles(numeric)
    choice = choose_reward(numeric)  # what fit and diagnose fit, and why
    role_info = {
        role: ({"column": col, "points": int(np.isfinite(run.metrics[col]).sum())} if col is not None else None)
        for role, col in roles.items()
    }
    return {
        "run": run.name,
        "source": run.source,
        "format": run.format,
        "step_column": run.step_column,
        "first_step": _num(steps[0]) if steps.size else None,
        "last_step": _num(steps[-1]) if steps.size else None,
        "n_steps": int(steps.size),
        "median_interval": _num(med) if med is not None else None,
        "gaps": gaps,
        "n_gaps": ngaps,
        "rows": int(run.stats.get("rows", steps.size)),
        "duplicates": int(run.stats.get("duplicates", 0)),
        "rows_without_step": int(run.stats.get("rows_without_step", 0)),
        "stats": {k: int(v) for k, v in run.stats.items()},
        "roles": role_info,
        "fitted_column": choice["column"],
        "fitted_role": choice["role"] if choice["column"] is not None else None,
        "fitted_note": choice["note"],
        "numeric_columns": numeric,
        "n_columns": len(run.metrics),
        "config_source": run.config_source,
        "hyperparameters": hyperparameters(run.config),
        "warnings": list(run.warnings),
    }


def inspect_path(path: str, *, step: str | None = None) -> dict[str, Any]:
    """``grpofit inspect PATH``: every run found in a file or folder, each described by
    :func:`inspect_run`. Raises the reader's :class:`~grpofit.core.errors.ReadError` when unreadable."""
    from grpofit.readers import read_path

    runs = read_path(path, step=step)
    formats = sorted({r.format for r in runs})
    return {
        "path": path,
        "format": formats[0] if len(formats) == 1 else formats,
        "n_runs": len(runs),
        "runs": [inspect_run(r) for r in runs],
    }
