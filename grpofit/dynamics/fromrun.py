"""From a fitted run: measure the curvature from the timescale, then check the inertia."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from grpofit.core.errors import UsageError
from grpofit.dynamics._common import _f
from grpofit.dynamics.closed import closed_form, measure_curvature
from grpofit.dynamics.coefficients import Prediction, predict

__all__ = ["RunPrediction", "from_run"]


def _param(fit: Any, name: str) -> tuple[float | None, tuple[float, float] | None]:
    """``(value, ci95)`` of a parameter from a FitResult, ModelFit, dict of Estimates or numbers."""
    obj = fit
    if hasattr(obj, "param") and hasattr(obj, "models"):  # FitResult
        est = obj.param(name, "oscillator")
        obj = {} if est is None else {name: est}
    if hasattr(obj, "params"):  # ModelFit
        obj = obj.params
    if isinstance(obj, Mapping) and "params" in obj:  # summary() dict of a model
        obj = obj["params"]
    p = obj.get(name) if isinstance(obj, Mapping) else None
    if p is None:
        return None, None
    if isinstance(p, (int, float)):
        return float(p), None
    if isinstance(p, Mapping):
        val, ci = p.get("value"), p.get("ci95")
    else:
        val, ci = getattr(p, "value", None), getattr(p, "ci95", None)
    ci = tuple(float(v) for v in ci) if ci is not None and None not in tuple(ci) else None
    return (None if val is None else float(val)), ci


@dataclass
class RunPrediction:
    """The falsifiable check: inertia predicted from the fitted timescale vs the fitted inertia."""

    curvature: float
    curvature_ci95: tuple[float, float] | None
    prediction: Prediction
    fitted_timescale: float
    fitted_inertia: float | None
    fitted_inertia_ci95: tuple[float, float] | None
    predicted_inertia: float | None
    predicted_inertia_range: tuple[float, float] | None  #: from the timescale's ci95
    agrees: bool | None  #: predicted inertia inside the fitted 95% interval (None: no interval)
    plateau: float | None
    initial: float | None

    def summary(self) -> dict[str, Any]:
        return {
            "curvature": _f(self.curvature),
            "curvature_ci95": None if self.curvature_ci95 is None else [_f(v) for v in self.curvature_ci95],
            "fitted_timescale": _f(self.fitted_timescale),
            "fitted_inertia": _f(self.fitted_inertia),
            "fitted_inertia_ci95": None
            if self.fitted_inertia_ci95 is None
            else [_f(v) for v in self.fitted_inertia_ci95],
            "predicted_inertia": _f(self.predicted_inertia),
            "predicted_inertia_range": None
            if self.predicted_inertia_range is None
            else [_f(v) for v in self.predicted_inertia_range],
            "agrees": self.agrees,
            "plateau": _f(self.plateau),
            "initial": _f(self.initial),
        }

    def report(self) -> list[tuple[str, str]]:
        s = self.summary()
        return [(k.replace("_", " "), "-" if v is None else str(v)) for k, v in s.items()]


def from_run(
    fit: Any,
    lr: float,
    momentum: float,
    refresh_interval: float,
    delta: float = 1.0,
    group_size: int | None = None,
    noise: float | None = None,
) -> RunPrediction:
    """Measure ``K`` from the fitted timescale, then predict the inertia and compare.

    ``fit``: a ``grpofit.fitting.FitResult`` (its oscillator), a ``ModelFit``, its summary dict,
    or a mapping ``{"timescale": x | Estimate | {"value", "ci95"}, "inertia": ..., ...}``.
    ``K = (1 - mu) / (eta (T/delta + K_ref))``; predicted inertia ``M/C`` with that ``K``. The
    timescale of the prediction equals ``T`` by construction; the inertia is the falsifiable part.
    """
    T, T_ci = _param(fit, "timescale")
    if T is None:
        raise UsageError("the fit has no oscillator timescale", fix="fit the run first (grpofit fit RUN)")
    K = measure_curvature(T, lr, momentum, refresh_interval, delta)
    plateau, _ = _param(fit, "plateau")
    initial, _ = _param(fit, "initial")
    pred = predict(lr, momentum, refresh_interval, K, group_size=group_size, noise=noise, delta=delta, plateau=plateau)
    inertia, inertia_ci = _param(fit, "inertia")
    K_ci = rng = None
    if T_ci is not None and T_ci[0] > 0:
        ks = sorted(measure_curvature(t, lr, momentum, refresh_interval, delta) for t in T_ci)
        K_ci = (ks[0], ks[1])
        vals = [closed_form(lr, momentum, refresh_interval, k, delta).inertia for k in ks]
        if None not in vals:
            rng = (min(vals), max(vals))
    agrees = None
    if inertia_ci is not None and pred.inertia is not None:
        agrees = bool(inertia_ci[0] <= pred.inertia <= inertia_ci[1])
    return RunPrediction(K, K_ci, pred, T, inertia, inertia_ci, pred.inertia, rng, agrees, plateau, initial)
