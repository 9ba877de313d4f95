"""A plateau the run is still moving past is reported as a bound, never as a tight number below
(or, for a falling metric, above) where the run is heading."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.fitting import fit_series
from grpofit.fitting.fitcheck import plateau_statement, still_moving


def _ar(rng, n, sd, phi=0.6):
    e = np.empty(n)
    e[0] = rng.normal(0, sd)
    for i in range(1, n):
        e[i] = phi * e[i - 1] + rng.normal(0, sd * np.sqrt(1 - phi**2))
    return e


def _bound_of(steps, y):
    fit = fit_series(steps, y)
    st = plateau_statement(fit)
    return (st["kind"], st["value"] if st["kind"] != "estimate" else None), st["law_value"]


def test_a_late_climb_past_the_law_gives_a_lower_bound():
    """A jump, a plateau, then a climb the law cannot draw: the late points lie past p*, past
    the law's curve and past its 95% interval while the slope is significant."""
    rng = np.random.default_rng(3)
    steps = np.arange(1.0, 301.0)
    y = 0.6 + 0.3 * (1 - np.exp(-steps / 5)) + 5e-4 * np.clip(steps - 200, 0, None) + _ar(rng, steps.size, 0.01)
    (kind, level), value = _bound_of(steps, y)
    assert kind == "lower_bound"
    # the level reached (the last tenth's mean) less three of its standard errors
    late = plateau_statement_late(steps, y)
    assert late["level_stderr"] > late["stderr"]  # the tenths' means climb
    assert level == pytest.approx(y[-30:].mean() - 3.0 * late["level_stderr"], abs=1e-12)
    assert level < 0.95  # the true curve is at 0.95 at the last step and rising


def plateau_statement_late(steps, y) -> dict:
    from grpofit.fitting.fitcheck import _late_checks

    return _late_checks(fit_series(steps, y))[0]


def _forced_run(seed: int, n_per_stratum: int, index: int, regime: str, forcing_sd: float):
    """Run ``index`` of ``forced_recovery_set(n_per_stratum, seed)`` without drawing the others."""
    from grpofit.testing.synthetic import make_forced_run, sample_forced_truth

    n_strata = 4 * 3  # forcing levels x regimes
    child = np.random.SeedSequence([seed, 0x5EED]).spawn(n_strata * n_per_stratum)[index]
    truth = sample_forced_truth(np.random.default_rng(child), regime=regime, forcing_sd=forcing_sd)
    return truth, make_forced_run(truth, seed=child.spawn(1)[0])


def test_a_settled_run_wandering_above_its_plateau_gets_a_bound_it_holds():
    """A generated run under forcing sd 0.03 (run 911 of the fit targets' held-out seed), settled
    for 30 timescales, wanders above its true plateau 0.675 in its last tenth: the slope test
    and the late data call it still rising past the law's interval [0.623, 0.680]. The bound was
    the level itself, "≥ 0.682", contradicted by the truth; the level less three of its standard
    errors (the late mean's and the wander of its last tenths' means) holds it."""
    truth, table = _forced_run(2026, 100, 911, "overdamped", 0.03)
    assert truth["timescale"] * 30 < truth["length"]
    fit = fit_series(table["step"], table["reward"])
    st = plateau_statement(fit)
    assert st["kind"] == "lower_bound" and st["reason"] == "moving"
    assert st["value"] <= truth["plateau"] < table["reward"][-60:].mean()


@pytest.mark.parametrize("index", [5, 18, 21, 26, 29])
def test_a_settled_generated_run_gets_no_bound_its_plateau_contradicts(index):
    """Runs of the project's generator that had settled: the slope test and the level past p*
    alone printed "p* <= 0.34 (still falling)" and the like, and the true plateau was on the
    other side of the bound (index 18: p* 0.358, bound <= 0.340). The law's estimate stands."""
    from grpofit.testing.synthetic import recovery_set

    truth, table = recovery_set(index + 1, seed=11)[index]
    fit = fit_series(table["step"], table["reward"])
    st = plateau_statement(fit)
    assert st["kind"] == "estimate"
    assert st["ci95"][0] <= truth["plateau"] <= st["ci95"][1]


def test_an_overshoot_the_law_draws_is_not_a_drift_past_it():
    """The late check's ``past_curve``: an underdamped law's curve above its p* (an overshoot it
    fits) is not data past the law."""
    from grpofit.fitting.fitcheck import plateau_bound

    moving = {"direction": "rising", "level": 0.9}
    plateau = {"value": 0.8, "ci95": [0.78, 0.82]}
    assert plateau_bound(plateau, moving, {"disagrees": True, "past_curve": False}) == ("estimate", None)
    assert plateau_bound(plateau, moving, {"disagrees": True, "past_curve": True}) == ("lower_bound", 0.9)
    assert plateau_bound(plateau, moving, {"disagrees": False, "past_curve": True}) == ("estimate", None)
    inside = {"value": 0.8, "ci95": [0.7, 0.95]}  # the level inside the law's own interval
    assert plateau_bound(inside, moving, {"disagrees": True, "past_curve": True}) == ("estimate", None)
    unpinned = {**inside, "note": "plateau not pinned down by the data: interval reaches the fit bounds"}
    assert plateau_bound(unpinned, moving, {"disagrees": True, "past_curve": True}) == ("lower_bound", 0.9)


