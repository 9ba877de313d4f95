"""``grpofit predict``: closed-form dynamics from hyperparameters, or measured from a run.

Given ``lr, momentum, refresh_interval, curvature`` this is :func:`grpofit.dynamics.predict`.
With ``from_run`` the curvature is measured from the run's fitted oscillator timescale, the
predicted inertia is compared with the fitted one (the falsifiable check), and ``what_if``
hyperparameters give a predicted trajectory.
"""

from __future__ import annotations

from typing import Any

from grpofit.core.errors import UsageError


def _require(*, from_run: str | None = None, **values: Any) -> None:
    missing = ["--" + k.replace("_", "-") for k, v in values.items() if v is None]
    if missing and from_run is not None:
        raise UsageError(
            "missing " + ", ".join(missing) + f" (not in the config of {from_run} either)",
            fix="pass " + ", ".join(missing) + " (flags override the run's config)",
        )
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
    run_pattern: str | None = None,
    prior: Any = None,
) -> tuple[dict, Any]:
    """The ``grpofit.predict/1`` document and, for ``--plot``, ``(WhatIf, observed)`` or None."""
    from grpofit import dynamics

    run = None
    inputs = None
    if from_run is not None:
        run = _one_run(from_run, run_pattern)
        lr, momentum, refresh_interval, group_size, adam, inputs = _from_config(
            run, lr=lr, momentum=momentum, refresh_interval=refresh_interval, group_size=group_size, adam=adam
        )
    _require(from_run=from_run, lr=lr, momentum=momentum, refresh_interval=refresh_interval)
    inputs_note = None
    passed = {"lr_passed": lr, "adam_beta1": momentum if adam else None}  # as the user gave them, for --plot
    if adam:
        lr, momentum = dynamics.heavy_ball_from_adam(lr, momentum)
        inputs_note = f"Adam mapped to heavy ball: mu = beta1 = {momentum:g}, eta_eff = lr (1 - beta1) = {lr:g}"
    changes = {k: v for k, v in (what_if or {}).items() if v is not None}
    if "lr" in changes:  # the figure is titled with the what-if rate, as the user gave it
        passed["lr_passed"] = changes["lr"]
    if adam and "lr" in changes:
        changes["lr"] = changes["lr"] * (1 - momentum)
    if from_run is None:
        _require(curvature=curvature)
        if changes:
            raise UsageError(
                "--what-if-* options need --from-run RUN",
                fix="add --from-run RUN (its fit gives the plateau and start)",
            )
        plateau = None
        if bandit is not None:
            from grpofit.dynamics.bandit import plateau_at_group_size

            plateau = plateau_at_group_size(group_size=0, **bandit)
        doc = dynamics.predict(
            lr,
            momentum,
            refresh_interval,
            curvature,
            group_size=group_size,
            noise=noise,
            plateau=plateau,
            bandit=bandit,
        ).summary()
        if inputs_note:
            doc["notes"].insert(0, inputs_note)
        return doc, None
    if curvature is not None:
        raise UsageError("--curvature and --from-run both give the curvature", fix="pass only one of them")
    fit, observed = _fit_one(run, metric)
    measured = dynamics.from_run(fit, lr, momentum, refresh_interval, group_size=group_size, noise=noise)
    doc = measured.prediction.summary()
    doc["from_run"] = {"run": fit.run, "metric": fit.metric, **measured.summary()}
    doc["input_sources"] = inputs  # where each hyperparameter came from; doc["inputs"] keeps the numbers used
    if inputs_note:
        doc["notes"].insert(0, inputs_note)
    figure = None
    if changes:
        t = observed[0] - observed[0][0]
        import numpy as np

        grid = np.linspace(0.0, max(float(t[-1]), 1.0) * 1.5, 400)
        result = dynamics.what_if(measured, steps=grid, **changes)
        doc["what_if"] = result.summary()
        doc["what_if"]["interval"] = _what_if_interval(
            fit, measured, lr, momentum, refresh_interval, what_if, adam, passed, inputs
        )
        doc["what_if"]["regime"] = doc["what_if"]["interval"].get("regime")
        if prior is not None:
            doc["what_if"]["prior_forecast"] = _prior_what_if(prior, run, observed, what_if)
        if adam:  # the model's rate is Adam's effective one: say so, never call it lr
            ni = doc["what_if"]["new_inputs"]
            ni["lr_eff_adam"] = ni.pop("lr")
            ni["lr_note"] = "Adam-effective rate lr (1 - beta1)"
        figure = (result, (t, observed[1]), passed)
    return doc, figure


