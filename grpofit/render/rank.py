"""The ``grpofit.rank/1`` document as a table for people (rich), GitHub markdown, and a figure of
the runs' fans side by side. Renders only: every number comes from the document (or, for the
figure, from the forecasts the document was made from)."""

from __future__ import annotations

__all__ = ["rank_table", "rank_markdown", "save_rank_figure"]

HEAD = ["run", "seen to", "final at horizon (80% / 95%)", "p best", "p within margin", "recommendation", "saved"]


def _pct(p) -> str:
    """A probability in whole percents: its Monte-Carlo error (the draws come from a few dozen
    parameter draws per run) is a few points, so a tenth would be noise (JSON keeps the share
    and its error)."""
    if p is None:
        return "-"
    if 0 < p < 0.005:
        return "<1%"
    if 0.995 < p < 1:
        return ">99%"
    return f"{100 * p:.0f}%"


def _final(f: dict) -> str:
    from grpofit.render.tables import num

    if not f or f.get("mean") is None:
        return "-"

    def iv(x):
        if not x:
            return "-"
        return f"[{num(x[0])}, {num(x[1]) if x[1] is not None else '?'}]"

    return f"{num(f['mean'])}  {iv(f.get('pi80'))} {iv(f.get('pi95'))}"


def _saved(r: dict) -> str:
    from grpofit.render.tables import num

    s = r.get("saved") or {}
    if s.get("steps") is None:
        return "-"
    parts = [f"{num(s['steps'])} steps"]
    if s.get("gpu_hours") is not None:
        parts.append(f"{num(s['gpu_hours'])} GPU-h")
    elif s.get("hours") is not None:
        parts.append(f"{num(s['hours'])} h")
    return ", ".join(parts)


def _rows(doc: dict):
    from grpofit.render.tables import step_text

    order = sorted(
        doc.get("runs", []),
        key=lambda r: (
            r.get("p_best") is None,
            -(r.get("p_best") or 0.0),
            -((r.get("final") or {}).get("mean") or -1e300),
        ),
    )
    for r in order:
        yield (
            r,
            [
                r["run"],
                step_text(r["seen"]["steps"][1]),
                _final(r.get("final")),
                _pct(r.get("p_best")),
                _pct(r.get("p_within_margin")),
                r["recommendation"],
                _saved(r),
            ],
        )


def _summary_lines(doc: dict) -> list[str]:
    from grpofit.render.tables import num, step_text

    h = doc["horizon"]
    lines = [
        f"horizon: step {step_text(h['step'])} ({h['source']}); margin {num(doc.get('margin'))}, "
        f"confidence {num(doc.get('confidence'))}"
    ]
    if doc.get("until") is not None:
        lines.append(f"runs cut at step {num(doc['until'])} (--until)")
    lines.append(f"most likely best: {doc['best']}" if doc.get("best") else "most likely best: cannot tell")
    near = [r["run"] for r in doc["runs"] if r.get("borderline")]
    if near:
        lines.append(
            f"{len(near)} recommendation(s) within 2 Monte-Carlo errors of a threshold (another --seed may "
            "change them): " + ", ".join(near[:5]) + (f" and {len(near) - 5} more" if len(near) > 5 else "")
        )
    from grpofit.forecasting.rank import STOP, decide

    # the safe choice that the rule alone would have stopped
    safe = [r for r in doc["runs"] if r.get("safe_choice") and decide(r["p_within_margin"], doc["confidence"]) == STOP]
    if safe:
        lines.append(
            f"kept as the safe choice: {safe[0]['run']} (the highest low end of a forecast: the best run if every "
            "forecast ends low, where the runs still rising may not reach the levels their wide forecasts allow)"
        )
    stop = [r for r in doc["runs"] if r["recommendation"] == "stop"]
    if stop:
        steps = sum(r["saved"]["steps"] or 0 for r in stop)
        lines.append(f"stopping {len(stop)} run(s) saves {num(steps)} steps")
    if doc.get("note"):
        lines.append(doc["note"])
    for r in doc["runs"]:
        if r.get("note"):
            lines.append(f"{r['run']}: {r['note']}")
    return lines


def rank_table(doc: dict):
    """``(table, lines)``: the runs, most likely best first, and the notes below."""
    from rich.table import Table

    from grpofit.render.tables import distinct_parts, esc, short_names

    table = Table(title="rank: each run forecast to the common horizon", title_justify="left")
    for h in HEAD:  # a run's name folds onto more lines rather than losing what tells it apart
        table.add_column(h, overflow="fold" if h == "run" else "ellipsis")
    from grpofit.readers.selection import run_label

    rows = [row for _, row in _rows(doc)]
    labels = [run_label(row[0]) for row in rows]
    names = distinct_parts(labels) if len(set(labels)) == len(labels) else short_names([row[0] for row in rows])
    for name, row in zip(names, rows):
        table.add_row(*[esc(x) for x in [name, *row[1:]]])
    return table, _summary_lines(doc)


def rank_markdown(doc: dict) -> str:
    lines = ["## grpofit rank", "", "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for _, row in _rows(doc):
        lines.append("| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |")
    lines += [""] + [f"- {x}" for x in _summary_lines(doc)]
    return "\n".join(lines) + "\n"


def save_rank_figure(outcome, path) -> None:
    """One panel per run (shared reward axis): the seen points, the points after ``--until`` (grey),
    the median forecast with its 80/95% fans up to the horizon, and the horizon line."""
    import math
    from pathlib import Path

    from matplotlib.figure import Figure

    from grpofit.core.errors import UsageError
    from grpofit.readers.selection import run_label
    from grpofit.render.plotting import check_suffix
    from grpofit.render.tables import distinct_parts

    path = Path(path)
    check_suffix(path)
    pairs = outcome.items
    n = max(len(pairs), 1)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(3.6 * cols, 2.9 * rows))
    axes = fig.subplots(rows, cols, sharey=True, squeeze=False)
    flat = list(axes.ravel())
    by_name = {r["run"]: r for r in outcome.doc["runs"]}
    horizon = outcome.doc["horizon"]["step"]
    names = distinct_parts([run_label(item) for item, _ in pairs])
    for ax, (item, res), name in zip(flat, pairs, names):
        ax.plot(item.steps, item.values, ".", ms=2, color="C0", alpha=0.6)
        if item.rest is not None and len(item.rest[0]):
            ax.plot(item.rest[0], item.rest[1], ".", ms=2, color="0.6", alpha=0.6)
        fan = getattr(res.forecast, "fan", None) if res.forecast is not None else None
        if fan is not None:
            ax.fill_between(fan["step"], fan["q025"], fan["q975"], color="C1", alpha=0.2, lw=0)
            ax.fill_between(fan["step"], fan["q10"], fan["q90"], color="C1", alpha=0.35, lw=0)
            ax.plot(fan["step"], fan["q50"], color="C1", lw=1.2)
        if horizon is not None:
            ax.axvline(horizon, color="k", ls=":", lw=0.8)
        r = by_name.get(item.name, {})
        title = f"{name[-28:]}\n{r.get('recommendation', '')}, p best {_pct(r.get('p_best'))}"
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in flat[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise UsageError(
            f"cannot write the figure: {e.strerror}", path=str(path), fix="choose a writable path"
        ) from None
