"""One run end to end: roles, collapse, fit of the part before it, the four checks; the CI gate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

import numpy as np

from grpofit.diagnostics.base import MODES, Context, Verdict, worst
from grpofit.diagnostics.findings import fold
from grpofit.diagnostics.registry import CHECKS, RULES
from grpofit.diagnostics.thresholds import Thresholds

if TYPE_CHECKING:  # names for the annotations only
    from grpofit.core.runs import Run
    from grpofit.diagnostics.groupsize import GroupSize
    from grpofit.fitting.collapse import Collapse
    from grpofit.fitting.results import FitResult, ModelFit


@dataclass
class RunDiagnosis:
    """The diagnosis of one run; ``summary()`` is one entry of the contract's ``runs`` list."""

    name: str
    fit: FitResult | None  #: the fit of the reward before any collapse
    diagnostics: dict[str, Verdict]
    collapse: Collapse | None = None
    group_size: GroupSize | None = None
    roles: dict[str, str | None] = field(default_factory=dict)
    late_variance: float | None = None  #: variance of the fit residuals over the last third of the fitted part
    fluctuation: dict | None = None  #: the policy's late fluctuation (grpofit.diagnostics.groupsize.policy_fluctuation)
    evals: list = field(default_factory=list)  #: one entry per eval series (benchmark), see grpofit.diagnostics.evals
    settings: dict | None = (
        None  #: the run's settings but G (grpofit.diagnostics.groupsize.run_settings), to tell related runs
    )

    @property
    def verdict(self) -> str:
        """Worst status: fail > warn > pass; ``unknown`` only when every mode is unknown."""
        return worst(v.status for v in self.diagnostics.values())

    @property
    def preferred_model(self) -> ModelFit | None:
        pref = getattr(self.fit, "preferred", None)
        return self.fit.models.get(pref) if pref else None

    @property
    def r2(self) -> float | None:
        m = self.preferred_model
        r2 = getattr(m, "r2", None)
        return float(r2) if r2 is not None and np.isfinite(r2) else None

    @property
    def regime(self) -> str | None:
        osc = getattr(self.fit, "models", {}).get("oscillator")
        return getattr(osc, "regime", None)

    def summary(self) -> dict:
        """The contract's entry (computed once: a ``diagnose --jobs`` worker fills it before the
        diagnosis travels back to the parent, which then has nothing left to do per run)."""
        cached = self.__dict__.get("_summary")
        if cached is None:
            cached = self.__dict__["_summary"] = self._summary_doc()
        return cached

    def _summary_doc(self) -> dict:
        from grpofit.core.jsonout import Encoded

        return Encoded.of(
            {
                "run": self.name,
                "fit": self.fit.summary() if self.fit is not None else None,
                "diagnostics": {m: self.diagnostics[m].summary() for m in MODES},
                "verdict": self.verdict,
                "collapse": self.collapse.summary() if self.collapse is not None else None,
                "group_size": self.group_size.summary() if self.group_size is not None else None,
                "roles": self.roles,
                "late_variance": self.late_variance,
                "fluctuation": self.fluctuation,
                **({"evals": self.evals} if self.evals else {}),
            }
        )


def _late_variance(fit: FitResult | None) -> float | None:
    model = getattr(fit, "models", {}).get(getattr(fit, "preferred", None) or "")
    if model is None or not getattr(model, "ok", True):
        return None
    s, v = np.asarray(fit.steps, float), np.asarray(fit.values, float)
    k = s.size // 3
    if k < 5:
        return None
    try:
        resid = v[-k:] - np.asarray(model.predict(s[-k:]), float)
    except Exception:  # a model that cannot predict gives no variance, not a crash
        return None
    var = float(np.var(resid, ddof=1))
    return var if np.isfinite(var) else None


