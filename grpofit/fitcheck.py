"""Does the fitted plateau agree with where the data already is?

A plateau is an extrapolation. When the run's last steps already sit beyond it (above it for a
rising reward, below it for a falling one) the fit misses the late data: the table marks p*
with ``!`` and the evidence says by how much, so a misfit is never a quiet pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def late_level_check(fit: Any, *, fraction: float = 0.25, minimum: int = 10, z: float = 3.0,
                     share_min: float = 0.75, gain_share: float = 0.05) -> dict | None:
    """``{"late_mean", "late_steps", "n", "plateau", "difference", "share_beyond", "disagrees",
    "note"}`` for a fit result (its fitted ``steps``/``values`` and preferred model), or None.

    The late window is the last ``fraction`` of the points (at least ``minimum``). The plateau
    disagrees when the late mean lies beyond it in the direction of travel by more than ``z``
    standard errors (the sd of the late points, doubled for autocorrelation, over sqrt(n)) and
    by at least ``gain_share`` of the fitted gain ``|p* - p0|``, and at least ``share_min`` of the
    late points (a 5-point rolling median) are beyond it too.
    """
    model = getattr(fit, "models", {}).get(getattr(fit, "preferred", None) or "")
    if model is None or not getattr(model, "ok", True):
        return None
    plateau = getattr(model.params.get("plateau"), "value", None)
    initial = getattr(model.params.get("initial"), "value", None)
    steps = np.asarray(getattr(fit, "steps", []), float)
    values = np.asarray(getattr(fit, "values", []), float)
    if plateau is None or initial is None or not np.isfinite(plateau) or values.size < 2 * minimum:
        return None
    n = max(minimum, int(round(fraction * values.size)))
    late = values[-n:]
    mean = float(late.mean())
    sign = 1.0 if plateau >= initial else -1.0  # direction of travel
    k = 5
    med = np.array([np.median(late[max(0, i - k // 2): i + k // 2 + 1]) for i in range(late.size)])
    share = float(np.mean(sign * (med - plateau) > 0))
    se = 2.0 * float(late.std(ddof=1)) / np.sqrt(late.size)
    diff = mean - float(plateau)
    gain = abs(float(plateau) - float(initial))
    disagrees = bool(sign * diff > max(z * se, gain_share * gain, 1e-12) and share >= share_min)
    lo, hi = float(steps[-n]), float(steps[-1])
    note = None
    if disagrees:
        where = "above" if sign > 0 else "below"
        note = (f"p* {plateau:.3g} misses the late data: steps {lo:g}-{hi:g} ({n} points) average {mean:.3g}, "
                f"{share:.0%} of them {where} p*")
    return {"late_mean": mean, "late_steps": [lo, hi], "n": n, "plateau": float(plateau), "difference": diff,
            "share_beyond": share, "disagrees": disagrees, "note": note}


def with_fit_check(summary: dict, fit: Any) -> dict:
    """``summary`` (a fit's contract dict) with its ``fit_check`` added (JSON-safe)."""
    from grpofit.jsonout import jsonable

    summary["fit_check"] = jsonable(late_level_check(fit))
    return summary
