"""Dynamics from optimizer hyperparameters: the closed form and the exact discrete answer.

The reduced-order model (docs/theory.md §2) expands the linear recursion

    e_{n+1} - e_n = mu (e_n - e_{n-1}) - eta K e_{n-L}                                   (R)

(heavy-ball momentum ``mu``, learning rate ``eta``, curvature ``K``, lag ``L``) to second order in
the step ``delta`` with ``L = K_ref``:

    M     = (delta^2 / 2) (1 + mu + eta K K_ref^2)
    C     = delta (1 - mu - eta K K_ref)
    K_eff = eta K

This package reports that closed form (:func:`closed_form`, :func:`predict`) *and* the exact
answer for (R) under two lag models (:func:`exact_fixed_delay`, :func:`exact_sawtooth`):

- ``fixed``: a constant delay ``L = K_ref`` (the closed form's lag); the spectral radius of the
  companion matrix of (R). Instability starts near ``L ~ (pi/2)(1 - mu)/(eta K)``.
- ``sawtooth``: the gradient is frozen at the last refresh, so the lag cycles ``0 .. K_ref-1``
  (what a trainer that regenerates every ``K_ref`` steps does); the monodromy matrix over one
  refresh period. Instability starts near ``K_ref ~ 2 (1 - mu)/(eta K)``.

Both exact models accept an *unlagged* part of the curvature (``curvature_current``): the force
``-eta (K_lag e_{n-lag} + K_now e_n)`` with ``K_lag + K_now = K``. In GRPO the KL pull is computed
on the current policy while the reward signal comes from stale samples, so part of ``K`` does not
wait for the refresh. The default ``0`` is the paper's picture (all of ``K`` lagged).

Adam: EMA momentum ``m <- beta1 m + (1 - beta1) g`` is heavy-ball with ``mu = beta1`` and
``eta_eff = eta (1 - beta1)`` (:func:`heavy_ball_from_adam`); preconditioning is not modelled.

Modules, one concept each:

- :mod:`~grpofit.dynamics.closed`: the closed form, critical values, Adam mapping,
  :func:`measure_curvature`, :func:`stationary_variance`;
- :mod:`~grpofit.dynamics.exact`: the exact recursions (companion and monodromy matrices,
  spectral radii, :func:`critical_refresh_interval`, :func:`linear_recursion`);
- :mod:`~grpofit.dynamics.coefficients`: :class:`Prediction` and :func:`predict` (with the
  finite-group-size section);
- :mod:`~grpofit.dynamics.curve`: :func:`oscillator_curve` (through :func:`grpofit.laws.models.oscillator`
  for stable coefficients);
- :mod:`~grpofit.dynamics.fromrun`: :class:`RunPrediction` and :func:`from_run`;
- :mod:`~grpofit.dynamics.whatif`: :class:`WhatIf`, :func:`what_if`, :func:`plot_what_if`.

Only numpy is imported at package import; matplotlib is imported by :func:`plot_what_if`.
"""

from __future__ import annotations

from grpofit.dynamics.closed import (
    ClosedForm,
    closed_form,
    heavy_ball_from_adam,
    measure_curvature,
    stationary_variance,
)
from grpofit.dynamics.coefficients import Prediction, predict
from grpofit.dynamics.curve import oscillator_curve
from grpofit.dynamics.exact import (
    ExactStability,
    critical_refresh_interval,
    exact_fixed_delay,
    exact_sawtooth,
    linear_recursion,
)
from grpofit.dynamics.fromrun import RunPrediction, from_run
from grpofit.dynamics.whatif import WhatIf, plot_what_if, what_if

__all__ = [
    "ClosedForm",
    "ExactStability",
    "Prediction",
    "RunPrediction",
    "WhatIf",
    "closed_form",
    "predict",
    "exact_fixed_delay",
    "exact_sawtooth",
    "critical_refresh_interval",
    "measure_curvature",
    "heavy_ball_from_adam",
    "from_run",
    "what_if",
    "oscillator_curve",
    "linear_recursion",
    "plot_what_if",
    "stationary_variance",
]
