"""Forecasting a run in progress: state-space likelihood, predictive draws, backtests.

Modules, one concept each: :mod:`.statespace` (the laws as forced linear systems: mean and
process covariance), :mod:`.kalman` (the same likelihood by a Kalman filter, the reference the
tests compare with), :mod:`.likelihood` (exact Gaussian likelihood, its maximum and Laplace
uncertainty), :mod:`.predictive` (joint draws of the future), :mod:`.drift` (is the run still
rising?), :mod:`.engine` (:func:`forecast_series`), :mod:`.plan` (planned last step and batch
size from a run's config), :mod:`.backtest` (forecasts from cut points against what happened).
"""
