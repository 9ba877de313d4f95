"""Tests of fit_series: seeded recovery targets, honest intervals, edge cases, real logs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.recovery import run_recovery
from grpofit.core.errors import TooFewPoints
from grpofit.fitting import (
    CRITICAL_BAND,
    MIN_POINTS,
    PREFER_DELTA_BIC,
    FitResult,
    fit_series,
    regime_rule,
)
from grpofit.laws.models import oscillator
from grpofit.laws.registry import MODELS
from grpofit.testing.synthetic import make_run_table, recovery_set
from tests.reallogs import real_log


def _json(result: FitResult) -> dict:
    text = json.dumps(result.summary(), allow_nan=False)  # raises on NaN / inf
    return json.loads(text)


@pytest.fixture(scope="module")
def recovery():
    return run_recovery(36, seed=7, baseline=False)


@pytest.mark.slow
def test_recovery_targets(recovery):
    # targets from the issue, with a little slack for the small sample (benchmarks/recovery.py
    # checks the full targets on 120 runs)
    assert recovery["recovered"] >= 0.90
    assert recovery["confident_wrong"] <= 0.03
    assert 0.80 <= recovery["plateau_coverage"] <= 1.0
    assert recovery["regime_wrong"] <= 0.04
    # the observed-overshoot test's null includes the wander the settled run shows (issue 37:
    # overdamped runs under process noise were called oscillating); on these runs' own OU forcing
    # it leaves more weak underdamped overshoots (zeta 0.6-0.7) unproven: indeterminate 0.33 ->
    # 0.5 here, 0.34/0.27/0.24 -> 0.47/0.39/0.36 on 120 runs of seeds 0/1/2; never a wrong regime
    assert recovery["regime_indeterminate"] <= 0.5


def test_recovery_results_are_json_safe(recovery):
    for row in recovery["rows"]:
        out = _json(row["result"])
        assert set(out["models"]) == set(MODELS)
        assert out["preferred"] in MODELS
        assert out["models"]["oscillator"]["regime"] in ("overdamped", "critical", "underdamped", "indeterminate")


def test_summary_matches_contract_shape():
    truth = {
        "plateau": 0.7,
        "initial": 0.05,
        "timescale": 40.0,
        "inertia": 6.0,
        "length": 480,
        "batch": 256,
        "start": 1,
    }
    table = make_run_table(truth, seed=3)
    res = fit_series(table["step"], table["reward"], run="logs/run.csv", metric="reward", step_column="step")
    out = _json(res)
    assert out["run"] == "logs/run.csv" and out["metric"] == "reward"
    assert out["step_column"] == "step"
    assert out["n_points"] == 481
    assert out["steps"] == [1, 481] and all(isinstance(s, int) for s in out["steps"])
    exp, osc = out["models"]["exponential"], out["models"]["oscillator"]
    assert set(exp) >= {"r2", "aic", "bic", "params"}
    assert list(exp["params"]) == ["plateau", "initial", "timescale"]
    assert list(osc["params"]) == ["plateau", "initial", "timescale", "inertia", "damping_ratio"]
    for p in (*exp["params"].values(), *osc["params"].values()):
        assert set(p) >= {"value", "stderr", "ci95"}
    assert osc["params"]["plateau"]["ci95"][0] <= 0.7 <= osc["params"]["plateau"]["ci95"][1]
    assert set(out["noise"]) >= {"noise_sd", "residual_sd", "r2_ceiling", "fit_vs_noise"}
    # the slow start is visible: the oscillator wins by more than the BIC margin
    assert exp["bic"] - osc["bic"] > PREFER_DELTA_BIC
    assert out["preferred"] == "oscillator"
    # predict works on absolute steps
    curve = res.models["oscillator"].predict(np.array([1.0, 481.0]))
    assert curve[0] == pytest.approx(0.05, abs=0.03) and curve[1] == pytest.approx(0.7, abs=0.02)


def test_time_origin_is_first_logged_step():
    t = np.arange(0, 600, 10.0)
    y = oscillator(t, 0.8, 0.1, 50.0, 0.0) + 0.002 * np.sin(t)
    a = fit_series(t, y)
    b = fit_series(t + 101, y)
    for name in ("plateau", "initial", "timescale"):
        va = a.models["exponential"].params[name].value
        vb = b.models["exponential"].params[name].value
        assert va == pytest.approx(vb, rel=1e-6)
    assert a.models["exponential"].params["initial"].value == pytest.approx(0.1, abs=0.01)


def test_regime_rule():
    assert regime_rule((1.2, None))[0] == "overdamped"
    assert regime_rule((0.3, 0.8))[0] == "underdamped"
    assert regime_rule((0.8, 1.3))[0] == "indeterminate"
    assert regime_rule((0.95, 1.05))[0] == "critical"
    assert regime_rule(None)[0] == "indeterminate"
    assert CRITICAL_BAND == (0.9, 1.1)


def test_too_few_points_names_the_run():
    with pytest.raises(TooFewPoints) as err:
        fit_series(np.arange(MIN_POINTS - 1), np.linspace(0, 1, MIN_POINTS - 1), run="a.csv")
    assert err.value.path == "a.csv" and err.value.minimum == MIN_POINTS
    assert "a.csv" in err.value.one_line()
    # NaN points do not count
    y = np.full(20, np.nan)
    y[:5] = 1.0
    with pytest.raises(TooFewPoints):
        fit_series(np.arange(20), y)


def _check_clean(res: FitResult):
    out = _json(res)
    for m in out["models"].values():
        for name, p in m["params"].items():
            if p["value"] is not None and p["ci95"] is None and p["stderr"] is None:
                assert p.get("note"), name  # missing numbers say why
    return out


@pytest.mark.parametrize("n", [8, 9, 10])
def test_few_points(n):
    rng = np.random.default_rng(n)
    t = np.arange(n) * 10.0
    y = oscillator(t, 0.6, 0.1, 20.0, 2.0) + rng.normal(0, 0.03, n)
    out = _check_clean(fit_series(t, y))
    assert out["n_points"] == n


def test_short_noisy_run():
    rng = np.random.default_rng(1)
    t = np.arange(0, 30.0)
    y = np.clip(oscillator(t, 0.5, 0.2, 8.0, 1.0) + rng.normal(0, 0.15, t.size), 0, 1)
    out = _check_clean(fit_series(t, y))
    # a short noisy run: low R^2 is explained by the noise floor
    assert out["noise"]["r2_ceiling"] is not None and out["noise"]["r2_ceiling"] < 0.6


def test_flat_run_has_no_timescale():
    rng = np.random.default_rng(2)
    t = np.arange(0, 300.0, 5)
    y = 0.4 + rng.normal(0, 0.03, t.size)
    out = _check_clean(fit_series(t, y))
    osc = out["models"]["oscillator"]
    assert osc["regime"] == "indeterminate"
    assert osc["params"]["timescale"]["ci95"] is None and "note" in osc["params"]["timescale"]
    assert 0.38 < osc["params"]["plateau"]["value"] < 0.42


def test_falling_run():
    rng = np.random.default_rng(3)
    t = np.arange(0, 500.0, 2)
    y = oscillator(t, 0.2, 0.9, 60.0, 5.0) + rng.normal(0, 0.02, t.size)
    out = _check_clean(fit_series(t, y))
    p = out["models"]["oscillator"]["params"]
    assert p["plateau"]["value"] == pytest.approx(0.2, abs=0.02)
    assert p["initial"]["value"] == pytest.approx(0.9, abs=0.05)
    assert p["timescale"]["value"] == pytest.approx(60.0, rel=0.25)


def test_constant_values():
    out = _check_clean(fit_series(np.arange(50.0), np.full(50, 0.25)))
    for m in out["models"].values():
        assert m["r2"] is None
        assert m["params"]["plateau"]["value"] == pytest.approx(0.25)
        assert m["params"]["timescale"]["value"] is None
    assert out["models"]["oscillator"]["regime"] == "indeterminate"
    assert out["noise"]["r2_ceiling"] is None


def test_unsaturated_run_does_not_extrapolate():
    # still rising linearly at the end: the plateau must stay near the data and say so
    rng = np.random.default_rng(4)
    t = np.arange(0, 200.0)
    y = 0.1 + 0.002 * t + rng.normal(0, 0.02, t.size)
    res = fit_series(t, y)
    out = _check_clean(res)
    hi = float(np.max(y)) + (float(np.max(y)) - float(np.min(y)))
    for m in out["models"].values():
        plat = m["params"]["plateau"]
        assert plat["value"] <= hi + 1e-9
        if plat["ci95"] is not None:
            assert plat["ci95"][1] <= hi + 1e-9
            assert plat["ci95"][1] - plat["ci95"][0] > 0.05 or plat.get("note")


def test_underdamped_run_is_called_underdamped():
    truth = {
        "plateau": 0.8,
        "initial": 0.1,
        "timescale": 40.0,
        "inertia": 40.0 / (4 * 0.35**2),
        "length": 1500,
        "stride": 1,
        "batch": 256,
        "forcing_sd": 0.003,
        "forcing_time": 20,
    }
    table = make_run_table(truth, seed=11)
    res = fit_series(table["step"], table["reward"])
    osc = res.models["oscillator"]
    assert osc.regime == "underdamped"
    lo, hi = osc.params["damping_ratio"].ci95
    assert hi < 1.0 and lo <= osc.params["damping_ratio"].value <= hi
    assert osc.params["damping_ratio"].value == pytest.approx(0.35, rel=0.15)


def test_strongly_overdamped_run_has_open_damping_interval():
    truth = {
        "plateau": 0.7,
        "initial": 0.1,
        "timescale": 60.0,
        "inertia": 0.0,
        "length": 800,
        "stride": 2,
        "batch": 128,
    }
    table = make_run_table(truth, seed=5)
    res = fit_series(table["step"], table["reward"])
    osc = res.models["oscillator"]
    assert osc.regime in ("overdamped", "indeterminate")
    zci = osc.params["damping_ratio"].ci95
    assert zci is not None and zci[1] is None  # inertia consistent with 0: no upper end
    assert osc.params["inertia"].ci95[0] == 0.0
    assert res.preferred == "exponential"


def test_deterministic():
    truth, table = recovery_set(1, seed=9)[0]
    a = fit_series(table["step"], table["reward"]).summary()
    b = fit_series(table["step"], table["reward"]).summary()
    assert a == b


# ---------------------------------------------------------------------------------------------
# real logs


@pytest.mark.real_logs
def test_real_log_slow_start():
    path = real_log("verlpr3389_ppo_qwen25_05b_dp2_run1.parsed.csv")
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(path)
    s = df[["step", "critic/rewards/mean"]].dropna()
    res = fit_series(
        s["step"].to_numpy(),
        s["critic/rewards/mean"].to_numpy(),
        run=str(path),
        metric="critic/rewards/mean",
        step_column="step",
    )
    out = _json(res)
    exp, osc = res.models["exponential"], res.models["oscillator"]
    assert osc.ssr < exp.ssr and osc.aic < exp.aic
    assert out["preferred"] == "oscillator"
    # sane numbers: the run has barely saturated at 116 steps (late level ~0.46), so the
    # plateau is uncertain but its interval holds the late level; a slow start of tens of steps
    tail = float(s["critic/rewards/mean"].to_numpy()[-20:].mean())
    lo, hi = osc.params["plateau"].ci95
    assert 0.35 < osc.params["plateau"].value < 0.55 and lo <= tail <= hi
    assert -0.02 <= osc.params["initial"].value < 0.08
    assert 5.0 < osc.params["timescale"].value < 120.0
    assert osc.params["inertia"].value > 1.0
    assert osc.r2 > 0.85
    assert out["steps"] == [1, 116]


# ---------------------------------------------------------------------------------------------
# no signal, unobserved turn-over, HAC identity


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_binomial_noise_is_indeterminate(seed):
    # a dead run: reward ~0.01 from 256 binary rewards per step, no rise at all
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 251, dtype=float)
    y = rng.binomial(256, 0.01, steps.size) / 256
    res = fit_series(steps, y)
    out = _check_clean(res)
    assert out["signal"]["detected"] is False
    assert out["preferred"] == "exponential"
    osc = out["models"]["oscillator"]
    assert osc["regime"] == "indeterminate" and "no significant rise" in osc["regime_reason"]
    for name in ("timescale", "inertia", "damping_ratio"):
        assert osc["params"][name]["ci95"] is None and "not identifiable" in osc["params"][name]["note"]
    assert out["models"]["exponential"]["params"]["timescale"]["ci95"] is None


def test_dead_sample_log_is_not_an_oscillation():
    path = Path(__file__).resolve().parents[1] / "sample_logs" / "dead_run"
    if not path.exists():
        pytest.skip("sample log not available")
    from grpofit.readers import read_path

    run = read_path(str(path))[0]
    col = "train/reward"
    ok = np.isfinite(run.metrics[col])
    res = fit_series(run.steps[ok], run.metrics[col][ok])
    assert res.models["oscillator"].regime == "indeterminate"
    assert res.preferred == "exponential"


def test_clear_rise_has_signal():
    truth = {"plateau": 0.7, "initial": 0.1, "timescale": 60.0, "inertia": 0.0, "length": 600}
    table = make_run_table(truth, seed=1)
    res = fit_series(table["step"], table["reward"])
    assert res.signal["detected"] is True
    assert res.models["oscillator"].params["timescale"].ci95 is not None


@pytest.mark.real_logs
def test_real_log_unobserved_turn_over_is_indeterminate():
    path = real_log("verlpr3389_ppo_qwen25_05b_dp2_run1.parsed.csv")
    pd = pytest.importorskip("pandas")
    s = pd.read_csv(path)[["step", "critic/rewards/mean"]].dropna()
    y = s["critic/rewards/mean"].to_numpy()
    res = fit_series(s["step"].to_numpy(), y)
    osc = res.models["oscillator"]
    # the fitted underdamped curve would peak near the end and fall back to ~0.40, which is
    # never observed: no call, and the plateau interval holds the observed late level
    assert osc.regime == "indeterminate" and "turn-over not observed" in osc.regime_reason
    lo, hi = osc.params["plateau"].ci95
    tail = float(y[-20:].mean())
    assert lo <= tail <= hi
    zlo, zhi = osc.params["damping_ratio"].ci95
    assert zhi is None or zhi >= 1.0


def test_hac_meat_is_the_bartlett_sum():
    from grpofit.fitting.hac import hac_meat, hac_scalar

    rng = np.random.default_rng(0)
    s = rng.normal(size=(60, 3))
    for bw in (1, 4, 17, 60):
        direct = s.T @ s
        for j in range(1, bw):
            g = s[j:].T @ s[:-j]
            direct = direct + (1 - j / bw) * (g + g.T)
        assert np.allclose(hac_meat(s, bw), direct)
        assert np.allclose(hac_scalar(s.T, bw), np.diag(direct))


# ---------------------------------------------------------------------------------------------
# the direct MINPACK solve: lmfit-equivalent, lmfit-free, overflow-safe


@pytest.mark.slow
def test_direct_solve_reaches_lmfit_optimum():
    """On 20 seeded recovery runs the direct MINPACK solve (the hot path) and lmfit fitting
    :func:`grpofit.laws.models.lmfit_model` from the same start, with the same bounds and weights,
    reach the same optimum: the evidence that the fits are lmfit-equivalent."""
    pytest.importorskip("lmfit")
    from grpofit.fitting.solve import solve
    from grpofit.laws.models import EXPONENTIAL, OSCILLATOR, lmfit_model

    worst = 0.0
    for truth, table in recovery_set(20, seed=3):
        b, bounds, starts = _problem(table)
        for spec in (EXPONENTIAL, OSCILLATOR):
            direct = solve(spec, b, starts[spec.name], bounds)
            assert direct.ok and direct.method == "lm"
            model = lmfit_model(spec.name)
            params = model.make_params()
            for k in spec.param_names:
                lo, hi = bounds[k]
                params[k].set(value=float(np.clip(starts[spec.name][k], lo, hi)), min=lo, max=hi)
            ref = model.fit(b.y, params, t=b.t, weights=np.sqrt(b.w), method="leastsq")
            x = {k: ref.params[k].value for k in spec.param_names}
            # never worse than lmfit; it may be slightly better when the optimum is on the
            # inertia bound 0 (lmfit's bound transform stalls just short of it: seed 3 run 5)
            rel = (direct.ssr - ref.chisqr) / ref.chisqr
            worst = max(worst, rel)
            assert -1e-4 <= rel <= 1e-6, (spec.name, direct.x, x)
            assert direct.x[0] == pytest.approx(x["plateau"], abs=1e-3)
            assert direct.x[2] == pytest.approx(x["timescale"], rel=0.01)
    assert worst <= 1e-6


def test_lmfit_model_guess_and_bounds():
    pytest.importorskip("lmfit")
    from grpofit.laws.models import OSCILLATOR, lmfit_model

    t = np.arange(0, 400.0, 2)
    y = oscillator(t, 0.7, 0.1, 50.0, 20.0) + np.random.default_rng(0).normal(0, 0.01, t.size)
    model = lmfit_model("oscillator", t, y)
    params = model.make_params()
    bounds = OSCILLATOR.bounds(t, y)
    for k in OSCILLATOR.param_names:
        assert (params[k].min, params[k].max) == bounds[k]
    assert model.guess(y, t=t)["plateau"].value == pytest.approx(params["plateau"].value)
    fit = model.fit(y, params, t=t)
    assert fit.params["plateau"].value == pytest.approx(0.7, abs=0.01)
    assert fit.params["timescale"].value == pytest.approx(50.0, rel=0.1)


@pytest.mark.slow
@pytest.mark.subprocess
def test_fit_path_does_not_import_lmfit_or_scipy():
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from grpofit.fitting import fit_series\n"
        "t = np.arange(300.0)\n"
        "fit_series(t, 1 - np.exp(-t / 30) + 0.01 * np.sin(t))\n"
        "fit_series(t, 0.7 - 0.6 * np.exp(-t / 40) + 0.01 * np.sin(t))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('lmfit', 'scipy')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        check=True,
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_hit_is_refitted_to_the_bounded_optimum(seed):
    # still rising at the end: the plateau wants to go beyond one data range above the data;
    # the direct solve holds it at its bound and reaches lmfit's bounded optimum
    pytest.importorskip("lmfit")
    from grpofit.fitting.profile import log_bins
    from grpofit.fitting.solve import solve, solve_lmfit
    from grpofit.laws.models import EXPONENTIAL, OSCILLATOR

    t = np.arange(0, 200.0)
    y = 0.1 + 0.002 * t + np.random.default_rng(seed).normal(0, 0.02, t.size)
    b = log_bins(t, y)
    start = {"plateau": 0.5, "initial": 0.1, "timescale": 100.0, "inertia": 5.0}
    for spec in (EXPONENTIAL, OSCILLATOR):
        bounds = spec.bounds(t, y)
        sol = solve(spec, b, start, bounds)
        ref = solve_lmfit(spec, b, start, bounds)
        assert sol.ok and sol.method == "lm+fixed"
        for k, v in zip(spec.param_names, sol.x):
            lo, hi = bounds[k]
            assert lo - 1e-9 <= v <= hi + 1e-9
        assert sol.x[0] == pytest.approx(bounds["plateau"][1])
        assert sol.ssr <= ref.ssr * (1 + 1e-6)
        assert sol.ssr == pytest.approx(ref.ssr, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", ["big_values", "big_steps", "tiny_values", "tiny_steps", "huge_constant", "near_double_max"]
)
def test_extreme_magnitudes_give_clean_verdicts(case):
    import warnings

    t = np.arange(100.0)
    y0 = 0.2 + 0.6 * (1 - np.exp(-t / 20)) + 0.01 * np.sin(1.3 * t)
    steps, values = {
        "big_values": (t, 1e300 * y0),
        "big_steps": (t * 1e300, y0),
        "tiny_values": (t, 1e-300 * y0),
        "tiny_steps": (t * 1e-300, y0),
        "huge_constant": (t, np.full(t.size, 1.7e308)),
        "near_double_max": (t * 1e300, -1.7e308 * (y0 - 0.5)),
    }[case]
    ref = fit_series(t, y0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning (overflow) may escape
        res = fit_series(steps, values)
        out = _check_clean(res)
    osc = out["models"]["oscillator"]
    if case == "huge_constant":
        assert osc["params"]["plateau"]["value"] == 1.7e308
        assert osc["params"]["timescale"]["value"] is None
        return
    # the method is affine-invariant: same verdict as the ordinary series, in the new units
    assert out["preferred"] == ref.preferred
    assert osc["regime"] == ref.models["oscillator"].regime
    assert osc["r2"] == pytest.approx(ref.models["oscillator"].r2, rel=1e-6)
    s = (values[-1] - values[0]) / (y0[-1] - y0[0])
    c = values[0] - s * y0[0]
    tau = (steps[-1] - steps[0]) / (t[-1] - t[0])
    p_ref = ref.models["oscillator"].params
    assert osc["params"]["plateau"]["value"] == pytest.approx(
        c + s * p_ref["plateau"].value, rel=1e-5, abs=abs(s) * 1e-5
    )
    assert osc["params"]["timescale"]["value"] == pytest.approx(tau * p_ref["timescale"].value, rel=1e-4)
    with np.errstate(all="raise"):
        curve = res.models["oscillator"].predict(steps[[0, -1]])
    assert np.all(np.isfinite(curve))


# ---------------------------------------------------------------------------------------------
# the numpy Levenberg-Marquardt solver (grpofit.fitting.lm): MINPACK's optimum without scipy


def _solve_both(spec, b, start, bounds, monkeypatch):
    """:func:`solve` with grpofit's LM and the same call forced through MINPACK."""
    from grpofit.fitting import solve as S

    ours = S.solve(spec, b, start, bounds)
    with monkeypatch.context() as m:
        m.setattr(S, "_leastsq", lambda problem, x0: (*S._minpack(problem, x0), True, None))
        ref = S.solve(spec, b, start, bounds)
    return ours, ref


