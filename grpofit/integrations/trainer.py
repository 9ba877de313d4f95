"""``GrpofitCallback``: fit, forecast and judge a Hugging Face ``Trainer`` run while it trains.

    from grpofit.integrations import GrpofitCallback

    cb = GrpofitCallback(every=10, stop_on="fail")
    trainer = GRPOTrainer(..., callbacks=[cb])      # or cb.attach(trainer): see "Ordering"

On each log event (``on_log``) the callback adds the logged numbers to its copy of the run;
every ``every`` steps it hands the run to :class:`grpofit.watch.monitor.Monitor` (the same
verdicts, early-warning rules and forecast as ``grpofit watch``). It then

- writes ``grpofit/forecast_final`` (expected reward at ``state.max_steps``) and
  ``grpofit/steps_to_95`` into the logs dict and the last ``state.log_history`` row when the
  forecaster gives numbers (never a made-up value: absent when it cannot forecast), plus
  ``grpofit/alerts`` (the number of alerts so far);
- sets ``control.should_training_stop`` when a run reaches ``stop_on`` (``"fail"``, ``"warn"``
  or None to never stop), and keeps the alert in :attr:`GrpofitCallback.stopped_by`.

Ordering. The Trainer calls its reporting callbacks (W&B, TensorBoard, ...) before the callbacks
you pass, all with the same logs dict; for the ``grpofit/*`` numbers of a log event to reach
them, the callback must run first: :meth:`GrpofitCallback.attach` inserts it at the front.
Otherwise they reach ``trainer_state.json`` (``log_history``) only.

``transformers`` is an optional extra: without it the class still works on any objects with the
Trainer's interface (``state.global_step``, ``state.max_steps``, ``control.should_training_stop``).
"""

from __future__ import annotations

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


class GrpofitCallback(_Base):
    """Live fit, forecast, verdicts and alerts for a Trainer run (module docstring)."""

    def __init__(self, every: int = 10, stop_on: str | None = "fail", *, metric: str | None = None,
                 forecast: bool = True, name: str = "trainer", group_size: int | None = None) -> None:
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"every={every!r}: a positive number of steps")
        if stop_on not in (None, "fail", "warn"):
            raise ValueError(f"stop_on={stop_on!r}: use 'fail', 'warn' or None")
        from grpofit.watch.monitor import Monitor

        self.every = every
        self.stop_on = stop_on
        self.metric = metric
        self.name = name
        self.group_size = group_size
        self.monitor = Monitor(metric=metric, forecast=forecast, group_size=group_size, refit_min=1)
        self.rows: dict[str, list[float]] = {"step": []}
        self.events: list[dict] = []  #: every alert and forecast event so far
        self.stopped_by: dict | None = None
        self._last_update: float | None = None
        self._horizon: float | None = None

    # ------------------------------------------------------------------ Trainer events
    def attach(self, trainer: Any) -> "GrpofitCallback":
        """Insert this callback first in ``trainer``'s handler, so that the reporting callbacks
        see the ``grpofit/*`` numbers of each log event."""
        trainer.callback_handler.callbacks.insert(0, self)
        return self

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return control
        step = float(getattr(state, "global_step", len(self.rows["step"])) or 0)
        self._add_row(step, logs)
        max_steps = getattr(state, "max_steps", None)
        if isinstance(max_steps, (int, float)) and max_steps > 0:
            self._horizon = float(max_steps)
        if self._last_update is None or step - self._last_update >= self.every:
            self._last_update = step
            self.update()
        st = self.monitor.runs.get(self.name)
        if st is not None:
            extra = {"grpofit/alerts": float(len(st.alerts))}
            mean, _ = st.forecast_final()
            if mean is not None:
                extra["grpofit/forecast_final"] = float(mean)
            s95 = st.steps_to_95()
            if s95 is not None:
                extra["grpofit/steps_to_95"] = float(s95)
            logs.update(extra)
            history = getattr(state, "log_history", None)
            if history and isinstance(history[-1], dict) and history[-1].get("step", step) == step:
                history[-1].update(extra)
        if self.stopped_by is not None and control is not None:
            control.should_training_stop = True
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
            if k.startswith("grpofit/") or k == "step" or isinstance(v, bool) or not isinstance(v, (int, float, np.number)):
                continue
            col = self.rows.get(k)
            if col is None:
                col = self.rows[k] = [np.nan] * len(self.rows["step"])
            col[n] = float(v)

    def run(self):
        """The run logged so far, as a :class:`grpofit.core.runs.Run`."""
        from grpofit.core.runs import make_run

        config = {}
        if self._horizon is not None:
            config["max_steps"] = self._horizon
        table = {k: np.asarray(v, float) for k, v in self.rows.items()}
        return make_run(self.name, self.name, "trainer-callback", table, step="step", config=config)

    def update(self) -> list[dict]:
        """Judge (and forecast) the run so far now; stop on ``stop_on``. Returns the new events."""
        self.monitor.horizon = self._horizon
        events = self.monitor.update(self.run(), force_fit=True)
        self.events += events
        if self.stop_on and self.stopped_by is None:
            for e in events:
                if e["event"] == "alert" and STATUS_RANK[e["status"]] >= STATUS_RANK[self.stop_on]:
                    self.stopped_by = e
                    break
        return events
