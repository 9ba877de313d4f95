"""Forecasting a run in progress: state-space likelihood, predictive draws, backtests.

Modules, one concept each: :mod:`.statespace` (the laws as forced linear systems: mean and
process covariance), :mod:`.kalman` (the same likelihood by a Kalman filter, the reference the
tests compare with), :mod:`.likelihood` (exact Gaussian likelihood, its maximum and Laplace
uncertainty), :mod:`.predictive` (joint draws of the future), :mod:`.drift` (is the run still
rising?), :mod:`.engine` (:func:`forecast_series`), :mod:`.plan` (planned last step and batch
size from a run's config), :mod:`.backtest` (forecasts from cut points against what happened).
"""


def forecast_run(run, *, metric=None, horizon=None, at=(), until=None, batch_size=None) -> dict:
    """One run's ``grpofit.forecast/1`` entry, as ``grpofit forecast`` prints it (the seam
    ``grpofit watch`` calls). See :mod:`.command` for the options."""
    from grpofit.forecasting.command import ForecastOptions
    from grpofit.forecasting.command import forecast_run as _forecast_run

    entry, _, _ = _forecast_run(run, ForecastOptions(metric=metric, horizon=horizon, at=list(at), until=until,
                                                     batch_size=batch_size))
    return entry
