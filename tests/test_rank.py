"""``grpofit rank``: joint draws, the decision, the document and the command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli


def write_csv(path: Path, steps, values, extra: dict | None = None) -> Path:
    cols = {"step": steps, "reward": values, **(extra or {})}
    names = list(cols)
    rows = [",".join(names)] + [",".join(f"{float(cols[n][i])!r}" for n in names) for i in range(len(steps))]
    path.write_text("\n".join(rows) + "\n")
    return path


def curve(plateau, tau, n=300, seed=0, start=0.1, sd=0.02):
    s = np.arange(1, n + 1, dtype=float)
    rng = np.random.default_rng(seed)
    return s, start + (plateau - start) * (1 - np.exp(-s / tau)) + sd * rng.standard_normal(n)


# --------------------------------------------------------------------------- judge (no forecasts)


def test_judge_joint_draws_sum_to_one_and_stop_the_dominated():
    from grpofit.forecasting.rank import judge

    rng = np.random.default_rng(0)
    draws = [
        0.80 + 0.01 * rng.standard_normal(2000),
        0.79 + 0.01 * rng.standard_normal(1000),
        0.50 + 0.01 * rng.standard_normal(2000),
        None,
    ]
    out = judge(draws, margin=0.02, confidence=0.95, seed=1)
    p = [o["p_best"] for o in out[:3]]
    assert sum(p) == pytest.approx(1.0, abs=1e-12)
    assert p[0] > p[1] > p[2]
    assert p[0] == pytest.approx(0.76, abs=0.05)  # P(N(0.80, .01) > N(0.79, .01)) = Phi(0.707)
    assert [o["recommendation"] for o in out] == ["keep", "keep", "stop", "cannot tell yet"]
    assert out[3]["p_best"] is None and out[3]["p_within_margin"] is None
    for o in out[:3]:
        assert o["p_within_margin"] >= o["p_best"]


def test_judge_is_joint_not_independent():
    """Two identical runs: each is best in half the joint draws (independent guesses, each
    compared with the other's mean, would give each about 1/2 too, but three identical runs must
    give 1/3 each, not 1/2)."""
    from grpofit.forecasting.rank import judge

    rng = np.random.default_rng(3)
    out = judge([0.5 + 0.05 * rng.standard_normal(3000) for _ in range(3)], margin=0.0, seed=2)
    for o in out:
        assert o["p_best"] == pytest.approx(1 / 3, abs=0.03)
        assert o["recommendation"] == "cannot tell yet"


def test_decide_thresholds():
    from grpofit.forecasting.rank import decide

    assert decide(0.049, 0.95) == "stop"
    assert decide(0.05, 0.95) == "cannot tell yet"
    assert decide(0.5, 0.95) == "keep"
    assert decide(None, 0.95) == "cannot tell yet"


def test_step_seconds_from_elapsed_and_timing_columns():
    from grpofit.core.runs import make_run
    from grpofit.forecasting.rank import gpu_count, step_seconds

    s = np.arange(0, 100, 2, dtype=float)
    run = make_run("r", "r", "csv", {"step": s, "reward": s * 0, "_runtime": 3.0 * s}, step="step")
    assert step_seconds(run) == pytest.approx(3.0)
    run = make_run("r", "r", "csv", {"step": s, "reward": s * 0, "timing_s/step": s * 0 + 7.5}, step="step")
    assert step_seconds(run) == pytest.approx(7.5)
    assert gpu_count({"trainer.n_gpus_per_node": 8, "trainer.nnodes": 2}) == 16
    assert gpu_count({}) is None


# --------------------------------------------------------------------------- the command


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Three runs to step 300, cut at 120: one saturates low (0.35), two rise to 0.8 / 0.75."""
    d = tmp_path_factory.mktemp("sweep")
    paths = []
    for name, plateau, tau, seed in (("low", 0.35, 25, 1), ("high", 0.80, 40, 2), ("mid", 0.75, 40, 3)):
        s, v = curve(plateau, tau, seed=seed)
        paths.append(write_csv(d / f"{name}.csv", s, v, {"_runtime": 12.0 * s}))
    return d, paths


