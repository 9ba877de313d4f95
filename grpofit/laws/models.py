"""The laws' functions under one import, and :func:`lmfit_model`.

Each law is its own module (:mod:`.exponential`, :mod:`.oscillator`, :mod:`.two_modes`; the
shared pieces in :mod:`.base`) and a row of :data:`grpofit.laws.registry.LAWS`; this module
re-exports their public names for callers that want them from one place
(``grpofit.laws.models.MODELS`` is the registry's dict of the laws ``fit`` fits).

For lmfit users, :func:`lmfit_model` wraps a law as an ``lmfit.Model`` (same function,
bounds as parameter hints, the data-driven guess as ``Model.guess``) for lmfit's reports,
constraints and confidence intervals. grpofit's own fitter uses its numpy Levenberg-Marquardt
(:mod:`grpofit.fitting.lm`, MINPACK's rules) and imports scipy/lmfit only as fallbacks (see
:mod:`grpofit.fitting.solve`); all reach the same optimum.
"""

from __future__ import annotations

import numpy as np

from grpofit.laws.base import (
    LEVEL_MARGIN,
    LEVELS,
    TIME_MARGIN,
    CurveModel,
    StateSpaceForm,
    level_bounds,
    median,
    time_bounds,
)
from grpofit.laws.exponential import (
    EXPONENTIAL,
    exponential,
    exponential_jacobian,
    guess_exponential,
    raw_exponential_jacobian,
)
from grpofit.laws.oscillator import (
    OSCILLATOR,
    damping_ratio,
    guess_oscillator,
    oscillator,
    oscillator_jacobian,
    oscillator_roots,
    raw_oscillator_jacobian,
    raw_relaxation_derivatives,
    raw_relaxation_shape,
    regime_of,
    relaxation,
    relaxation_derivatives,
    relaxation_shape,
)

__all__ = [
    "exponential",
    "exponential_jacobian",
    "raw_exponential_jacobian",
    "guess_exponential",
    "relaxation",
    "relaxation_derivatives",
    "raw_relaxation_derivatives",
    "relaxation_shape",
    "raw_relaxation_shape",
    "oscillator",
    "oscillator_jacobian",
    "raw_oscillator_jacobian",
    "guess_oscillator",
    "damping_ratio",
    "regime_of",
    "oscillator_roots",
    "CurveModel",
    "StateSpaceForm",
    "LEVELS",
    "LEVEL_MARGIN",
    "TIME_MARGIN",
    "level_bounds",
    "time_bounds",
    "EXPONENTIAL",
    "OSCILLATOR",
    "lmfit_model",
    "median",
]


def __getattr__(name: str):
    """``MODELS``: the registry's dict of :mod:`grpofit.laws.registry`, loaded on first use."""
    if name == "MODELS":
        from grpofit.laws.registry import MODELS

        return MODELS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def lmfit_model(name: str, t=None, y=None):
    """The law ``name`` (a row of :data:`grpofit.laws.registry.LAWS`) as an ``lmfit.Model``.

    The independent variable is ``t`` = steps from the first logged step (``step - step[0]``).
    ``Model.guess(data, t=t)`` returns ``Parameters`` set to grpofit's deterministic
    data-driven guess with grpofit's bounds (:func:`level_bounds`, :func:`time_bounds`).
    Parameter hints: ``timescale > 0``, ``inertia >= 0`` and, when ``t`` and ``y`` are given,
    the bounds and guess for that series, so ``make_params()`` is ready to fit::

        model = lmfit_model("oscillator", t, y)
        result = model.fit(y, model.make_params(), t=t)
        print(result.fit_report())

    lmfit is imported here, not at module import (``import grpofit.laws.models`` stays light).
    """
    import lmfit

    from grpofit.laws.registry import LAWS

    spec = {m.name: m for m in LAWS}[name]

    class GrpofitModel(lmfit.Model):
        def guess(self, data, t, **kws):  # noqa: D401 - lmfit's hook
            data = np.asarray(data, dtype=float)
            t = np.asarray(t, dtype=float)
            start, bounds = spec.guess(t, data), spec.bounds(t, data)
            params = self.make_params()
            for key in spec.param_names:
                lo, hi = bounds[key]
                params[self.prefix + key].set(value=float(np.clip(start[key], lo, hi)), min=lo, max=hi)
            return lmfit.models.update_param_vals(params, self.prefix, **kws)

    model = GrpofitModel(spec.func, independent_vars=["t"], name=name)
    model.set_param_hint("timescale", min=0.0, value=1.0)
    if "inertia" in spec.param_names:
        model.set_param_hint("inertia", min=0.0, value=0.0)
    if t is not None and y is not None:
        t = np.asarray(t, dtype=float)
        y = np.asarray(y, dtype=float)
        start, bounds = spec.guess(t, y), spec.bounds(t, y)
        for key in spec.param_names:
            lo, hi = bounds[key]
            model.set_param_hint(key, value=float(np.clip(start[key], lo, hi)), min=lo, max=hi)
    return model
