"""Shared helpers of :mod:`grpofit.dynamics`: JSON-safe floats and input validation."""

from __future__ import annotations

import math

from grpofit.core.errors import UsageError
from grpofit.core.numbers import finite

#: JSON-safe float: NaN/inf -> None (the dynamics modules' short name for it)
_f = finite


def _check(lr: float, momentum: float, refresh_interval: float, curvature: float | None = None) -> None:
    if not (lr > 0 and math.isfinite(lr)):
        raise UsageError(f"learning rate must be positive, got {lr}", fix="pass --lr ETA with ETA > 0")
    if not (0 <= momentum < 1):
        raise UsageError(f"momentum must be in [0, 1), got {momentum}", fix="pass --momentum MU with 0 <= MU < 1")
    if not (refresh_interval >= 1 and math.isfinite(refresh_interval)):
        raise UsageError(
            f"refresh interval must be >= 1, got {refresh_interval}",
            fix="pass --refresh-interval 1 for on-policy training (refresh every step)",
        )
    if curvature is not None and not (curvature > 0 and math.isfinite(curvature)):
        raise UsageError(
            f"curvature must be positive, got {curvature}",
            fix="pass --curvature K > 0, or --from-run RUN to measure it",
        )
