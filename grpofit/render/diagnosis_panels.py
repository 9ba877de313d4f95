"""The ``--plot-dir`` panels of the diagnostic rules, appended to each run's diagnosis figure
(:func:`grpofit.render.plotting.diagnosis_figure`):

- one panel per rule finding that has one (the series it read, its threshold lines, the start
  step; the title carries the rule, its mode and its status);
- with two or more eval series, one panel per benchmark (the eval points, the fitted exponential,
  the plateau's 95% interval, the train reward on a second axis; the title says whether it
  decouples).

Functions draw on axes the caller passes; nothing here picks a backend or writes a file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_COLOUR = {"pass": "tab:green", "warn": "tab:orange", "fail": "tab:red", "unknown": "0.4"}


#: the series each mode's own check reads (its panel when the check itself, not a rule, flags the run)
MODE_ROLES = {
    "train_eval_decoupling": ("eval_reward",),
    "advantage_degeneracy": ("zero_std_frac", "reward_std"),
    "policy_concentration": ("entropy",),
    "dynamical_instability": ("grad_norm", "is_ratio", "clip_ratio"),
}

#: modes whose check reads its first series that the run has (the others are fallbacks)
FIRST_ONLY = ("advantage_degeneracy",)

FLAGGED = ("warn", "fail")


def extra_panels(diagnosis: Any, run: Any) -> list[tuple]:
    """Every panel a run's figure could carry: ``("rule", mode, finding)`` for every finding with a
    panel, then ``("eval", entry)`` per benchmark when the run has two or more."""
    items: list[tuple] = [
        ("rule", mode, f) for mode, v in diagnosis.diagnostics.items() for f in v.findings if f.panel is not None
    ]
    entries = [e for e in getattr(diagnosis, "evals", []) if e["metric"] in run.metrics]
    if len(entries) >= 2:
        items += [("eval", e) for e in entries]
    return items


def finding_panels(diagnosis: Any, run: Any) -> tuple[list[tuple], list[str]]:
    """The panels of a run's figure: only those that carry a finding, each series once.

    Returns ``(panels, unshown)``. A panel is ``("rule", mode, finding)`` for a rule that warns or
    fails (reported-only rules included: their title says so), ``("eval", entry)`` for a benchmark
    that warns, fails or decouples (two or more eval series), and ``("series", mode, role)`` for a
    mode whose own check (not one of its rules) warns or fails, drawn on the series that check
    reads. A series already drawn by a rule's panel is not drawn again. ``unshown``: the flagged
    rules and checks that have no series to draw (named in the figure's title instead)."""
    panels: list[tuple] = []
    unshown: list[str] = []
    drawn: set[str] = set()
    roles = diagnosis.roles or {}
    for mode, v in diagnosis.diagnostics.items():
        _add_rule_panels(mode, v, roles, panels, unshown, drawn)
    evals = [e for e in getattr(diagnosis, "evals", []) if e["metric"] in run.metrics]
    for mode, v in diagnosis.diagnostics.items():
        own = v.own_status or v.status
        if own not in FLAGGED:
            continue
        if mode == "train_eval_decoupling" and len(evals) >= 2:
            flagged = [e for e in evals if e.get("status") in FLAGGED or e.get("decouples")]
            panels += [("eval", e) for e in flagged]
            drawn.update(e["metric"] for e in flagged)
            if flagged:
                continue
        columns = _undrawn_columns(mode, roles, run, drawn)
        if not columns:
            if not any(p[0] == "rule" and p[1] == mode for p in panels):
                from grpofit.core.vocabulary import MODE_TITLES

                unshown.append(f"{MODE_TITLES.get(mode, mode)} {own} (no series to draw)")
            continue
        for role, column in columns:
            panels.append(("series", mode, role))
            drawn.add(column)
    return panels, unshown


def _add_rule_panels(mode: str, v: Any, roles: dict, panels: list, unshown: list, drawn: set) -> None:
    """Add a ``("rule", mode, finding)`` panel for each of mode ``v``'s flagged findings with a
    series (noting its series in ``drawn``); name in ``unshown`` those without one, and a warn on
    a series the mode's own failing check draws."""
    own = v.own_status or v.status
    worse = {roles.get(r) for r in MODE_ROLES.get(mode, ()) if own == "fail"} - {None}
    for f in v.findings:
        if f.status not in FLAGGED:
            continue
        if f.panel is None:
            unshown.append(f"{f.rule} {f.status}")
            continue
        if f.status == "warn" and str(f.panel.label) in worse:  # the check's own fail on the same series is drawn
            unshown.append(f"{f.rule} {f.status} (on the {f.panel.label} panel's series)")
            continue
        panels.append(("rule", mode, f))
        drawn.add(str(f.panel.label))


def _undrawn_columns(mode: str, roles: dict, run: Any, drawn: set) -> list[tuple[str, str]]:
    """The ``(role, column)`` pairs the mode's check reads that the run logs and no panel draws
    yet (only the first for a mode in ``FIRST_ONLY``)."""
    columns = [(role, roles.get(role)) for role in MODE_ROLES.get(mode, ())]
    columns = [(role, c) for role, c in columns if c and c in run.metrics and c not in drawn]
    if mode in FIRST_ONLY:
        columns = columns[:1]
    return columns


def thin(x, y, limit: int = 1500):
    """At most about ``limit`` points of a long series, for drawing only: each bucket of
    consecutive points keeps its lowest and highest (a spike stays visible)."""
    x, y = np.asarray(x), np.asarray(y, float)
    n = y.size
    if n <= limit or x.size != n:
        return x, y
    k = int(np.ceil(2 * n / limit))
    m = n // k
    head = y[: m * k].reshape(m, k)
    lo = np.where(np.isnan(head), np.inf, head).argmin(axis=1)
    hi = np.where(np.isnan(head), -np.inf, head).argmax(axis=1)
    base = np.arange(m) * k
    idx = np.sort(np.concatenate([base + lo, base + hi, np.arange(m * k, n)]))
    idx = idx[np.concatenate([[True], np.diff(idx) > 0])]
    return x[idx], y[idx]


def draw_extra(axes, items: list[tuple], diagnosis: Any, run: Any) -> None:
    """Draw :func:`extra_panels` on ``axes`` (one each)."""
    for ax, item in zip(axes, items):
        if item[0] == "rule":
            draw_rule(ax, item[1], item[2])
        else:
            draw_eval(ax, item[1], diagnosis, run)


def draw_rule(ax, mode: str, f: Any) -> None:
    """One rule's panel: its series, threshold lines and start step; title: rule, mode, status."""
    from grpofit.render.plotting import safe_label

    p = f.panel
    scatter = p.title.startswith("entropy-reward law")
    ax.plot(
        *thin(p.steps, p.values), "." if scatter else "-", ms=2, lw=0.9, color="tab:purple", label=safe_label(p.label)
    )
    for level, label, colour in p.lines:
        if level is not None and np.isfinite(level):
            ax.axhline(level, color=colour, ls="--", lw=0.9, label=safe_label(label))
    if p.other is not None:
        xs, ys, label = p.other
        if scatter:
            ax.plot(xs, ys, "-", color="k", lw=1.0, label=safe_label(label))
        else:
            twin = ax.twinx()
            twin.plot(*thin(xs, ys), "-", color="0.6", lw=0.8)
            twin.set_ylabel(safe_label(label), fontsize=7, color="0.4")
            twin.tick_params(labelsize=6)
    if f.start_step is not None and not scatter:
        ax.axvline(f.start_step, color=_COLOUR.get(f.status, "k"), ls=":", lw=1.2)
    values = np.asarray(p.values, float)
    if p.logy and np.all(values[np.isfinite(values)] > 0):
        ax.set_yscale("log")
    ax.set_title(
        safe_label(f"{f.rule} ({mode}): {f.status}" + ("" if f.gates else ", reported only")),
        fontsize=7,
        loc="left",
        color=_COLOUR.get(f.status, "k"),
        y=1.0,
        pad=3,
    )
    ax.set_xlabel("entropy H" if scatter else "", fontsize=7)
    ax.set_ylabel(safe_label(p.title), fontsize=7)
    ax.tick_params(labelsize=6)
    ax.legend(fontsize=6, loc="best")


def draw_eval(ax, e: dict, diagnosis: Any, run: Any) -> None:
    """One benchmark's panel: eval points, fitted exponential, plateau interval, train reward."""
    from grpofit.diagnostics.evals import profile_fit
    from grpofit.render.plotting import safe_label

    s, v = run.series(e["metric"])
    ax.plot(s, v, "o", ms=3, color="tab:blue", label="eval")
    pf = profile_fit(s, v) if s.size >= 5 else None
    if pf is not None:
        tt = np.linspace(s[0], s[-1], 200)
        ax.plot(
            tt,
            pf["plateau"] + (pf["initial"] - pf["plateau"]) * np.exp(-(tt - pf["t0"]) / pf["timescale"]),
            "--",
            color="tab:orange",
            label="exponential",
        )
    plat = e.get("plateau") or {}
    ci = plat.get("ci95")
    if plat.get("value") is not None and plat.get("kind") == "estimate":
        ax.axhline(plat["value"], color="tab:orange", lw=0.8, alpha=0.7)
    if ci and ci[0] is not None and ci[1] is not None:
        ax.axhspan(ci[0], ci[1], color="tab:orange", alpha=0.12, label="plateau 95%")
    fit = diagnosis.fit
    if fit is not None:
        twin = ax.twinx()
        twin.plot(*thin(fit.steps, fit.values), "-", color="0.7", lw=0.7)
        twin.set_ylabel(safe_label(f"train {fit.metric}"), fontsize=7, color="0.5")
        twin.tick_params(labelsize=6)
    status = e.get("status", "unknown")
    title = f"eval {e['benchmark']}: gain {e['gain']:.3g}" if e.get("gain") is not None else f"eval {e['benchmark']}"
    title += f", {status}" + (" (decouples)" if e.get("decouples") else "")
    ax.set_title(safe_label(title), fontsize=7, loc="left", color=_COLOUR.get(status, "k"), y=1.0, pad=3)
    ax.set_ylabel(safe_label(e["benchmark"]), fontsize=7)
    ax.tick_params(labelsize=6)
    ax.legend(fontsize=6, loc="lower right")
