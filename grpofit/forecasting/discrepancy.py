"""The laws' own error, added to the predictive draws (the model discrepancy, theory.md §8).

The draws of :mod:`.predictive` carry what the likelihood knows: the parameters, the forcing,
the drift and the observation noise. None of it covers the laws' shape being wrong, and where
the data are nearly noiseless (a deterministic run: the softmax bandit with its exact expected
gradient) the likelihood pins every parameter and the band shrinks to the width of one curve,
while the continuation the laws draw is still wrong by as much as the run moves. Two terms,
both in the fitted coordinates (the logit when the metric is bounded), each one standard
normal per draw, are added to the latent draws:

- **the rolling-origin error** (:func:`add_validation_error`): how far the laws' conditional
  prediction, from origins inside the seen steps, lands from what followed (:mod:`.validate`),
  less the check's own noise, grown as ``sqrt(ahead / distance checked)``;
- **the rate error** (:func:`add_rate_error`): the continuation's rate is uncertain by
  :data:`RATE_ERROR` of the late slope the seen steps vouch for (:func:`vouched_slope`), a
  level error growing linearly with the distance ahead, which slows a draw's move at most to a
  halt (never turns it back). The rolling-origin check cannot supply it: its parameters are
  fitted on the steps it checks, so on a noiseless run it measures a tenth or less of the error
  a forecast makes beyond the cut.
"""

from __future__ import annotations

import math

import numpy as np

from grpofit.fitting.drift import late_slope

__all__ = ["RATE_ERROR", "add_rate_error", "add_validation_error", "tail_noise_var", "vouched_slope"]

#: the share of the vouched late slope by which the continuation's rate is uncertain. Chosen on
#: the tuning grid of benchmarks/forecast_calibration.py (seed 101: 120 runs of its grid and 42 of
#: its outside-the-grid ranges; 0.1, 0.15, 0.2, 0.25 and 0.3 tried): with 0.25 the deterministic
#: runs' pi95 went from 38-75% to 89-100% per stratum and cut; on the runs with sampled groups pi95
#: moved by at most 1 point (pi80 by at most 4) and the median pi95 widths fell by up to 0.11 (a draw
#: already behind the last seen level is only moved forward)
RATE_ERROR = 0.25
#: the slope a rate error is taken from is the late slope less this many of its standard errors
VOUCH_SE = 2.0


def vouched_slope(t: np.ndarray, z: np.ndarray) -> float:
    """The late slope of ``z`` (per step; :func:`~grpofit.fitting.drift.late_slope`, the last
    half, HAC standard error) the seen steps vouch for: its size less :data:`VOUCH_SE` standard
    errors, at least 0, with its sign. A noisy run without a clear trend gets none; a noiseless
    one its slope."""
    d = late_slope(np.asarray(t, dtype=float), np.asarray(z, dtype=float))
    if d.slope is None or d.stderr is None:
        return 0.0
    return math.copysign(max(abs(d.slope) - VOUCH_SE * d.stderr, 0.0), d.slope)


def add_rate_error(draws, slope: float, ahead: np.ndarray, rng) -> None:
    """Add the rate error to ``draws.latent`` (column 0 is the last seen step; ``ahead``: each
    column's distance past it, in steps): ``RATE_ERROR * |slope| * ahead * xi``, ``xi`` standard
    normal, one per draw, in the slope's direction. It changes how fast the run keeps moving, not
    where it heads: a draw is not moved back past the last seen step's level (nor past its own
    value, where it already lies behind that), so a run creeping toward a bound keeps its band
    there instead of one reaching back to the other bound. ``slope``: :func:`vouched_slope`."""
    if slope == 0.0 or not math.isfinite(slope):
        return
    sign = math.copysign(1.0, slope)
    scale = RATE_ERROR * abs(slope) * np.clip(ahead, 0.0, None)
    err = rng.standard_normal((draws.latent.shape[0], 1)) * scale[None, :]
    gain = sign * (draws.latent - draws.latent[:, :1])  # each draw's move in the run's direction
    draws.latent += sign * np.maximum(err, -np.maximum(gain, 0.0))


def tail_noise_var(fits, weights, link, t: np.ndarray) -> float:
    """The observation noise's variance of the mean over the seen part's last tenth (the
    rolling-origin check's target), in the fitted coordinates."""
    n_tail = max(1, int(np.sum(t >= t[-1] - 0.1 * (t[-1] - t[0]))))
    if link.point_var is not None:
        per_point = float(np.median(link.point_var[-n_tail:]))
    else:
        best = fits[int(np.argmax(weights))]
        per_point = float(best.sigma or 0.0) ** 2
    return per_point / n_tail


def add_validation_error(
    draws, validation: dict | None, ahead: np.ndarray, target: float, noise_var: float, rng
) -> None:
    """Add the model's own extrapolation error to the latent draws (in the fitted coordinates):
    the rolling-origin check (:mod:`.validate`) measures, on the seen steps, how far the laws'
    conditional prediction lands from what followed at about the horizon's distance; a
    misspecified shape (a sigmoid rise) is wrong by about that much again. The check's own noise
    (twice ``noise_var``: the target's mean and the prediction conditioned on noisy points) is
    taken out of its squared error; each draw gets ``error * sqrt(ahead / target) * xi`` (``xi``
    standard normal, one per draw: a level error that grows with the distance ahead)."""
    if not validation or target <= 0:
        return
    err = math.sqrt(max(float(validation.get("model_error") or 0.0) ** 2 - 2.0 * noise_var, 0.0))
    if not err > 0:
        return
    scale = np.sqrt(np.clip(ahead, 0.0, None) / target)
    draws.latent += err * rng.standard_normal((draws.latent.shape[0], 1)) * scale[None, :]
