"""``GrpofitCallback``: fit, forecast and judge a Hugging Face ``Trainer`` run while it trains.

    from grpofit.integrations import GrpofitCallback

    trainer = GRPOTrainer(...)
    GrpofitCallback(every=10).attach(trainer)   # registers it once, first in the handler

(``callbacks=[GrpofitCallback(...)]`` works too; ``attach`` on a callback already registered
only moves it to the front, never registers it twice.)

On each log event (``on_log``) the callback adds the logged numbers to its copy of the run;
every ``every`` steps it hands a snapshot of the run to a background thread, which judges it with
:class:`grpofit.watch.monitor.Monitor` (the same verdicts, early-warning rules and forecast as
``grpofit watch`` and ``grpofit diagnose``). The training thread never waits for a judgement: it
pays for the snapshot (a copy of the logged numbers) and reads the results of the last finished
judgement at the next log event. There the callback

- logs every new alert through the Trainer's logger (``transformers.trainer``), and writes
  ``grpofit/forecast_final`` (expected reward at ``state.max_steps``), ``grpofit/steps_to_95``
  (when the forecaster gives numbers: never a made-up value) and ``grpofit/alerts`` into the logs
  dict and the last ``state.log_history`` row;
- with ``stop_on`` (default None: never stop) set to ``"fail"`` (or ``"warn"``), stops training
  (``control.should_training_stop``) when the run is broken (:func:`stops`: a truncation or
  length-cap finding never stops a run; a collapse, a dead run or a blow-up does), prints a
  banner with the evidence and the last good step, and keeps the alert in
  :attr:`GrpofitCallback.stopped_by`.

Ordering. The Trainer calls its reporting callbacks (W&B, TensorBoard, ...) before the callbacks
you pass, all with the same logs dict; for the ``grpofit/*`` numbers of a log event to reach
them, the callback must run first: :meth:`GrpofitCallback.attach` puts it at the front.

``transformers`` is an optional extra: without it the class still works on any objects with the
Trainer's interface (``state.global_step``, ``state.max_steps``, ``control.should_training_stop``).
"""

from __future__ import annotations

import logging
import math
import queue
import threading
from typing import Any

import numpy as np

from grpofit.core.vocabulary import STATUS_RANK

try:  # the real base class when transformers is installed (its handler calls every event)
    from transformers import TrainerCallback as _Base
except Exception:  # noqa: BLE001 - transformers is an optional extra (and may fail to import)

    class _Base:  # type: ignore[no-redef]
        """The Trainer's callback interface: every event is a no-op."""

        def __getattr__(self, name: str):
            if name.startswith("on_"):
                return lambda *a, **k: None
            raise AttributeError(name)


#: findings that say the responses run into the length cap: worth an alert, never a reason to
#: stop a run (a short ``max_completion_length`` truncates by design)
NOT_BROKEN = frozenset({"truncation", "length_cap"})


def stops(status: str, causes, stop_on: str | None) -> bool:
    """Does a verdict (or alert) at ``status`` whose status comes from ``causes`` (``"check"``,
    rule names) stop a run under ``stop_on``? Only when it reaches ``stop_on`` and at least one
    cause means the run is broken (not only truncated responses)."""
    if stop_on is None or STATUS_RANK.get(status, 0) < STATUS_RANK[stop_on]:
        return False
    causes = tuple(causes) or ("check",)
    return any(c not in NOT_BROKEN for c in causes)


def trainer_logger() -> logging.Logger:
    """The Trainer's logger (its verbosity and handlers), or ``grpofit``'s without transformers."""
    try:
        from transformers.utils import logging as hf_logging

        return hf_logging.get_logger("transformers.trainer")
    except Exception:  # noqa: BLE001 - transformers is optional
        return logging.getLogger("grpofit")


