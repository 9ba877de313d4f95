"""What ``grpofit watch`` knows about each run, updated as the run grows; and the alerts.

:class:`Monitor` takes run snapshots (from :class:`~grpofit.watch.follow.Follower`, a replay or
the Trainer callback) and for each:

- runs the early-warning rules of :mod:`grpofit.watch.rules` on every update (cheap, causal);
- re-judges the run with :func:`grpofit.diagnostics.diagnose_run` and refreshes the forecast
  (:func:`forecast_entry`) when it has grown by ``refit_growth`` (default 5%, at least
  ``refit_min`` points) since the last judgement: fitting is the expensive part, so a run that
  logs a step every poll is not refitted every poll. A refresh is warm-started: each law of the
  forecast starts its likelihood search from the parameters the last refit found (one search
  instead of several from generic starts), and a cold refit runs again once the run has grown
  by ``cold_growth`` (50%) since the last cold one.
- turns every mode whose status becomes ``warn`` or ``fail`` into an :class:`Alert`, once per
  ``(run, mode, status)``, remembering the first step at which it fired.

A verdict of ``diagnose`` on a short prefix is not yet a verdict on the run: a run whose reward
is still 0 after ten steps is "dead" to ``diagnose`` and is usually just starting (replays of
the shared real runs show this on three healthy runs). So ``diagnose`` verdicts raise alerts
only from ``min_points`` (30) points on, and a ``fail`` raises a ``warn`` alert at first and
becomes a ``fail`` alert once it still holds after the run has grown by ``confirm_growth``
(20%) and has at least ``min_fail_points`` (100) points: several of ``diagnose``'s rules measure
durations relative to the run's length, so on a short prefix a brief excursion is "sustained"
(the rasbt 7_4 run's importance ratio leaves its range for 4 points at step 16: a fail on the
first 40-80 steps, a warn on the whole run). ``advantage_degeneracy`` (a dead run, degenerate advantages) describes a run that is not
learning *yet*: live it fails only once it has held while the run doubled in length, or past
half the planned steps when the config gives them (the Unsloth run shows degenerate advantages
from step 40 to 80, then takes off). The causal rules of :mod:`grpofit.watch.rules` are built for live data and alert at once.

Events (:meth:`Monitor.update` returns them) are plain dicts, the lines of ``--jsonl``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpofit.core.errors import GrpofitError
from grpofit.core.numbers import finite
from grpofit.core.vocabulary import SCHEMAS, STATUS_RANK

SCHEMA = SCHEMAS["watch"]


def forecast_entry(run: Any, *, metric: str | None = None, horizon: float | None = None) -> dict | None:
    """The run's ``grpofit.forecast/1`` entry from the forecaster (a cold fit), or None when
    this grpofit has none."""
    return forecast_fit(run, metric=metric, horizon=horizon)[0]


def forecast_fit(
    run: Any, *, metric: str | None = None, horizon: float | None = None, warm: dict | None = None
) -> tuple[dict | None, dict | None]:
    """``(entry, thetas)``: the run's ``grpofit.forecast/1`` entry and each fitted law's
    parameters (law -> ``theta``, the next refit's ``warm`` start), or ``(None, None)`` when
    this grpofit has no forecaster. The seam between watch and the forecaster: the only place
    watch calls it."""
    try:
        from grpofit.commands.forecast import ForecastOptions
        from grpofit.commands.forecast import forecast_run as _forecast_run
    except ImportError:
        return None, None
    opts = ForecastOptions(metric=metric, horizon=None if horizon is None else int(round(horizon)))
    entry, fc, _ = _forecast_run(run, opts, warm=warm)
    fits = (getattr(fc, "extra", None) or {}).get("fits") or []
    thetas = {f.law: np.array(f.theta, dtype=float) for f in fits}
    return (entry if isinstance(entry, dict) else None), (thetas or None)


@dataclass
class Alert:
    run: str
    mode: str
    status: str  #: warn | fail
    step: float  #: the last step seen when it first fired
    onset: float | None  #: where the problem starts, when the rule says
    evidence: str
    source: str  #: ``diagnose`` or ``rule:<name>``
    #: what gives the status: ``"check"`` (the mode's own check) and/or rule names (``truncation``,
    #: ``reward_drop``, ...); :func:`grpofit.integrations.trainer.stops` reads it
    causes: tuple[str, ...] = ()

    def event(self) -> dict:
        return {
            "schema": SCHEMA,
            "event": "alert",
            "time": round(time.time(), 3),
            "run": self.run,
            "mode": self.mode,
            "status": self.status,
            "step": _num(self.step),
            "onset": _num(self.onset),
            "evidence": self.evidence,
            "source": self.source,
            "causes": list(self.causes),
        }


def _num(x):
    return finite(x, whole=True)


@dataclass
class RunState:
    name: str
    n: int = 0
    last_step: float | None = None
    reward: float | None = None  #: last logged reward
    level: float | None = None  #: median of the last few rewards
    reward_column: str | None = None
    fitted_n: int = 0
    forecast_n: int = 0
    verdicts: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    causes: dict[str, tuple] = field(default_factory=dict)  #: mode -> what gives its verdict its status
    collapse: dict | None = None  #: the shared judgement's collapse (its summary), None without one
    forecast: dict | None = None
    forecast_note: str | None = "cannot forecast yet: not judged yet"
    first_step: float | None = None
    restarts: int = 0  #: times the run's log was replaced (or rotated) and judged afresh
    warm: dict | None = None  #: law -> theta of the last forecast fit (the next one starts there)
    fit_warm: dict = field(default_factory=dict)  #: the verdicts' curve fit's last optima (fit_run's ``warm``)
    cold_n: int = 0  #: points at the last cold (not warm-started) forecast fit
    forecast_fits: int = 0  #: forecast fits so far (``warm_fits`` of them warm-started)
    warm_fits: int = 0
    alerts: dict[tuple[str, str], Alert] = field(default_factory=dict)
    problem: str | None = None
    #: the option the user passed is at fault (``--metric nope``): a :class:`~grpofit.commands.pipeline.RunError`
    option_error: Any = None
    rule_state: dict = field(default_factory=dict)

    @property
    def status(self) -> str:
        from grpofit.diagnostics.base import worst

        return worst(list(self.verdicts.values()) + [a.status for a in self.alerts.values()])

    def forecast_final(self) -> tuple[float | None, list | None]:
        f = self.forecast or {}
        at = (f.get("at") or [{}])[0]
        return at.get("mean"), at.get("pi95")

    def steps_to_95(self) -> float | None:
        f = self.forecast or {}
        return (f.get("steps_to_95") or {}).get("value")


class Monitor:
    """Per-run state and alerts (module docstring)."""

    def __init__(
        self,
        *,
        metric: str | None = None,
        eval_metric: str | None = None,
        thresholds: Any = None,
        group_size: int | None = None,
        refit_growth: float = 0.05,
        refit_min: int = 5,
        forecast: bool = True,
        horizon: float | None = None,
        rules: bool = True,
        min_points: int = 30,
        min_fail_points: int = 100,
        confirm_growth: float = 0.2,
        warm_start: bool = True,
        cold_growth: float = 0.5,
    ) -> None:
        self.metric = metric
        self.eval_metric = eval_metric
        self.thresholds = thresholds
        self.group_size = group_size
        self.refit_growth = refit_growth
        self.refit_min = refit_min
        self.forecast = forecast
        self.horizon = horizon
        self.rules = rules
        self.min_points = min_points
        self.min_fail_points = min_fail_points
        self.confirm_growth = confirm_growth
        self.warm_start = warm_start
        self.cold_growth = cold_growth
        self.runs: dict[str, RunState] = {}
        self.pending: dict[str, tuple] = {}  #: runs due for a diagnosis (``defer``)
        self.pending_fc: dict[str, tuple] = {}  #: runs due for a forecast (``defer``)
        self.judge_seconds = 0.0
        self.rejudge_spent = 0.0  #: CPU seconds the last :meth:`judge_pending` spent re-judging
        self.catchup_spent = 0.0  #: CPU seconds it spent on first judgements (not rationed)

    # ------------------------------------------------------------------ updating
    def update(
        self, run: Any, *, force_fit: bool = False, defer: bool = False, replaced: bool = False, final: bool = False
    ) -> list[dict]:
        """Take a new snapshot of ``run``; return the events it caused (alerts, forecasts).

        ``defer``: a due re-judgement is queued for :meth:`judge_pending` instead of done now
        (``grpofit watch`` rations them to a CPU budget); the rules still run now. ``replaced``:
        the run's file was replaced or rotated (also assumed when the run has fewer points than
        before or another first step): it is judged afresh, alerts included. ``final``: the
        snapshot is the whole run (``watch --once``, the end of a replay): it is judged now and
        ``diagnose``'s verdicts raise alerts at their own status, as ``diagnose``'s gate takes
        them (no wait for a live fail to be confirmed)."""
        from grpofit.fitting.analysis import resolve_column

        st = self.runs.get(run.name)
        if st is None:
            st = self.runs[run.name] = RunState(run.name)
        events: list[dict] = []
        columns = tuple(run.metrics)
        cached = st.rule_state.get("columns")
        if cached is not None and cached[0] == columns:
            col, st.rule_state["grad_col"] = cached[1], cached[2]
        else:
            try:
                col = resolve_column(run, "reward", self.metric)
            except GrpofitError as e:
                st.problem = e.one_line()
                st.option_error = _option_error(run.name, e)
                st.n = int(run.steps.size)
                return events
            st.option_error = None
            st.rule_state["grad_col"] = _grad_column(run)
            st.rule_state["columns"] = (columns, col, st.rule_state["grad_col"])
        st.problem = None
        st.reward_column = col
        s, v = run.series(col)
        if s.size and st.n and (replaced or s.size < st.n or float(s[0]) != st.first_step):
            # fewer points than before, or another first step: the file was replaced by a new
            # run (or rotated): judge it afresh, its alerts included
            restarts = st.restarts + 1
            self.pending.pop(run.name, None)
            self.pending_fc.pop(run.name, None)
            st = self.runs[run.name] = RunState(run.name, restarts=restarts)
            st.reward_column = col
            st.rule_state["grad_col"] = _grad_column(run)
            st.rule_state["columns"] = (columns, col, st.rule_state["grad_col"])
        st.n = int(s.size)
        if not s.size:
            return events
        st.first_step = float(s[0])
        st.last_step = float(s[-1])
        st.reward = float(v[-1])
        st.level = float(np.median(v[-min(s.size, 9) :]))
        if self.rules and not final:
            # the live rules are causal early warnings for a run in progress; a whole run
            # (``final``) is judged as ``diagnose`` judges it, with its evidence and onset
            for sig in self._rules(run, st, s, v):
                events += self._alert(
                    st,
                    Alert(
                        run.name,
                        sig.mode,
                        sig.status,
                        sig.step,
                        sig.onset,
                        sig.evidence,
                        f"rule:{sig.rule}",
                        (sig.rule,),
                    ),
                )
        force_fit = force_fit or final
        due = (
            force_fit or st.fitted_n == 0 or st.n - st.fitted_n >= max(self.refit_min, self.refit_growth * st.fitted_n)
        )
        if due and st.n >= 10:
            if defer and not force_fit:
                self.pending[run.name] = (run, col)
                if self.forecast:
                    self.pending_fc[run.name] = (run, col)
            else:
                self.pending.pop(run.name, None)
                self.pending_fc.pop(run.name, None)
                events += self._judge(run, st, col, final=final)
        elif defer and self.forecast and run.name in self.pending_fc:
            self.pending_fc[run.name] = (run, col)  # the newest snapshot
        return events

    def forget(self, name: str) -> None:
        """Drop a run that is no longer in its file under this name (its file turned out to hold
        runs appended one after another, and it is followed as ``name::run1`` now)."""
        self.runs.pop(name, None)
        self.pending.pop(name, None)
        self.pending_fc.pop(name, None)

    def judge_pending(self, budget: float, *, catchup: float = 3.0) -> list[dict]:
        """Work through the queued judgements (``defer``).

        First judgements and first forecasts (catching up) may take ``catchup`` seconds per
        call whatever the budget (:attr:`catchup_spent`: their CPU seconds); then re-judgements
        (the most grown first), then re-forecasts, until ``budget`` CPU seconds are spent
        (:attr:`rejudge_spent`).
        """
        events: list[dict] = []
        t0 = time.perf_counter()
        c0 = time.process_time()
        spent = 0.0
        touched: set[str] = set()

        def grown(name, attr):
            st = self.runs[name]
            done = getattr(st, attr)
            return -(st.n - done) / max(done, 1)

        first = [n for n in self.pending if self.runs[n].fitted_n == 0]
        first_fc = [n for n in self.pending_fc if self.runs[n].forecast_n == 0 and n not in first]
        for name in first + first_fc:
            if time.perf_counter() - t0 >= catchup:
                break
            if name in self.pending:
                run, col = self.pending.pop(name)
                events += self._diagnose(run, self.runs[name], col)
            if name in self.pending_fc:
                run, col = self.pending_fc.pop(name)
                self._forecast(run, self.runs[name], col)
            touched.add(name)
        self.catchup_spent = time.process_time() - c0 if first or first_fc else 0.0
        for queue, attr, work in (
            (self.pending, "fitted_n", self._diagnose),
            (self.pending_fc, "forecast_n", self._forecast),
        ):
            for name in sorted(queue, key=lambda n: grown(n, attr)):
                if spent >= budget:
                    break
                run, col = queue.pop(name)
                t1 = time.process_time()
                out = work(run, self.runs[name], col)
                spent += time.process_time() - t1
                events += out or []
                touched.add(name)
        for name in touched:
            events.append(self.forecast_event(self.runs[name]))
        self.judge_seconds += time.perf_counter() - t0
        self.rejudge_spent = spent
        return events

    @property
    def catching_up(self) -> bool:
        """Runs still waiting for their first judgement or first forecast."""
        return any(self.runs[n].fitted_n == 0 for n in self.pending) or any(
            self.runs[n].forecast_n == 0 for n in self.pending_fc
        )

    def _rules(self, run, st: RunState, s, v):
        from grpofit.watch.rules import GradSpike, RewardDrop

        drop = st.rule_state.get("drop")
        if drop is None:
            drop = st.rule_state["drop"] = RewardDrop()
        sig = drop.update(s, v)
        if sig is not None:
            yield sig
        gcol = st.rule_state.get("grad_col")
        if gcol is not None and ("dynamical_instability", "warn") not in st.alerts:
            spike = st.rule_state.get("spike")
            if spike is None:
                spike = st.rule_state["spike"] = GradSpike()
            sig = spike.update(*run.series(gcol))
            if sig is not None:
                yield sig

    def _judge(self, run, st: RunState, col: str, *, final: bool = False) -> list[dict]:
        """Diagnose and (when enabled) forecast now."""
        events = self._diagnose(run, st, col, final=final)
        if self.forecast:
            self._forecast(run, st, col)
        events.append(self.forecast_event(st))
        return events

    def _diagnose(self, run, st: RunState, col: str, *, final: bool = False) -> list[dict]:
        from grpofit.diagnostics import diagnose_run
        from grpofit.diagnostics.base import causes_of

        events: list[dict] = []
        st.fitted_n = st.n
        try:
            d = diagnose_run(
                run,
                metric=col,
                eval_metric=self.eval_metric,
                thresholds=self.thresholds,
                group_size=self.group_size,
                warm=st.fit_warm if self.warm_start else None,
            )
        except GrpofitError as e:
            st.verdicts = {}
            st.evidence = {"fit": e.one_line()}
            st.option_error = _option_error(run.name, e)
            d = None
        else:
            st.option_error = None
        if d is not None:
            st.verdicts = {m: v.status for m, v in d.diagnostics.items()}
            st.evidence = {m: v.evidence for m, v in d.diagnostics.items()}
            st.causes = {m: causes_of(v) for m, v in d.diagnostics.items()}
            st.collapse = d.collapse.summary() if d.collapse is not None else None
            pending = st.rule_state.setdefault("pending_fail", {})
            for mode, verdict in d.diagnostics.items():
                if verdict.status != "fail":
                    pending.pop(mode, None)
                if verdict.status not in ("warn", "fail") or (st.n < self.min_points and not final):
                    continue
                status = verdict.status
                if status == "fail" and not final:
                    first_n = pending.setdefault(mode, st.n)
                    if not self._confirmed(mode, first_n, st, run):
                        status = "warn"  # not confirmed yet
                events += self._alert(
                    st,
                    Alert(
                        run.name,
                        mode,
                        status,
                        st.last_step,
                        verdict.start_step,
                        verdict.evidence,
                        "diagnose",
                        causes_of(verdict),
                    ),
                )
        return events

    def _forecast(self, run, st: RunState, col: str) -> None:
        st.forecast_n = st.n
        # warm: start from the last fit's parameters, except once the run has grown by
        # ``cold_growth`` since the last cold fit (a cold fit searches from every usual start)
        warm = st.warm if (self.warm_start and st.warm and st.n < (1.0 + self.cold_growth) * st.cold_n) else None
        try:
            entry, thetas = forecast_fit(run, metric=col, horizon=self.horizon, warm=warm)
            st.forecast_fits += 1
            if warm is None:
                st.cold_n = st.n
            else:
                st.warm_fits += 1
            st.warm = thetas
        except GrpofitError as e:
            entry, st.forecast_note = None, f"cannot forecast: {e.one_line()}"
        except Exception as e:  # noqa: BLE001 - the forecaster must never stop the watch
            entry, st.forecast_note = None, f"cannot forecast: {type(e).__name__}: {e}"
        else:
            st.forecast_note = None if entry is None else entry.get("note")
            if entry is None:
                st.forecast_note = "cannot forecast yet: this grpofit has no forecaster"
        st.forecast = entry

    def _confirmed(self, mode: str, first_n: int, st: RunState, run) -> bool:
        if st.n < self.min_fail_points:
            return False
        if mode == "advantage_degeneracy":
            plan = planned_steps(getattr(run, "config", {}) or {})
            if plan is not None and st.last_step is not None and st.last_step >= 0.5 * plan:
                return True
            return st.n >= 2 * first_n
        return st.n >= first_n * (1.0 + self.confirm_growth)

    def _alert(self, st: RunState, alert: Alert) -> list[dict]:
        key = (alert.mode, alert.status)
        if key in st.alerts:
            return []
        st.alerts[key] = alert
        return [alert.event()]

    # ------------------------------------------------------------------ views
    def forecast_event(self, st: RunState) -> dict:
        mean, pi95 = st.forecast_final()
        return {
            "schema": SCHEMA,
            "event": "forecast",
            "time": round(time.time(), 3),
            "run": st.name,
            "step": _num(st.last_step),
            "n_points": st.n,
            "reward": st.reward,
            "forecast_final": mean,
            "pi95": pi95,
            "steps_to_95": st.steps_to_95(),
            "note": st.forecast_note if mean is None else (st.forecast or {}).get("note"),
            "verdicts": dict(st.verdicts),
            "collapse": st.collapse,
        }

    def first_alert(self, name: str, status: str = "fail") -> Alert | None:
        """The earliest alert of a run at ``status`` or worse."""
        st = self.runs.get(name)
        if st is None:
            return None
        hits = [a for a in st.alerts.values() if STATUS_RANK[a.status] >= STATUS_RANK[status]]
        return min(hits, key=lambda a: a.step) if hits else None


PLAN_KEYS = (
    "trainer.total_training_steps",
    "total_training_steps",
    "max_steps",
    "trainer_state.max_steps",
    "args.max_steps",
    "training_args.max_steps",
)


def planned_steps(config: dict) -> float | None:
    """The planned last step from a run's config, when it says."""
    for k in PLAN_KEYS:
        v = config.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return float(v)
    return None


def _grad_column(run) -> str | None:
    from grpofit.core.roles import detect_roles

    try:
        col = detect_roles(run.numeric_columns()).get("grad_norm")
    except Exception:  # noqa: BLE001 - a role table without grad_norm
        return None
    return col if col in run.metrics else None


def _option_error(name: str, exc: GrpofitError):
    """The run's error as a :class:`~grpofit.commands.pipeline.RunError` when an option's value caused it."""
    if getattr(exc, "option", None) is None:
        return None
    from grpofit.commands.pipeline import RunError

    return RunError.of(name, exc)
