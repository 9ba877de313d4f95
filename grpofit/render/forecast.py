"""Forecast and backtest documents as tables for people (rich) and GitHub markdown.

Renders only: every number comes from the document."""

from __future__ import annotations

from typing import Any

__all__ = ["forecast_tables", "backtest_table", "backtest_markdown"]


def _interval(iv) -> str:
    from grpofit.render.tables import num

    if not iv:
        return "-"
    return f"[{num(iv[0])}, {num(iv[1]) if iv[1] is not None else '?'}]"


def _est(e: dict | None, unit: str = "") -> str:
    """``value [lo, hi]``; a lower bound (``kind: lower_bound``, upper end null) reads
    ``at least value`` and shows no interval (the value is its lower end)."""
    from grpofit.render.tables import num

    if not e or e.get("value") is None:
        return f"unknown: {e['reason']}" if e and e.get("reason") else "-"
    iv = e.get("ci95")
    if e.get("kind") == "upper_bound" and not iv:
        return f"at most {unit}{num(e['value'])}"
    if e.get("kind") == "lower_bound" and (not iv or iv[1] is None):
        low = num(iv[0]) if iv else num(e["value"])
        if iv and iv[0] != e["value"]:
            return f"{num(e['value'])}, at least {unit}{low} (95%; upper end unknown)"
        return f"at least {unit}{low} (upper end unknown)"
    return f"{num(e['value'])} {_interval(iv)}"


def _plateau_label(r: dict) -> str:
    """The plateau row's label: still rising or falling for a bound; the fit's plateau of a run
    that collapsed is the one before the collapse."""
    from grpofit.render.tables import step_text

    kind = (r.get("plateau") or {}).get("kind")
    label = {"lower_bound": "plateau (still rising)", "upper_bound": "plateau (still falling)"}.get(kind, "plateau")
    step = (r.get("collapse") or {}).get("step")
    if step is not None and (r.get("plateau") or {}).get("source") == "fit":
        label += f" before the collapse at step {step_text(step)}"
    return label


def _at_text(a: dict) -> str:
    """Expected reward at a step: mean and 80/95% intervals, or their lower ends when the
    upper ends are unknown."""
    from grpofit.render.tables import num

    if a.get("mean") is None:
        return "-"
    p80, p95 = a.get("pi80"), a.get("pi95")
    if a.get("kind") == "lower_bound" or (p95 and p95[1] is None):
        lo80 = num(p80[0]) if p80 else "-"
        lo95 = num(p95[0]) if p95 else "-"
        return f"{num(a['mean'])}  at least {lo80} (80%), at least {lo95} (95%); upper end unknown"
    return f"{num(a['mean'])}  80% {_interval(p80)}  95% {_interval(p95)}"


def _prior_text(p: dict, at: list) -> str:
    """How many finished runs, the weight the prior got, and the forecast without it."""
    from grpofit.render.tables import num

    text = f"{p.get('runs')} finished runs ({p.get('source')}); weight {num(p.get('weight'))}"
    if p.get("tempering") is not None and p["tempering"] < 1:
        text += f", tempered to {num(p['tempering'])} (the run is unlike them)"
    if p.get("covariates"):
        text += f"; regressed on {', '.join(p['covariates'])}"
    wo = (at[0] or {}).get("without_prior") if at else None
    if wo and wo.get("mean") is not None:
        text += f"; without the prior: {num(wo['mean'])} 95% {_interval(wo.get('pi95'))}"
    elif wo:
        text += "; without the prior: no forecast"
    return text


