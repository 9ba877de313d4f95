"""Calibration of ``grpofit forecast`` per stratum and cut, on runs the forecast was not tuned on.

``python -m benchmarks.forecast_calibration [--quick] [--record] [--jobs N]`` forecasts:

- **bandit**: ``grpofit simulate bandit`` runs over a seeded grid of settings (arms 4/8/16, learning
  rate 0.003-0.1 log-uniform, momentum 0/0.5/0.9, refresh interval 1/2/4, group size 0/2/4/8/16, KL
  weight 0.05-1 log-uniform, 600-1,500 steps); :data:`EVAL_SEED` is the evaluation grid, the
  forecast's few choices were made on :data:`TUNE_SEED` only (a different grid of the same ranges);
- **generated**: the project's generator with forcing inside the dynamics and slow starts
  (:func:`grpofit.testing.synthetic.forced_recovery_set`: overdamped with inertia, underdamped, two
  classes; forcing sd 0.005-0.03), seed :data:`EVAL_SEED`;

- **bandit outside the grid** (:func:`outside_settings`, seed :data:`OUTSIDE_SEED`, evaluation
  only, never tuned on): 32/64 arms, learning rate 0.1-0.3, momentum 0 or 0.95, refresh interval 1
  or 8, group size 0/4/32, 1,800-3,000 steps (``--outside`` runs this set alone);

each cut at 10%, 25% and 50% of its steps, the forecast asked for the logged reward at the midpoint
between the cut and the end and at the last step (batch size unknown, as the CLI reads these logs).
A target is in the stratum **moved** when the true expected reward there differs from the true one
at the cut by more than 0.05, else **settled**. Per stratum and cut: pi80 and pi95 coverage of the
logged reward, the share of pi95 misses above the band, and the median absolute error of the mean
(against the true expected reward) beside persistence's (the mean of the last tenth seen), and the median
width of the pi95 bands.

The full run adds the shared real logs with a trend cut at 25% and 50% (:func:`real_lines`: 95%
coverage of the final level, median error beside persistence's and a plain exponential's), how often
the steps to 90/95% of the gain jump between neighbouring cuts 5% apart by more than their 95%
intervals allow (:func:`jump_lines`, on the real logs and :data:`JUMP_BANDITS` bandit runs) and the
same tables measured before later changes (:data:`BEFORE_SPREAD`, :data:`BEFORE_RATE`, :data:`BEFORE_BOUND`, :data:`BEFORE_SESSION`)
and before this round's forecast (:data:`BEFORE`); :data:`RATE_NOTE` says what the rate error of the
continuation was measured to fix on the tuning grid, :data:`LIMITS_NOTE` what limits the coverage per stratum. ``--tune`` runs the tuning grid instead.
``--record`` writes the tables to :data:`DOC` (``docs/forecast_calibration.md``);
``tests/test_forecast_calibration.py`` runs a small version. Run with ``OPENBLAS_NUM_THREADS=1``
on a shared machine (BLAS threads oversubscribe the cores and make each forecast ~5x slower).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "forecast_calibration.md"
CUTS = (0.1, 0.25, 0.5)
MOVED = 0.05
TUNE_SEED = 101
EVAL_SEED = 202


def bandit_settings(n: int, seed: int) -> list[dict]:
    """``n`` seeded settings of ``simulate_bandit`` over the grid of the module docstring."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(
            dict(
                arms=int(rng.choice([4, 8, 16])),
                lr=float(np.exp(rng.uniform(np.log(0.003), np.log(0.1)))),
                beta=float(np.exp(rng.uniform(np.log(0.05), np.log(1.0)))),
                momentum=float(rng.choice([0.0, 0.5, 0.9])),
                refresh_interval=int(rng.choice([1, 2, 4])),
                group_size=int(rng.choice([0, 2, 4, 8, 16])),
                steps=int(rng.integers(600, 1501)),
                seed=int(seed * 1000 + i),
            )
        )
    return out


