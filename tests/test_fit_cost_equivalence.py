"""The fit's cheaper paths give what the plain ones gave (tolerance comparisons, no timing)."""

from __future__ import annotations

import json
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


def _hf_documents():
    rows = [{"step": s, "loss": 1.0 / s, "reward": 0.01 * s, "epoch": s / 300} for s in range(1, 40)]
    rows.insert(5, {"step": 5, "eval_reward": 0.3})  # merged into step 5
    rows.append({"step": 39, "train_runtime": 9.0, "train_loss": 0.1})  # the summary row
    yield json.dumps({"global_step": 39, "max_steps": 1e3, "log_history": rows}, indent=2)
    yield json.dumps(rows)  # a bare log_history array
    yield json.dumps({"log_history": [{"step": 2, "r": 1}, {"step": 1, "r": 2}, {"r": 3}]})  # unsorted, no step
    yield '{"log_history": [{"step": 1, "r": NaN}, {"step": NaN, "r": 1}], "epoch": Infinity}'
    yield '{"log_history": [{"step": 1, "r": 1}], "log_history": [{"step": 7, "r": 2}]}'  # the last key wins
    yield '{"log_history": [{"step": 1, "r": 1}], "log_history": null}'
    yield '{"log_history": [{"step": 1, "r": {"a": 1, "b": [1, 2]}}, {"step": 2, "r": true}]}'
    yield '\ufeff{"log_history": [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.75}]}'
    yield '{"log_history": [{"step": 1, "reward": 0.5}, 3, "x"]}'
    yield '{"log_history": []}'
    yield '{"log_history": [{"step": 1, "reward": 0.5}]} {"extra": 1}'  # not one document
    yield "[1, 2"
    yield '"just a string"'


def _hf_outcome(src):
    from grpofit.readers import hf

    try:
        runs = hf.read_hf(src, "trainer_state")
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return ("error", type(e).__name__, str(e))
    return [
        (r.name, r.steps.tobytes(), {k: v.tobytes() for k, v in r.metrics.items()}, r.stats, r.config) for r in runs
    ]


def test_trainer_state_in_memory_is_read_as_the_scanner_reads_it(tmp_path):
    from grpofit.readers.source import Source

    for i, text in enumerate(_hf_documents()):
        path = tmp_path / f"doc{i}" / "trainer_state.json"
        path.parent.mkdir()
        path.write_bytes(text.encode())
        scanned = _hf_outcome(Source(str(path), str(path)))  # no data in memory: the scanner
        loaded = _hf_outcome(Source(str(path), str(path)).small_in_memory())
        assert loaded == scanned, text