@pytest.mark.slow
@pytest.mark.parametrize("tol", [None, 1e-10])
def test_lm_reaches_minpack_optimum(tol, monkeypatch):
    """On 40 seeded recovery runs (both laws) grpofit's numpy LM and MINPACK ``lmder``
    (``scipy.optimize.leastsq``) from the same start reach the same optimum: at the production
    tolerance the SSRs agree to 1e-6 relative (both stop once the relative reduction is below
    it); at 1e-10 to 1e-9 and the parameters to 1e-4 relative."""
    pytest.importorskip("scipy")
    from grpofit.fitting import solve as S
    from grpofit.laws.models import EXPONENTIAL, OSCILLATOR

    if tol is not None:
        monkeypatch.setattr(S, "TOL", tol)
    worst_ssr = worst_x = 0.0
    for truth, table in recovery_set(40, seed=11):
        b, bounds, starts = _problem(table)
        for spec in (EXPONENTIAL, OSCILLATOR):
            ours, ref = _solve_both(spec, b, starts[spec.name], bounds, monkeypatch)
            assert ours.ok and ref.ok
            if tol is None:
                assert ours.method == "lm"
            rel = (ours.ssr - ref.ssr) / ref.ssr
            worst_ssr = max(worst_ssr, abs(rel))
            # levels and timescale relative to the data range / the timescale; inertia
            # relative to the timescale (it is 0 .. Ts-sized and weakly determined)
            span = float(np.ptp(table["reward"])) or 1.0
            scale = np.array([span, span] + [ref.x[2]] * (ref.x.size - 2))
            worst_x = max(worst_x, float(np.max(np.abs(ours.x - ref.x) / scale)))
    if tol is None:
        assert worst_ssr <= 1e-6
        assert worst_x <= 2e-2
    else:
        assert worst_ssr <= 1e-9
        assert worst_x <= 1e-4


