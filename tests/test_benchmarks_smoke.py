"""The benchmark (``python -m tests.benchmarks``) still runs end to end: ``--quick`` sizes."""

from __future__ import annotations

import json

from tests.benchmarks.__main__ import SECTIONS, loglog_slope, main


def test_loglog_slope_of_a_power_law():
    xs = [10, 100, 1000]
    assert abs(loglog_slope(xs, [3 * x for x in xs]) - 1.0) < 1e-9
    assert abs(loglog_slope(xs, [x**2 for x in xs]) - 2.0) < 1e-9


def test_quick_benchmark_runs_every_section(tmp_path, capsys):
    out_json, out_md = tmp_path / "bench.json", tmp_path / "bench.md"
    code = main(["--quick", "--workdir", str(tmp_path / "work"), "--json", str(out_json),
                 "--markdown", str(out_md)])
    doc = json.loads(out_json.read_text())
    assert "failures" not in doc["raw"], doc["raw"].get("failures")
    assert code == 0
    assert set(doc["raw"]) >= set(SECTIONS)
    # figures are real measurements, not placeholders
    fit = doc["raw"]["fit"]
    assert fit["grpofit_s"][0] > 0 and fit["plain_s"][0] > 0 and fit["ratio"] > 0
    assert 0.0 <= fit["grpofit_recovery"]["oscillator"] <= 1.0
    assert fit["grpofit_recovery"]["missing"] == 0
    assert doc["raw"]["sweep"]["judged"]["jobs1"] == doc["config"]["sizes"]["sweep_runs"]
    reading = doc["raw"]["reading"]
    assert reading["csv_mb_per_s"] > 0 and reading["runs"]["csv"]["rss"][0] > 10  # MB, a real process
    assert len(doc["raw"]["growth"]["fit"]["seconds"]) == len(doc["config"]["sizes"]["growth_lengths"])
    # one table, three renderings of the same rows
    md = out_md.read_text()
    assert md.count("\n| ") == len(doc["rows"]) + 1  # header + one line per row
    assert "Machine:" in md and "Machine:" in capsys.readouterr().out
