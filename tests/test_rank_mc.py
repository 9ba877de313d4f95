"""``grpofit rank``'s probabilities are integrals over the runs' own distributions: no error of
pairing draws, ties at a bound split, a Monte-Carlo error per run, memory flat in the runs."""

from __future__ import annotations

import math
import tracemalloc
from statistics import NormalDist

import numpy as np
import pytest


def exact_normal(mean, sd, n=1200):
    """``n`` draws that are a normal's quantiles, sorted (no Monte-Carlo error, worst order for pairing)."""
    nd = NormalDist(mean, sd)
    return np.array([nd.inv_cdf((i + 0.5) / n) for i in range(n)])


def test_probabilities_do_not_depend_on_the_draws_order():
    """Pairing the i-th draws of the runs (as before) made the answer depend on the draws' order:
    two sorted normal samples 0.02 apart were 'best' in every row."""
    from grpofit.forecasting.rank import judge

    a, b = exact_normal(0.50, 0.05), exact_normal(0.52, 0.05)
    out = judge([a, b], margin=0.0)
    p = NormalDist().cdf(0.02 / (0.05 * math.sqrt(2)))  # P(B > A) = 0.611
    assert out[1]["p_best"] == pytest.approx(p, abs=0.005)
    assert out[0]["p_best"] == pytest.approx(1 - p, abs=0.005)
    rng = np.random.default_rng(1)
    again = judge([rng.permutation(a), rng.permutation(b)], margin=0.0, seed=7)
    for x, y in zip(out, again):
        assert x["p_best"] == pytest.approx(y["p_best"], abs=1e-12)
        assert x["p_within_margin"] == pytest.approx(y["p_within_margin"], abs=1e-12)


def test_within_margin_is_the_exact_probability():
    from grpofit.forecasting.rank import judge

    a, b, c = exact_normal(0.60, 0.02), exact_normal(0.58, 0.02), exact_normal(0.40, 0.02)
    out = judge([a, b, c], margin=0.01)
    # P(B >= A - 0.01): B - A ~ N(-0.02, 0.02 sqrt 2); C is far below both
    assert out[1]["p_within_margin"] == pytest.approx(1 - NormalDist(-0.02, 0.02 * math.sqrt(2)).cdf(-0.01), abs=0.01)
    assert out[2]["p_within_margin"] < 1e-6 and out[2]["recommendation"] == "stop"
    assert sum(o["p_best"] for o in out) == pytest.approx(1.0, abs=1e-12)


def test_ties_at_a_bound_are_split_not_given_to_the_first_run():
    """Draws held at the metric's bound tie exactly: the first run listed took every tie before."""
    from grpofit.forecasting.rank import judge

    out = judge([np.ones(600), np.ones(600)], margin=0.0)
    assert [o["p_best"] for o in out] == pytest.approx([0.5, 0.5], abs=1e-9)
    assert all(o["p_within_margin"] == pytest.approx(1.0) for o in out)


def test_error_from_the_effective_number_of_draws():
    from grpofit.forecasting.rank import judge

    a, b = exact_normal(0.50, 0.05), exact_normal(0.52, 0.05)
    few, many = judge([a, b], margin=0.0, ess=[10.0, 10.0]), judge([a, b], margin=0.0, ess=[1000.0, 1000.0])
    p = few[1]["p_best"]
    assert few[1]["p_best_error"] == pytest.approx(math.sqrt(p * (1 - p) / 10), rel=1e-9)
    assert many[1]["p_within_error"] < few[1]["p_within_error"] / 9
    assert "p_best_error" not in judge([a, b], margin=0.0)[0]


def test_grouped_draws_count_as_fewer():
    """Draws that come in groups sharing one parameter draw: a group whose draws all fall on one
    side of the median counts once; groups spread like the whole sample count as their draws."""
    from grpofit.forecasting.predictive import cluster_ess

    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(40), 30)
    stuck = np.repeat(rng.standard_normal(40), 30)  # each group one value
    spread = rng.standard_normal(1200)  # groups carry nothing in common
    assert cluster_ess(stuck, groups) == pytest.approx(40, rel=0.35)
    assert cluster_ess(spread, groups) > 400


