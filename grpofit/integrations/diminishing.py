"""``stop_on="diminishing"``: stop a run when the gain still expected before its planned end is
below a threshold with the stated probability (the Trainer callback's one use of it).

From the run's draws at the planned end (:func:`grpofit.forecasting.horizon.horizon_draws`, the
same forecast as ``grpofit forecast`` and ``grpofit rank``), the gain is each draw minus the
run's current level (the mean of its last tenth of points). The run is judged diminishing when
``P(gain < min_gain) >= confidence``. No forecast (too few points, no rise yet): never diminishing.
"""

from __future__ import annotations

import numpy as np

__all__ = ["diminishing"]


def diminishing(
    steps, values, horizon: float | None, *, min_gain: float = 0.01, confidence: float = 0.95, seed: int = 0
) -> dict | None:
    """``{"event": "diminishing", "status": "stop", "step", "p", "expected_gain", "message"}`` when
    the run should stop, else None (also when the planned end is unknown or already reached)."""
    from grpofit.forecasting.horizon import horizon_draws

    steps = np.asarray(steps, dtype=float)
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(steps) & np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if horizon is None or not steps.size or steps[-1] >= horizon:
        return None
    res = horizon_draws(steps, values, horizon, seed=seed, lean=True)  # the same draws, fewer extras
    if res.draws is None or res.kind != "forecast":
        return None
    now = float(values[-max(3, values.size // 10) :].mean())
    gain = res.draws - now
    p = float(np.mean(gain < min_gain))
    if p < confidence:
        return None
    left = int(round(horizon - steps[-1]))
    return {
        "event": "diminishing",
        "status": "stop",
        "step": float(steps[-1]),
        "p": p,
        "expected_gain": float(gain.mean()),
        "message": (
            f"diminishing returns: {float(gain.mean()):.3g} of reward still expected in the "
            f"{left} steps before step {int(round(horizon))}; below {min_gain:g} with probability "
            f"{p:.0%} (>= {confidence:.0%}): stopping"
        ),
    }