@pytest.fixture(scope="module")
def ranked(sweep):
    from grpofit.commands.rank import RankOptions, rank_paths

    d, _ = sweep
    return rank_paths([str(d / "*.csv")], RankOptions(until=120, margin=0.02))


@pytest.mark.slow
def test_rank_document(ranked):
    doc = ranked.doc
    assert doc["schema"] == "grpofit.rank/1"
    assert doc["horizon"] == {"step": 300, "source": "last step of the longest run"}
    by = {Path(r["run"]).stem: r for r in doc["runs"]}
    assert set(by) == {"low", "high", "mid"}
    for r in doc["runs"]:
        assert set(r) >= {
            "run",
            "metric",
            "seen",
            "final",
            "p_best",
            "p_within_margin",
            "recommendation",
            "saved",
            "note",
        }
        assert r["seen"]["steps"][1] == 120
    assert sum(r["p_best"] for r in doc["runs"]) == pytest.approx(1.0, abs=1e-9)
    assert by["low"]["recommendation"] == "stop"
    assert by["low"]["saved"]["steps"] == 180
    assert by["low"]["saved"]["hours"] == pytest.approx(180 * 12 / 3600)
    assert by["low"]["saved"]["gpu_hours"] is None  # no GPU count in a bare CSV
    assert by["high"]["recommendation"] != "stop"
    assert by["high"]["p_best"] > by["low"]["p_best"]
    assert Path(doc["best"]).stem in ("high", "mid")
    assert by["high"]["final"]["pi95"][0] < by["high"]["final"]["mean"]


@pytest.mark.slow
def test_run_with_no_rise_yet_cannot_tell(tmp_path, sweep):
    """A slow starter (flat so far) is not stopped: it has no forecast and no p_best."""
    from grpofit.commands.rank import RankOptions, rank_paths

    _, paths = sweep
    s = np.arange(1, 301, dtype=float)
    flat = write_csv(tmp_path / "slow.csv", s, 0.1 + 0.02 * np.random.default_rng(9).standard_normal(300))
    doc = rank_paths([str(paths[1]), str(flat)], RankOptions(until=100)).doc
    slow = [r for r in doc["runs"] if r["run"].endswith("slow.csv")][0]
    assert slow["recommendation"] == "cannot tell yet"
    if slow["p_best"] is None:  # the engine refuses a run with no rise yet: it takes no part
        assert "no rise" in slow["note"] and "take no part in p_best" in doc["note"]


