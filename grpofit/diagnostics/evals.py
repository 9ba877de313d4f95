"""Several eval series: fit every benchmark a run logs and judge train-eval decoupling on each.

verl writes ``val-core/<source>/<var>/mean@N`` per data source, TRL ``eval_<ds>_...``. By default
every eval series found is judged (:func:`eval_columns`: the eval-reward names of
:mod:`grpofit.core.roles`, ``val-aux`` dropped when ``val-core`` exists); ``--eval-metric`` takes one
column or a glob such as ``'val-core/*'``.

Per benchmark (:func:`benchmark_entry`):

- ``gain``: the fitted change over the observed steps (one exponential, grid over the timescale
  with the two linear parameters in closed form);
- ``plateau`` with a 95% interval from the profile over the timescale: every timescale whose
  fit is within ``chi2_1(0.95) = 3.84`` of the best (``n log(SSE/SSE_min)``) contributes its
  plateau +- 1.96 of its linear standard error; a curve still rising at the grid's longest
  timescale has no upper end (``kind: lower_bound``);
- ``timescale_ratio``: eval timescale / train timescale;
- ``status`` and ``evidence``: the train-eval decoupling check on that series (an eval falling
  while the train reward does not, stalling while it still rises, or saturating much earlier).

With two or more benchmarks the mode's verdict is the worst of them and its evidence names the
benchmarks that decouple.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace
from typing import Sequence

import numpy as np

from grpofit.diagnostics.base import Context, Verdict, exponential_grid, fmt, worst

_GLOB = re.compile(r"[*?\[]")


def is_glob(text: str | None) -> bool:
    return bool(text) and bool(_GLOB.search(text))


def eval_columns(columns: Sequence[str], pattern: str | None = None, *, exclude: Sequence[str] = ()) -> list[str]:
    """Every eval series among ``columns`` (file order): those matching the glob ``pattern``, or
    by default the eval-reward names of :mod:`grpofit.core.roles`."""
    from grpofit.core.roles import _COMPILED, _EXCLUDE

    cols = [c for c in columns if c not in exclude]
    if pattern is not None:
        return [c for c in cols if fnmatch.fnmatchcase(c, pattern)]
    found = [
        c
        for c in cols
        if not _EXCLUDE.match(c) and "num_turns" not in c and any(p.match(c) for p in _COMPILED["eval_reward"])
    ]
    if any(c.startswith("val-core/") for c in found):
        found = [c for c in found if not c.startswith("val-aux/")]
    # TRL's per-reward-function parts of an eval reward are not benchmarks: dropped when the
    # total for the same dataset is logged (``eval_reward`` beside ``eval_rewards/<fn>/mean``)
    totals = {_dataset(c) for c in found if not _COMPONENT.match(c)}
    return [c for c in found if not (_COMPONENT.match(c) and _dataset(c) in totals)]


_COMPONENT = re.compile(r"(?:eval_|eval/)(?:([^/]+)_)?rewards/[^/]+(?:/mean)?\Z")
_TOTAL = re.compile(r"(?:eval_|eval/)(?:([^/]+)_)?reward\Z")


def _dataset(column: str) -> str | None:
    """The dataset an ``eval_<ds>_reward(s/...)`` column belongs to ('' for plain ``eval_reward``)."""
    m = _COMPONENT.match(column) or _TOTAL.match(column)
    return (m.group(1) or "") if m else None


def benchmark_name(column: str) -> str:
    """A short name: ``val-core/openai/gsm8k/acc/mean@1`` -> ``openai/gsm8k``."""
    name = re.sub(r"^(?:val-core|val-aux|val/test_score|eval)/", "", column)
    name = re.sub(r"/(?:reward|acc|score|accuracy|pass@?\d*)?/?(?:mean|maj|best)@\d+$", "", name)
    name = re.sub(r"^eval_", "", name)
    name = re.sub(r"_pass@?1$", "", name) if column.startswith("eval/eval_") else name
    name = re.sub(r"_(?:reward|rewards/[^/]+/mean|accuracy|acc)$", "", name) if column.startswith("eval_") else name
    if name.lower() in ("", "acc", "accuracy", "reward", "score", "mean"):
        return column
    return name


#: longer series are averaged in consecutive blocks to at most half this many points first
MAX_PROFILE_POINTS = 4000


def profile_fit(steps: np.ndarray, values: np.ndarray, *, n_grid: int = 64, percent: bool = False) -> dict | None:
    """``y = a + b exp(-(t - t0)/T)`` by grid over ``T``: best fit and the plateau's profile
    interval. ``percent``: the metric's name says it is a percentage (:func:`ceiling`)."""
    t = np.asarray(steps, float)
    y = np.asarray(values, float)
    if t.size > MAX_PROFILE_POINTS:  # a long dense series: block means keep the grid's memory small
        k = -(-t.size // (MAX_PROFILE_POINTS // 2))
        m = t.size // k * k
        t, y = t[:m].reshape(-1, k).mean(axis=1), y[:m].reshape(-1, k).mean(axis=1)
    n = t.size
    if n < 5:
        return None
    g = exponential_grid(t, y, n_grid)
    if g is None:
        return None
    span, grid, em, var, a, b, sse, k = g.span, g.grid, g.e_mean, g.e_var, g.a, g.b, g.sse, g.k
    # autocorrelated residuals (a dense train reward) carry fewer independent points than n:
    # the profile uses n_eff = n (1 - rho) / (1 + rho) with rho their lag-1 autocorrelation
    res = g.residuals
    rho = float(np.clip((res[1:] @ res[:-1]) / max(float(res @ res), 1e-300), 0.0, 0.95)) if n > 3 else 0.0
    n_eff = max(3.0, n * (1.0 - rho) / (1.0 + rho))
    s2 = sse / max(n - 3, 1)
    se_a = np.sqrt(s2 * (1.0 / n_eff + em**2 / var * n / n_eff))
    accepted = n_eff * np.log(sse / sse[k]) <= 3.84
    lo = float(np.min((a - 1.96 * se_a)[accepted]))
    hi = float(np.max((a + 1.96 * se_a)[accepted]))
    rising = bool(accepted[-1] and b[k] < 0) or bool(accepted[-1] and b[-1] < 0)
    falling = bool(accepted[-1] and b[-1] > 0)
    T = float(grid[k])
    gain = float(-b[k] * (1.0 - np.exp(-span / T)))
    sst = g.sst
    # the timescale's 95% profile interval, and the share of the gain still ahead at the last
    # step, exp(-span / T) (0: at the plateau, 1: not started), over the accepted timescales
    # (falling curves: the share of the fall still ahead)
    # (widened by one grid step on either side: the grid's resolution)
    idx = np.flatnonzero(accepted)
    i_lo, i_hi = max(int(idx[0]) - 1, 0), min(int(idx[-1]) + 1, n_grid - 1)
    t_lo = None if accepted[0] else float(grid[i_lo])
    t_hi = None if accepted[-1] else float(grid[i_hi])
    ahead = np.exp(-span / grid[i_lo : i_hi + 1])
    return {
        "timescale_ci95": [t_lo, t_hi],
        "ahead": float(np.exp(-span / T)),
        "ahead_ci95": [float(ahead.min()), float(ahead.max())],
        "n_eff": n_eff,
        "t0": float(steps[0]),
        "initial": float(a[k] + b[k]),
        "plateau": float(a[k]),
        "ci95": [None if falling else lo, None if rising else hi],
        "kind": "lower_bound" if rising else ("upper_bound" if falling else "estimate"),
        "timescale": T,
        "timescale_at_bound": k in (0, n_grid - 1),
        "gain": gain,
        "y_min": float(np.min(values)),
        "y_max": float(np.max(values)),
        "r2": 1.0 - float(sse[k]) / sst if sst > 0 else 0.0,
        "headroom_share": _share(
            ceiling(float(np.min(values)), float(np.max(values)), percent),
            y.mean(),
            a,
            b,
            em,
            var,
            s2,
            n,
            n_eff,
            accepted,
            k,
            rising,
            falling,
        ),
    }


#: a column name that says its values are a percentage (an accuracy, a pass rate) when they exceed 1
PERCENT_NAME = re.compile(r"acc|pass|pct|percent|%", re.I)


def ceiling(y_min: float, y_max: float, percent: bool = False) -> float | None:
    """The metric's known upper bound: 1 for a 0-1 metric (an accuracy, a pass rate, a 0/1
    reward), 100 for a percentage (``percent``: its name says so, :data:`PERCENT_NAME`, and every
    value lies in [0, 100], some above 1.5); None otherwise (a sum of rewards, a score on no
    fixed scale: its headroom is not known)."""
    if y_min < 0.0:
        return None
    if y_max <= 1.0:
        return 1.0
    if percent and 1.5 < y_max <= 100.0:
        return 100.0
    return None


def _share(c, ybar, a, b, em, var, s2, n, n_eff, accepted, k, rising, falling) -> dict | None:
    """The plateau's share of the headroom above the start level, ``(plateau - initial) /
    (ceiling - initial)`` = ``-b / (c - ybar - b (1 - mean e))`` on the profile's grid, with a
    95% interval over the accepted timescales that carries the uncertainty of the start level as
    well as the plateau's (delta method on the two independent linear estimates, the centred mean
    ``ybar`` and the slope ``b``, at each timescale). None when the ceiling is not known or the
    curve starts within 2% of the ceiling's scale of it."""
    i0 = a[k] + b[k]
    if c is None or not (0.0 <= i0 <= c) or c - i0 < 0.02 * c:
        return None
    d = c - ybar - b * (1.0 - em)
    ok = accepted & (d > 0.02 * c)
    if not ok[k]:
        return None
    share = -b[ok] / d[ok]
    var_b = s2[ok] / var[ok] * (n / n_eff)
    var_m = s2[ok] / n_eff
    se = np.sqrt((c - ybar) ** 2 * var_b + b[ok] ** 2 * var_m) / d[ok] ** 2
    lo, hi = float(np.min(share - 1.96 * se)), float(np.max(share + 1.96 * se))
    return {"value": float(-b[k] / d[k]), "ci95": [None if falling else lo, None if rising else hi], "ceiling": c}


def headroom_share(fit: dict) -> dict | None:
    """The plateau on a scale common to metrics with a known ceiling (a 0-1 metric or a
    percentage, :func:`ceiling`): the share of the headroom above the start level that the curve
    gains at its plateau, ``(plateau - initial) / (ceiling - initial)``, with a 95% interval that
    carries the start level's uncertainty as well as the plateau's (an open end stays open). None
    when the headroom is not known."""
    return fit.get("headroom_share")


def divergence(
    eval_steps: np.ndarray,
    eval_values: np.ndarray,
    train_steps: np.ndarray,
    train_values: np.ndarray,
    *,
    ratio: float,
    plateau_ratio: float = 4.0,
    names: tuple[str, str] = ("", ""),
) -> dict | None:
    """Does the eval's rate or plateau diverge from the train reward's? Interval-based, so that
    noise alone does not flag (a noisy curve's profile accepts a wide range of timescales).

    Both curves get :func:`profile_fit` over the eval's steps (the train reward restricted to
    them). ``rate``: ``"faster"`` when the eval/train timescale ratio's 95% interval
    ``[T_e lo / T_t hi, T_e hi / T_t lo]`` lies below ``1 / ratio`` (the eval saturates early),
    ``"slower"`` when it lies above ``ratio``, ``"same"`` when it lies inside ``[1/ratio, ratio]``,
    else None (cannot tell).

    ``plateau`` compares the levels, not the rates: each plateau as its share of the headroom
    (:func:`headroom_share`: 0-1 metrics and percentages), with its 95% interval. ``"lower"`` when the
    eval's whole interval lies below ``1 / plateau_ratio`` of the train's lower end (the eval
    levels off at a small part of what the train reward gains: it stops transferring, whatever
    the rates), ``"higher"`` when the eval's lower end exceeds ``plateau_ratio`` x the train's
    upper end, ``"same"`` when the two intervals lie within a factor ``plateau_ratio`` of each
    other, else None. A plateau still rising past the observed steps has an open upper end,
    so it can be "lower" only where it is the train's. ``names``: the eval's and the train
    reward's column names (a percentage is known by its name). Only rising curves are compared
    (``diverges`` on ``rate == "faster"`` or ``plateau == "lower"``); None when either fit fails."""
    t0, t1 = float(eval_steps[0]), float(eval_steps[-1])
    keep = (train_steps >= t0) & (train_steps <= t1)
    fe = profile_fit(eval_steps, eval_values, percent=bool(PERCENT_NAME.search(names[0])))
    ft = profile_fit(train_steps[keep], train_values[keep], percent=bool(PERCENT_NAME.search(names[1])))
    if fe is None or ft is None:
        return None
    (elo, ehi), (tlo, thi) = fe["timescale_ci95"], ft["timescale_ci95"]
    lo = 0.0 if elo is None or thi is None else elo / thi
    hi = None if ehi is None or tlo is None else ehi / tlo
    rising = fe["gain"] > 0 and ft["gain"] > 0
    rate = None
    if rising:
        if hi is not None and hi < 1.0 / ratio:
            rate = "faster"
        elif lo > ratio:
            rate = "slower"
        elif lo >= 1.0 / ratio and hi is not None and hi <= ratio:
            rate = "same"
    se, st = headroom_share(fe), headroom_share(ft)
    plateau = None
    if rising and se is not None and st is not None:
        (e_lo, e_hi), (t_lo, t_hi) = se["ci95"], st["ci95"]
        if e_hi is not None and t_lo is not None and t_lo > 0 and e_hi < t_lo / plateau_ratio:
            plateau = "lower"
        elif e_lo is not None and t_hi is not None and e_lo > 0 and e_lo > plateau_ratio * max(t_hi, 0.0):
            plateau = "higher"
        elif (
            None not in (e_lo, e_hi, t_lo, t_hi)
            and min(e_lo, t_lo) > 0
            and max(e_hi, t_hi) <= plateau_ratio * min(e_lo, t_lo)
        ):
            plateau = "same"
    return {
        "timescale_ratio": fe["timescale"] / ft["timescale"],
        "timescale_ratio_ci95": [lo, hi],
        "eval_timescale_ci95": fe["timescale_ci95"],
        "train_timescale_ci95": ft["timescale_ci95"],
        "eval_ahead_ci95": fe["ahead_ci95"],
        "train_ahead_ci95": ft["ahead_ci95"],
        "eval_plateau_share": se,
        "train_plateau_share": st,
        "rate": rate,
        "plateau": plateau,
        "diverges": rate == "faster" or plateau == "lower",
    }


def _share_text(share: dict) -> str:
    lo, hi = share["ci95"]
    rng = f"[{'-inf' if lo is None else f'{100 * lo:.0f}'}, {'inf' if hi is None else f'{100 * hi:.0f}'}]%"
    return f"{100 * share['value']:.0f}% {rng}"


def divergence_text(d: dict) -> str:
    lo, hi = d["timescale_ratio_ci95"]
    rng = f"[{lo:.2g}, {'inf' if hi is None else f'{hi:.2g}'}]"
    parts = []
    if d["rate"] == "faster":
        parts.append(f"saturates early: eval timescale x{d['timescale_ratio']:.2g} the train's, 95% {rng}")
    if d["plateau"] == "lower":
        parts.append(
            f"levels off low: its plateau gains {_share_text(d['eval_plateau_share'])} of its headroom, "
            f"the train reward's {_share_text(d['train_plateau_share'])}"
        )
    return "; ".join(parts)


def benchmark_entry(ctx: Context, column: str) -> tuple[dict, Verdict]:
    """One benchmark's numbers and its decoupling verdict."""
    from grpofit.diagnostics import decoupling

    sub = replace(ctx, roles={**ctx.roles, "eval_reward": column})
    verdict = decoupling.check(sub)
    entry: dict = {
        "metric": column,
        "benchmark": benchmark_name(column),
        "points": 0,
        "gain": None,
        "plateau": {"value": None, "ci95": None, "kind": None},
        "timescale": None,
        "timescale_ci95": None,
        "timescale_ratio": None,
    }
    series = sub.series("eval_reward", before_collapse=True)
    if series is not None:
        s, e = series
        keep = s <= ctx.end_step
        s, e = s[keep], e[keep]
        entry["points"] = int(s.size)
        fit = profile_fit(s, e)
        if fit is not None:
            T_r = ctx.reward_timescale
            entry.update(
                gain=fit["gain"],
                plateau={"value": fit["plateau"], "ci95": fit["ci95"], "kind": fit["kind"]},
                timescale=None if fit["timescale_at_bound"] else fit["timescale"],
                r2=fit["r2"],
            )
            if entry["timescale"] is not None and T_r:
                entry["timescale_ratio"] = entry["timescale"] / T_r
            entry["timescale_ci95"] = None if entry["timescale"] is None else fit["timescale_ci95"]
    entry["divergence"] = (verdict.details or {}).get("divergence")
    entry["status"] = verdict.status
    entry["evidence"] = verdict.evidence
    entry["decouples"] = verdict.status in ("warn", "fail")
    return entry, verdict


def judge(ctx: Context, base: Verdict) -> tuple[Verdict, list[dict]]:
    """The decoupling verdict over every benchmark, and the per-benchmark entries.

    With fewer than two benchmarks the base check's verdict stands (the entries still carry the
    numbers)."""
    cols = list(ctx.eval_columns)
    if not cols:
        return base, []
    judged = [benchmark_entry(ctx, c) for c in cols]
    entries = [e for e, _ in judged]
    if len(cols) < 2:
        return base, entries
    status = worst(v.status for _, v in judged)
    bad = [(e, v) for e, v in judged if v.status in ("warn", "fail")]
    if bad:
        names = ", ".join(f"{e['benchmark']} ({v.status})" for e, v in bad)
        text = f"decouples on {names}: " + "; ".join(f"{e['benchmark']}: {v.evidence}" for e, v in bad)
        starts = [v.start_step for _, v in bad if v.start_step is not None and v.status == status]
        start = min(starts) if starts else None
    elif status == "unknown":
        text = "; ".join(f"{e['benchmark']}: {v.evidence}" for e, v in judged)
        start = None
    else:
        text = f"none of {len(cols)} benchmarks decouples: " + "; ".join(
            f"{e['benchmark']} gain {fmt(e['gain'])}"
            + (f", timescale x{e['timescale_ratio']:.2g} the train's" if e["timescale_ratio"] else "")
            for e in entries
        )
        start = None
    details = {"benchmarks": [e["benchmark"] for e in entries], "decoupling": [e["benchmark"] for e, _ in bad]}
    return Verdict(status, text, start_step=start, details=details), entries