#: what the outside-the-grid table does not show (measured with ``--outside``)
OUTSIDE_NOTE = "Where a run has reached its ceiling by the cut, the bands can be wide: all of [0, 1] on 6 of the 24 settled targets at 10% and 2 of the 28 at 25%, as before the rate error. That width comes from the draws (a rise seen over 10% of the steps, extrapolated in the logit with the levels' prior sd 8), not from the model error added to them; measured at commit 7ae8e6d (before the rate error): with the rolling-origin check switched off the same 6 and 2 bands are [0, 1], and the settled targets' median pi95 widths are 0.154 / 0.199 / 0.015 at 10/25/50% (0.174 / 0.195 / 0.016 with it), while pi95 at 50% falls to 93% (two deterministic runs missed); capping the check's logit error by its error measured on the metric was tried on seed 101 and not adopted. The rate error widens the settled targets at 10% from a median 0.174 to 0.250 (runs still creeping toward 1 at the cut: their late slope in the logit is steep; it cannot take a draw below the level at the cut) and leaves 25% and 50% at 0.179 and 0.015."
#: what the bandit table does not show: the cause of the under-coverage before the rate error and
#: its measurement on the tuning grid (seed 101, 120 runs: ``bandit_settings(120, TUNE_SEED)``)
RATE_NOTE = "Before the rate error (grpofit/forecasting/discrepancy.py) the grid's misses were the deterministic runs' (group size 0: the exact mean-field gradient, no sampling noise). On the tuning grid (seed 101, 120 runs) their pi95 was 47/38/39% on the targets that moved and 75/50/57% on the settled ones at 10/25/50%, against 90/96/99% and 100/100/99% for the runs with sampled groups: the likelihood of a noiseless curve pins every parameter (noise sd 1e-5 to 2e-4 in the logit), the band shrinks to one curve (median pi95 width 0.002 on the settled targets at 50%), and the rolling-origin check, whose parameters are fitted on the steps it checks, measured a median tenth of the error the laws' continuation then made beyond the cut (132 targets; quartiles 0.03 and 0.33). Refitting the laws at each origin raised the deterministic runs' pi95 on the moved targets only to 50/46/61%, at about three times the forecast's time; not adopted. With the rate error (0.25 of the late slope vouched for, chosen there from 0.1-0.3) the tuning grid's deterministic runs cover 89/100/100% (moved) and 100/100/100% (settled), all runs 91/96/100% and 100/100/99% (pi80 78/83/96% and 98/98/90%), with median pi95 widths 0.797/0.543/0.340 and 0.438/0.199/0.143 (0.823/0.531/0.305 and 0.524/0.207/0.148 before). What it leaves on the tuning grid: 24 of the 25 remaining pi95 misses lie above the band, 22 of them 16-arm runs still near chance (0.06-0.12) at the cut that take off later (11 with no late slope the seen steps vouch for); the seen steps cannot say when a run at chance takes off. The evaluation grid's 50% moved stratum has 19 targets: 2 misses (89%) happen to a calibrated 95% band with probability 0.25."
#: what limits the coverage per stratum (measured on the tuning grid, seed 101)
LIMITS_NOTE = "What limits the coverage per stratum, measured on the tuning grid (seed 101: 120 bandit runs, 108 generated; / separates the 10/25/50% cuts). The settled targets' bands are wide because the draws are: without the rolling-origin error and the rate error the bandit's settled pi95 is 96/90/91% and the generated runs' 100/99/97% (with both: 100/100/99% and 100/99/97%); the rolling-origin error moves no stratum's pi95 by more than 4 points, and the rate error is what the deterministic runs need (their settled pi95 at 25/50%: 44/43% without it, 100/100% with it). The forecast cannot see the stratum, and the strata differ in what the seen steps show: bandit runs whose late slope is significantly rising at the cut cover 98/99/100% (moved) and 100/100/100% (settled) at pi95, runs flat at the cut that then took off 76/75% at 10/25% (49 and 20 targets, pi80 47/40%, every miss above: the one-sided misses). Part of the settled pi80 excess is the lattice: a forecaster that knew the true expected reward and the batch (16 groups of G) and took its bands from the binomial's percentiles covers the settled targets with sampled groups at pi80 90-91%, pi95 98%; with each draw spread over its lattice cell (grpofit/forecasting/engine.py, _band) 84-87% and 97%. The spread moved the tuning grid's settled pi80 by 0 to -2 points. A lighter tempering of a rising run's posterior (grpofit/forecasting/predictive.py, TEMPER 2, 3, 4 and 5 tried there) leaves 9 of the 24 stratum-and-cut cells outside the coverage targets with 3 against 13 with 5, but moves the shared real logs' median error at 25% to 0.0208 against persistence's 0.0205 (0.0161 with 5; with 4 also 0.0098 against 0.0083 at 50%): not adopted. The levels' prior sd 6 in the logit (8 today) left the settled pi95 at 100/100/99% and took the moved pi95 at 10% from 92% to 89% (20 misses, all above): not adopted. A take-off tail for a run flat near its floor would need the rate at which such runs take off, which the tuning grid's settings set and a real run does not show: not adopted."