def _exponential_problem(t, y):
    """Residuals and Jacobian of ``p + (p0 - p) exp(-t/T) - y`` in ``(p, p0, T)``."""

    def fun(x):
        return x[0] + (x[1] - x[0]) * np.exp(-t / x[2]) - y

    def jac(x):
        e = np.exp(-t / x[2])
        return np.column_stack([1 - e, e, (x[1] - x[0]) * e * t / x[2] ** 2])

    return fun, jac


def test_lm_rosenbrock_and_exact_fit():
    from grpofit.fitting.lm import levenberg_marquardt

    res = levenberg_marquardt(
        lambda x: np.array([10 * (x[1] - x[0] ** 2), 1 - x[0]]),
        lambda x: np.array([[-20 * x[0], 10.0], [-1.0, 0.0]]),
        [-1.2, 1.0],
        ftol=1e-12,
        xtol=1e-12,
    )
    assert res.ok, res.message
    assert res.x == pytest.approx([1.0, 1.0], abs=1e-8)
    assert res.ssr <= 1e-20

    t = np.linspace(0, 200, 80)
    fun, jac = _exponential_problem(t, 0.8 - 0.5 * np.exp(-t / 35.0))
    res = levenberg_marquardt(fun, jac, [0.5, 0.5, 10.0])
    assert res.ok and res.info in (1, 2, 3, 4, 6, 7)
    assert res.x == pytest.approx([0.8, 0.3, 35.0], rel=1e-6)


