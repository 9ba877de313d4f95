"""The registry of the laws: :data:`LAWS`, one row per law, each row the law's one object.

A law is one module under :mod:`grpofit.laws` defining its
:class:`grpofit.laws.base.CurveModel` (curve, Jacobian, guess, bounds, table titles, plot style
and its :class:`~grpofit.laws.base.StateSpaceForm`) and one row here (CONTRIBUTING.md, "Adding a
law"; ``tests/test_law_addition.py`` adds one to a copy of the package). Nothing after this
module names a law to enumerate the laws:

- ``fit`` (:mod:`grpofit.fitting.driver`), model selection, the JSON (``models`` of a fit), the
  tables (a column per law, a row per parameter with the law's ``titles``), the plots (each law
  drawn in its ``style``) and ``compare`` (its ``laws`` section) read :data:`MODELS`, the rows
  with ``fitted`` set;
- ``forecast`` (:mod:`grpofit.forecasting.engine`) mixes :data:`STATESPACE`, the state-space
  forms of the rows that have one, by the form's name (the key in the forecast's ``laws``).

Rows are in order of complexity, the simplest first: model selection starts from the first law
that fits and moves to a later one only when its BIC is lower by more than
:data:`grpofit.fitting.regime.PREFER_DELTA_BIC` (and the series shows a significant rise); the
forecaster's search of every form starts from where the first form's (the exponential's) ended.
The exponential and the oscillator are fitted together from one grid over the damping ratio (the
oscillator nests the exponential, :mod:`grpofit.fitting.profile`); every other fitted row is
fitted from its own ``guess`` by the same bounded solver, with HAC intervals
(:func:`grpofit.fitting.assemble.law_fit`).
"""

from __future__ import annotations

from grpofit.laws.base import CurveModel, StateSpaceForm
from grpofit.laws.exponential import EXPONENTIAL
from grpofit.laws.oscillator import OSCILLATOR
from grpofit.laws.two_modes import TWO_MODES

__all__ = ["LAWS", "MODELS", "STATESPACE"]

#: every law, simplest first
LAWS: tuple[CurveModel, ...] = (EXPONENTIAL, OSCILLATOR, TWO_MODES)

#: the laws ``fit`` fits, by name, in the order of :data:`LAWS`
MODELS: dict[str, CurveModel] = {m.name: m for m in LAWS if m.fitted}

#: the state-space forms ``forecast`` mixes, by their name, in the order of :data:`LAWS`
STATESPACE: dict[str, StateSpaceForm] = {m.statespace.name: m.statespace for m in LAWS if m.statespace is not None}
