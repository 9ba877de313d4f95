"""How ``grpofit watch`` shows its state: a rich table for a live terminal, one line per change
otherwise."""

from __future__ import annotations

from grpofit.core.vocabulary import MODE_TITLES  # noqa: F401  (the contract's titles, spelled once)
from grpofit.watch.monitor import Monitor, RunState

_STYLE = {"fail": "bold red", "warn": "yellow", "pass": "green", "unknown": "dim"}


def _modes() -> tuple[str, ...]:
    from grpofit.diagnostics.base import MODES

    return tuple(MODES)


def _f(x, fmt: str = ".3g") -> str:
    return "–" if x is None else format(x, fmt)


def forecast_text(st: RunState, *, short: bool = False) -> str:
    mean, pi95 = st.forecast_final()
    if mean is None:
        note = st.forecast_note or "cannot forecast yet"
        if short:  # the table keeps the gist; lines and --jsonl keep the whole reason
            note = note.split(";")[0].split(" (")[0]
        return note
    if pi95 and None not in pi95:
        return f"{mean:.3g} [{pi95[0]:.3g}, {pi95[1]:.3g}]"
    if pi95 and pi95[0] is not None:  # upper end unknown: a lower bound only
        return f"{mean:.3g} [>= {pi95[0]:.3g}]"
    return f"{mean:.3g}"


def steps_to_95_text(st: RunState) -> str:
    """The step reaching 95% of the gain; ``>=`` when only a lower bound is known."""
    s95 = st.steps_to_95()
    if s95 is None:
        return "–"
    kind = ((st.forecast or {}).get("steps_to_95") or {}).get("kind")
    return (">= " if kind == "lower_bound" else "") + f"{s95:.0f}"


def alerts_text(st: RunState) -> str:
    if not st.alerts:
        return "–"
    parts = []
    for a in sorted(st.alerts.values(), key=lambda a: a.step):
        since = f" (from {a.onset:g})" if a.onset is not None and a.onset < a.step else ""
        parts.append(f"{a.status} {MODE_TITLES.get(a.mode, a.mode)} @{a.step:g}{since}")
    return "; ".join(parts)


def table(monitor: Monitor, *, title: str = "grpofit watch", footer: str | None = None):
    from rich.table import Table
    from rich.text import Text

    t = Table(title=title, caption=footer, expand=False)
    t.add_column("run", overflow="fold", max_width=48)
    t.add_column("step", justify="right")
    t.add_column("reward", justify="right")
    t.add_column("forecast final [95%]", overflow="fold", max_width=36)
    t.add_column("steps to 95%", justify="right")
    for m in _modes():
        t.add_column(MODE_TITLES.get(m, m))
    t.add_column("alerts (first step)", overflow="fold", max_width=40)
    for st in monitor.runs.values():
        if st.problem:
            t.add_row(
                st.name, _f(st.last_step, "g"), "–", Text(st.problem, style="dim"), "–", *["–" for _ in _modes()], "–"
            )
            continue
        verdicts = [Text(st.verdicts.get(m, "–"), style=_STYLE.get(st.verdicts.get(m, ""), "")) for m in _modes()]
        t.add_row(
            st.name,
            _f(st.last_step, "g"),
            _f(st.level),
            forecast_text(st, short=True),
            steps_to_95_text(st),
            *verdicts,
            Text(alerts_text(st), style=_STYLE.get(st.status, "")),
        )
    return t


def alert_line(event: dict) -> str:
    onset = f" onset={event['onset']}" if event.get("onset") is not None else ""
    return (
        f"ALERT {event['status']} {event['mode']} run={event['run']} step={event['step']}{onset}: {event['evidence']}"
    )


def update_line(st: RunState) -> str:
    verdicts = " ".join(f"{MODE_TITLES.get(m, m)}={st.verdicts.get(m, '–')}" for m in _modes())
    return (
        f"UPDATE run={st.name} step={_f(st.last_step, 'g')} reward={_f(st.level)} "
        f"forecast={forecast_text(st)} steps_to_95={steps_to_95_text(st)} {verdicts}"
    )