def test_lm_rank_deficient_and_failures():
    from grpofit.fitting.lm import levenberg_marquardt

    # two parameters that only enter as their sum: a singular J'J, still a minimum
    t = np.linspace(0, 1, 30)
    y = 2.0 + 3.0 * t
    res = levenberg_marquardt(
        lambda x: x[0] + x[1] + x[2] * t - y,
        lambda x: np.column_stack([np.ones_like(t), np.ones_like(t), t]),
        [0.0, 0.0, 0.0],
    )
    assert res.ok
    assert res.x[0] + res.x[1] == pytest.approx(2.0, abs=1e-6)
    assert res.x[2] == pytest.approx(3.0, abs=1e-6)
    # non-finite at the start: failure, no exception
    res = levenberg_marquardt(lambda x: np.array([np.nan, 1.0]), lambda x: np.eye(2), [0.0, 0.0])
    assert not res.ok and res.info == 0
    # evaluation cap: failure (code 5), best point so far returned
    res = levenberg_marquardt(
        lambda x: np.array([10 * (x[1] - x[0] ** 2), 1 - x[0]]),
        lambda x: np.array([[-20 * x[0], 10.0], [-1.0, 0.0]]),
        [-1.2, 1.0],
        ftol=1e-15,
        xtol=1e-15,
        max_nfev=3,
    )
    assert not res.ok and res.info == 5 and res.nfev == 3
    assert res.ssr <= 4 * 24.2  # never worse than the start (S(-1.2, 1) = 24.2)


