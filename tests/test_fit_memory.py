"""Memory of a fit on a long series (issue 14 item 5, issue 17 long runs).

A series longer than :data:`grpofit.fitting.hac.BLOCK` is summed block by block (Jacobians,
HAC window sums, the residual autocorrelation): the results must be those of the one-piece sums
up to rounding. Shorter series take the one-piece formulas unchanged (byte-identical output).
"""

from __future__ import annotations

import numpy as np
import pytest


def _series(n: int, tau: float, ring: bool, seed: int = 1):
    rng = np.random.default_rng(seed)
    s = np.arange(n, dtype=float)
    shape = np.exp(-s / tau) * (np.cos(2 * s / tau) if ring else 1.0)
    noise = np.convolve(rng.normal(0, 0.02, n + 20), np.ones(20) / 5, "valid")[:n]  # autocorrelated
    return s, 0.85 - 0.6 * shape + noise


def _numbers(doc, path=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _numbers(v, f"{path}/{k}")
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            yield from _numbers(v, f"{path}/{i}")
    else:
        yield path, doc


@pytest.mark.parametrize("n,tau,ring", [(5000, 800.0, False), (6001, 500.0, True)])
def test_blocked_sums_match_the_one_piece_fit(monkeypatch, n, tau, ring):
    from grpofit.analysis import fit_summary
    from grpofit.fitting import fit_series, hac
    from grpofit.jsonout import jsonable

    steps, values = _series(n, tau, ring)
    whole = dict(_numbers(jsonable(fit_summary(fit_series(steps, values)))))
    monkeypatch.setattr(hac, "BLOCK", 997)  # every long-series path, with ragged last blocks
    blocked = dict(_numbers(jsonable(fit_summary(fit_series(steps, values)))))
    assert whole.keys() == blocked.keys()
    floats = 0
    for key, a in whole.items():
        b = blocked[key]
        if isinstance(a, float) and isinstance(b, float):
            floats += 1
            assert b == pytest.approx(a, rel=1e-9, abs=1e-12), key
        else:
            assert a == b, key
    assert floats > 20


def test_blocked_parts_are_the_plain_bread_and_meat():
    from grpofit.fitting import hac

    rng = np.random.default_rng(3)
    jac = rng.normal(size=(2500, 3))
    r = rng.normal(size=2500)
    for bw in (1, 7, 250, 1249):
        parts = hac.blocked_parts(lambda lo, hi: jac[lo:hi], r, bw, block=300)
        np.testing.assert_allclose(parts.bread, jac.T @ jac, rtol=1e-12)
        np.testing.assert_allclose(parts.meat, hac.hac_meat(jac * r[:, None], bw), rtol=1e-10, atol=1e-12)


def test_blocked_autocorrelation_is_the_fft_one(monkeypatch):
    from grpofit.fitting import hac

    r = np.random.default_rng(4).normal(size=3000).cumsum() * 0.01 + np.random.default_rng(5).normal(size=3000)
    whole = hac._acf(r, 401)
    monkeypatch.setattr(hac, "BLOCK", 512)
    np.testing.assert_allclose(hac._acf(r, 401), whole, rtol=1e-9, atol=1e-12)
    blocked_bw = hac.bandwidth(r)
    monkeypatch.undo()
    assert blocked_bw == hac.bandwidth(r)
