"""The fit's cheaper paths give what the plain ones gave (tolerance comparisons, no timing)."""

from __future__ import annotations

import math
import random
import re

import numpy as np
import pytest

from grpofit.fitting import ceiling
from grpofit.fitting.outliers import FACTOR, find_outliers
from grpofit.readers.jsonl import _JSON_VALUES


def _jackknife_one_by_one(d: np.ndarray, B: int, lattice: bool) -> np.ndarray:
    """The jackknife as it was written first: one replicate at a time through ``_sd``."""
    edges = np.linspace(0, d.size, B + 1).astype(int)
    return np.array(
        [ceiling._sd(np.concatenate([d[: edges[b]], d[edges[b + 1] :]]), True, lattice)[0] for b in range(B)]
    )


@pytest.mark.parametrize("n", [9, 10, 11, 30, 31, 100, 299, 300, 301, 1001])
@pytest.mark.parametrize("kind", ["continuous", "lattice", "ties"])
def test_batched_jackknife_matches_one_replicate_at_a_time(n, kind):
    rng = np.random.default_rng(n)
    y = np.cumsum(rng.normal(0, 0.05, n)) + rng.normal(0, 0.2, n)
    if kind == "lattice":  # a reward averaged over 8 rollouts
        y = np.round(rng.random(n) * 8) / 8 + np.linspace(0, 1, n)
    elif kind == "ties":
        y = np.round(y * 4) / 4
    d = np.diff(y)
    B = min(ceiling.BLOCKS, d.size // 3)
    for lattice in (False, True):
        got = ceiling._jackknife_sds(d.copy(), B, lattice)
        want = _jackknife_one_by_one(d.copy(), B, lattice)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_jackknife_leaves_out_the_blocks_the_linspace_cuts_name():
    # the integer cuts equal np.linspace(0, n, B + 1).astype(int)'s for every size a fit meets
    for n in range(6, 5000):
        B = min(ceiling.BLOCKS, n // 3)
        if B >= 2:
            assert np.array_equal((np.arange(B + 1) * n) // B, np.linspace(0, n, B + 1).astype(int)), n


def test_outlier_bounds_are_those_of_np_median_s_noise():
    rng = np.random.default_rng(3)
    for n in (30, 31, 300):
        values = np.cumsum(rng.normal(0, 0.02, n)) + rng.normal(0, 0.1, n)
        values[n // 2] = 40.0  # one corrupted value
        found = find_outliers(np.arange(n, dtype=float), values)
        assert found is not None and found.index.tolist() == [n // 2]
        # a value just inside the bound that np.median's noise sets is kept (the noise, not the
        # range, sets the bound here)
        trim = max(2, n // 200)

        def bound(v):
            part = np.sort(v)
            lo, hi = part[trim], part[n - 1 - trim]
            noise = float(np.median(np.abs(np.diff(v)))) * 1.4826 / math.sqrt(2.0)
            assert 10.0 * noise > hi - lo
            return hi + FACTOR * max(hi - lo, abs(lo), abs(hi), 10.0 * noise)

        inside = values.copy()
        for _ in range(5):  # the planted value moves the noise a little: settle it
            inside[n // 2] = bound(inside) - 1e-6
        assert inside[n // 2] < bound(inside)
        assert find_outliers(np.arange(n, dtype=float), inside) is None
        inside[n // 2] = bound(inside) + 1e-3
        assert find_outliers(np.arange(n, dtype=float), inside) is not None


def test_possessive_json_values_pattern_matches_the_same_strings():
    number = rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
    value = rb"(?:" + number + rb"|null|NaN|-?Infinity)"
    plain = re.compile(value + rb"(?:," + value + rb")*")
    rng = random.Random(0)
    alphabet = [b"0", b"1", b"9", b".", b"e", b"E", b"+", b"-", b",", b"null", b"NaN", b"Infinity", b"_", b" ", b"x"]
    matched = 0
    for _ in range(50000):
        s = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        want = plain.fullmatch(s) is not None
        assert (_JSON_VALUES.fullmatch(s) is not None) == want, s
        matched += want
    assert matched > 1000  # the sample holds many valid lists, not only rejections
    for s in (b"1,-0.5e+3,null,NaN,-Infinity,0", b"01", b"1.", b".5", b"1e", b"1_0", b"+1", b"1,,2"):
        assert (_JSON_VALUES.fullmatch(s) is not None) == (plain.fullmatch(s) is not None), s
