"""``grpofit predict``: closed-form dynamics from hyperparameters, or measured from a run.

Given ``lr, momentum, refresh_interval, curvature`` this is :func:`grpofit.dynamics.predict`.
With ``from_run`` the curvature is measured from the run's fitted oscillator timescale, the
predicted inertia is compared with the fitted one (the falsifiable check), and ``what_if``
hyperparameters give a predicted trajectory.
"""

from __future__ import annotations

from typing import Any

from grpofit.errors import UsageError


def _require(**values: Any) -> None:
    missing = ["--" + k.replace("_", "-") for k, v in values.items() if v is None]
    if missing:
        raise UsageError(
            "missing " + ", ".join(missing),
            fix="pass --lr, --momentum, --refresh-interval and --curvature, or --from-run RUN with --lr, --momentum, --refresh-interval",
        )


def run_predict(
    *,
    lr: float | None,
    momentum: float | None,
    refresh_interval: float | None,
    curvature: float | None,
    group_size: int | None = None,
    noise: float | None = None,
    adam: bool = False,
    from_run: str | None = None,
    metric: str | None = None,
    what_if: dict[str, float | None] | None = None,
    bandit: dict[str, float] | None = None,
) -> tuple[dict, Any]:
    """The ``grpofit.predict/1`` document and, for ``--plot``, ``(WhatIf, observed)`` or None."""
    from grpofit import dynamics

    _require(lr=lr, momentum=momentum, refresh_interval=refresh_interval)
    inputs_note = None
    if adam:
        lr, momentum = dynamics.heavy_ball_from_adam(lr, momentum)
        inputs_note = f"Adam mapped to heavy ball: mu = beta1 = {momentum:g}, eta_eff = lr (1 - beta1) = {lr:g}"
    changes = {k: v for k, v in (what_if or {}).items() if v is not None}
    if adam and "lr" in changes:
        changes["lr"] = changes["lr"] * (1 - momentum)
    if from_run is None:
        _require(curvature=curvature)
        if changes:
            raise UsageError("--what-if-* options need --from-run RUN", fix="add --from-run RUN (its fit gives the plateau and start)")
        plateau = None
        if bandit is not None:
            from grpofit.dynamics.bandit import plateau_at_group_size

            plateau = plateau_at_group_size(group_size=0, **bandit)
        doc = dynamics.predict(
            lr, momentum, refresh_interval, curvature, group_size=group_size, noise=noise, plateau=plateau, bandit=bandit
        ).summary()
        if inputs_note:
            doc["notes"].insert(0, inputs_note)
        return doc, None
    if curvature is not None:
        raise UsageError("--curvature and --from-run both give the curvature", fix="pass only one of them")
    fit, observed = _fit_one(from_run, metric)
    measured = dynamics.from_run(fit, lr, momentum, refresh_interval, group_size=group_size, noise=noise)
    doc = measured.prediction.summary()
    doc["from_run"] = {"run": fit.run, "metric": fit.metric, **measured.summary()}
    if inputs_note:
        doc["notes"].insert(0, inputs_note)
    figure = None
    if changes:
        t = observed[0] - observed[0][0]
        import numpy as np

        grid = np.linspace(0.0, max(float(t[-1]), 1.0) * 1.5, 400)
        result = dynamics.what_if(measured, steps=grid, **changes)
        doc["what_if"] = result.summary()
        figure = (result, (t, observed[1]))
    return doc, figure


def _fit_one(path: str, metric: str | None):
    from grpofit.analysis import fit_run
    from grpofit.readers import read_path

    runs = read_path(path)
    if len(runs) != 1:
        names = ", ".join(r.name for r in runs[:5])
        raise UsageError(
            f"--from-run needs one run, {path} holds {len(runs)} ({names})",
            path=path,
            fix="point --from-run at a single run's file or folder",
        )
    fit = fit_run(runs[0], metric=metric)
    osc = fit.models.get("oscillator")
    if osc is None or not osc.ok or osc.params["timescale"].value is None:
        raise UsageError(
            "the run's oscillator fit did not converge, so K cannot be measured",
            path=path,
            fix="check the run with grpofit fit, or pass --curvature",
        )
    return fit, (fit.steps, fit.values)