def _prior_what_if(prior, run, observed, what_if) -> dict:
    """The what-if run's final level before its first step, from a population prior of finished
    runs (docs/prior.md) at the run's covariates with the what-if settings in place of its own."""
    import numpy as np

    from grpofit.forecasting.prior import FINAL_FRACTION, covariates_of, resolve_prior

    p = resolve_prior(prior)
    cov = covariates_of(run)
    for key, name in (("lr", "lr"), ("momentum", "momentum"), ("refresh_interval", "refresh")):
        if (what_if or {}).get(key) is not None:
            cov[name] = float(what_if[key])
    steps = np.asarray(observed[0], dtype=float)
    span = float(steps[-1] - steps[0])
    window = steps[steps >= steps[-1] - FINAL_FRACTION * span]
    others = [r for r in p.runs if r.run != run.name]
    from grpofit.forecasting.prior import Prior

    p = Prior(others, p.calibration, p.source)
    if len(p.runs) < 2:
        return {"runs": len(p.runs), "note": "a prior needs at least two finished runs other than this one"}
    pf = p.forecast([], [], window, covariates=cov, first_step=float(steps[0]))
    return {
        "final_level": pf.final,
        "plateau": pf.plateau,
        "steps": [float(window[0]), float(window[-1])],
        "runs": len(p.runs),
        "source": p.source,
        "covariates": cov,
        "regressed_on": pf.used,
        "note": (
            "the final level over the base run's last 10% of steps, from the prior's runs"
            + (
                ""
                if pf.used
                else "; regressed on no setting (a regression needs at least 4 runs "
                "that vary it): the population's level, not a function of the what-if settings"
            )
        ),
    }


def _what_if_interval(fit, measured, lr, momentum, refresh_interval, what_if, adam, passed, inputs):
    """:func:`grpofit.dynamics.whatif_interval.what_if_intervals` for this run: the fitted
    timescale's 95% interval, the momentum marked as assumed when the run's config does not name it."""
    from grpofit.dynamics.fromrun import _param
    from grpofit.dynamics.whatif_interval import what_if_intervals

    T, T_ci = _param(fit, "timescale")
    source = ((inputs or {}).get("momentum") or {}).get("source", "")
    assumed = not source.startswith("config")
    raw = {k: v for k, v in (what_if or {}).items() if v is not None}
    return what_if_intervals(
        timescale=T,
        timescale_ci95=T_ci,
        lr=lr,
        momentum=momentum,
        refresh_interval=refresh_interval,
        changes=raw,
        adam=adam,
        lr_raw=None,
        momentum_assumed=assumed,
    )


def _one_run(path: str, pattern: str | None):
    """The one run ``--from-run PATH`` (``FILE::RUN``, ``--run PATTERN``) points at."""
    from grpofit.readers.selection import read_selected, run_label

    runs = read_selected(path, run=pattern)
    if len(runs) != 1:
        names = ", ".join(run_label(r) for r in runs[:5]) + (" ..." if len(runs) > 5 else "")
        raise UsageError(
            f"--from-run needs one run, {path} holds {len(runs)} ({names})",
            fix=f"pick one with {path}::RUN or --run PATTERN",
        )
    return runs[0]


#: predict's inputs and the config quantity (grpofit.readers.config.KEYS) each may come from
_CONFIG_INPUTS = (
    ("lr", "learning_rate", "--lr"),
    ("momentum", "momentum", "--momentum"),
    ("refresh_interval", "refresh", "--refresh-interval"),
    ("group_size", "group_size", "--group-size"),
)


def _from_config(run, **given):
    """Fill the hyperparameters not passed as flags from the run's config (flags win).

    Returns ``(lr, momentum, refresh_interval, group_size, adam, inputs)``; ``inputs`` says
    where each value came from (``--lr``, ``config: learning_rate in FILE``, or missing). A
    momentum read from an Adam key (``adam_beta1``, ``betas``) makes the learning rate an Adam
    one: ``eta_eff = lr (1 - beta1)``, as with ``--adam``.
    """
    from grpofit.readers.config import hyperparameters

    found = hyperparameters(run.config or {})
    where = run.config_source or "the run's config"
    values = dict(given)
    inputs: dict[str, dict] = {}
    for name, quantity, flag in _CONFIG_INPUTS:
        if given.get(name) is not None:
            inputs[name] = {"value": given[name], "source": flag}
        elif quantity in found:
            hit = found[quantity]
            values[name] = hit["value"]
            inputs[name] = {"value": hit["value"], "source": f"config: {hit['key']} in {where}"}
        else:
            inputs[name] = {"value": None, "source": f"not given (no {flag}, not in the config)"}
    adam = bool(given.get("adam"))
    key = (found.get("momentum") or {}).get("key", "")
    if not adam and given.get("momentum") is None and ("adam" in key or "betas" in key):
        adam = True
        inputs["momentum"]["source"] += "; Adam beta1, so the learning rate is Adam's"
    inputs["adam"] = {
        "value": adam,
        "source": "--adam" if given.get("adam") else ("config: Adam betas" if adam else "heavy-ball momentum"),
    }
    return values["lr"], values["momentum"], values["refresh_interval"], values["group_size"], adam, inputs


def _fit_one(run, metric: str | None):
    from grpofit.fitting.analysis import fit_run

    path = run.name
    fit = fit_run(run, metric=metric)
    timescale = fit.param("timescale", "oscillator")
    if timescale is None or timescale.value is None:
        raise UsageError(
            "the run's oscillator fit did not converge, so K cannot be measured",
            path=path,
            fix="check the run with grpofit fit, or pass --curvature",
        )
    if not timescale.identified:  # a curvature from an unidentified timescale would be a guess
        raise UsageError(
            f"the run's oscillator timescale is {timescale.note}, so K cannot be measured from it",
            path=path,
            fix="use a run that rises to a plateau, or pass --curvature",
        )
    return fit, (fit.steps, fit.values)
