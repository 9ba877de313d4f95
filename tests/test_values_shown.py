"""Values the data did not identify print as '–'; values consistent with zero and plateaus that
miss the late data are marked (issue 13, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
REAL = ROOT.parent / "shared" / "real_logs"
VERLPR = REAL / "verlpr3389_ppo_qwen25_05b_dp2_run1.parsed.csv"


def _row(out: str, name: str) -> list[str]:
    line = next(x for x in out.splitlines() if name in x and "│" in x)
    return [c.strip() for c in line.strip("│ ").split("│")]


def test_unidentified_values_are_a_dash_and_zero_is_marked(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli(capsys, "diagnose", SAMPLES / "dead_run", SAMPLES / "group_sweep" / "bandit_G4.csv",
                           SAMPLES / "healthy_slow_start.csv")
    head = _row(out.replace("┃", "│"), "1/K_eff")
    dead = dict(zip(head, _row(out, "dead_run")))
    assert dead["1/K_eff"] == "–" and dead["inertia"] == "–"  # was 1.78 and 2489
    g4 = dict(zip(head, _row(out, "bandit_G4.csv")))
    assert g4["inertia"].endswith("(≈0)")  # its 95% interval holds zero
    healthy = dict(zip(head, _row(out, "healthy_slow_start.csv")))
    assert healthy["inertia"] == "22.3" and healthy["p*"] == "0.729"


@pytest.mark.skipif(not VERLPR.exists(), reason="shared/real_logs not present")
def test_a_plateau_below_the_late_data_is_not_a_quiet_pass(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli(capsys, "diagnose", VERLPR)
    cells = _row(out, "verlpr3389")
    assert cells[2] == "0.399 !"
    assert f"{VERLPR}: fit: p* 0.399 misses the late data: steps 88-116 (29 points) average 0.503, " \
           "100% of them above p*" in out.replace(str(ROOT) + "/", "")
    code, out, _ = run_cli(capsys, "diagnose", VERLPR, "--format", "json")
    check = json.loads(out)["runs"][0]["fit_check"]
    assert check["disagrees"] and check["late_mean"] == pytest.approx(0.503, abs=0.001)
    code, out, _ = run_cli(capsys, "diagnose", VERLPR, "--format", "markdown")
    assert "| 0.399 ! |" in out and "misses the late data" in out
    code, out, _ = run_cli(capsys, "fit", VERLPR)
    assert "p* 0.399 misses the late data" in out


def test_a_good_fit_is_not_marked(capsys):
    for run in ("healthy_slow_start.csv", "bandit_g16.csv", "bandit_oscillating.jsonl"):
        code, out, _ = run_cli(capsys, "diagnose", SAMPLES / run, "--format", "json")
        assert json.loads(out)["runs"][0]["fit_check"]["disagrees"] is False


def test_fit_table_shows_no_number_for_what_was_not_identified(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = run_cli(capsys, "fit", SAMPLES / "dead_run")
    assert code == 0
    for label in ("timescale 1/K_eff", "inertia M/C", "damping ratio"):
        row = next(x for x in out.splitlines() if label in x)
        cells = [c.strip() for c in row.split("│")[1:-1]]
        assert all(c in ("", ) or c.startswith("– (not identifiable: no significant rise") for c in cells[1:]), row
    assert "2489" not in out and "1.78" not in out  # the numbers the issue saw printed as if identified
    code, out, _ = run_cli(capsys, "fit", SAMPLES / "dead_run", "--format", "json")
    inertia = json.loads(out)["runs"][0]["models"]["oscillator"]["params"]["inertia"]
    assert inertia["value"] is not None and inertia["ci95"] is None  # JSON keeps the number, with its note
