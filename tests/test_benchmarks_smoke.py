"""The benchmark (``python -m benchmarks``) still runs end to end: ``--quick`` sizes."""

from __future__ import annotations

import json

import pytest

from benchmarks.__main__ import SECTIONS, growth_slope, loglog_slope, main


def test_heldout_runs_follow_the_forced_oscillator():
    from benchmarks.data import forced_oscillator_runs

    runs = forced_oscillator_runs(30, n_steps=400, seed=1)
    for run in runs:
        truth = run["truth"]
        late = run["reward"][-100:].mean()
        # binomial means of a relaxed run sit near the plateau (4 sd of the noise at the least batch)
        if truth["process_sd"] == 0 and truth["timescale"] < 60 and truth["damping_ratio"] > 0.5:
            assert abs(late - truth["plateau"]) < 4 * 0.5 / (truth["batch"] * 100) ** 0.5 + 0.01
        assert truth["inertia"] == __import__("pytest").approx(truth["timescale"] / (4 * truth["damping_ratio"] ** 2))
    assert {r["truth"]["format"] for r in runs} == {"csv", "jsonl", "trainer_state", "wandb_csv"}


def test_loglog_slope_of_a_power_law():
    xs = [10, 100, 1000]
    assert abs(loglog_slope(xs, [3 * x for x in xs]) - 1.0) < 1e-9
    assert abs(loglog_slope(xs, [x**2 for x in xs]) - 2.0) < 1e-9


def test_growth_slope_subtracts_the_fixed_cost_from_both_axes():
    xs = [10, 30, 100, 300]
    linear = [[1.5 + 0.03 * x * (1 + e) for e in (-0.01, 0.0, 0.01)] for x in xs]
    slope, se, fixed = growth_slope(xs, linear)
    assert abs(slope - 1.0) < 0.02 and se < 0.05 and abs(fixed - 1.8) < 1e-9
    # the old reading, log(t - t0) on log x, calls the same linear times superlinear
    assert loglog_slope(xs[1:], [1.5 + 0.03 * x - 1.8 for x in xs[1:]]) > 1.1
    quadratic = [[1.5 + 1e-4 * x**2] * 3 for x in xs]
    assert growth_slope(xs, quadratic)[0] > 1.6


@pytest.mark.slow
def test_quick_benchmark_runs_every_section(tmp_path, capsys):
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    code = main(["--quick", "--workdir", str(tmp_path / "work"), "--json", str(out_json), "--markdown", str(out_md)])
    doc = json.loads(out_json.read_text())
    assert "failures" not in doc["raw"], doc["raw"].get("failures")
    assert code == 0
    assert set(doc["raw"]) >= set(SECTIONS)
    # figures are real measurements, not placeholders
    fit = doc["raw"]["fit"]
    counts = doc["config"]["sizes"]["fit_counts"]
    for n in counts:
        cell = fit["measures"][str(n)]
        for tool in ("grpofit", "plain"):
            assert cell[tool]["wall"][0] > 0 and cell[tool]["cpu"][0] > 0 and cell[tool]["rss"][0] > 10
        assert len(fit["paired_ratios"][str(n)]["wall"]) == doc["config"]["repeats"]
    assert fit["errors"] == 0
    stages = fit["stages"]["min_s"]
    assert set(stages["grpofit"]) == {"read", "fit", "entry"} and set(stages["plain"]) == {"read", "fit"}
    assert all(v > 0 for tool in stages.values() for v in tool.values())
    assert sum(c["n"] for c in fit["recovery"].values()) == max(counts)
    assert doc["raw"]["sweep"]["judged"]["jobs1"] == doc["config"]["sizes"]["sweep_runs"]
    assert doc["raw"]["sweep"]["paired_speedups"][0] > 0
    reading = doc["raw"]["reading"]
    assert reading["csv_mb_per_s"] > 0 and reading["runs"]["csv"]["rss"][0] > 10  # MB, a real process
    readers = doc["raw"]["readers"]
    rows = doc["config"]["sizes"]["reader_rows"]
    assert {f"{f}_{r}" for f in ("csv", "jsonl", "trainer_state", "wandb_csv", "tfevents") for r in rows} <= set(
        readers
    )
    assert readers[f"csv_{rows[0]}"]["peer_s"] and readers[f"csv_{rows[0]}"]["ratio"] > 0
    assert set(readers["pandas_imported_for_small_files"]) == {
        "csv",
        "jsonl",
        "trainer_state",
        "wandb_csv",
        "tfevents",
        "typed_jsonl",
    }
    assert not readers["pandas_imported_for_small_files"]["typed_jsonl"]
    for fmt in ("csv", "wandb_csv"):  # the fresh-process view: real processes, both tools
        fresh = readers["fresh_process"][fmt]
        assert min(fresh["grpofit"]["wall"]) > 0.01 and min(fresh["pandas"]["wall"]) > 0.01 and fresh["ratio_wall"] > 0
    assert doc["raw"]["long_fit"]["rss_mb"][0] > 10
    assert len(doc["raw"]["growth"]["fit"]["seconds"]) == len(doc["config"]["sizes"]["growth_lengths"])
    fc = doc["raw"]["forecast"]
    assert len(fc["forecast"]["cpu"]) == doc["config"]["sizes"]["forecast_files"] and min(fc["backtest"]["wall"]) > 0
    # one table, three renderings of the same rows
    md = out_md.read_text()
    assert md.count("\n| ") == len(doc["rows"]) + 1  # header + one line per row
    assert "Machine:" in md and "Machine:" in capsys.readouterr().out
