"""``grpofit watch`` on a Trainer's ``output_dir``: started before the trainer creates
it, it waits; the checkpoint-N/ folders are views of one run (one name from save to save, no
re-raised alerts); JSON in the folder that is not a log (the callback's events file) is ignored."""

from __future__ import annotations

import io
import json

from grpofit.testing.planted import make_planted_run
from grpofit.watch.session import Session, WatchOptions


def save(out, rows, step, max_steps=300):
    d = out / f"checkpoint-{step}"
    d.mkdir(parents=True)
    (d / "trainer_state.json").write_text(
        json.dumps({"global_step": step, "max_steps": max_steps, "log_history": rows[:step]})
    )


def test_watch_follows_one_run_through_the_saves_of_an_output_dir(tmp_path):
    table = make_planted_run("dynamical_instability", seed=3, n_steps=300)
    rows = [
        {"step": i + 1, "reward": float(table["reward"][i]), "grad_norm": float(table["grad_norm"][i])}
        for i in range(300)
    ]
    out = tmp_path / "output_dir"
    err = io.StringIO()
    s = Session(WatchOptions(paths=[str(out)], forecast=False), out=io.StringIO(), err=err)  # not there yet: no exit 2
    assert s.poll() == [] and not s.monitor.runs
    out.mkdir()
    (out / "grpofit_events.json").write_text(json.dumps([{"event": "alert", "step": 5}]))
    names, alerts = set(), []
    for step in (100, 200, 300):
        save(out, rows, step)
        events = s.poll(final=True)
        names |= set(s.monitor.runs)
        alerts += [(e["mode"], e["status"]) for e in events if e["event"] == "alert"]
    assert names == {str(out)}  # one run, named by the folder
    assert len(alerts) == len(set(alerts))  # no alert raised twice
    assert ("dynamical_instability", "fail") in alerts
    assert "grpofit_events.json" not in err.getvalue()
