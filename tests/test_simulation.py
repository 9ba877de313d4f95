"""GRPO on a softmax bandit (grpofit.dynamics.simulation): gradients, fixed points, regimes, output."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from grpofit.core.errors import UsageError
from grpofit.dynamics import exact_sawtooth
from grpofit.dynamics import simulation as sim

# ----------------------------------------------------------------------------- finite-G maths


def test_group_signal_hand_values_and_limit():
    # G = 2: k=1 with prob 2p(1-p), s_1 = 1/2, weight s^2/(s+eps) = 0.25/(0.5+eps)
    p = 0.3
    assert sim.group_signal(p, 2, eps=1e-4) == pytest.approx(2 * p * (1 - p) * 0.25 / (0.5 + 1e-4))
    assert sim.group_signal(p, 2, advantage="none") == pytest.approx(2 * p * (1 - p) * 0.25)
    # G -> inf: sigma^2/(sigma+eps) ~ sqrt(p(1-p)); large G approaches it from below
    sig = math.sqrt(p * (1 - p))
    assert sim.group_signal(p, 0, eps=0.0) == pytest.approx(sig)
    vals = [sim.group_signal(p, G) for G in (4, 16, 256)]
    assert vals[0] < vals[1] < vals[2] < sim.group_signal(p, 0)
    assert vals[2] == pytest.approx(sig, rel=5e-3)
    assert sim.group_signal(0.0, 8) == 0.0


def test_finite_g_expected_gradient_matches_monte_carlo():
    rng = np.random.default_rng(3)
    theta = rng.normal(size=6)
    G, groups = 4, 20000
    exact = sim.mean_field_gradient(theta, correct=2, beta=0.0, group_size=G)
    pi = np.exp(theta - theta.max())
    pi /= pi.sum()
    a = rng.choice(6, p=pi, size=(groups, G))
    r = (a < 2).astype(float)
    A, _, _ = sim._advantages(r, "std", sim.EPS)
    mc = (np.bincount(a.ravel(), weights=A.ravel(), minlength=6) - pi * A.sum()) / a.size
    assert np.allclose(mc, exact, atol=4e-3)


@pytest.mark.parametrize("G", [0, 4])
@pytest.mark.parametrize("ratio", [False, True])
@pytest.mark.parametrize("kl_at", ["sampling", "current"])
def test_mean_field_gradient_is_gradient_of_surrogate(G, ratio, kl_at):
    rng = np.random.default_rng(11)
    theta, theta_old = rng.normal(size=5), rng.normal(size=5)
    kw = dict(correct=2, beta=0.7, group_size=G, importance_ratio=ratio, kl_at=kl_at)
    g = sim.mean_field_gradient(theta, theta_old, **kw)
    h = 1e-6
    fd = np.array(
        [
            (sim.surrogate(theta + h * e, theta_old, **kw) - sim.surrogate(theta - h * e, theta_old, **kw)) / (2 * h)
            for e in np.eye(5)
        ]
    )
    assert np.allclose(g, fd, atol=1e-7)


def test_infinite_g_gradient_is_the_textbook_formula():
    rng = np.random.default_rng(5)
    theta = rng.normal(size=8)
    pi = np.exp(theta) / np.exp(theta).sum()
    p = pi[0]
    A = np.where(np.arange(8) < 1, 1 - p, -p) / math.sqrt(p * (1 - p))
    expected_pg = sum(pi[a] * A[a] * (np.eye(8)[a] - pi) for a in range(8))
    logr = np.full(8, -math.log(8))
    kl = pi @ (np.log(pi) - logr)
    klg = pi * (np.log(pi) - logr - kl)
    got = sim.mean_field_gradient(theta, correct=1, beta=1.3, eps=0.0)
    assert np.allclose(got, expected_pg - 1.3 * klg, atol=1e-12)


# ----------------------------------------------------------------------------- fixed point and K


@pytest.mark.slow
def test_plateaus_move_with_group_size():
    p4 = sim.plateau_at_group_size(1.0, 8, 1, 4)
    p16 = sim.plateau_at_group_size(1.0, 8, 1, 16)
    p_inf = sim.plateau_at_group_size(1.0, 8, 1, 0)
    assert p4 == pytest.approx(0.4189, abs=1e-3)
    assert p16 == pytest.approx(0.4970, abs=1e-3)
    assert p_inf == pytest.approx(0.5136, abs=1e-3)
    for G, target in ((4, p4), (16, p16)):
        run = sim.simulate_bandit(lr=0.5, group_size=G, steps=1200, seed=1, measure=False)
        assert run.columns["expected_reward"][-300:].mean() == pytest.approx(target, abs=0.01)


def test_curvature_matches_one_dimensional_flow_and_relaxation():
    fp = sim.fixed_point(8, 1, 1.0, 0)
    assert fp.curvature_lagged + fp.curvature_current == pytest.approx(fp.curvature, rel=1e-6)
    assert fp.curvature_current == pytest.approx(0.0, abs=1e-8)  # everything frozen by default

    # independent: derivative of the reduced 1-D flow dx/dt = g_c - g_w, x = theta_c - theta_w
    def gx(x):
        t = np.zeros(8)
        t[0] = x
        g = sim.mean_field_gradient(t, correct=1, beta=1.0)
        return g[0] - g[1]

    x0 = fp.theta[0] - fp.theta[1]
    k1 = -(gx(x0 + 1e-5) - gx(x0 - 1e-5)) / 2e-5
    assert fp.curvature == pytest.approx(k1, rel=1e-5)
    # a deterministic on-policy run relaxes as (1 - eta K)^n near the fixed point
    th = fp.theta.copy()
    th[0] += 1e-4
    run = sim.simulate_bandit(lr=0.2, group_size=0, steps=200, theta0=th, measure=False)
    e = run.columns["expected_reward"] - fp.p
    assert (e[150] / e[50]) ** (1 / 100) == pytest.approx(1 - 0.2 * fp.curvature, rel=1e-4)


def test_kl_on_current_policy_leaves_little_lagged_curvature():
    cur = sim.fixed_point(8, 1, 1.0, 0, kl_at="current")
    assert cur.curvature == pytest.approx(sim.fixed_point(8, 1, 1.0, 0).curvature, rel=1e-6)
    assert abs(cur.curvature_lagged) < 0.1 * cur.curvature


# ----------------------------------------------------------------------------- regimes


def _label(kref, steps=1500, lr=0.1):
    run = sim.simulate_bandit(lr=lr, group_size=0, refresh_interval=kref, steps=steps)
    return run.summary()["trajectory"]["label"], run


@pytest.mark.slow
def test_regime_transition_on_short_runs():
    K = sim.fixed_point(8, 1, 1.0, 0).curvature  # ~0.278; eta K = 0.0278: sawtooth threshold ~ 73
    small, _ = _label(1)
    assert small == "monotone"
    assert exact_sawtooth(0.1, 0.0, 48, K, with_threshold=False).regime == "oscillatory"
    mid, _ = _label(48)
    assert mid == "oscillatory"
    big, run = _label(100, steps=2500)
    assert big == "unstable"  # bounded: the softmax keeps p in [0, 1]
    assert np.all(np.isfinite(run.columns["expected_reward"]))
    assert not exact_sawtooth(0.1, 0.0, 100, K, with_threshold=False).stable


@pytest.mark.slow
def test_linear_growth_matches_exact_sawtooth():
    fp = sim.fixed_point(8, 1, 1.0, 0)
    th = fp.theta.copy()
    th[0] += 1e-7
    run = sim.simulate_bandit(lr=0.1, group_size=0, refresh_interval=64, steps=3000, theta0=th, measure=False)
    e = np.abs(run.columns["expected_reward"] - fp.p)
    # windows a whole number of monodromy periods apart (2 K_ref: the eigenvalue is negative)
    a1, a2 = e[1024:1280].max(), e[2560:2816].max()
    measured = (a2 / a1) ** (1 / 1536)
    assert measured == pytest.approx(
        exact_sawtooth(0.1, 0.0, 64, fp.curvature, with_threshold=False).spectral_radius, abs=2e-5
    )


# ----------------------------------------------------------------------------- runs and output


def test_seeded_reproducibility():
    a = sim.simulate_bandit(lr=0.3, group_size=8, steps=200, seed=7, measure=False)
    b = sim.simulate_bandit(lr=0.3, group_size=8, steps=200, seed=7, measure=False)
    c = sim.simulate_bandit(lr=0.3, group_size=8, steps=200, seed=8, measure=False)
    for k in sim.COLUMNS:
        assert np.array_equal(a.columns[k], b.columns[k])
    assert not np.array_equal(a.columns["reward"], c.columns["reward"])


@pytest.mark.slow
def test_long_run_with_many_groups():
    """2000 steps of 16 groups of 16 (vectorised over groups): every step is logged and finite."""
    run = sim.simulate_bandit(lr=0.5, group_size=16, groups=16, steps=2000, measure=False)
    rows = run.summary()["n_rows"]
    assert rows == 2000


def test_columns_and_values_are_sane():
    run = sim.simulate_bandit(lr=0.5, group_size=4, steps=300, seed=0, measure=False)
    c = run.columns
    assert tuple(c) == sim.COLUMNS
    assert np.array_equal(c["step"], np.arange(1, 301))
    assert c["expected_reward"][0] == pytest.approx(1 / 8)
    assert c["kl"][0] == pytest.approx(0.0) and c["entropy"][0] == pytest.approx(math.log(8))
    assert np.all((c["frac_reward_zero_std"] >= 0) & (c["frac_reward_zero_std"] <= 1))
    # early on (p ~ 1/8, G = 4) most groups are all-wrong: about (7/8)^4 = 0.586 zero-std
    assert c["frac_reward_zero_std"][:3].mean() == pytest.approx(0.586 + 0.0002, abs=0.15)


def test_write_csv_jsonl_and_meta(tmp_path):
    run = sim.simulate_bandit(lr=0.5, group_size=16, steps=120, seed=2)
    meta = run.write(tmp_path / "b.csv")
    assert meta.name == "b.csv.meta.json"
    rows = list(csv.DictReader((tmp_path / "b.csv").open()))
    assert list(rows[0]) == list(sim.COLUMNS) and len(rows) == 120
    doc = json.loads(meta.read_text())
    for key in ("lr", "momentum", "refresh_interval", "group_size", "beta", "arms", "correct", "seed"):
        assert key in doc
    assert doc["fixed_point"] == pytest.approx(0.497, abs=2e-3)
    assert doc["curvature"] > 0 and doc["plateau_exact"] == pytest.approx(0.5136, abs=1e-3)
    doc0 = sim.run_simulation(tmp_path / "m.jsonl", lr=0.2, group_size=0, steps=50)
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert set(first) == set(sim.COLUMNS) and first["step"] == 1 and len(lines) == 50
    assert doc0["out"].endswith("m.jsonl") and (tmp_path / "m.jsonl.meta.json").exists()
    json.dumps(doc0, allow_nan=False)
    with pytest.raises(UsageError):
        run.write(tmp_path / "b.txt")


def test_bad_parameters_raise():
    with pytest.raises(UsageError):
        sim.simulate_bandit(correct=8, arms=8)
    with pytest.raises(UsageError):
        sim.simulate_bandit(momentum=1.0)
    with pytest.raises(UsageError):
        sim.fixed_point(8, 1, 0.0)


def test_a_kl_too_weak_for_an_interior_fixed_point_still_simulates(capsys, tmp_path):
    """At beta 0.2 with 20 arms the std-normalised push beats the KL pull near p = 1: the exact
    flow has no interior fixed point. The run is still simulated (as at beta 0), with no p* and
    a note saying why, instead of refusing a setting users train with."""
    with pytest.raises(sim.NoInteriorFixedPoint):
        sim.fixed_point(20, 2, 0.2, 0)
    run = sim.simulate_bandit(arms=20, correct=2, lr=0.3, group_size=0, beta=0.2, steps=200)
    doc = run.summary()
    assert doc["fixed_point"] is None and doc["curvature"] is None
    assert "no interior fixed point" in doc["fixed_point_note"]
    assert run.columns["expected_reward"][-1] > 0.95  # it does rise towards 1
    from tests.conftest import run_cli

    out = tmp_path / "b.csv"
    code, text, err = run_cli(
        capsys,
        "simulate",
        "bandit",
        "--arms",
        "20",
        "--correct",
        "2",
        "--beta",
        "0.2",
        "--group-size",
        "0",
        "--steps",
        "50",
        "--out",
        out,
    )
    assert code == 0, err
    assert "no interior fixed point" in text and out.exists()


# ----------------------------------------------------------------------------- noise is not instability


@pytest.mark.slow
def test_stationary_fluctuation_is_not_called_unstable():
    # lr 0.1, mu 0, K_ref 1, G 16, seed 0 was "trajectory: unstable", yet the exact
    # growth factor of the linearised recursion is 0.971 per step
    run = sim.simulate_bandit(lr=0.1, momentum=0.0, refresh_interval=1, group_size=16, beta=1.0, steps=1500, seed=0)
    traj = run.summary()["trajectory"]
    assert traj["growth_factor"] == pytest.approx(0.9713, abs=1e-4)
    assert traj["label"] != "unstable"
    assert traj["fluctuation"] == "stationary"
    # the old rule (no decay over the last two quarters) is what fired: the data alone cannot tell
    assert sim.classify_trajectory(run.columns["expected_reward"], run.fixed.p)["label"] == "unstable"


@pytest.mark.slow
def test_noisy_run_past_the_exact_threshold_is_still_unstable():
    K = sim.fixed_point(8, 1, 1.0, 0).curvature
    assert not exact_sawtooth(0.1, 0.0, 100, K, with_threshold=False).stable
    run = sim.simulate_bandit(lr=0.1, refresh_interval=100, group_size=16, steps=2500, seed=0)
    traj = run.summary()["trajectory"]
    assert traj["growth_factor"] > 1.0
    assert traj["label"] == "unstable"


@pytest.mark.slow
def test_noisy_overshoot_must_beat_the_noise():
    # K_ref 32, mu 0: the exact sawtooth recursion is monotone; with G = 16 the sampled noise
    # crosses p* but that is no overshoot
    K = sim.fixed_point(8, 1, 1.0, 0).curvature
    assert exact_sawtooth(0.1, 0.0, 32, K, with_threshold=False).regime == "monotone"
    run = sim.simulate_bandit(lr=0.1, refresh_interval=32, group_size=16, steps=1500, seed=0)
    assert run.summary()["trajectory"]["label"] == "monotone"
    # a genuinely underdamped noisy run keeps its overshoot (mu 0.9, K_ref 4: sawtooth oscillatory)
    assert exact_sawtooth(0.1, 0.9, 4, K, with_threshold=False).regime == "oscillatory"
    osc = sim.simulate_bandit(lr=0.1, momentum=0.9, refresh_interval=4, group_size=16, steps=1500, seed=0)
    assert osc.summary()["trajectory"]["label"] == "oscillatory"
