"""The law registries are the one source of the laws: the forecaster mixes exactly the rows of
``grpofit.forecasting.statespace.LAWS`` and every fit law's ``statespace_law`` names one of them."""

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
def test_the_forecaster_mixes_the_rows_of_its_registry(monkeypatch):
    steps, values = _rise()
    doc = engine.forecast_series(steps, values, validate=False).doc
    assert list(doc["laws"]) == list(statespace.LAWS)
    monkeypatch.delitem(statespace.LAWS, "two")  # a row less: the forecaster mixes one law less
    doc = engine.forecast_series(steps, values, validate=False).doc
    assert list(doc["laws"]) == ["one", "oscillator"]
    assert not hasattr(engine, "LAWS_USED")


def test_every_fit_law_points_at_a_forecaster_law_or_none():
    for row in laws.LAWS:
        assert row.statespace_law is None or row.statespace_law in statespace.LAWS, row.name
