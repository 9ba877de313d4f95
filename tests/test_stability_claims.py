"""the stability threshold ratios are computed, not a rule; an exact tie is marginal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpofit.cli import app  # noqa: F401  (the CLI module must import)
from grpofit.dynamics import critical_refresh_interval, exact_fixed_delay, predict
from grpofit.dynamics.bandit import fixed_point
from tests.doc_pages import docs_text

ROOT = Path(__file__).resolve().parents[1]


def _ratios(lr, mu, K):
    ck = (1 - mu) / (lr * K)
    return (critical_refresh_interval(lr, mu, K, "fixed") / ck, critical_refresh_interval(lr, mu, K, "sawtooth") / ck)


@pytest.mark.slow
def test_ratio_is_not_pi_over_2_and_2_at_high_momentum():
    fx, sw = _ratios(0.01, 0.9, 1.0)
    assert fx == pytest.approx(1.2) and sw == pytest.approx(3.8)
    fx0, sw0 = _ratios(0.01, 0.0, 1.0)
    assert fx0 == pytest.approx(1.57) and sw0 == pytest.approx(2.0)  # the old rule holds only at small mu


def test_predict_prints_the_ratio_it_computed():
    doc = predict(0.01, 0.9, 1, 1.0).summary()
    assert doc["threshold_ratio"] == pytest.approx({"fixed_delay": 1.2, "sawtooth": 3.8})
    note = next(n for n in doc["notes"] if n.startswith("critical refresh interval"))
    assert "12 = 1.2x" in note and "38 = 3.8x" in note
    assert "pi/2" not in " ".join(doc["notes"])


def test_readme_ratios_come_from_the_exact_recursions():
    readme = docs_text()
    assert "conservative by about `pi/2`" not in readme
    K = fixed_point(8, 1, 1.0, 0).curvature
    fixed, saw = zip(*(_ratios(0.1, mu, K) for mu in (0.0, 0.5, 0.9)))
    line = "exact fixed delay is " + ", ".join(f"{r:.2f}x" for r in fixed[:2]) + f" and {fixed[2]:.2f}x"
    assert line in readme
    assert ("exact sawtooth " + ", ".join(f"{r:.2f}x" for r in saw[:2]) + f" and {saw[2]:.2f}x") in readme
    fx, sw = _ratios(0.01, 0.9, 1.0)
    assert f"{fx:.1f}x and {sw:.1f}x" in readme


def test_exact_tie_is_marginal_on_every_line():
    # eta K = 1 - mu at K_ref = 1: the fixed-delay roots sit exactly on the unit circle
    doc = predict(0.00005, 0.9, 1, 2000.0).summary()
    assert doc["regime"] == "marginal" and doc["stable"] is False
    fx = doc["exact_fixed_delay"]
    assert fx["spectral_radius"] == pytest.approx(1.0, abs=1e-9)
    assert fx["regime"] == "marginal" and fx["stable"] is False
    # stable iff the refresh interval is below the critical one, on every line
    for ex in (doc["exact_fixed_delay"], doc["exact_sawtooth"]):
        assert ex["stable"] == (1 < ex["critical_refresh_interval"])
    assert doc["stable"] == (1 < doc["critical_refresh_interval"] - 1e-9)
    # just off the tie the answers are decided again
    assert exact_fixed_delay(0.0000499, 0.9, 1, 2000.0).stable is True
    assert exact_fixed_delay(0.0000501, 0.9, 1, 2000.0).stable is False


def test_cli_tie_line_is_consistent(capsys):
    from grpofit.cli import main

    with pytest.raises(SystemExit) as ex:
        main(
            [
                "predict",
                "--lr",
                "0.00005",
                "--momentum",
                "0.9",
                "--refresh-interval",
                "1",
                "--curvature",
                "2000",
                "--format",
                "json",
            ]
        )
    assert ex.value.code in (0, None)
    doc = json.loads(capsys.readouterr().out)
    assert doc["exact_fixed_delay"]["stable"] is False and doc["exact_fixed_delay"]["regime"] == "marginal"


@pytest.mark.parametrize(
    "args",
    [
        ["--lr", "0.01", "--momentum", "0.9", "--refresh-interval", "1", "--curvature", "1"],
        ["--lr", "0.00005", "--momentum", "0.9", "--refresh-interval", "1", "--curvature", "2000"],
    ],
)
def test_issue_predict_commands_print_their_table(capsys, args):
    """The issue's exact commands, in the default table form (the inputs without a run are plain
    numbers: printing them crashed)."""
    from grpofit.cli import main

    with pytest.raises(SystemExit) as ex:
        main(["predict", *args])
    out = capsys.readouterr().out
    assert ex.value.code in (0, None)
    assert "critical refresh interval, computed for these inputs" in " ".join(out.split())
