"""The result objects of a fit: :class:`Estimate`, :class:`ModelFit`, :class:`FitResult`.

They render (``summary()`` -> JSON-safe dict, NaN and infinity as ``None``) and never print.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from grpofit.core.numbers import finite
from grpofit.laws.registry import MODELS

if TYPE_CHECKING:
    from grpofit.fitting.collapse import Collapse

__all__ = ["Estimate", "ModelFit", "FitResult", "num"]


num = finite  #: the JSON-safe float (:func:`grpofit.core.numbers.finite`), under its old name


def _step(x) -> int | float | None:
    v = num(x)
    if v is not None and v.is_integer():
        return int(v)
    return v


@dataclass
class Estimate:
    """A parameter value with its standard error and 95% interval (``None`` + ``note`` why)."""

    value: float | None
    stderr: float | None = None
    ci95: tuple[float | None, float | None] | None = None
    note: str | None = None
    #: the least-squares interval before the forcing's widening (inertia, damping ratio of an
    #: underdamped fit, or of an overdamped one widened on one side:
    #: :func:`grpofit.fitting.statespace_ci._widen_shape`), or None
    ci95_ls: tuple[float | None, float | None] | None = None

    def __post_init__(self):
        self.value = num(self.value)
        self.stderr = num(self.stderr)
        if self.ci95 is not None:
            self.ci95 = (num(self.ci95[0]), num(self.ci95[1]))

    @property
    def identified(self) -> bool:
        """Whether the data identified this value: it is known and not marked "not identifiable"."""
        return self.value is not None and not str(self.note or "").startswith("not identifiable")

    def summary(self) -> dict:
        """``{"value", "stderr", "ci95"}`` (+ ``"note"`` when there is one); JSON-safe.

        ``ci95`` is ``[lo, hi]``; an end is ``None`` when it is unbounded (a damping ratio with
        inertia consistent with 0 has no upper end)."""
        ci = None
        if self.ci95 is not None:
            lo, hi = num(self.ci95[0]), num(self.ci95[1])
            ci = None if lo is None and hi is None else [lo, hi]
        out = {"value": num(self.value), "stderr": num(self.stderr), "ci95": ci}
        if self.note:
            out["note"] = self.note
        if self.ci95_ls is not None:
            out["ci95_ls"] = [num(self.ci95_ls[0]), num(self.ci95_ls[1])]
        return out


@dataclass
class ModelFit:
    """One model fitted to one series."""

    model: str
    r2: float | None
    aic: float | None
    bic: float | None
    params: dict[str, Estimate]
    regime: str | None = None
    regime_reason: str | None = None
    ok: bool = True
    message: str = ""
    step0: float = 0.0  #: the step that is ``t = 0``
    ssr: float | None = None
    n_points: int = 0
    #: oscillator: the overshoot seen in the data (:mod:`grpofit.fitting.overshoot`), beside the damping ratio
    observed_overshoot: dict | None = None

    def values(self) -> dict[str, float | None]:
        return {k: e.value for k, e in self.params.items()}

    def predict(self, steps) -> np.ndarray:
        """The fitted curve at absolute run steps (NaN when the fit failed)."""
        steps = np.asarray(steps, dtype=float)
        model = MODELS[self.model]
        vals = self.values()
        if not self.ok or any(vals.get(k) is None for k in model.param_names):
            return np.full(steps.shape, np.nan)
        return model(steps - self.step0, vals)

    def summary(self) -> dict:
        """``{"r2", "aic", "bic", "params"}`` (+ ``"regime"`` for a law that reports one, the
        oscillator), JSON-safe."""
        out: dict[str, Any] = {
            "r2": num(self.r2),
            "aic": num(self.aic),
            "bic": num(self.bic),
            "params": {k: e.summary() for k, e in self.params.items()},
        }
        spec = MODELS.get(self.model)
        if spec is not None and spec.reports_regime:
            out["regime"] = self.regime or "indeterminate"
            if self.regime_reason:
                out["regime_reason"] = self.regime_reason
            if self.observed_overshoot is not None:
                out["observed_overshoot"] = self.observed_overshoot
        if not self.ok:
            out["ok"] = False
            out["message"] = self.message
        return out


@dataclass
class FitResult:
    """Both models fitted to one series of one run.

    ``signal`` says whether the series shows a significant rise or fall at all (see
    :func:`grpofit.fitting.regime.signal_test`); without one, the dynamics are not identifiable.
    """

    run: str
    metric: str
    step_column: str
    steps: np.ndarray
    values: np.ndarray
    n_points: int
    models: dict[str, ModelFit]
    preferred: str | None
    noise: dict[str, float | None] = field(default_factory=dict)
    preferred_reason: str = ""
    signal: dict[str, Any] = field(default_factory=dict)
    role: str = "reward"  #: ``reward``, or ``eval_reward`` when only a validation reward was logged
    metric_note: str | None = None  #: why this column was fitted (several candidates, validation only)
    #: the collapse the series was cut at (:func:`grpofit.fitting.analysis.fit_run`); the fit covers the part before it
    collapse: "Collapse | None" = None
    #: the whole series of the fitted column, collapse included (``steps``/``values`` stop at the cut)
    column_steps: np.ndarray | None = None
    column_values: np.ndarray | None = None
    #: values of the column excluded as far outside the run's own range (:mod:`grpofit.fitting.outliers`)
    outliers: Any = None

    def param(self, name: str, model: str | None = None) -> Estimate | None:
        """The :class:`Estimate` of ``name`` (``.value``, ``.stderr``, ``.ci95``, ``.identified``)
        in ``model``, the preferred law unless given; None when that law was not fitted, its fit
        failed, or it has no such parameter."""
        fit = self.models.get(model or self.preferred or "")
        if fit is None or not fit.ok:
            return None
        return fit.params.get(name)

    def summary(self) -> dict:
        """One entry of the contract's ``fit`` runs list (additive keys: ``noise``,
        ``preferred_reason``, ``signal``, ``collapse``); ``diagnose`` nests the same object as
        its ``fit``. :func:`grpofit.fitting.analysis.fit_summary` adds the fit check."""
        first, last = (self.steps[0], self.steps[-1]) if self.steps.size else (None, None)
        out = {
            "run": self.run,
            "metric": self.metric,
            "step_column": self.step_column,
            "n_points": int(self.n_points),
            "steps": [_step(first), _step(last)],
            "models": {k: m.summary() for k, m in self.models.items()},
            "preferred": self.preferred,
            "preferred_reason": self.preferred_reason,
            "noise": {k: num(v) for k, v in self.noise.items()},
        }
        if self.signal:
            out["signal"] = {k: (num(v) if isinstance(v, float) else v) for k, v in self.signal.items()}
        if self.role != "reward":
            out["role"] = self.role
        if self.metric_note:
            out["metric_note"] = self.metric_note
        out["collapse"] = self.collapse.summary() if self.collapse is not None else None
        if self.outliers is not None:
            out["outliers"] = self.outliers.summary()
        return out