def forecast_tables(doc: dict) -> list[Any]:
    from grpofit.render.tables import key_value_table, num, step_text

    out = []
    for r in doc.get("runs", []):
        rows = [
            ("metric", r.get("metric")),
            (
                "seen",
                f"steps {step_text(r['seen']['steps'][0])}..{step_text(r['seen']['steps'][1])} ({r['seen']['n_points']} points)",
            ),
        ]
        h = r.get("horizon") or {}
        rows.append(
            (
                "planned end",
                f"step {step_text(h.get('step'))} ({h.get('source')})" if h.get("step") is not None else "unknown",
            )
        )
        bd = r.get("bounds") or {}
        if bd.get("low") is not None and bd.get("high") is not None:
            rows.append(("bounds", f"[{num(bd['low'])}, {num(bd['high'])}] ({bd.get('source')})"))
        for a in r.get("at", []):
            if a.get("step") is None:
                continue
            rows.append((f"expected reward at step {step_text(a['step'])}", _at_text(a)))
        p = r.get("plateau") or {}
        own = " (without the prior)" if r.get("prior") else ""
        rows.append((_plateau_label(r) + own, _est(p)))
        rows.append(("step reaching 90% of the gain" + own, _est(r.get("steps_to_90"), "step ")))
        rows.append(("step reaching 95% of the gain" + own, _est(r.get("steps_to_95"), "step ")))
        rows.append(("gain still expected by the planned end", _est(r.get("remaining_gain"))))
        if r.get("recommendation"):
            rows.append(("recommendation", r["recommendation"]))
        if r.get("prior"):
            rows.append(("prior", _prior_text(r["prior"], r.get("at") or [{}])))
        if r.get("note"):
            rows.append(("note", r["note"]))
        out.append(key_value_table(f"forecast: {r.get('run')}", rows))
    return out


def _cut_rows(doc: dict):
    from grpofit.render.tables import num, step_text

    for r in doc.get("runs", []):
        for c in r.get("cuts", []):
            pred = c.get("predicted") or {}
            base = c.get("baselines") or {}
            yield [
                r.get("run"),
                f"{c['fraction']:.0%}",
                step_text(c.get("step")),
                num(pred.get("median", pred.get("mean"))),
                _interval(pred.get("pi95")),
                num(c.get("actual")),
                {True: "yes", False: "NO", None: "-"}[c.get("covered")],
                num(c.get("error")),
                num((base.get("persistence") or {}).get("error")),
                num((base.get("exponential") or {}).get("error")),
                c.get("note") or "",
            ]


HEAD = ["run", "cut", "step", "forecast", "95% PI", "actual", "covered", "error", "persistence", "exponential", "note"]


def _summary_lines(doc: dict) -> list[str]:
    from grpofit.render.tables import num

    s = doc.get("summary") or {}
    b = s.get("baselines") or {}
    lines = [
        f"forecasts made: {s.get('n_forecasts')} of {s.get('n_cuts')} cuts; 95% interval coverage "
        f"{num(s.get('coverage'))}"
        + (f" ({s['lower_bounds']} of them lower bounds: still rising, end not seen)" if s.get("lower_bounds") else "")
        + f"; error median {num(s.get('median_error'))}, worst {num(s.get('worst_error'))}"
    ]
    for name in ("persistence", "exponential"):
        x = b.get(name) or {}
        lines.append(
            f"{name} (same cuts): error median {num(x.get('median_error'))}, worst {num(x.get('worst_error'))}"
        )
    for frac, x in (s.get("by_fraction") or {}).items():
        lines.append(
            f"cut {frac}: coverage {num(x.get('coverage'))}, median error {num(x.get('median_error'))} "
            f"(persistence {num(x.get('persistence_median_error'))}, exponential {num(x.get('exponential_median_error'))})"
        )
    stops = s.get("stop_recommendations")
    if stops:
        lines.append(
            f"'done' / 'no further gain expected' at {stops['calls']} cuts; wrong (the final level then rose by more "
            f"than 5% of the metric's range) at {stops['wrong']}"
            + (f" ({stops['wrong_rate']:.0%})" if stops.get("wrong_rate") is not None else "")
        )
    return lines


def backtest_table(doc: dict):
    from rich.table import Table

    from grpofit.render.tables import esc, short_names

    table = Table(
        title="backtest: forecast of the final level (mean of the last 10% of steps) from each cut",
        title_justify="left",
    )
    for h in HEAD:
        table.add_column(h)
    rows = list(_cut_rows(doc))
    names = short_names([row[0] for row in rows]) if rows else []
    for name, row in zip(names, rows):
        table.add_row(*[esc(x) for x in [name, *row[1:]]])
    return table, _summary_lines(doc)


def backtest_markdown(doc: dict) -> str:
    lines = ["## grpofit backtest", "", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for row in _cut_rows(doc):
        lines.append("| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |")
    lines += [""] + [f"- {x}" for x in _summary_lines(doc)]
    return "\n".join(lines) + "\n"
