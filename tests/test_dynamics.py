"""Closed form, exact discrete recursions, run checks and what-if (grpofit.dynamics)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from grpofit import dynamics as dyn
from grpofit.core.errors import UsageError

CONTRACT_KEYS = {
    "schema",
    "mass",
    "damping",
    "stiffness",
    "damping_ratio",
    "regime",
    "stable",
    "critical_refresh_interval",
    "timescale",
    "inertia",
}


# ----------------------------------------------------------------------------- closed form


def test_closed_form_hand_computed_overdamped():
    # eta=0.1, mu=0.9, Kref=4, K=0.0075 -> eta K = 0.00075
    # M = 0.5 (1 + 0.9 + 0.00075*16) = 0.956 ; C = 1 - 0.9 - 0.00075*4 = 0.097 ; K_eff = 0.00075
    # zeta = 0.097 / (2 sqrt(0.956 * 0.00075)) = 1.811266 ; T = 0.097/0.00075 = 129.333 ; I = 0.956/0.097
    # Kref* = 0.1/0.00075 = 133.33 ; eta* = 0.1/(0.0075*4) = 3.3333
    cf = dyn.closed_form(0.1, 0.9, 4, 0.0075)
    assert cf.mass == pytest.approx(0.956)
    assert cf.damping == pytest.approx(0.097)
    assert cf.stiffness == pytest.approx(0.00075)
    assert cf.damping_ratio == pytest.approx(1.811266, rel=1e-6)
    assert cf.timescale == pytest.approx(129.3333, rel=1e-6)
    assert cf.inertia == pytest.approx(9.855670, rel=1e-6)
    assert cf.critical_refresh_interval == pytest.approx(133.3333, rel=1e-6)
    assert cf.critical_lr == pytest.approx(3.333333, rel=1e-6)
    assert cf.regime == "overdamped" and cf.stable


def test_closed_form_hand_computed_underdamped_and_unstable():
    # eta=1, mu=0, Kref=2, K=0.3: M = 0.5 (1 + 0.3*4) = 1.1 ; C = 1 - 0.6 = 0.4 ; zeta = 0.4/(2 sqrt(0.33))
    cf = dyn.closed_form(1.0, 0.0, 2, 0.3)
    assert (cf.mass, cf.damping, cf.stiffness) == pytest.approx((1.1, 0.4, 0.3))
    assert cf.damping_ratio == pytest.approx(0.4 / (2 * math.sqrt(0.33)))
    assert cf.regime == "underdamped"
    # Kref=4: C = 1 - 1.2 = -0.2 <= 0 -> unstable; no timescale or inertia
    bad = dyn.closed_form(1.0, 0.0, 4, 0.3)
    assert bad.damping == pytest.approx(-0.2)
    assert bad.regime == "unstable" and not bad.stable
    assert bad.timescale is None and bad.inertia is None
    # delta = 2: M scales with delta^2, C with delta
    d2 = dyn.closed_form(1.0, 0.0, 2, 0.3, delta=2.0)
    assert (d2.mass, d2.damping) == pytest.approx((4.4, 0.8))


def test_damping_ratio_formula_matches_theory_expression():
    eta, mu, K, L = 0.05, 0.5, 0.2, 3
    zeta = (1 - mu - eta * K * L) / math.sqrt(2 * eta * K * (1 + mu + eta * K * L**2))
    assert dyn.closed_form(eta, mu, L, K).damping_ratio == pytest.approx(zeta)


def test_measure_curvature_inverts_timescale():
    cf = dyn.closed_form(0.02, 0.5, 3, 0.4)
    assert dyn.measure_curvature(cf.timescale, 0.02, 0.5, 3) == pytest.approx(0.4)
    # the theory's formula, written out: K = (1 - mu) / (eta (T + Kref))
    assert dyn.measure_curvature(30.0, 0.1, 0.9, 4) == pytest.approx(0.1 / (0.1 * 34.0))


def test_adam_mapping():
    assert dyn.heavy_ball_from_adam(1e-3, 0.9) == pytest.approx((1e-4, 0.9))
    with pytest.raises(UsageError):
        dyn.heavy_ball_from_adam(1e-3, 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(lr=0.0, momentum=0.5, refresh_interval=1, curvature=1.0),
        dict(lr=0.1, momentum=1.0, refresh_interval=1, curvature=1.0),
        dict(lr=0.1, momentum=0.5, refresh_interval=0, curvature=1.0),
        dict(lr=0.1, momentum=0.5, refresh_interval=1, curvature=-1.0),
    ],
)
def test_bad_inputs_raise_usage_error(kwargs):
    with pytest.raises(UsageError) as err:
        dyn.predict(**kwargs)
    assert err.value.fix


# ----------------------------------------------------------------------------- exact recursions


def _growth_by_iteration(A, n=4000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=A.shape[0])
    x /= np.linalg.norm(x)
    logs = []
    for _ in range(n):
        x = A @ x
        s = np.linalg.norm(x)
        logs.append(math.log(s))
        x /= s
    return math.exp(np.mean(logs[n // 2 :]))


@pytest.mark.slow
@pytest.mark.parametrize("eta_k,mu,L", [(0.02, 0.0, 10), (0.02, 0.0, 90), (0.05, 0.5, 6), (0.01, 0.9, 3)])
def test_fixed_delay_radius_matches_direct_iteration(eta_k, mu, L):
    ex = dyn.exact_fixed_delay(1.0, mu, L, eta_k, with_threshold=False)
    # the recursion e_{n+1} = (1+mu) e_n - mu e_{n-1} - eta K e_{n-L} on (e_n .. e_{n-L})
    m = L + 1
    A = np.zeros((m, m))
    A[0, 0], A[0, 1] = 1 + mu, -mu
    A[0, L] -= eta_k
    A[np.arange(1, m), np.arange(m - 1)] = 1.0
    assert _growth_by_iteration(A, 6000) == pytest.approx(ex.spectral_radius, rel=2e-3)
    # and the scalar recursion iterated from rest grows at the same rate
    e = dyn.linear_recursion(1.0, mu, L, eta_k, 6000, lag_model="fixed")
    tail = np.abs(e[3000:])
    env = [tail[i : i + 400].max() for i in (0, len(tail) - 400)]
    if env[0] > 1e-250:
        assert (env[1] / env[0]) ** (1 / (len(tail) - 400)) == pytest.approx(ex.spectral_radius, rel=3e-3)


@pytest.mark.parametrize("eta_k,mu,kref", [(0.02, 0.0, 10), (0.02, 0.0, 105), (0.05, 0.5, 12), (0.01, 0.9, 8)])
def test_sawtooth_radius_matches_direct_iteration(eta_k, mu, kref):
    ex = dyn.exact_sawtooth(1.0, mu, kref, eta_k, with_threshold=False)
    from grpofit.dynamics.exact import _sawtooth_monodromy

    P = _sawtooth_monodromy(1.0, mu, kref, eta_k, 0.0)
    per_period = _growth_by_iteration(P, 1500)
    assert per_period ** (1 / kref) == pytest.approx(ex.spectral_radius, rel=2e-3)
    e = dyn.linear_recursion(1.0, mu, kref, eta_k, 40 * kref + 2000, lag_model="sawtooth")
    n = len(e)
    w = 4 * kref + 20
    a1, a2 = np.abs(e[n // 2 - w : n // 2]).max(), np.abs(e[n - w :]).max()
    assert (a2 / a1) ** (1 / (n - n // 2)) == pytest.approx(ex.spectral_radius, rel=3e-3)
    assert ex.stable == (ex.spectral_radius < 1)


@pytest.mark.slow
@pytest.mark.parametrize("eta_k,mu", [(0.005, 0.0), (0.002, 0.5), (0.0002, 0.9)])
def test_critical_intervals_approach_theory_small_eta_k(eta_k, mu):
    fixed = dyn.critical_refresh_interval(1.0, mu, eta_k, "fixed")
    saw = dyn.critical_refresh_interval(1.0, mu, eta_k, "sawtooth")
    assert fixed == pytest.approx(math.pi / 2 * (1 - mu) / eta_k, rel=0.03)
    assert saw == pytest.approx(2 * (1 - mu) / eta_k, rel=0.03)
    # thresholds are where stability is lost
    assert not dyn.exact_fixed_delay(1.0, mu, fixed, eta_k, with_threshold=False).stable
    assert dyn.exact_fixed_delay(1.0, mu, fixed - 1, eta_k, with_threshold=False).stable
    assert not dyn.exact_sawtooth(1.0, mu, saw, eta_k, with_threshold=False).stable
    assert dyn.exact_sawtooth(1.0, mu, saw - 1, eta_k, with_threshold=False).stable


def test_unlagged_curvature_removes_the_lag_threshold():
    # K_now > K_lag: the frozen force can never beat the current restoring force
    assert dyn.critical_refresh_interval(0.1, 0.0, 1.0, "sawtooth", curvature_current=0.7, max_interval=5000) is None
    ex = dyn.exact_sawtooth(0.1, 0.0, 200, 1.0, curvature_current=0.7, with_threshold=False)
    assert ex.stable


def test_discrete_regimes():
    small = dyn.exact_sawtooth(0.1, 0.0, 1, 0.2, with_threshold=False)
    assert small.regime == "monotone" and small.oscillation_period is None
    osc = dyn.exact_sawtooth(0.1, 0.0, 80, 0.2, with_threshold=False)  # eta K Kref = 1.6
    assert osc.regime == "oscillatory" and osc.stable
    assert osc.oscillation_period == pytest.approx(160, rel=1e-6)  # negative monodromy eigenvalue
    assert dyn.exact_sawtooth(0.1, 0.0, 120, 0.2, with_threshold=False).regime == "unstable"


# ----------------------------------------------------------------------------- predict


@pytest.mark.slow
def test_predict_summary_contract_and_json_safe():
    p = dyn.predict(0.1, 0.9, 4, 0.0075, group_size=16, plateau=0.5)
    s = p.summary()
    assert CONTRACT_KEYS <= set(s)
    assert s["schema"] == "grpofit.predict/1"
    assert list(s)[: len(CONTRACT_KEYS)] == [
        "schema",
        "mass",
        "damping",
        "stiffness",
        "damping_ratio",
        "regime",
        "stable",
        "critical_refresh_interval",
        "timescale",
        "inertia",
    ]
    json.dumps(s, allow_nan=False)
    assert s["exact_fixed_delay"]["lag_model"] == "fixed"
    assert s["exact_sawtooth"]["critical_refresh_interval"] > s["exact_fixed_delay"]["critical_refresh_interval"]
    g = s["group"]
    assert g["noise_temperature"] == pytest.approx(1 / 16)
    # without a measured noise strength D there is no fluctuation to report (never a guess)
    assert g["noise"] is None and g["fluctuation_variance"] is None and "--noise" in g["noise_source"]
    g_noise = dyn.predict(0.1, 0.9, 4, 0.0075, group_size=16, plateau=0.5, noise=0.25).summary()["group"]
    assert g_noise["fluctuation_variance"] == pytest.approx(0.25 / (2 * 16 * 0.097 * 0.00075))
    assert 0 < g["advantage_signal_factor"] < 1
    assert g["zero_std_fraction"] == pytest.approx(2 * 0.5**16)
    assert p.report() and all(isinstance(r, tuple) for r in p.report())


def test_predict_unstable_is_json_safe():
    s = dyn.predict(1.0, 0.0, 4, 0.3).summary()
    assert s["regime"] == "unstable" and s["stable"] is False and s["inertia"] is None
    assert s["exact_sawtooth"]["stable"] in (True, False)
    json.dumps(s, allow_nan=False)


def test_predict_bandit_plateau_correction():
    s = dyn.predict(
        0.5, 0.0, 1, 0.28, group_size=4, plateau=0.5136, bandit={"beta": 1.0, "arms": 8, "correct": 1}
    ).summary()
    assert s["group"]["plateau_at_group_size"] == pytest.approx(0.4189, abs=2e-3)
    assert s["group"]["plateau_exact"] == pytest.approx(0.5136, abs=2e-3)


# ----------------------------------------------------------------------------- curves, from_run, what-if


@pytest.mark.slow
def test_oscillator_curve_continuous_across_regimes_and_matches_ode():
    from scipy.integrate import solve_ivp

    t = np.linspace(0, 400, 401)
    for K in (0.0009, 0.001, 0.0011, 0.01):  # around zeta = 1 for M=1, C=0.0632...
        M, C = 1.0, 2 * math.sqrt(0.001)
        y = dyn.oscillator_curve(t, 0.7, 0.1, M, C, K)
        sol = solve_ivp(
            lambda s, z: [z[1], -(C * z[1] + K * z[0]) / M], (0, 400), [-0.6, 0.0], t_eval=t, rtol=1e-10, atol=1e-12
        )
        assert np.allclose(y, 0.7 + sol.y[0], atol=1e-7)
    crit = dyn.oscillator_curve(t, 0.7, 0.1, 1.0, 2 * math.sqrt(0.001), 0.001)
    near = dyn.oscillator_curve(t, 0.7, 0.1, 1.0, 2 * math.sqrt(0.001), 0.001 * (1 + 1e-9))
    assert np.allclose(crit, near, atol=1e-8)
    far = dyn.oscillator_curve(np.array([0.0, 1e6]), 0.7, 0.1, 0.5, 3.0, 0.01)
    assert np.all(np.isfinite(far)) and far[1] == pytest.approx(0.7)


@pytest.mark.slow
def test_from_run_recovers_curvature_and_checks_inertia():
    lr, mu, kref, K = 0.1, 0.9, 4, 0.0075
    cf = dyn.closed_form(lr, mu, kref, K)
    fit = {
        "plateau": 0.7,
        "initial": 0.1,
        "timescale": {"value": cf.timescale, "ci95": [cf.timescale * 0.9, cf.timescale * 1.1]},
        "inertia": {"value": cf.inertia, "ci95": [cf.inertia - 1, cf.inertia + 1]},
    }
    rp = dyn.from_run(fit, lr, mu, kref)
    assert rp.curvature == pytest.approx(K)
    assert rp.predicted_inertia == pytest.approx(cf.inertia)
    assert rp.agrees is True
    lo, hi = rp.curvature_ci95
    assert lo < K < hi
    fit["inertia"] = {"value": 40.0, "ci95": [35.0, 45.0]}
    assert dyn.from_run(fit, lr, mu, kref).agrees is False
    json.dumps(rp.summary(), allow_nan=False)


@pytest.mark.slow
def test_what_if_and_plot(tmp_path):
    fit = {"plateau": 0.7, "initial": 0.1, "timescale": 30.0, "inertia": 5.0}
    rp = dyn.from_run(fit, 0.1, 0.9, 2)
    wi = dyn.what_if(rp, refresh_interval=8, steps=300)
    assert wi.steps.shape == wi.baseline.shape == wi.predicted.shape == wi.predicted_discrete.shape == (300,)
    assert wi.baseline[0] == pytest.approx(0.1) and wi.baseline[-1] == pytest.approx(0.7, abs=1e-3)
    assert wi.new.refresh_interval == 8 and wi.new.damping < wi.base.damping
    json.dumps(wi.summary(), allow_nan=False)
    fig = dyn.plot_what_if(wi, observed=(np.arange(10.0), np.full(10, 0.2)))
    assert len(fig.axes[0].lines) >= 4
    fig.savefig(tmp_path / "w.png")
    assert (tmp_path / "w.png").stat().st_size > 1000


@pytest.mark.slow
def test_long_delay_threshold_search_does_not_overflow():
    """Small eta K puts the fixed-delay threshold beyond a delay of 1000: the root search on
    circles |z| = r < 1 must not overflow z^(-L) (it used to crash with NaN)."""
    from grpofit.dynamics import predict

    for mu in (0.0, 0.5):
        s = predict(0.1, mu, 4, 0.0075).summary()
        crit = s["exact_fixed_delay"]["critical_refresh_interval"]
        theory = 3.14159 / 2 * (1 - mu) / (0.1 * 0.0075)
        assert crit is None or abs(crit - theory) / theory < 0.05