def test_lm_failure_falls_back_to_minpack(monkeypatch):
    pytest.importorskip("scipy")
    from grpofit.fitting import solve as S
    from grpofit.fitting.lm import LMResult
    from grpofit.fitting.profile import log_bins
    from grpofit.laws.models import OSCILLATOR

    t = np.arange(0, 300.0)
    y = oscillator(t, 0.7, 0.1, 40.0, 30.0) + np.random.default_rng(0).normal(0, 0.01, t.size)
    b = log_bins(t, y)
    bounds = OSCILLATOR.bounds(t, y)
    start = {"plateau": 0.65, "initial": 0.1, "timescale": 50.0, "inertia": 10.0}
    ours = S.solve(OSCILLATOR, b, start, bounds)
    monkeypatch.setattr(S, "levenberg_marquardt", lambda fun, jac, x0, **kw: LMResult(np.asarray(x0), np.inf, 5, 1, 0))
    fallback = S.solve(OSCILLATOR, b, start, bounds)
    assert ours.method == "lm" and fallback.method == "leastsq"
    assert fallback.ok and "MINPACK" in fallback.message
    assert fallback.ssr == pytest.approx(ours.ssr, rel=1e-6)


def _problem(table):
    """Binned data, bounds and the grid's starting points of one run, as the fit driver builds them."""
    from grpofit.fitting.profile import log_bins, profile
    from grpofit.laws.models import EXPONENTIAL, OSCILLATOR

    t = table["step"] - table["step"][0]
    y = table["reward"]
    b = log_bins(t, y)
    bounds = OSCILLATOR.bounds(t, y)
    prof = profile(b, EXPONENTIAL.guess(t, y)["timescale"], bounds["plateau"], bounds["timescale"])
    starts = {
        "exponential": prof.row(prof.zeta.size - 1, exponential=True),
        "oscillator": prof.row(int(np.argmin(prof.ssr))),
    }
    return b, bounds, starts


