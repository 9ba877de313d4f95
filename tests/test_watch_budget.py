"""``--cpu-budget`` pays for whole polls once caught up: catching up is free and earns no credit,
reading and the rules are charged, and re-judgements get only what is left."""

import io
import json

import numpy as np

from grpofit.watch.session import Session, WatchOptions
from tests.doc_pages import docs_text


def _rows(rng, a, b):
    return "".join(
        json.dumps(
            {"step": s, "reward": round(float(0.7 - 0.5 * np.exp(-s / 80) + rng.normal(0, 0.02)), 4), "grad_norm": 0.2}
        )
        + "\n"
        for s in range(a, b)
    )


def _session(tmp_path, budget):
    rng = np.random.default_rng(0)
    for i in range(3):
        (tmp_path / f"run{i}.jsonl").write_text(_rows(rng, 1, 101))
    s = Session(
        WatchOptions(paths=[str(tmp_path)], interval=10.0, cpu_budget=budget, forecast=False),
        out=io.StringIO(),
        err=io.StringIO(),
    )
    s.open()
    while True:
        s.poll()
        if not s.monitor.catching_up:
            break
    return s, rng


def _grow_and_poll(s, tmp_path, rng, a, b, seconds):
    for i in range(3):
        with open(tmp_path / f"run{i}.jsonl", "a") as f:
            f.write(_rows(rng, a, b))
    s.last_poll -= seconds  # as if ``seconds`` had passed since the last poll
    return s.poll()


def test_catching_up_leaves_an_empty_bucket_and_a_tiny_budget_defers_rejudgements(tmp_path):
    s, rng = _session(tmp_path, 1e-6)
    assert s.tokens == 0.0
    assert all(st.fitted_n == 100 for st in s.monitor.runs.values())
    _grow_and_poll(s, tmp_path, rng, 101, 131, 10.0)  # +30%: every run is due
    assert s.tokens < 0  # the poll's reading and rules were charged
    assert set(s.monitor.pending) == set(s.monitor.runs)  # ...and nothing was left to re-judge
    assert all(st.n == 130 and st.fitted_n == 100 for st in s.monitor.runs.values())


def test_a_budget_that_covers_the_poll_rejudges(tmp_path):
    s, rng = _session(tmp_path, 1.0)
    events = _grow_and_poll(s, tmp_path, rng, 101, 131, 10.0)  # 10 s of credit at a whole core
    assert not s.monitor.pending
    assert all(st.fitted_n == 130 for st in s.monitor.runs.values())
    assert sum(e["event"] == "forecast" for e in events) == 3


def test_a_budget_used_up_by_reading_still_rejudges_every_so_many_polls(tmp_path):
    from grpofit.watch.session import STARVED_POLLS

    s, rng = _session(tmp_path, 1e-6)
    step = 101
    for poll in range(1, STARVED_POLLS + 1):
        _grow_and_poll(s, tmp_path, rng, step, step + 10, 10.0)
        step += 10
        done = sum(st.fitted_n > 100 for st in s.monitor.runs.values())
        assert done == (0 if poll < STARVED_POLLS else 1), poll  # one run, then the budget again
    assert s.starved == 0


def test_readme_states_the_starvation_bound():

    from grpofit.watch.session import STARVED_POLLS

    readme = " ".join(docs_text().split())
    assert f"waits at most {STARVED_POLLS} polls" in readme
