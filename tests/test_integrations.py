"""``GrpofitCallback`` driven like the Hugging Face Trainer drives it.

With ``transformers`` installed (the ``test-hf`` extra; it imports without torch) the real
``TrainerCallback``, ``TrainerState``, ``TrainerControl``, ``TrainingArguments`` and
``CallbackHandler`` are used; the duck-typed test runs everywhere.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from grpofit.integrations import GrpofitCallback
from grpofit.testing.planted import make_planted_run


def feed(cb, table, state, control, args=None, *, upto=None, handler=None):
    """Log one row per step as the Trainer does (log_history first, then on_log)."""
    n = len(table["step"]) if upto is None else upto
    for i in range(n):
        state.global_step = i + 1
        logs = {k: float(v[i]) for k, v in table.items() if k != "step" and np.isfinite(v[i])}
        state.log_history.append({**logs, "step": i + 1})
        if handler is not None:
            control = handler.on_log(args, state, control, logs)
        else:
            control = cb.on_log(args, state, control, logs=logs)
        cb.wait()  # a replay: the judgement in flight finishes (its results reach the next log event)
        if control.should_training_stop:
            return i + 1, control
    return None, control


@pytest.mark.slow
def test_stops_a_collapsing_run_through_the_trainer_control():
    tr = pytest.importorskip("transformers")
    table = make_planted_run("dynamical_instability", seed=3, n_steps=300)
    cb = GrpofitCallback(every=5, stop_on="fail", forecast=False)
    assert isinstance(cb, tr.TrainerCallback)
    args = tr.TrainingArguments(output_dir="unused", report_to=[])
    stopped, control = feed(cb, table, tr.TrainerState(max_steps=300), tr.TrainerControl(), args)
    assert stopped is not None and 196 <= stopped <= 240  # planted collapse at step 196
    assert control.should_training_stop
    assert cb.stopped_by["mode"] == "dynamical_instability" and cb.stopped_by["status"] == "fail"


@pytest.mark.slow
def test_healthy_run_is_never_stopped():
    tr = pytest.importorskip("transformers")
    table = make_planted_run(None, seed=1, n_steps=300)
    cb = GrpofitCallback(every=10, stop_on="warn", forecast=False)
    stopped, control = feed(cb, table, tr.TrainerState(max_steps=300), tr.TrainerControl())
    assert stopped is None and not control.should_training_stop
    assert cb.stopped_by is None


@pytest.mark.slow
def test_forecast_is_logged_beside_the_run_through_the_real_handler():
    tr = pytest.importorskip("transformers")
    from transformers.trainer_callback import CallbackHandler

    seen = []

    class Reporter(tr.TrainerCallback):  # stands for the W&B / TensorBoard callbacks
        def on_log(self, args, state, control, logs=None, **kw):
            seen.append(dict(logs))

    cb = GrpofitCallback(every=60, stop_on=None)
    handler = CallbackHandler([Reporter()], None, None, None, None)
    trainer = SimpleNamespace(callback_handler=handler)
    cb.attach(trainer)
    assert handler.callbacks[0] is cb
    table = make_planted_run(None, seed=1, n_steps=300)
    state = tr.TrainerState(max_steps=300)
    args = tr.TrainingArguments(output_dir="unused", report_to=[])
    feed(cb, table, state, tr.TrainerControl(), args, upto=130, handler=handler)
    last = seen[-1]
    assert "grpofit/alerts" in last
    # the forecaster forecasts this rising run at its planned end (state.max_steps) ...
    assert 0.4 < last["grpofit/forecast_final"] < 1.0
    assert last["grpofit/steps_to_95"] > 0
    # ... and the numbers reach trainer_state.json's log_history too
    assert state.log_history[-1]["grpofit/forecast_final"] == last["grpofit/forecast_final"]
    fc = [e for e in cb.events if e["event"] == "forecast"]
    assert fc and fc[-1]["forecast_final"] == last["grpofit/forecast_final"]


@pytest.mark.slow
def test_documented_interface_without_transformers():
    """The Trainer interface the callback relies on: ``state.global_step``, ``state.max_steps``,
    ``state.log_history`` and ``control.should_training_stop`` (documented in transformers'
    TrainerCallback docs), given as plain objects."""
    table = make_planted_run("dynamical_instability", seed=4, n_steps=300)
    cb = GrpofitCallback(every=5, forecast=False, stop_on="fail")
    state = SimpleNamespace(global_step=0, max_steps=300, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    stopped, control = feed(cb, table, state, control)
    assert stopped is not None and control.should_training_stop
    run = cb.run()
    assert run.steps[-1] == stopped and "reward" in run.metrics and "grad_norm" in run.metrics


def test_eval_rows_at_the_same_step_merge_and_bad_arguments_are_refused():
    cb = GrpofitCallback(every=1, forecast=False)
    state = SimpleNamespace(global_step=5, max_steps=0, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    cb.on_log(None, state, control, logs={"reward": 0.5, "loss": 1.0})
    cb.on_log(None, state, control, logs={"eval_reward": 0.4, "flag": True, "note": "x"})
    run = cb.run()
    assert run.steps.tolist() == [5.0]
    assert run.metrics["eval_reward"][0] == 0.4 and run.metrics["reward"][0] == 0.5
    assert "flag" not in run.metrics and "note" not in run.metrics
    with pytest.raises(ValueError):
        GrpofitCallback(every=0)
    with pytest.raises(ValueError):
        GrpofitCallback(stop_on="maybe")


# --------------------------------------------------------------------------- a callback people can leave on


def replay(cb, logs, *, max_steps=300):
    """Feed TRL's logs dicts through the real Trainer classes when installed (plain objects
    otherwise); wait for each judgement, as a replay may. Returns (stopped step | None, messages)."""
    import logging

    try:
        import transformers as tr

        state, control = tr.TrainerState(max_steps=max_steps), tr.TrainerControl()
    except Exception:  # noqa: BLE001
        state = SimpleNamespace(global_step=0, max_steps=max_steps, log_history=[])
        control = SimpleNamespace(should_training_stop=False)
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    log = logging.getLogger(f"grpofit.test.{id(cb)}")
    log.propagate = False
    log.addHandler(Keep())
    cb.logger = log
    for i, row in enumerate(logs):
        state.global_step = i + 1
        state.log_history.append({**row, "step": i + 1})
        control = cb.on_log(None, state, control, logs=dict(row))
        cb.wait()
        if control.should_training_stop:
            return i + 1, messages
    return None, messages


def test_trl_run_truncating_at_the_cap_is_never_stopped():
    """The issue's TRL run (healthy, ~90% of completions at max_completion_length=12, TRL logs
    completions/clipped_ratio): no stop with the defaults, none with stop_on="fail"; the
    truncation is alerted (a warning), and length_cap does not apply since a rate is logged."""
    from tests.trl_scenario import trl_logs

    logs = trl_logs(seed=0)
    for stop_on in (None, "fail"):
        cb = GrpofitCallback(every=10, stop_on=stop_on, forecast=False)
        stopped, messages = replay(cb, logs)
        assert stopped is None and cb.stopped_by is None
        alerts = [e for e in cb.events if e["event"] == "alert"]
        assert alerts and all(e["causes"] == ["truncation"] for e in alerts)
        assert len(messages) == len(alerts) and "clipped_ratio" in messages[0]
        st = cb.monitor.runs["trainer"]
        assert st.verdicts["dynamical_instability"] == "warn"


def test_trl_run_that_collapses_is_stopped_with_a_banner_only_when_asked():
    from tests.trl_scenario import trl_logs

    logs = trl_logs(seed=0, broken=True)
    cb = GrpofitCallback(every=10, forecast=False)
    assert replay(cb, logs)[0] is None  # default stop_on=None: alerts only
    cb = GrpofitCallback(every=10, stop_on="fail", forecast=False)
    stopped, messages = replay(cb, logs)
    assert stopped is not None and 201 <= stopped <= 240  # the reward collapses at step 201
    s = cb.stopped_by
    assert s["mode"] == "dynamical_instability" and "truncation" not in s["causes"]
    assert s["last_good_step"] is not None and s["last_good_step"] <= 201
    banner = messages[-1]
    assert "grpofit stopped training at step" in banner and s["evidence"] in banner
    assert f"last good step: {int(s['last_good_step'])}" in banner


def test_stop_rule_ignores_truncation_findings_only():
    from grpofit.integrations.trainer import stops

    assert not stops("fail", ["truncation"], "fail") and not stops("fail", ["length_cap", "truncation"], "warn")
    assert stops("fail", ["truncation", "check"], "fail") and stops("fail", [], "fail")
    assert not stops("warn", ["check"], "fail") and stops("warn", ["reward_drop"], "warn")
    assert not stops("fail", ["check"], None)


def test_judgement_runs_off_the_training_thread():
    """on_log hands a snapshot to a worker and returns: the results arrive at a later log event."""
    import threading

    table = make_planted_run(None, seed=2, n_steps=60)
    cb = GrpofitCallback(every=50, forecast=False)
    seen = []
    real = cb._judge

    def judge(job):
        seen.append(threading.current_thread() is threading.main_thread())
        return real(job)

    cb._judge = judge
    state = SimpleNamespace(global_step=0, max_steps=0, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    feed(cb, table, state, control)
    assert seen and not any(seen)
    assert cb.events and all(e["event"] in ("alert", "forecast") for e in cb.events)


def test_a_number_no_float_holds_does_not_raise_out_of_on_log():
    cb = GrpofitCallback(every=1, forecast=False, background=False)
    state = SimpleNamespace(global_step=1, max_steps=10**400, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    cb.on_log(None, state, control, logs={"reward": 0.5, "tokens": 10**400, "big": -(10**500)})
    run = cb.run()
    assert run.metrics["reward"][0] == 0.5
    assert not np.isfinite(run.metrics.get("tokens", np.array([np.nan]))[0])


def test_attach_registers_once_even_when_also_passed_in_callbacks():
    tr = pytest.importorskip("transformers")
    from transformers.trainer_callback import CallbackHandler

    cb = GrpofitCallback(every=10)
    handler = CallbackHandler([tr.TrainerCallback(), cb], None, None, None, None)
    cb.attach(SimpleNamespace(callback_handler=handler))
    cb.attach(SimpleNamespace(callback_handler=handler))
    assert handler.callbacks[0] is cb and sum(c is cb for c in handler.callbacks) == 1