#: the tables main recorded before the lattice spread of the bands (grpofit/forecasting/engine.py, ``_band``)
BEFORE_SPREAD = "## Before the lattice spread (main at commit 2dfb055), the same script and seeds\n\n#### `grpofit simulate bandit`, 40 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 50 | 50 | 88% | 96% | 2/2 | 100% | 0.101 | 0.426 | 0.24 | 0.695 |\n| 10% | settled | 30 | 30 | 93% | 100% | 0/0 | 97% | 0.043 | 0.019 | 2.29 | 0.584 |\n| 25% | moved | 35 | 35 | 86% | 100% | 0/0 | 100% | 0.029 | 0.218 | 0.13 | 0.259 |\n| 25% | settled | 45 | 43 | 95% | 100% | 0/0 | 98% | 0.021 | 0.008 | 2.52 | 0.329 |\n| 50% | moved | 19 | 19 | 84% | 89% | 2/2 | 100% | 0.045 | 0.106 | 0.43 | 0.407 |\n| 50% | settled | 61 | 61 | 90% | 98% | 1/1 | 97% | 0.006 | 0.008 | 0.77 | 0.078 |\n\n'done' / 'no further gain expected' printed 27 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n#### generated runs with forcing and slow starts, 36 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 41 | 41 | 90% | 100% | 0/0 | 100% | 0.075 | 0.130 | 0.58 | 0.727 |\n| 10% | settled | 31 | 31 | 87% | 100% | 0/0 | 100% | 0.097 | 0.024 | 4.04 | 0.633 |\n| 25% | moved | 23 | 23 | 96% | 100% | 0/0 | 96% | 0.075 | 0.066 | 1.14 | 0.551 |\n| 25% | settled | 49 | 49 | 98% | 100% | 0/0 | 100% | 0.014 | 0.024 | 0.59 | 0.352 |\n| 50% | moved | 4 | 4 | 50% | 100% | 0/0 | 100% | 0.061 | 0.067 | 0.90 | 0.223 |\n| 50% | settled | 68 | 68 | 93% | 99% | 0/1 | 100% | 0.010 | 0.011 | 0.91 | 0.239 |\n\n'done' / 'no further gain expected' printed 2 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n"

#: the outside-the-grid set: its own seed and ranges (evaluation only, never tuned on)
OUTSIDE_SEED = 303
OUTSIDE_RUNS = 14


def outside_settings(n: int = OUTSIDE_RUNS, seed: int = OUTSIDE_SEED) -> list[dict]:
    """``n`` seeded settings outside the grid of the module docstring: 32/64 arms, learning rate
    0.1-0.3 log-uniform, momentum 0 or 0.95, refresh interval 1 or 8, group size 0/4/32, KL weight
    0.05-1 log-uniform, 1,800-3,000 steps."""
    rng = np.random.default_rng(seed)
    return [
        dict(
            arms=int(rng.choice([32, 64])),
            lr=float(np.exp(rng.uniform(np.log(0.1), np.log(0.3)))),
            beta=float(np.exp(rng.uniform(np.log(0.05), np.log(1.0)))),
            momentum=float(rng.choice([0.0, 0.95])),
            refresh_interval=int(rng.choice([1, 8])),
            group_size=int(rng.choice([0, 4, 32])),
            steps=int(rng.integers(1800, 3001)),
            seed=int(seed * 1000 + i),
        )
        for i in range(n)
    ]


def bandit_items(n: int, seed: int, settings=None):
    """``(name, steps, logged, expected)`` per bandit setting (``settings``: these instead of the grid's)."""
    from grpofit.dynamics.simulation import simulate_bandit

    items = []
    for kw in settings if settings is not None else bandit_settings(n, seed):
        r = simulate_bandit(measure=False, **kw)
        c = r.columns
        name = "bandit " + " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items())
        items.append((name, c["step"], c["reward"], c["expected_reward"]))
    return items


def generated_items(n_per_stratum: int, seed: int):
    from grpofit.testing.synthetic import forced_recovery_set

    items = []
    for truth, tab in forced_recovery_set(n_per_stratum, seed, levels=(0.005, 0.015, 0.03)):
        name = f"generated {truth['regime']} sd={truth['forcing_sd']} #{truth['index']}"
        items.append((name, tab["step"], tab["reward"], tab["latent"]))
    return items