def test_ranking_memory_does_not_hold_the_draws():
    """A thousand runs of 1,200 draws: the ranking holds their quantiles and one grid, not a
    (draws x runs) table (9.6 MB before, as much again as the draws themselves)."""
    from grpofit.forecasting.rank import judge, summarise

    rng = np.random.default_rng(0)
    runs = [summarise(rng.normal(rng.uniform(0.3, 0.9), 0.05, 1200)) for _ in range(1000)]
    assert all(q.dtype == np.float32 and q.size == 128 for q in runs)
    tracemalloc.start()
    try:
        out = judge(runs, margin=0.01)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # ~3.4 MB: 3.4 KB a run
    assert sum(o["p_best"] for o in out) == pytest.approx(1.0, abs=1e-9)


def test_borderline_when_a_threshold_is_within_two_errors():
    from grpofit.forecasting.rank import judge, near_threshold

    assert near_threshold(0.47, 0.02, 0.95) and not near_threshold(0.40, 0.02, 0.95)
    assert near_threshold(0.07, 0.02, 0.95) and not near_threshold(0.07, 0.02, 0.95, can_stop=False)
    assert not near_threshold(0.001, 0.005, 0.95)
    lead, tied, behind = exact_normal(0.60, 0.02), exact_normal(0.60, 0.02), exact_normal(0.40, 0.02)
    out = judge([lead, tied, behind], margin=0.0, ess=[20.0, 20.0, 20.0], open_ended=[False, True, False])
    assert out[0]["p_within_margin"] == pytest.approx(0.5, abs=0.01)
    assert out[0]["borderline"] and out[1]["borderline"]  # at 50%, error 0.11
    assert not out[2]["borderline"] and out[2]["recommendation"] == "stop"  # far below 5%


@pytest.mark.slow
def test_two_seeds_on_a_near_tie_differ_within_the_stated_errors():
    """A near-tied sweep ranked under two seeds: each run's probabilities differ by less than
    three of the errors stated, and a recommendation that changes is flagged borderline."""
    from grpofit.commands.rank import RankItem, RankOptions, rank_series

    rng = np.random.default_rng(11)
    items = []
    for k, (plateau, tau) in enumerate(((0.70, 40), (0.71, 45), (0.69, 35), (0.55, 40))):
        s = np.arange(1, 121, dtype=float)
        v = rng.binomial(64, 0.1 + (plateau - 0.1) * (1 - np.exp(-s / tau))) / 64.0
        items.append(RankItem(f"run{k}", "reward", s, v, 64, None, None))
    docs = [
        rank_series(items, horizon=300.0, source="--horizon", opts=RankOptions(seed=seed, fans=False)).doc
        for seed in (0, 1)
    ]
    for a, b in zip(docs[0]["runs"], docs[1]["runs"]):
        assert a["p_best_error"] is not None and 0 < a["p_within_error"] < 0.5
        for key, err in (("p_best", "p_best_error"), ("p_within_margin", "p_within_error")):
            assert abs(a[key] - b[key]) < 3 * math.hypot(a[err], b[err])
        if a["recommendation"] != b["recommendation"]:
            assert a["borderline"] or b["borderline"]


def test_the_safe_choice_is_never_stopped_in_favour_of_a_wide_slow_starter():
    """Three settled runs near 0.67 and a slow starter forecast 0.87 with a wide upper tail: the
    settled runs are unlikely to end within 0.01 of the best, but the one whose forecast's low
    end is highest is kept (``safe_choice``); the others may be stopped."""
    from grpofit.forecasting.rank import KEEP, STOP, judge

    rng = np.random.default_rng(0)
    # the slow starter: mostly near 0.9, with a tail down to 0.38 (its rise may end early)
    slow = np.concatenate([np.clip(rng.normal(0.9, 0.04, 1110), 0, 1), rng.uniform(0.38, 0.7, 90)])
    settled = [rng.normal(m, s, 1200) for m, s in ((0.661, 0.05), (0.674, 0.03), (0.675, 0.04))]
    out = judge([slow, *settled], margin=0.01, confidence=0.95)
    assert [o.get("safe_choice", False) for o in out] == [False, False, True, False]  # sd 0.04: the highest low end
    assert out[2]["recommendation"] == KEEP and out[2]["p_within_margin"] < 0.05
    assert out[1]["recommendation"] == STOP and out[3]["recommendation"] == STOP
    alone = judge([settled[1]], margin=0.01, confidence=0.95)  # one run: nothing to hedge
    assert "safe_choice" not in alone[0]
