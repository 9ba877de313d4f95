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


def test_every_law_is_a_consistent_object():
    """Each row's guess lies in its bounds, its curve starts at ``initial`` and its Jacobian is
    the derivative of its curve (central differences), at the guess for a seeded rising run."""
    t = np.arange(0.0, 400.0, 2.0)
    y = 0.8 - 0.6 * np.exp(-t / 60.0) + np.random.default_rng(3).normal(0.0, 0.01, t.size)
    for row in laws.LAWS:
        guess, bounds = row.guess(t, y), row.bounds(t, y)
        assert set(guess) == set(bounds) == set(row.param_names), row.name
        p = {k: float(np.clip(guess[k], *bounds[k])) for k in row.param_names}
        p = {k: v if v > 0 or k in ("plateau", "initial") else 0.3 for k, v in p.items()}
        assert row(np.array([0.0]), p)[0] == pytest.approx(p["initial"], abs=1e-9), row.name
        jac = row.jacobian(t, *(p[k] for k in row.param_names))
        assert jac.shape == (t.size, len(row.param_names)), row.name
        for j, k in enumerate(row.param_names):
            h = 1e-6 * max(1.0, abs(p[k]))
            up, down = dict(p, **{k: p[k] + h}), dict(p, **{k: p[k] - h})
            np.testing.assert_allclose(jac[:, j], (row(t, up) - row(t, down)) / (2 * h), atol=1e-6, err_msg=row.name)
