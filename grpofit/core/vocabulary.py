"""The command-line contract's vocabulary in one place: failure modes, statuses, regimes, schemas.

Every name a script may rely on (docs/json.md) is spelled here once; the diagnostics, the gate,
the renderers and the planted-run generator read it from here. Importing this module costs
nothing (no numpy), so the renderers and ``--fail-on`` parsing can use it freely.

A failure mode is one :class:`Mode` row in :data:`MODE_TABLE`: its contract name, the column
titles of the full and compact tables, and the module (under :mod:`grpofit.diagnostics`) whose
``check(ctx) -> Verdict`` judges it. Adding a diagnostic is that module, one row here and one test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Mode:
    """One failure mode of the ``diagnose`` contract."""

    name: str  #: contract key in ``diagnostics`` (e.g. ``dynamical_instability``)
    title: str  #: column title in the full table and in markdown
    short: str  #: column title in the compact table
    module: str  #: ``grpofit.diagnostics.<module>`` holds its ``check(ctx)``


MODE_TABLE: tuple[Mode, ...] = (
    Mode("train_eval_decoupling", "train-eval", "T-E", "decoupling"),
    Mode("advantage_degeneracy", "advantage", "adv", "degeneracy"),
    Mode("policy_concentration", "entropy", "ent", "concentration"),
    Mode("dynamical_instability", "dynamics", "dyn", "instability"),
)

#: contract mode names, in output order
MODES: tuple[str, ...] = tuple(m.name for m in MODE_TABLE)
MODE_TITLES: dict[str, str] = {m.name: m.title for m in MODE_TABLE}
SHORT_TITLES: dict[str, str] = {m.name: m.short for m in MODE_TABLE}

#: a diagnostic's status; the run's verdict is the worst of them (``unknown`` does not fail)
STATUSES: tuple[str, ...] = ("pass", "warn", "fail", "unknown")
STATUS_RANK: dict[str, int] = {"unknown": 0, "pass": 1, "warn": 2, "fail": 3}

#: the oscillator fit's regime (``indeterminate`` when the data cannot decide)
REGIMES: tuple[str, ...] = ("overdamped", "critical", "underdamped", "indeterminate")

#: the ``schema`` id of every JSON document, by command
SCHEMAS: dict[str, str] = {
    "fit": "grpofit.fit/1",
    "diagnose": "grpofit.diagnose/1",
    "predict": "grpofit.predict/1",
    "inspect": "grpofit.inspect/1",
    "forecast": "grpofit.forecast/1",
    "backtest": "grpofit.backtest/1",
    "compare": "grpofit.compare/1",
    "rank": "grpofit.rank/1",
    "watch": "grpofit.watch/1",
    "bandit": "grpofit.bandit/1",  #: simulate bandit's .meta.json
    "prior": "grpofit.prior/1",  #: a saved population prior (forecast --save-prior)
}


def parse_modes(text: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """``--fail-on`` as mode names (comma-separated text or names; ``-`` may stand for ``_``).

    None or empty -> None (every mode gates). Unknown names raise
    :class:`~grpofit.core.errors.UsageError`: the one place ``--fail-on`` is validated.
    """
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    modes = [str(m).strip().replace("-", "_") for m in items if str(m).strip()]
    if not modes:
        return None
    bad = [m for m in modes if m not in MODES]
    if bad:
        from grpofit.core.errors import UsageError

        raise UsageError(f"unknown mode(s) in --fail-on: {', '.join(bad)}", fix="use any of: " + ", ".join(MODES))
    return tuple(modes)
