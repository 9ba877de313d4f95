"""The forecast as ``diagnose`` shows it: a still-rising flag for every run (cheap: the late-slope
test of :mod:`.drift` on the fitted part of the reward) and, with ``diagnose --forecast`` (or
``--horizon N``), the expected final reward at the planned end and the step reaching 95% of the
gain. The planned end is each run's own (its config, :mod:`.plan`); ``--horizon N`` is the
fallback for runs whose config names none (one option for many runs must not override the
plans the runs carry), and ``horizon.source`` says which was used."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["diagnose_forecast"]


def diagnose_forecast(run: Any, fit: Any, *, full: bool = False, horizon: float | None = None) -> dict:
    """``{"still_rising", "computed", "horizon", "expected_final", "steps_to_95", "note"}``."""
    from grpofit.fitting.drift import late_slope

    steps = np.asarray(getattr(fit, "steps", []), dtype=float)
    values = np.asarray(getattr(fit, "values", []), dtype=float)
    out = {
        "still_rising": None,
        "computed": False,
        "horizon": None,
        "expected_final": None,
        "steps_to_95": None,
        "note": None,
    }
    if steps.size >= 2:
        out["still_rising"] = bool(late_slope(steps, values).rising)
    if not full or steps.size == 0:
        return out
    from grpofit.forecasting.engine import forecast_series
    from grpofit.readers.plan import batch_size, planned_last_step

    config = getattr(run, "config", {}) or {}
    step, source = planned_last_step(config)
    if step is None and horizon is not None:
        step, source = float(horizon), "--horizon"
    batch, _ = batch_size(config)
    fc = forecast_series(steps, values, horizon_step=step, horizon_source=source, batch=batch)
    doc = fc.doc
    at = (doc.get("at") or [{}])[0]
    out.update(
        {
            "computed": True,
            "horizon": doc.get("horizon"),
            "expected_final": {"step": at.get("step"), "mean": at.get("mean"), "pi95": at.get("pi95")},
            "steps_to_95": doc.get("steps_to_95"),
            "note": doc.get("note"),
        }
    )
    if doc.get("still_rising") is not None:
        out["still_rising"] = bool(doc["still_rising"])
    return out