def test_lm_fused_evaluation_matches_separate_jacobian():
    """``jac=None``: ``fun`` returns ``(r, J)`` at once; the iteration is the same."""
    from grpofit.fitting.lm import levenberg_marquardt

    t = np.linspace(0, 200, 80)
    fun, jac = _exponential_problem(t, 0.8 - 0.5 * np.exp(-t / 35.0) + 0.01 * np.sin(t))
    separate = levenberg_marquardt(fun, jac, [0.5, 0.5, 10.0])
    fused = levenberg_marquardt(lambda x: (fun(x), jac(x)), None, [0.5, 0.5, 10.0])
    assert separate.ok and fused.ok
    np.testing.assert_allclose(fused.x, separate.x, rtol=1e-12)
    assert fused.nfev == separate.nfev and fused.info == separate.info


def test_profile_curves_are_the_rows_relaxation():
    """``Profile.curves`` (reused by the thresholds) is each row's relaxation at its timescale."""
    from grpofit.fitting.profile import log_bins, profile, refine
    from grpofit.laws.models import EXPONENTIAL, OSCILLATOR, relaxation_shape

    t = np.arange(0, 600.0)
    y = oscillator(t, 0.7, 0.1, 80.0, 30.0) + np.random.default_rng(3).normal(0, 0.01, t.size)
    b = log_bins(t, y)
    bounds = OSCILLATOR.bounds(t, y)
    prof = profile(b, EXPONENTIAL.guess(t, y)["timescale"], bounds["plateau"], bounds["timescale"])
    want = relaxation_shape(b.t[None, :] / prof.ts[:, None], prof.zeta)
    np.testing.assert_allclose(prof.curves, want, rtol=1e-12, atol=1e-15)
    ends = refine(b, np.array([0.8, 2.0]), np.array([70.0, 90.0]), bounds["plateau"], bounds["timescale"])
    np.testing.assert_allclose(
        ends.curves, relaxation_shape(b.t[None, :] / ends.ts[:, None], ends.zeta), rtol=1e-12, atol=1e-15
    )


