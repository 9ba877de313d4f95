"""Forecasting a run in progress: state-space likelihood, predictive draws, backtests.

Modules, one concept each: :mod:`.statespace` (the laws as forced linear systems: mean and
process covariance), :mod:`.kalman` (the same likelihood by a Kalman filter, the reference the
tests compare with), :mod:`.likelihood` (exact Gaussian likelihood, its maximum and Laplace
uncertainty), :mod:`.predictive` (joint draws of the future), :mod:`.engine` (:func:`forecast_series`),
:mod:`.brief` (the still-rising flag and short forecast ``diagnose`` shows), :mod:`.walk` (level
drift the laws cannot see), :mod:`.validate` (rolling-origin validation). No I/O and no rendering:
the command (:mod:`grpofit.commands.forecast`) reads runs, the modules of ``grpofit/render/`` draw them.
"""