def _number(v) -> float | None:
    """A logged value as a float; None for text, flags and values no float holds (``10**400``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.number)):
        return None
    try:
        x = float(v)
    except (OverflowError, ValueError, TypeError):
        return math.nan  # a number, but none a float holds: missing at this step
    return x


class GrpofitCallback(_Base):
    """Live fit, forecast, verdicts and alerts for a Trainer run (module docstring)."""

    def __init__(
        self,
        every: int = 10,
        stop_on: str | None = None,
        *,
        metric: str | None = None,
        forecast: bool = True,
        name: str = "trainer",
        group_size: int | None = None,
        background: bool = True,
        logger: logging.Logger | None = None,
        min_gain: float = 0.01,
        confidence: float = 0.95,
    ) -> None:
        if not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"every={every!r}: a positive number of steps")
        if stop_on not in (None, "fail", "warn", "diminishing"):
            raise ValueError(f"stop_on={stop_on!r}: use 'fail', 'warn', 'diminishing' or None")
        self.min_gain, self.confidence = min_gain, confidence  #: stop_on="diminishing" (:meth:`_diminishing`)
        from grpofit.watch.monitor import Monitor

        self.every = every
        self.stop_on = stop_on
        self.metric = metric
        self.name = name
        self.group_size = group_size
        self.background = background
        self.logger = logger
        self.monitor = Monitor(metric=metric, forecast=forecast, group_size=group_size, refit_min=1)
        self.rows: dict[str, list[float]] = {"step": []}
        self.events: list[dict] = []  #: every alert and forecast event so far
        self.stopped_by: dict | None = None
        self._last_update: float | None = None
        self._horizon: float | None = None
        self._numbers: dict[str, float] = {}  #: the last judgement's grpofit/* numbers
        self._judged: list[tuple[float, bool]] = []  #: (last step, broken) of each judgement
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._job: tuple | None = None  #: the newest snapshot waiting for the worker
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._busy = False
        self._worker: threading.Thread | None = None

    # ------------------------------------------------------------------ Trainer events
    def attach(self, trainer: Any) -> "GrpofitCallback":
        """Put this callback first in ``trainer``'s handler (registered once: a callback already
        passed in ``callbacks=[...]`` is moved, not added again), so that the reporting callbacks
        see the ``grpofit/*`` numbers of each log event."""
        callbacks = trainer.callback_handler.callbacks
        callbacks[:] = [c for c in callbacks if c is not self]
        callbacks.insert(0, self)
        return self

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return control
        step = _number(getattr(state, "global_step", None))
        if step is None or not math.isfinite(step):
            step = float(len(self.rows["step"]))
        self._add_row(step, logs)
        max_steps = _number(getattr(state, "max_steps", None))
        if max_steps is not None and math.isfinite(max_steps) and max_steps > 0:
            self._horizon = max_steps
        self._collect()
        if self._last_update is None or step - self._last_update >= self.every:
            self._last_update = step
            self._submit()
            if not self.background:
                self._collect()
        if self._numbers:
            logs.update(self._numbers)
            history = getattr(state, "log_history", None)
            if history and isinstance(history[-1], dict) and history[-1].get("step", step) == step:
                history[-1].update(self._numbers)
        if self.stopped_by is not None and control is not None:
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        """Report what the judgements finished so far found; never waits for one."""
        self._collect()
        return control

    # ------------------------------------------------------------------ the run so far
    def _add_row(self, step: float, logs: dict) -> None:
        n = len(self.rows["step"])
        if n and self.rows["step"][-1] == step:
            n -= 1  # a second log event at the same step (eval after train): merge into it
        else:
            self.rows["step"].append(step)
            for col in self.rows.values():
                if len(col) < n + 1:
                    col.append(np.nan)
        for k, v in logs.items():
            if k.startswith("grpofit/") or k == "step":
                continue
            x = _number(v)
            if x is None:
                continue
            col = self.rows.get(k)
            if col is None:
                col = self.rows[k] = [np.nan] * len(self.rows["step"])
            col[n] = x

    def _snapshot(self) -> tuple:
        return {k: np.array(v, dtype=float) for k, v in self.rows.items()}, self._horizon

    def _make_run(self, table: dict, horizon: float | None):
        from grpofit.core.runs import make_run

        config = {} if horizon is None else {"max_steps": horizon}
        return make_run(self.name, self.name, "trainer-callback", table, step="step", config=config)

    def run(self):
        """The run logged so far, as a :class:`grpofit.core.runs.Run`."""
        return self._make_run(*self._snapshot())

    # ------------------------------------------------------------------ judging
    def update(self) -> list[dict]:
        """Judge (and forecast) the run so far now, on this thread; stop on ``stop_on``.
        Returns the new events."""
        self._results.put(self._judge(self._snapshot()))
        before = len(self.events)
        self._collect()
        return self.events[before:]

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background judgement in flight (if any) is done; True when idle.
        For scripts and tests: the callback itself never waits."""
        with self._lock:
            return self._wake.wait_for(lambda: not self._busy and self._job is None, timeout)

    def _submit(self) -> None:
        job = self._snapshot()
        if not self.background:
            self._results.put(self._judge(job))
            return
        with self._lock:
            self._job = job  # the newest snapshot replaces one still waiting
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="grpofit-callback", daemon=True)
                self._worker.start()
            self._wake.notify_all()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._wake.wait_for(lambda: self._job is not None, timeout=60.0):
                    self._worker = None
                    return  # idle for a minute: the next snapshot starts a new worker
                job, self._job, self._busy = self._job, None, True
            try:
                self._results.put(self._judge(job))
            finally:
                with self._lock:
                    self._busy = False
                    self._wake.notify_all()

    def _judge(self, job: tuple) -> dict:
        """One judgement of a snapshot (on the worker): the new events, the numbers to log, and
        the broken verdict that stops the run under ``stop_on`` (if any)."""
        table, horizon = job
        try:
            self.monitor.horizon = horizon
            events = self.monitor.update(self._make_run(table, horizon), force_fit=True)
        except Exception as e:  # noqa: BLE001 - a judgement must never stop training
            return {"error": f"{type(e).__name__}: {e}", "events": [], "numbers": None, "stop": None, "step": None}
        st = self.monitor.runs.get(self.name)
        numbers, stop = None, None
        if st is not None:
            numbers = {"grpofit/alerts": float(len(st.alerts))}
            mean, _ = st.forecast_final()
            if mean is not None:
                numbers["grpofit/forecast_final"] = float(mean)
            s95 = st.steps_to_95()
            if s95 is not None:
                numbers["grpofit/steps_to_95"] = float(s95)
            stop = self._diminishing(st) if self.stop_on == "diminishing" else self._broken(st, events)
        return {"events": events, "numbers": numbers, "stop": stop, "step": None if st is None else st.last_step}

    def _diminishing(self, st) -> dict | None:
        """``stop_on="diminishing"``: the stop when the gain still expected before ``max_steps``
        is below ``min_gain`` with probability ``confidence``
        (:func:`grpofit.integrations.diminishing.diminishing`), or None."""
        from grpofit.fitting.analysis import resolve_column
        from grpofit.integrations.diminishing import diminishing

        run = self._make_run(*self._snapshot())
        try:
            steps, values = run.series(resolve_column(run, "reward", self.metric))
        except Exception:  # noqa: BLE001 - no reward column logged yet
            return None
        event = diminishing(steps, values, self._horizon, min_gain=self.min_gain, confidence=self.confidence)
        if event is None:
            return None
        return {**event, "mode": "diminishing returns", "evidence": event["message"]}

    def _broken(self, st, events: list[dict]) -> dict | None:
        """The alert that stops the run now under ``stop_on`` (:func:`stops`), or None: a new
        alert, or a confirmed alert whose mode's current verdict is broken."""
        for e in events:
            if e["event"] == "alert" and stops(e["status"], e.get("causes", ()), self.stop_on):
                return e
        for (mode, status), alert in st.alerts.items():
            now = st.verdicts.get(mode)
            if alert.source == "diagnose" and now == status and stops(now, st.causes.get(mode, ()), self.stop_on):
                return {
                    **alert.event(),
                    "evidence": st.evidence.get(mode, alert.evidence),
                    "causes": list(st.causes.get(mode, ())),
                    "step": st.last_step,
                }
        return None

    def _collect(self) -> None:
        """Take in the judgements finished since the last log event (on the training thread)."""
        log = self.logger or trainer_logger()
        while True:
            try:
                res = self._results.get_nowait()
            except queue.Empty:
                return
            if res.get("error"):
                log.warning("grpofit: the judgement failed (%s); training goes on", res["error"])
            for e in res["events"]:
                self.events.append(e)
                if e["event"] == "alert":
                    log.warning(
                        "grpofit alert at step %s: %s %s: %s", _step(e["step"]), e["mode"], e["status"], e["evidence"]
                    )
            if res["numbers"] is not None:
                self._numbers = res["numbers"]
            stop = res["stop"]
            if stop is not None and self.stopped_by is None:
                self.stopped_by = {**stop, "last_good_step": self._last_good(stop)}
                log.warning(self.banner())
            if res["step"] is not None:
                self._judged.append((res["step"], stop is not None))

    def _last_good(self, stop: dict) -> float | None:
        """The last judged step before the problem: the last judgement that did not stop the run,
        before the problem's onset when the evidence gives one."""
        onset = stop.get("onset")
        good = [s for s, broken in self._judged if not broken and (onset is None or s < onset)]
        if good:
            return good[-1]
        return None

    def banner(self) -> str:
        """The stop announcement (``stopped_by``'s evidence and the last good step)."""
        s = self.stopped_by or {}
        good = s.get("last_good_step")
        line = "=" * 72
        return "\n".join(
            [
                line,
                f"grpofit stopped training at step {_step(s.get('step'))}: {s.get('mode')} {s.get('status')}"
                + (f" (problem from step {_step(s['onset'])})" if s.get("onset") is not None else ""),
                f"evidence: {s.get('evidence')}",
                "last good step: "
                + (_step(good) if good is not None else "none judged good before the problem")
                + " (its checkpoint, when saved, is the one to resume from)",
                "stop_on=None never stops a run; the alerts stay in the log either way",
                line,
            ]
        )


def _step(x) -> str:
    if x is None:
        return "?"
    x = float(x)
    return f"{x:g}" if x != int(x) else str(int(x))
