"""The registry of the laws ``grpofit fit`` fits: :data:`MODELS`, one row per law.

Fitting (:mod:`grpofit.fitting.driver`), model selection, the JSON (``models`` of a fit), the
tables (a column per law, a row per parameter with the law's ``titles``) and the plots (each
law drawn in its ``style``) all iterate over this registry; nothing after it names a law to
enumerate the laws. A new law is one module defining its :class:`grpofit.laws.models.CurveModel`,
one row here and one test (README, "Contributing": ``tests/test_contributing.py`` plants the
worked example).

Rows are in order of complexity, the simplest first: model selection starts from the first law
that fits and moves to a later one only when its BIC is lower by more than
:data:`grpofit.fitting.regime.PREFER_DELTA_BIC` (and the series shows a significant rise). The
exponential and the oscillator are fitted together from one grid over the damping ratio (the
oscillator nests the exponential, :mod:`grpofit.fitting.profile`); every other row is fitted
from its own ``guess`` by the same bounded solver, with HAC intervals
(:func:`grpofit.fitting.assemble.law_fit`).

The forecaster's state-space laws are a separate registry,
:data:`grpofit.forecasting.statespace.LAWS` (a law here points at one with ``statespace_law``).
"""

from __future__ import annotations

from grpofit.laws.models import EXPONENTIAL, OSCILLATOR, CurveModel

__all__ = ["MODELS", "LAWS"]

#: the rows, simplest first
LAWS: tuple[CurveModel, ...] = (EXPONENTIAL, OSCILLATOR)

#: the laws ``fit`` fits, by name, in the order of :data:`LAWS`
MODELS: dict[str, CurveModel] = {m.name: m for m in LAWS}