def diagnose_run(
    run: Run,
    *,
    metric: str | None = None,
    eval_metric: str | None = None,
    thresholds: Thresholds | None = None,
    group_size: int | None = None,
    fit_seed: int = 0,
    warm: dict | None = None,
) -> RunDiagnosis:
    """Fit the reward (before any collapse) and judge the four failure modes of ``run``.

    Raises MetricNotFound (no reward column, or ``eval_metric`` absent) and TooFewPoints.
    ``warm``: kept between refits of a growing run, the fit starts from the last one's optimum
    (:func:`grpofit.fitting.analysis.fit_run`).
    """
    from grpofit.core.roles import detect_roles
    from grpofit.diagnostics import evals
    from grpofit.diagnostics.groupsize import group_size_of, policy_fluctuation, run_settings
    from grpofit.fitting.analysis import fit_run, resolve_column

    th = thresholds or Thresholds()
    reward = resolve_column(run, "reward", metric)
    overrides = {"reward": reward}
    columns = run.numeric_columns()
    if evals.is_glob(eval_metric) and eval_metric not in columns:
        eval_cols = evals.eval_columns(columns, eval_metric, exclude=(reward,))
        if not eval_cols:
            from grpofit.core.errors import MetricNotFound
            from grpofit.fitting.analysis import _listing

            raise MetricNotFound(
                f"no column matches --eval-metric {eval_metric!r} in run {run.name}",
                path=run.source,
                columns=columns,
                option=f"--eval-metric {eval_metric!r}",
                fix="pass a glob or a column among the numeric columns: " + _listing(columns),
            )
        overrides["eval_reward"] = eval_cols[0]
    elif eval_metric is not None:
        overrides["eval_reward"] = resolve_column(run, "eval_reward", eval_metric)
        eval_cols = [overrides["eval_reward"]]
    else:
        eval_cols = evals.eval_columns(columns, exclude=(reward,))
    roles = detect_roles(columns, overrides)
    if roles.get("eval_reward") and roles["eval_reward"] not in eval_cols:
        eval_cols.insert(0, roles["eval_reward"])
    fit = fit_run(
        run,
        metric=reward,
        seed=fit_seed,
        collapse_options={"min_drop": th.collapse_min_drop, "noise_k": th.collapse_noise_k},
        warm=warm,
    )
    collapse, steps, values = fit.collapse, fit.column_steps, fit.column_values
    gs = group_size_of(run, group_size)
    ctx = Context(
        run=run,
        roles=roles,
        reward_column=reward,
        steps=steps,
        values=values,
        collapse=collapse,
        fit=fit,
        group_size=gs.value,
        th=th,
        eval_columns=tuple(eval_cols),
    )
    base = {mode: CHECKS[mode](ctx) for mode in MODES}
    base["train_eval_decoupling"], eval_entries = evals.judge(ctx, base["train_eval_decoupling"])
    findings = {mode: [f for rule in RULES[mode] for f in rule(ctx)] for mode in MODES}
    if base["train_eval_decoupling"].status == "unknown":  # an eval too sparse to judge is no eval set
        for f in findings["train_eval_decoupling"]:
            f.gates = True
    diagnostics = {mode: fold(base[mode], findings[mode]) for mode in MODES}
    return RunDiagnosis(
        name=run.name,
        fit=fit,
        diagnostics=diagnostics,
        collapse=collapse,
        group_size=gs,
        roles=roles,
        late_variance=_late_variance(fit),
        evals=eval_entries,
        fluctuation=policy_fluctuation(run, fit),
        settings=run_settings(run),
    )


def gate(diagnoses: Iterable[RunDiagnosis], *, fail_on: Iterable[str] = MODES, min_r2: float | None = None) -> dict:
    """``{"passed", "failed_runs"}``: a run fails when a ``fail_on`` mode fails or its R2 < ``min_r2``.

    A run without an R2 (no usable fit) fails a ``min_r2`` gate.
    """
    from grpofit.core.vocabulary import parse_modes

    fail_on = parse_modes(tuple(fail_on)) or ()
    failed = []
    for d in diagnoses:
        bad = any(d.diagnostics[m].status == "fail" for m in fail_on if m in d.diagnostics)
        if min_r2 is not None and (d.r2 is None or d.r2 < min_r2):
            bad = True
        if bad:
            failed.append(d.name)
    return {"passed": not failed, "failed_runs": failed}