@pytest.mark.slow
def test_cli_json_markdown_plot_and_bad_input(capsys, sweep, tmp_path):
    d, paths = sweep
    code, out, err = run_cli(
        capsys,
        "rank",
        str(paths[0]),
        str(paths[1]),
        "--until",
        "120",
        "--format",
        "json",
        "--plot",
        str(tmp_path / "fans.png"),
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "grpofit.rank/1" and len(doc["runs"]) == 2
    assert (tmp_path / "fans.png").stat().st_size > 1000
    code, out, err = run_cli(capsys, "rank", str(paths[0]), str(paths[1]), "--until", "120", "--format", "markdown")
    assert code == 0 and out.startswith("## grpofit rank") and "| run |" in out
    code, out, err = run_cli(capsys, "rank", str(paths[0]), "--margin", "-1")
    assert code == 2 and out == "" and "--margin" in err and len(err.strip().splitlines()) == 1
    code, out, err = run_cli(capsys, "rank", str(d / "nothing*.csv"))
    assert code == 2 and "matches no file" in err


@pytest.mark.slow
def test_trainer_callback_stops_on_diminishing_returns_and_says_so(capsys):
    """A run saturated long before max_steps stops; one still rising steeply does not."""
    from types import SimpleNamespace

    from grpofit.integrations.trainer import GrpofitCallback

    def drive(plateau_tau):
        cb = GrpofitCallback(every=50, stop_on="diminishing", forecast=False, min_gain=0.05, background=False)
        s, v = curve(0.8, plateau_tau, n=200, seed=5, sd=0.01)
        control = SimpleNamespace(should_training_stop=False)
        for step, value in zip(s, v):
            state = SimpleNamespace(global_step=int(step), max_steps=1000, log_history=[])
            cb.on_log(None, state, control, logs={"reward": float(value)})
            if control.should_training_stop:
                break
        return cb, control

    cb, control = drive(10.0)
    assert control.should_training_stop and cb.stopped_by["event"] == "diminishing"
    assert "diminishing returns" in cb.banner()
    cb, control = drive(2000.0)
    assert not control.should_training_stop and cb.stopped_by is None


def test_sweep_benchmark_scoring():
    """Regret, best killed and compute share, on a hand-made sweep of three runs of 10 steps."""
    from benchmarks.sweeps import Sweep, _score

    s = np.arange(1, 11, dtype=float)
    sw = Sweep(
        "t",
        "generated",
        ["a", "b", "c"],
        [s, s, s],
        [np.full(10, 0.5), np.full(10, 0.9), np.full(10, 0.7)],
        np.array([0.5, 0.9, 0.7]),
        10.0,
    )
    everything = _score(sw, [None, None, None])
    assert everything == {"regret": 0.0, "best_killed": False, "compute": 1.0, "kept": "b", "stopped": 0}
    killed = _score(sw, [None, 3.0, None])  # the best stopped at step 3: c is kept
    assert killed["regret"] == pytest.approx(0.2) and killed["best_killed"]
    assert killed["compute"] == pytest.approx((10 + 3 + 10) / 30)


def test_a_run_still_rising_is_never_stopped():
    """The slow starter's protection: draws far below the best, but open-ended (still rising)."""
    from grpofit.forecasting.rank import judge

    rng = np.random.default_rng(4)
    draws = [
        0.9 + 0.01 * rng.standard_normal(1000),
        0.3 + 0.05 * rng.standard_normal(1000),
        0.3 + 0.05 * rng.standard_normal(1000),
    ]
    out = judge(draws, open_ended=[False, True, False])
    assert out[1]["p_within_margin"] < 0.05
    assert [o["recommendation"] for o in out] == ["keep", "cannot tell yet", "stop"]


def test_judge_for_a_pruner_reads_the_runs_still_going_and_the_tolerance():
    """A near-tie (0.900 vs 0.901): with no tolerance neither may stop; with a tolerance of 0.02
    both could, but a stopped run is no reference, so once one is stopped the other is kept;
    without pruning options the verdicts are rank's (p_within_margin), unchanged."""
    from grpofit.forecasting.rank import judge

    rng = np.random.default_rng(8)
    a, b = 0.9 + 0.005 * rng.standard_normal(1000), 0.901 + 0.005 * rng.standard_normal(1000)
    lo = 0.3 + 0.01 * rng.standard_normal(1000)
    plain = judge([a, b, lo], margin=0.0, confidence=0.9)
    assert [v["recommendation"] for v in plain][2] == "stop" and "p_matters" not in plain[0]
    none = judge([a, b, lo], margin=0.0, confidence=0.9, alive=[True, True, True])
    assert [v["recommendation"] for v in none][:2] != ["stop", "stop"]
    assert none[0]["p_matters"] == pytest.approx(plain[0]["p_within_margin"], abs=1e-12)
    both = judge([a, b, lo], margin=0.0, confidence=0.9, tolerance=0.02)
    assert [v["recommendation"] for v in both] == ["stop", "stop", "stop"]
    after = judge([a, b, lo], margin=0.0, confidence=0.9, tolerance=0.02, alive=[False, True, True])
    assert after[1]["recommendation"] == "keep" and after[2]["recommendation"] == "stop"
    assert after[1]["p_matters"] == 1.0 or after[1]["p_matters"] > 0.99
    # stops do not add up: a run already let go (0.92) still counts, so the one at 0.905 is not
    # let go against the one at 0.900 (alone it would be: 0.005 above it, under the tolerance)
    g = [x + 0.002 * rng.standard_normal(1000) for x in (0.92, 0.905, 0.90)]
    alone = judge([None, g[1], g[2]], margin=0.0, confidence=0.9, tolerance=0.01, alive=[False, True, True])
    assert alone[1]["recommendation"] == "stop"
    chained = judge(g, margin=0.0, confidence=0.9, tolerance=0.01, alive=[False, True, True])
    assert chained[1]["recommendation"] == "keep" and chained[1]["p_matters"] > 0.99


def test_sweep_benchmark_summary_counts_each_sweep_once():
    from benchmarks.sweeps import summarise

    row = {"regret": 0.1, "best_killed": True, "compute": 0.5, "per_report_ms": {"mean": 1.0, "max": 2.0}}
    recs = [{"kind": "real", "methods": {"m": row}}, {"kind": "generated (slow starter best)", "methods": {"m": row}}]
    out = summarise(recs)
    assert out["real"]["sweeps"] == 1 and out["generated (all)"]["sweeps"] == 1
    assert out["generated (slow starter best)"]["m"]["best_killed"] == 1.0


def test_sweep_benchmark_trial_order_depends_on_the_sweep_name_only():
    """The sequential replay's order is seeded by the sweep's name, not by its position in the
    invocation: the same sweep measured alone or after others is replayed in the same order."""
    from benchmarks.sweeps import Sweep, trial_order

    def sweep(name):
        s = np.arange(1, 11, dtype=float)
        return Sweep(name, "generated", list("abcdef"), [s] * 6, [s] * 6, np.zeros(6), 10.0)

    a = sweep("bandit sweep 3")
    assert sorted(trial_order(a)) == list(range(6))
    assert trial_order(a) == trial_order(sweep("bandit sweep 3"))
    orders = {tuple(trial_order(sweep(f"bandit sweep {k}"))) for k in range(8)}
    assert len(orders) > 1  # the name seeds it: different sweeps, different orders


@pytest.mark.slow
def test_sweep_benchmark_memo_returns_the_forecast_and_charges_its_cost(tmp_path):
    """A memo hit is the same draws as the call, and is charged the call's seconds."""
    from benchmarks.sweeps import ForecastMemo
    from grpofit.forecasting import horizon

    s, v = curve(0.8, 40, n=80, seed=2)
    memo = ForecastMemo(str(tmp_path))
    saved = horizon.horizon_draws
    try:
        memo.install()
        memo.load("a sweep")
        first = horizon.horizon_draws(s, v, 200.0, seed=0)
        assert memo.charged == [0.0, 0.0]
        memo.save()
        again = ForecastMemo(str(tmp_path))
        again.load("a sweep")
        second = again(s.tolist(), list(v), 200, seed=0)  # lists and an int horizon: the same key
        assert again.charged[1] > 0
    finally:
        horizon.horizon_draws = saved
        del horizon.horizon_draws_uncached
    direct = saved(s, v, 200.0, seed=0)
    np.testing.assert_allclose(first.draws, direct.draws)
    np.testing.assert_allclose(second.draws, direct.draws)
    assert first.open_ended == direct.open_ended == second.open_ended


def test_sweep_rule_replays_stop_where_the_judge_says():
    """The rule replays: a run whose draws are far below the others' is stopped at the first
    checkpoint under both harnesses; a run still rising (open-ended) is not; the chosen rule is
    marked in the rendered table."""
    from benchmarks.sweep_rule import choose, parallel, schedule_steps, sequential
    from benchmarks.sweeps import Sweep, render_rule_choice

    rng = np.random.default_rng(3)
    s = np.arange(1, 101, dtype=float)
    sw = Sweep(
        "t", "generated", ["hi", "lo", "rising"], [s] * 3, [np.full(100, 0.5)] * 3, np.array([0.9, 0.3, 0.35]), 100.0
    )
    hi, lo = 0.9 + 0.01 * rng.standard_normal(500), 0.3 + 0.01 * rng.standard_normal(500)
    assert schedule_steps(100.0, 0.2, 0.2) == [20.0, 40.0, 60.0, 80.0]
    fc = {}
    for c in (*schedule_steps(100.0, 0.2, 0.2), "end"):
        fc[0, c], fc[1, c], fc[2, c] = (hi, False), (lo, False), (lo, True)
    rule = {"schedule": (0.2, 0.2), "margin": 0.0, "confidence": 0.95}
    assert parallel(sw, fc, rule) == [None, 20.0, None]
    stopped = sequential(sw, fc, rule)
    assert stopped[2] is None and stopped[0] in (None, 20.0)
    row = {"checks_name": "20%", "margin": 0.0, "tolerance": 0.0, "confidence": 0.95}
    res = {
        "parallel": {"regret": 0.0, "best_killed": 0.0, "compute": 0.6},
        "sequential": {"regret": 0.0, "best_killed": 0.0, "compute": 0.7},
    }
    bad = {"parallel": {"regret": 0.1, "best_killed": 0.5, "compute": 0.3}, "sequential": res["sequential"]}
    table = [{**row, "tune": res}, {**row, "margin": 0.02, "tune": bad}]
    assert choose(table) is table[0]  # the cheaper one kills the best in half the sweeps
    text = "\n".join(render_rule_choice({"chosen": table[0], "table": table, "sizes": {"generated": 1}}))
    assert "| **20%** | no | 0.0 | 0.0 | 0.95 |" in text
    assert "| 20% | no | 0.02 |" not in text  # per schedule only the row the criterion picks
    table.append({**row, "checks_name": "10%", "population": True, "tune": bad})
    text = "\n".join(render_rule_choice({"chosen": table[0], "table": table, "sizes": {"generated": 1}}))
    assert "| 10% | yes | 0.0 | 0.0 | 0.95 | 0.1000 / 50% / 30% |" in text


def test_run_names_in_rank_tables_keep_what_tells_them_apart():
    from grpofit.render.tables import distinct_parts

    sweep = [
        f"Qwen2.5-0.5B-Instruct-GSM8K-CRPO-sp-p1-b8-{g}-lam1.0-01161659" for g in ("gamma0.1", "gamma-20.0", "random")
    ]
    assert distinct_parts(sweep) == ["…gamma0.1…", "…gamma-20.0…", "…random…"]
    assert distinct_parts(["lr1e-5", "lr4e-5"]) == ["lr1e-5", "lr4e-5"]  # a short shared word stays
    assert distinct_parts(["sweep/run_a.csv", "sweep/run_a.csv"]) == ["sweep/run_a.csv"] * 2
    assert distinct_parts(["/tmp/sweep/run_lr1e-5.csv", "/tmp/sweep/run_lr4e-5.csv"]) == ["…lr1e-5.csv", "…lr4e-5.csv"]
    # the group-size sweep's W&B names mix cases: the shared head is shared regardless of case
    sizes = [
        "Qwen2.5-0.5B-Instruct-GSM8K-GRPO-n32-01131200",
        "Qwen2.5-0.5B-Instruct-GSM8K-GRPO-n64",
        "qwen2.5-0.5b-instruct-gsm8k-crpo-no-branch-n16-new",
        "qwen2.5-0.5b-instruct-gsm8k-crpo-no-branch",
    ]
    assert distinct_parts(sizes) == ["…GRPO-n32-01131200", "…GRPO-n64", "…crpo-no-branch-n16-new", "…crpo-no-branch"]


def test_rank_table_rows_of_a_sweep_with_long_names_can_be_told_apart():
    """Rendered off a terminal at 80 columns, every row of the group-size sweep shows its whole
    distinct part (folded, not cut with an ellipsis)."""
    from rich.console import Console

    from grpofit.render.rank import rank_table

    names = ["GRPO-n32-01131200", "GRPO-n64", "crpo-no-branch-n16-new", "crpo-no-branch"]
    runs = [
        {
            "run": f"sweep.csv::Qwen2.5-0.5B-Instruct-GSM8K-{n}",
            "metric": "reward",
            "seen": {"steps": [0, 100], "n_points": 20},
            "final": {"mean": 0.5, "pi80": [0.4, 0.6], "pi95": [0.3, 0.7]},
            "p_best": 0.25,
            "p_within_margin": 0.3,
            "recommendation": "cannot tell yet",
            "saved": {"steps": None, "gpu_hours": None, "hours": None},
            "basis": "forecast",
            "note": None,
        }
        for n in names
    ]
    doc = {
        "horizon": {"step": 500, "source": "longest"},
        "margin": 0.01,
        "confidence": 0.95,
        "runs": runs,
        "best": None,
    }
    table, _ = rank_table(doc)
    console = Console(width=80, record=True)
    console.print(table)
    cells = [line.split("│")[1].strip() for line in console.export_text().splitlines() if line.count("│") > 2]
    text = "".join(cells)  # the run column's lines, folded parts joined back
    for n in names:
        assert n in text, n


def test_a_tolerance_lets_one_of_a_near_tie_go_but_never_both():
    """Two runs that will end 0.001 apart and a loser: with no tolerance neither of the tied
    pair can be stopped; with a tolerance of 0.02 the first judged is let go and the other,
    now the best still running, is kept (a stopped run is no reference)."""
    from benchmarks.sweep_rule import parallel, schedule_steps
    from benchmarks.sweeps import Sweep

    rng = np.random.default_rng(5)
    s = np.arange(1, 101, dtype=float)
    sw = Sweep("t", "generated", ["a", "b", "lo"], [s] * 3, [np.full(100, 0.5)] * 3, np.array([0.9, 0.901, 0.3]), 100.0)
    a, b = 0.9 + 0.005 * rng.standard_normal(800), 0.901 + 0.005 * rng.standard_normal(800)
    lo = 0.3 + 0.01 * rng.standard_normal(800)
    fc = {}
    for c in (*schedule_steps(100.0, 0.2, 0.2), "end"):
        fc[0, c], fc[1, c], fc[2, c] = (a, False), (b, False), (lo, False)
    rule = {"schedule": (0.2, 0.2), "margin": 0.0, "confidence": 0.95}
    assert parallel(sw, fc, rule) == [None, None, 20.0]
    assert parallel(sw, fc, {**rule, "tolerance": 0.02}) == [20.0, None, 20.0]


def test_sweep_benchmark_oracle_bounds_and_equal_compute():
    """The hindsight oracle stops every other run at 20%; the separated one only once the data
    show the gap (a run tied with the best until 60% and below it after is stopped at 60%); the
    equal-compute table picks a family's least regret among its settings no costlier than ours."""
    from benchmarks.sweeps import Sweep, at_equal_compute, oracle_bounds

    s = np.arange(1, 101, dtype=float)
    rng = np.random.default_rng(0)
    best = 0.8 + 0.01 * rng.standard_normal(100)
    late = np.where(s <= 60, 0.8, 0.5) + 0.01 * rng.standard_normal(100)
    sw = Sweep("t", "generated", ["best", "late"], [s, s], [best, late], np.array([0.8, 0.5]), 100.0)
    o = oracle_bounds(sw)
    assert o["hindsight"] == pytest.approx((100 + 20) / 200)
    assert (100 + 60) / 200 <= o["separated"] <= (100 + 75) / 200
    summary = {"g": {"sweeps": 1, "ray: grpofit": {"regret": 0.01, "best_killed": 0.0, "compute": 0.5}}}
    frontier = {
        "g": {
            "settings": {
                "ray: ASHA grace 5% rf 2": {"regret": 0.0, "best_killed": 0.0, "compute": 0.8},
                "ray: ASHA grace 10% rf 2": {"regret": 0.05, "best_killed": 1.0, "compute": 0.4},
                "ray: ASHA grace 20% rf 2": {"regret": 0.02, "best_killed": 1.0, "compute": 0.505},
            }
        }
    }
    rows = [r for r in at_equal_compute(summary, frontier) if r["family"] == "ray: ASHA"]
    assert len(rows) == 1 and rows[0]["setting"] == "ray: ASHA grace 20% rf 2"