def forecast_rows(item, cuts=CUTS) -> list[dict]:
    """One row per (cut, target) of one item."""
    from grpofit.fitting.drift import persistence
    from grpofit.forecasting.engine import forecast_series

    name, s, y, truth = item
    rows = []
    n = s.size
    for c in cuts:
        k = int(round(c * n))
        mid = (k - 1 + n - 1) // 2
        targets = [n - 1, mid]
        fc = forecast_series(s[:k], y[:k], horizon_step=float(s[-1]), at_steps=[float(s[mid])], seed=k)
        pers = persistence(y[:k])
        for j, (entry, ti) in enumerate(zip(fc.doc["at"], targets)):
            row = {
                "name": name,
                "cut": c,
                "target": "end" if j == 0 else "mid",
                "moved": bool(abs(truth[ti] - truth[k - 1]) > MOVED),
                "actual": float(y[ti]),
                "truth": float(truth[ti]),
                "persistence_error": abs(pers - float(truth[ti])),
                "note": fc.doc.get("note"),
            }
            if entry.get("mean") is None:
                row.update(made=False)
            else:
                p80, p95 = entry["pi80"], entry["pi95"]
                hi80 = np.inf if p80[1] is None else p80[1]
                hi95 = np.inf if p95[1] is None else p95[1]
                a = row["actual"]
                row.update(
                    made=True,
                    mean=entry["mean"],
                    error=abs(entry["mean"] - row["truth"]),
                    in80=bool(p80[0] <= a <= hi80),
                    in95=bool(p95[0] <= a <= hi95),
                    above=bool(a > hi95),
                    below=bool(a < p95[0]),
                    distinct=bool(p80 != p95),
                    width95=float(hi95 - p95[0]),
                    pi80=p80,
                    pi95=p95,
                    bounds=fc.doc.get("bounds"),
                )
            rows.append(row)
        rec = fc.doc.get("recommendation") or ""
        if rec.startswith(("done", "no further gain")):
            rise = float(truth[-1] - truth[k - 1])
            rows.append(
                {"name": name, "cut": c, "target": "recommendation", "stop_call": True, "wrong": bool(rise > MOVED)}
            )
    return rows


def _rows_of(rows_of_item, items, jobs: int) -> list[dict]:
    """``rows_of_item`` over ``items`` (in ``jobs`` processes), the rows of all in one list."""
    if jobs > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs) as pool:
            parts = list(pool.map(rows_of_item, items))
    else:
        parts = [rows_of_item(it) for it in items]
    return [r for p in parts for r in p]


def run_all(items, jobs: int = 1) -> list[dict]:
    return _rows_of(forecast_rows, items, jobs)


