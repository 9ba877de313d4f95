"""What-if trajectories: the same run under other hyperparameters, and their plot.

matplotlib is imported by :func:`plot_what_if` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpofit.core.errors import UsageError
from grpofit.dynamics._common import _f
from grpofit.dynamics.coefficients import Prediction, predict
from grpofit.dynamics.curve import oscillator_curve
from grpofit.dynamics.exact import linear_recursion
from grpofit.dynamics.fromrun import RunPrediction

__all__ = ["WhatIf", "what_if", "plot_what_if"]


@dataclass
class WhatIf:
    """Trajectories (arrays for plotting) under the run's and the new hyperparameters."""

    steps: np.ndarray  #: t = 0 .. n-1, steps from the first logged step
    baseline: np.ndarray  #: closed-form oscillator, original hyperparameters
    predicted: np.ndarray  #: closed-form oscillator, new hyperparameters
    predicted_discrete: np.ndarray  #: exact recursion (sawtooth lag) with the new hyperparameters
    base: Prediction
    new: Prediction
    plateau: float
    initial: float

    def summary(self) -> dict[str, Any]:
        return {
            "base": {k: self.base.summary()[k] for k in ("damping_ratio", "regime", "stable", "timescale", "inertia")},
            "new": {k: self.new.summary()[k] for k in ("damping_ratio", "regime", "stable", "timescale", "inertia")},
            "new_inputs": self.new.summary()["inputs"],
            "new_exact_sawtooth": self.new.sawtooth.summary() if self.new.sawtooth else None,
            "plateau": _f(self.plateau),
            "initial": _f(self.initial),
            "n_steps": int(len(self.steps)),
        }


def what_if(
    base: "RunPrediction | Prediction",
    *,
    lr: float | None = None,
    momentum: float | None = None,
    refresh_interval: float | None = None,
    steps: int | np.ndarray | None = None,
    plateau: float | None = None,
    initial: float | None = None,
) -> WhatIf:
    """Predicted trajectory under other hyperparameters: same ``K``, plateau and initial value.

    The oscillator curve (:func:`oscillator_curve`) with the new ``M, C, K_eff`` and, beside it,
    the exact sawtooth recursion (an integer refresh interval is rounded). ``steps``: an array of
    step offsets or a count (default: 6 baseline timescales, at least 50).
    """
    if isinstance(base, RunPrediction):
        plateau = base.plateau if plateau is None else plateau
        initial = base.initial if initial is None else initial
        base = base.prediction
    if plateau is None or initial is None:
        raise UsageError("what-if needs the plateau and the initial value", fix="predict from a fitted run")
    new = predict(
        base.lr if lr is None else lr,
        base.momentum if momentum is None else momentum,
        base.refresh_interval if refresh_interval is None else refresh_interval,
        base.curvature,
        group_size=base.group_size,
        noise=base.noise,
        delta=base.delta,
        curvature_current=base.curvature_current,
        plateau=base.plateau,
    )
    if steps is None:
        tau = base.timescale or 50.0
        steps = max(50, int(math.ceil(6 * (tau + (base.inertia or 0)))))
    t = np.arange(int(steps), dtype=float) if np.isscalar(steps) else np.asarray(steps, dtype=float)
    curve = lambda p: oscillator_curve(t, plateau, initial, p.mass, p.damping, p.stiffness)  # noqa: E731
    n = int(math.ceil(t.max())) + 1 if len(t) else 1
    kref = max(1, int(round(new.refresh_interval)))
    with np.errstate(over="ignore", invalid="ignore"):
        e = linear_recursion(
            new.lr, new.momentum, kref, new.curvature, n, e0=initial - plateau, curvature_current=new.curvature_current
        )
    disc = plateau + np.interp(t, np.arange(n), e)
    return WhatIf(t, curve(base), curve(new), disc, base, new, plateau, initial)


def plot_what_if(
    result: WhatIf,
    ax: Any = None,
    observed: tuple[np.ndarray, np.ndarray] | None = None,
    *,
    lr_passed: float | None = None,
    adam_beta1: float | None = None,
) -> Any:
    """Figure of the baseline and what-if trajectories, drawn on a matplotlib ``Figure``.

    Never touches pyplot state or the backend. ``lr_passed``/``adam_beta1``: the learning rate the
    user gave and, when it was an Adam rate, its beta1; the title then says that the model uses the
    Adam-effective rate ``lr (1 - beta1)``.
    """
    if ax is None:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(7, 4.3))
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    lo, hi = min(result.initial, result.plateau), max(result.initial, result.plateau)
    span = hi - lo or 1.0
    clip = lambda y: np.clip(y, lo - 2 * span, hi + 2 * span)  # noqa: E731
    if observed is not None:
        ax.plot(observed[0], observed[1], ".", ms=2, color="0.6", label="run")
    b, n = result.base, result.new
    lr_name = "lr_eff" if adam_beta1 is not None else "lr"  # the model's heavy-ball rate
    ax.plot(
        result.steps,
        clip(result.baseline),
        color="C0",
        label=f"baseline: {lr_name}={b.lr:g} mu={b.momentum:g} Kref={b.refresh_interval:g} ({b.regime})",
    )
    ax.plot(
        result.steps,
        clip(result.predicted),
        color="C3",
        label=f"what-if: {lr_name}={n.lr:g} mu={n.momentum:g} Kref={n.refresh_interval:g} ({n.regime})",
    )
    ax.plot(
        result.steps, clip(result.predicted_discrete), color="C3", ls=":", label="what-if, exact sawtooth recursion"
    )
    ax.axhline(result.plateau, color="0.5", lw=0.8, ls="--", label=f"plateau {result.plateau:.4g}")
    shown = n.lr if lr_passed is None else lr_passed
    if adam_beta1 is not None:
        lr_text = f"lr {shown:g} (Adam, beta1={adam_beta1:g}; Adam-effective lr {n.lr:g})"
    else:
        lr_text = f"lr {shown:g}"
    ax.set_title(f"What-if trajectory\nat {lr_text}, momentum {n.momentum:g}, K_ref {n.refresh_interval:g}", fontsize=9)
    ax.set_xlabel("steps from first logged step")
    ax.set_ylabel("reward")
    ax.legend(fontsize=7)
    return fig
