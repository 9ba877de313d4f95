"""The incremental gradient-norm spike rule equals the brute-force rule (median of all earlier
points, recomputed per point), whatever the sizes of the slices it is fed."""

import numpy as np
import pytest

from grpofit.watch.rules import MIN_BASELINE, GradSpike, grad_spike


def brute_first_spike(v, since=0, factor=5.0):
    for i in range(max(since, MIN_BASELINE), v.size):
        base = float(np.median(v[:i]))
        if base > 0 and v[i] >= factor * base:
            return i, base
    return None


@pytest.mark.parametrize("seed", range(6))
def test_matches_brute_force_in_random_slices(seed):
    rng = np.random.default_rng(seed)
    n = 400
    v = 0.2 * np.exp(rng.normal(0, 0.5, n))
    v[rng.choice(np.arange(25, n), 3, replace=False)] *= rng.uniform(3, 12, 3)  # spikes, some below x5
    s = np.arange(1.0, n + 1)
    rule, k, since, fired = GradSpike(), 0, 0, []
    while k < n:
        k = min(n, k + int(rng.integers(1, 40)))
        sig = rule.update(s[:k], v[:k])
        want = brute_first_spike(v[:k], since)
        since = k
        if want is None:
            assert sig is None
        else:
            i, base = want
            assert sig is not None and sig.onset == s[i] and sig.step == s[k - 1]
            assert f"x{v[i] / base:.1f}" in sig.evidence
            fired.append(i)
        assert rule.median() == pytest.approx(float(np.median(v[:k])), rel=0, abs=0)
    assert fired  # the planted spikes are found


def test_new_series_is_taken_afresh_and_nans_are_skipped():
    v = np.r_[np.full(30, 1.0), 10.0]
    s = np.arange(31.0)
    rule = GradSpike()
    assert rule.update(s[:30], v[:30]) is None
    sig = rule.update(s, v)
    assert sig is not None and sig.onset == 30.0
    # a replaced file (another step where the last one was seen): judged afresh
    assert rule.update(s[:25] + 1000, v[:25]) is None and rule.n == 25
    w = v.copy()
    w[5] = np.nan
    assert grad_spike(s, w).onset == 30.0