def table(rows: list[dict], title: str) -> list[str]:
    """Markdown lines: per cut and stratum, coverage, miss sides, errors."""
    out = [
        f"### {title}",
        "",
        "| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio "
        "| median pi95 width |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in CUTS:
        for stratum in ("moved", "settled"):
            sel = [
                r
                for r in rows
                if r["cut"] == c and r.get("target") in ("end", "mid") and r["moved"] == (stratum == "moved")
            ]
            made = [r for r in sel if r["made"]]
            if not sel:
                continue
            if not made:
                out.append(f"| {c:.0%} | {stratum} | {len(sel)} | 0 | - | - | - | - | - | - | - | - |")
                continue
            miss = [r for r in made if not r["in95"]]
            above = sum(r["above"] for r in miss)
            me = float(np.median([r["error"] for r in made]))
            pe = float(np.median([r["persistence_error"] for r in made]))
            out.append(
                f"| {c:.0%} | {stratum} | {len(sel)} | {len(made)} | {np.mean([r['in80'] for r in made]):.0%} "
                f"| {np.mean([r['in95'] for r in made]):.0%} | {above}/{len(miss)} "
                f"| {np.mean([r['distinct'] for r in made]):.0%} | {me:.3f} | {pe:.3f} | {me / pe if pe > 0 else float('nan'):.2f} "
                f"| {float(np.median([r['width95'] for r in made])):.3f} |"
            )
    calls = [r for r in rows if r.get("target") == "recommendation"]
    wrong = sum(r["wrong"] for r in calls)
    if calls:
        out += [
            "",
            f"'done' / 'no further gain expected' printed {len(calls)} times; wrong (the run then rose by "
            f"more than {MOVED}) {wrong} times ({wrong / len(calls):.0%}).",
        ]
    else:
        out += ["", "'done' / 'no further gain expected' never printed."]
    return out + [""]


#: the cuts the steps to 90/95% of the gain are followed over (item: neighbouring cuts 5% apart)
JUMP_CUTS = tuple(round(0.1 + 0.05 * i, 2) for i in range(17))
JUMP_KEYS = ("steps_to_90", "steps_to_95")
#: bandit runs (the first of the grid) the steps are followed on
JUMP_BANDITS = 12


def step_rows(item, cuts=JUMP_CUTS) -> list[dict]:
    """The forecast's steps to 90/95% of the gain at each of ``cuts`` (shares of the points) of
    one item, to its last step: ``{"name", "cut", "key", "value", "ci95", "kind"}`` per cut and key."""
    from grpofit.forecasting.engine import forecast_series

    name, s, y = item[:3]
    rows = []
    for c in cuts:
        k = int(round(c * s.size))
        fc = forecast_series(s[:k], y[:k], horizon_step=float(s[-1]), seed=k)
        for key in JUMP_KEYS:
            d = fc.doc.get(key) or {}
            rows.append(
                {
                    "name": name,
                    "cut": c,
                    "key": key,
                    "value": d.get("value"),
                    "ci95": d.get("ci95"),
                    "kind": d.get("kind"),
                }
            )
    return rows


def _span(d: dict) -> tuple[float, float]:
    """The interval a printed step claims: its 95% interval (an open upper end: infinity; a lower
    bound: from the value up)."""
    lo, hi = d["ci95"] if d.get("ci95") else (d["value"], d["value"])
    if d.get("kind") == "lower_bound":
        lo, hi = d["value"], None
    return (-np.inf if lo is None else lo), (np.inf if hi is None else hi)


def jumps(rows: list[dict]) -> dict:
    """Per key: neighbouring cuts of one run that both print a step (``pairs``) and those whose
    steps jump, each outside the other's interval (``jumps``: the second lies outside the first's
    95% interval and the first outside the second's), and the printed steps in all."""
    out = {}
    for key in JUMP_KEYS:
        pairs = jumped = printed = 0
        names = dict.fromkeys(r["name"] for r in rows)
        for name in names:
            seq = sorted((r for r in rows if r["name"] == name and r["key"] == key), key=lambda r: r["cut"])
            printed += sum(r["value"] is not None for r in seq)
            for a, b in zip(seq, seq[1:]):
                if a["value"] is None or b["value"] is None:
                    continue
                pairs += 1
                la, ha = _span(a)
                lb, hb = _span(b)
                if not (la <= b["value"] <= ha) and not (lb <= a["value"] <= hb):
                    jumped += 1
        out[key] = {"pairs": pairs, "jumps": jumped, "printed": printed, "cuts": sum(r["key"] == key for r in rows)}
    return out


def jump_lines(groups: dict) -> list[str]:
    """The table of :func:`jumps` per data set (``{title: rows}``)."""
    out = [
        "### steps to 90/95% of the gain between neighbouring cuts",
        "",
        f"Cuts at {JUMP_CUTS[0]:.0%}, {JUMP_CUTS[1]:.0%}, ..., {JUMP_CUTS[-1]:.0%} of each run's points, forecast to its "
        "last step. A jump: two neighbouring cuts both print a step and each lies outside the other's 95% "
        "interval (a lower bound's interval runs from it upward).",
        "",
        "| data | quantity | cuts | printed a step | neighbouring pairs | jumps | share |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for title, rows in groups.items():
        for key, j in jumps(rows).items():
            share = f"{j['jumps'] / j['pairs']:.0%}" if j["pairs"] else "-"
            out.append(f"| {title} | {key} | {j['cuts']} | {j['printed']} | {j['pairs']} | {j['jumps']} | {share} |")
    return out + [""]


def run_steps(items, jobs: int = 1) -> list[dict]:
    return _rows_of(step_rows, items, jobs)


def real_lines(jobs: int = 1) -> list[str]:
    """The shared real logs with a trend (:func:`benchmarks.forecast_measure.trend_runs`), cut at 25% and
    50%: 95% coverage of the final level and the median errors beside persistence's and a plain
    exponential's (the backtest's comparison)."""
    from benchmarks import forecast_measure as fm

    fm.JOBS = jobs
    rows = fm._backtest(fm.trend_runs(), (0.25, 0.5))
    out = [
        "### shared real logs with a trend (final level: mean of the last 10% of steps)",
        "",
        "| cut | runs | forecast | pi95 | median error | persistence's | exponential's |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in (0.25, 0.5):
        sel = [r for r in rows if r[1] == c]
        made = [r for r in sel if r[2] is not None]
        med = lambda k: float(np.median([r[k] for r in made if r[k] is not None]))
        out.append(
            f"| {c:.0%} | {len(sel)} | {len(made)} | {np.mean([r[2] for r in made]):.0%} | {med(3):.4f} "
            f"| {med(4):.4f} | {med(5):.4f} |"
        )
    return out + [""]


#: the tables main recorded before the rate error of the continuation (grpofit/forecasting/discrepancy.py)
BEFORE_RATE = "## Before the rate error (main's tables until this change, recorded at commit 7ae8e6d), the same script and seeds\n\n#### `grpofit simulate bandit`, 40 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 50 | 50 | 70% | 88% | 2/6 | 94% | 0.103 | 0.426 | 0.24 | 0.609 |\n| 10% | settled | 30 | 30 | 87% | 93% | 2/2 | 93% | 0.052 | 0.019 | 2.74 | 0.690 |\n| 25% | moved | 35 | 35 | 63% | 74% | 6/9 | 100% | 0.031 | 0.218 | 0.14 | 0.281 |\n| 25% | settled | 45 | 43 | 93% | 95% | 2/2 | 100% | 0.024 | 0.008 | 2.79 | 0.273 |\n| 50% | moved | 19 | 19 | 74% | 79% | 4/4 | 100% | 0.032 | 0.106 | 0.30 | 0.406 |\n| 50% | settled | 61 | 61 | 80% | 89% | 7/7 | 97% | 0.005 | 0.008 | 0.68 | 0.086 |\n\n'done' / 'no further gain expected' printed 26 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n#### `grpofit simulate bandit` outside the grid (seed 303), 14 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 4 | 4 | 75% | 100% | 0/0 | 75% | 0.286 | 0.187 | 1.52 | 1.000 |\n| 10% | settled | 24 | 24 | 100% | 100% | 0/0 | 100% | 0.016 | 0.001 | 18.49 | 0.174 |\n| 25% | settled | 28 | 28 | 93% | 100% | 0/0 | 100% | 0.005 | 0.000 | 18.51 | 0.195 |\n| 50% | settled | 28 | 28 | 96% | 100% | 0/0 | 100% | 0.002 | 0.000 | 27.28 | 0.016 |\n\n'done' / 'no further gain expected' printed 31 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n#### generated runs with forcing and slow starts, 36 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 41 | 41 | 85% | 98% | 1/1 | 100% | 0.088 | 0.130 | 0.68 | 0.758 |\n| 10% | settled | 31 | 31 | 90% | 100% | 0/0 | 100% | 0.054 | 0.024 | 2.26 | 0.652 |\n| 25% | moved | 23 | 23 | 83% | 91% | 0/2 | 100% | 0.076 | 0.066 | 1.16 | 0.535 |\n| 25% | settled | 49 | 49 | 94% | 100% | 0/0 | 100% | 0.012 | 0.024 | 0.50 | 0.281 |\n| 50% | moved | 4 | 4 | 50% | 100% | 0/0 | 100% | 0.063 | 0.067 | 0.94 | 0.207 |\n| 50% | settled | 68 | 68 | 94% | 99% | 0/1 | 100% | 0.010 | 0.011 | 0.91 | 0.230 |\n\n'done' / 'no further gain expected' printed 2 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n#### shared real logs with a trend (final level: mean of the last 10% of steps)\n\n| cut | runs | forecast | pi95 | median error | persistence's | exponential's |\n| --- | --- | --- | --- | --- | --- | --- |\n| 25% | 21 | 21 | 95% | 0.0196 | 0.0205 | 0.0223 |\n| 50% | 21 | 21 | 100% | 0.0084 | 0.0083 | 0.0161 |\n\n#### steps to 90/95% of the gain between neighbouring cuts\n\nCuts at 10%, 15%, ..., 90% of each run's points, forecast to its last step. A jump: two neighbouring cuts both print a step and each lies outside the other's 95% interval (a lower bound's interval runs from it upward).\n\n| data | quantity | cuts | printed a step | neighbouring pairs | jumps | share |\n| --- | --- | --- | --- | --- | --- | --- |\n| real logs with a trend | steps_to_90 | 357 | 350 | 328 | 4 | 1% |\n| real logs with a trend | steps_to_95 | 357 | 350 | 328 | 4 | 1% |\n| bandit, 12 runs | steps_to_90 | 204 | 203 | 190 | 5 | 3% |\n| bandit, 12 runs | steps_to_95 | 204 | 203 | 190 | 5 | 3% |\n\n"


#: the same tables measured on commit fb2fd53 (before the bands could reach the metric's bound) by this script
BEFORE_BOUND = "## Before this session's change (main at commit bdbbdad: bands stopped short of the metric's bound), the same script and seeds\n\n#### `grpofit simulate bandit`, 40 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 50 | 50 | 68% | 88% | 2/6 | 100% | 0.103 | 0.426 | 0.24 | 0.607 |\n| 10% | settled | 30 | 30 | 87% | 93% | 2/2 | 97% | 0.052 | 0.019 | 2.74 | 0.690 |\n| 25% | moved | 35 | 35 | 63% | 74% | 6/9 | 100% | 0.031 | 0.218 | 0.14 | 0.281 |\n| 25% | settled | 45 | 43 | 93% | 95% | 2/2 | 100% | 0.024 | 0.008 | 2.79 | 0.273 |\n| 50% | moved | 19 | 19 | 74% | 79% | 4/4 | 100% | 0.032 | 0.106 | 0.30 | 0.406 |\n| 50% | settled | 61 | 61 | 80% | 87% | 8/8 | 97% | 0.005 | 0.008 | 0.68 | 0.086 |\n\n'done' / 'no further gain expected' printed 28 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n#### generated runs with forcing and slow starts, 36 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 41 | 41 | 85% | 98% | 1/1 | 100% | 0.088 | 0.130 | 0.68 | 0.750 |\n| 10% | settled | 31 | 31 | 90% | 100% | 0/0 | 100% | 0.054 | 0.024 | 2.26 | 0.650 |\n| 25% | moved | 23 | 23 | 83% | 91% | 0/2 | 100% | 0.076 | 0.066 | 1.16 | 0.535 |\n| 25% | settled | 49 | 49 | 94% | 100% | 0/0 | 100% | 0.012 | 0.024 | 0.50 | 0.281 |\n| 50% | moved | 4 | 4 | 50% | 100% | 0/0 | 100% | 0.063 | 0.067 | 0.94 | 0.207 |\n| 50% | settled | 68 | 68 | 94% | 99% | 0/1 | 100% | 0.010 | 0.011 | 0.91 | 0.230 |\n\n'done' / 'no further gain expected' printed 2 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n#### `grpofit simulate bandit` outside the grid, 14 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 4 | 4 | 50% | 50% | 2/2 | 100% | 0.286 | 0.187 | 1.52 | 0.977 |\n| 10% | settled | 24 | 24 | 75% | 75% | 6/6 | 100% | 0.016 | 0.001 | 18.49 | 0.174 |\n| 25% | settled | 28 | 28 | 64% | 64% | 10/10 | 100% | 0.005 | 0.000 | 18.51 | 0.195 |\n| 50% | settled | 28 | 28 | 68% | 79% | 6/6 | 100% | 0.002 | 0.000 | 27.28 | 0.016 |\n\n#### shared real logs with a trend (final level: mean of the last 10% of steps)\n\n| cut | runs | forecast | pi95 | median error | persistence's | exponential's |\n| --- | --- | --- | --- | --- | --- | --- |\n| 25% | 21 | 21 | 95% | 0.0196 | 0.0205 | 0.0223 |\n| 50% | 21 | 21 | 100% | 0.0084 | 0.0083 | 0.0161 |\n\n"


#: the same tables measured on commit 6fed7f7 (before this session's change) by this script, evaluation seed 202
BEFORE_SESSION = "## Before the levels' prior sd 8 (commit 6fed7f7: the levels' prior sd 4 in the logit), the same script and evaluation seed\n\n#### `grpofit simulate bandit`, 40 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 50 | 50 | 68% | 84% | 6/8 | 100% | 0.169 | 0.426 | 0.40 | 0.711 |\n| 10% | settled | 30 | 30 | 87% | 93% | 2/2 | 100% | 0.093 | 0.019 | 4.94 | 0.777 |\n| 25% | moved | 35 | 35 | 66% | 80% | 6/7 | 100% | 0.060 | 0.218 | 0.28 | 0.312 |\n| 25% | settled | 45 | 43 | 93% | 95% | 2/2 | 98% | 0.021 | 0.008 | 2.44 | 0.250 |\n| 50% | moved | 19 | 19 | 74% | 79% | 4/4 | 100% | 0.046 | 0.106 | 0.43 | 0.406 |\n| 50% | settled | 61 | 61 | 82% | 85% | 9/9 | 97% | 0.006 | 0.008 | 0.72 | 0.062 |\n\n'done' / 'no further gain expected' printed 28 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n#### generated runs with forcing and slow starts, 36 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio | median pi95 width |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 41 | 41 | 98% | 98% | 1/1 | 100% | 0.090 | 0.130 | 0.69 | 0.748 |\n| 10% | settled | 31 | 31 | 97% | 100% | 0/0 | 100% | 0.055 | 0.024 | 2.28 | 0.664 |\n| 25% | moved | 23 | 23 | 78% | 100% | 0/0 | 100% | 0.059 | 0.066 | 0.91 | 0.434 |\n| 25% | settled | 49 | 49 | 98% | 100% | 0/0 | 100% | 0.017 | 0.024 | 0.69 | 0.315 |\n| 50% | moved | 4 | 4 | 25% | 100% | 0/0 | 100% | 0.070 | 0.067 | 1.04 | 0.230 |\n| 50% | settled | 68 | 68 | 96% | 99% | 0/1 | 100% | 0.010 | 0.011 | 0.91 | 0.240 |\n\n'done' / 'no further gain expected' printed 1 times; wrong (the run then rose by more than 0.05) 0 times (0%).\n\n#### shared real logs with a trend (final level: mean of the last 10% of steps)\n\n| cut | runs | forecast | pi95 | median error | persistence's | exponential's |\n| --- | --- | --- | --- | --- | --- | --- |\n| 25% | 21 | 21 | 95% | 0.0253 | 0.0205 | 0.0223 |\n| 50% | 21 | 20 | 100% | 0.0091 | 0.0079 | 0.0137 |\n\n"


#: the same tables measured on commit b999d61 (before this round's forecast) by this script, evaluation seed 202
BEFORE = "## Before this round's forecast (commit b999d61, the same script and evaluation seed)\n\nOne-sided intervals (lower bounds) counted as covered above; real logs at 25% / 50%: median error 0.0160 / 0.0057 against persistence's 0.0185 / 0.0070 (docs/forecast_real_runs.md at b999d61).\n\n#### `grpofit simulate bandit`, 40 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 50 | 45 | 47% | 58% | 19/19 | 100% | 0.278 | 0.451 | 0.62 |\n| 10% | settled | 30 | 25 | 100% | 100% | 0/0 | 96% | 0.019 | 0.019 | 1.00 |\n| 25% | moved | 35 | 34 | 71% | 76% | 6/8 | 100% | 0.108 | 0.221 | 0.49 |\n| 25% | settled | 45 | 42 | 100% | 100% | 0/0 | 100% | 0.008 | 0.008 | 1.01 |\n| 50% | moved | 19 | 19 | 79% | 79% | 2/4 | 100% | 0.083 | 0.106 | 0.78 |\n| 50% | settled | 61 | 61 | 95% | 98% | 1/1 | 100% | 0.006 | 0.008 | 0.79 |\n\n'done' / 'no further gain expected' printed 43 times; wrong (the run then rose by more than 0.05) 16 times (37%).\n\n#### generated runs with forcing and slow starts, 36 runs\n\n| cut | stratum | targets | forecast | pi80 | pi95 | misses above | pi80 != pi95 | median error | persistence's | ratio |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n| 10% | moved | 41 | 41 | 76% | 88% | 5/5 | 100% | 0.084 | 0.130 | 0.65 |\n| 10% | settled | 31 | 31 | 87% | 100% | 0/0 | 100% | 0.030 | 0.024 | 1.26 |\n| 25% | moved | 23 | 23 | 83% | 96% | 1/1 | 100% | 0.047 | 0.066 | 0.72 |\n| 25% | settled | 49 | 49 | 88% | 100% | 0/0 | 100% | 0.011 | 0.024 | 0.47 |\n| 50% | moved | 4 | 4 | 25% | 100% | 0/0 | 100% | 0.066 | 0.067 | 0.98 |\n| 50% | settled | 68 | 68 | 85% | 96% | 0/3 | 100% | 0.012 | 0.011 | 1.06 |\n\n'done' / 'no further gain expected' printed 54 times; wrong (the run then rose by more than 0.05) 5 times (9%).\n"


def _commit_line() -> str:
    """`` Recorded on commit X.`` (the checkout's HEAD; the forecast code the tables measure), or
    nothing outside a git checkout."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return f" Recorded on commit {out}." if out else ""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    quick = "--quick" in argv
    jobs = int(argv[argv.index("--jobs") + 1]) if "--jobs" in argv else 1
    seed = TUNE_SEED if "--tune" in argv else EVAL_SEED
    nb, ng = (8, 1) if quick else (40, 4)
    if "--n" in argv:
        nb, ng = int(argv[argv.index("--n") + 1]), max(1, int(argv[argv.index("--n") + 1]) // 10)
    lines = [
        "# Forecast calibration per stratum and cut",
        "",
        "Written by `python -m benchmarks.forecast_calibration --record` (see its docstring for the data and the",
        f"strata). Evaluation seed {seed}; the forecast's choices were made on seed {TUNE_SEED} only." + _commit_line(),
        "",
    ]
    bandit = run_all(bandit_items(nb, seed), jobs)
    lines += table(bandit, f"`grpofit simulate bandit`, {nb} runs")
    if not quick and "--tune" not in argv:
        lines += [RATE_NOTE, "", LIMITS_NOTE, ""]
    if "--outside" in argv:
        out = run_all(bandit_items(0, 0, outside_settings()), jobs)
        print("\n".join(table(out, f"`grpofit simulate bandit` outside the grid, {OUTSIDE_RUNS} runs")))
        return 0
    if not quick:
        out = run_all(bandit_items(0, 0, outside_settings()), jobs)
        lines += table(out, f"`grpofit simulate bandit` outside the grid (seed {OUTSIDE_SEED}), {OUTSIDE_RUNS} runs")
        lines += [OUTSIDE_NOTE, ""]
    gen = run_all(generated_items(ng, seed), jobs)
    lines += table(gen, f"generated runs with forcing and slow starts, {ng * 9} runs")
    if not quick:
        lines += real_lines(jobs)
        from benchmarks.forecast_measure import trend_runs

        lines += jump_lines(
            {
                "real logs with a trend": run_steps(trend_runs(), jobs),
                f"bandit, {JUMP_BANDITS} runs": run_steps(bandit_items(JUMP_BANDITS, seed), jobs),
            }
        )
        lines += [BEFORE_SPREAD, BEFORE_RATE, BEFORE_BOUND, BEFORE_SESSION, BEFORE]
    text = "\n".join(lines)
    print(text)
    if "--record" in argv and not quick:
        DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