BOUNDED_CASES = ["rasbt_grpo_qwen3-0.6b_7_3_tracking.csv", "unsloth_grpo_gsm8k_IMJONEZZ.trainer_state.json"]


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.real_logs
@pytest.mark.parametrize("name", BOUNDED_CASES)
def test_bounded_fallback_reaches_lmfit_optimum_without_lmfit(name, monkeypatch):
    """Real runs whose oscillator optimum the held-at-a-bound re-solve misses (its held
    parameter wants back inside): lmfit's bound map solved by our LM reaches lmfit's optimum,
    and the fit imports neither lmfit nor scipy (it used to import both: 1.2 s, 80 MB)."""
    import subprocess
    import sys

    pytest.importorskip("lmfit")
    path = real_log(name)
    import grpofit.fitting.solve as solve_mod
    from grpofit.fitting.analysis import fit_run
    from grpofit.readers import read_path

    calls = []
    real = solve_mod.solve_bounded

    def record(model, b, start, bounds):
        sol = real(model, b, start, bounds)
        calls.append((sol, solve_mod.solve_lmfit(model, b, start, bounds), bounds))
        return sol

    monkeypatch.setattr(solve_mod, "solve_bounded", record)
    fit_run(read_path(str(path))[0])
    assert calls, "the fit no longer needs the bounded fallback: pick another case"
    for sol, ref, bounds in calls:
        assert sol.ok and sol.method == "lm+bounded"
        for k, v in zip(sol.model.param_names, sol.x):
            assert bounds[k][0] <= v <= bounds[k][1]
        assert sol.ssr == pytest.approx(ref.ssr, rel=1e-6)
    code = (
        "import sys\nfrom grpofit.readers import read_path\nfrom grpofit.fitting.analysis import fit_run\n"
        f"fit_run(read_path({str(path)!r})[0])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('lmfit', 'scipy')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        check=True,
    )
    assert out.stdout.strip() == "[]"
