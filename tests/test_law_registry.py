"""The law registry is the one source of the laws: ``fit`` fits exactly its fitted rows, the
forecaster mixes exactly the state-space forms of its rows, and each law is one object."""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.forecasting import engine, statespace
from grpofit.laws import registry as laws


def _rise(n=300, seed=0):
    steps = np.arange(n, dtype=float)
    values = 0.8 - 0.6 * np.exp(-steps / 60.0) + np.random.default_rng(seed).normal(0, 0.01, n)
    return steps, values


@pytest.mark.slow
def test_the_forecaster_mixes_the_forms_of_the_registry(monkeypatch):
    steps, values = _rise()
    doc = engine.forecast_series(steps, values, validate=False).doc
    forms = [m.statespace.name for m in laws.LAWS if m.statespace is not None]
    assert list(doc["laws"]) == forms
    last = forms[-1]
    monkeypatch.delitem(statespace.LAWS, last)  # a row less: the forecaster mixes one law less
    doc = engine.forecast_series(steps, values, validate=False).doc
    assert list(doc["laws"]) == forms[:-1]


def test_the_forecaster_reads_the_law_registry_itself():
    assert statespace.LAWS is laws.STATESPACE
    for row in laws.LAWS:
        if row.statespace is not None:
            assert statespace.LAWS[row.statespace.name] is row.statespace, row.name
    assert list(laws.MODELS) == [m.name for m in laws.LAWS if m.fitted]


def test_every_form_is_consistent_with_its_law():
    """Each form's pieces agree with one another: columns per amplitude, times read back from
    their log coordinates inside the bounds, a stable forcing, starts of the right length."""
    for row in laws.LAWS:
        form = row.statespace
        if form is None:
            continue
        assert form.levels[0] == "plateau", row.name
        lo, hi = form.log_bounds(np.log(0.5), np.log(1e4), 2.0)
        assert len(lo) == len(hi) == len(form.times), row.name
        theta = np.array([0.5 * (a + b) for a, b in zip(lo, hi)] + [0.0])
        times = form.from_log(theta)
        assert len(times) == len(form.times) and all(t > 0 for t in times), row.name
        cols = form.columns(np.linspace(0.0, 100.0, 11), times)
        assert len(cols) == len(form.levels) - 1, row.name
        lam, r = form.modes(times)
        assert np.all(np.real(lam) < 0) and lam.shape == r.shape, row.name
        assert all(0 <= i < len(times) for i in form.forcing), row.name
        for start in form.starts(50.0, [0.1, 0.2], None):
            assert len(start) == len(form.times) + 1, row.name
        assert form.slowest(times) >= min(times) > 0, row.name