def test_a_still_falling_loss_gives_an_upper_bound():
    rng = np.random.default_rng(4)
    steps = np.arange(1.0, 301.0)
    y = 2.0 - 1.0 * (1 - np.exp(-steps / 6)) - 2e-3 * np.clip(steps - 200, 0, None) + _ar(rng, steps.size, 0.02)
    (kind, level), value = _bound_of(steps, y)
    late = plateau_statement_late(steps, y)
    assert kind == "upper_bound"
    assert level == pytest.approx(late["still_moving"]["level"] + 3.0 * late["level_stderr"], abs=1e-12)
    assert level > y[-30:].mean()  # the loss is still falling: any plateau is below where it is


@pytest.mark.slow
def test_settled_runs_are_rarely_called_bounds():
    """Saturated runs with correlated noise: the late-slope test is one-sided at 2.5% and the bound
    also needs the level past p*, so few of 40 seeds may be flagged."""
    steps = np.arange(1.0, 401.0)
    flagged = 0
    for seed in range(40):
        rng = np.random.default_rng(100 + seed)
        y = 0.2 + 0.5 * (1 - np.exp(-steps / 40)) + _ar(rng, steps.size, 0.02)
        (kind, _), _ = _bound_of(steps, y)
        flagged += kind != "estimate"
    assert flagged <= 3


def test_long_series_are_tested_on_block_means():
    steps = np.arange(1.0, 200_001.0)
    y = 0.5 + 1e-6 * steps + np.random.default_rng(5).normal(0, 0.01, steps.size)
    moving = still_moving(steps, y)
    assert moving["direction"] == "rising"
    assert abs(moving["slope_per_step"] - 1e-6) < 2e-7


@pytest.mark.slow
@pytest.mark.real_logs
def test_fit_and_forecast_state_one_plateau(capsys):
    """rasbt 7_6 conditional: ``fit`` printed "≥ 0.975 (still rising)" and ``forecast`` "at least
    1.17": two plateau statements for one run. The forecast now renders the fit's."""
    import json

    from tests.conftest import run_cli
    from tests.reallogs import real_log

    path = real_log("rasbt_grpo_qwen3-0.6b_7_6_format_reward_conditional.csv")
    fit = json.loads(run_cli(capsys, "fit", path, "--format", "json")[1])["runs"][0]
    fc = json.loads(run_cli(capsys, "forecast", path, "--format", "json")[1])["runs"][0]
    law = fit["models"][fit["preferred"]]["params"]["plateau"]
    assert fc["plateau"]["kind"] == law["kind"] and fc["plateau"]["source"] == "fit"
    want = law["bound"] if law["kind"] != "estimate" else law["value"]
    assert fc["plateau"]["value"] == pytest.approx(want, rel=1e-9)
    if law["kind"] == "estimate":
        assert fc["plateau"]["ci95"] == pytest.approx(law["ci95"], rel=1e-9)
    fit_text = run_cli(capsys, "fit", path)[1]
    fc_text = run_cli(capsys, "forecast", path)[1]
    row = next(x for x in fc_text.splitlines() if x.startswith("│ plateau"))
    cell = row.split("│")[2].strip()
    value, _, interval = cell.partition(" ")  # the fit's row also gives the stderr: 'v ± se [lo, hi]'
    assert value and value in fit_text and interval in fit_text


@pytest.mark.parametrize(("index", "cut"), [(84, 4.0), (210, 4.0), (125, 4.0)])
def test_an_unidentified_plateau_s_bound_allows_for_the_noise_of_the_level(index, cut):
    """Generated runs (seed 2026) cut at four times their slowest time: their law's p* is not
    pinned down, so the plateau is stated as at least the level reached. At the level itself
    (the last tenth's mean, a little above the plateau by chance) the true plateau contradicted
    it (run 84: '≥ 0.716' for a true 0.714); three of the level's standard errors below, it holds."""
    from grpofit.testing.synthetic import make_run_table, sample_truth

    child = np.random.SeedSequence([2026, 0x67F]).spawn(240)[index]
    truth = sample_truth(np.random.default_rng(child))
    table = make_run_table(truth, seed=child.spawn(1)[0])
    t = table["step"] - table["step"][0]
    keep = t <= cut * max(truth["timescale"], 2.0 * truth["inertia"])
    fit = fit_series(table["step"][keep], table["reward"][keep])
    st = plateau_statement(fit)
    late = plateau_statement_late(table["step"][keep], table["reward"][keep])
    assert st["kind"] == "lower_bound" and st["reason"] == "unidentified"
    assert st["value"] == pytest.approx(late["still_moving"]["level"] - 3.0 * late["level_stderr"], rel=1e-9)
    assert st["value"] <= truth["plateau"] < late["still_moving"]["level"]
