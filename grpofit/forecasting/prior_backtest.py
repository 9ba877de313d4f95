"""``grpofit backtest --prior-from-others``: every run of a sweep forecast leave-one-out, with a
prior built from the sweep's other runs and without one, at 0% (before the first step), 10% and
25% of its steps (docs/prior.md).

The final level is the backtest's (the mean of the last 10% of steps). "Without" is grpofit's
own forecast from the same cut (:func:`~.engine.forecast_series`; nothing before the first
step); persistence (the mean of the last tenth seen) is the baseline. Before the first step the
baseline is the mean of the other runs' final levels, and the interval's width is compared with
the spread (max - min) of the sweep's final levels.
"""

from __future__ import annotations

import numpy as np

from grpofit.forecasting.prior import FINAL_FRACTION, build_prior, noise_level

__all__ = ["PRIOR_CUTS", "loo_backtest", "loo_items", "loo_summary"]

PRIOR_CUTS = (0.0, 0.1, 0.25)


def loo_items(runs, metric=None):
    """``(name, steps, values, covariates)`` of every run with a reward column."""
    from grpofit.core.errors import GrpofitError
    from grpofit.fitting.analysis import resolve_column
    from grpofit.forecasting.prior import covariates_of

    out = []
    for run in runs:
        try:
            column = resolve_column(run, "reward", metric)
        except GrpofitError:
            continue
        s, v = run.series(column)
        keep = np.isfinite(s) & np.isfinite(v)
        out.append((run.name, s[keep], v[keep], covariates_of(run)))
    return out


def loo_backtest(items, *, cuts=PRIOR_CUTS, without: bool = True, seed: int = 0) -> list[dict]:
    """One entry per run: its cuts, each with the prior's forecast and (``without``) grpofit's own."""
    from grpofit.fitting.drift import persistence
    from grpofit.forecasting.engine import forecast_series

    finals = {}
    for name, s, v, _ in items:
        span = s[-1] - s[0]
        finals[name] = float(v[s >= s[-1] - FINAL_FRACTION * span].mean())
    out = []
    cache: dict = {}
    for name, s, v, cov in items:
        others = [it for it in items if it[0] != name]
        entry = {"run": name, "covariates": cov, "cuts": []}
        if len(others) < 2:
            entry["note"] = "fewer than two other runs: no prior"
            out.append(entry)
            continue
        prior = build_prior(others, source="the sweep's other runs", seed=seed, cache=cache)
        span = s[-1] - s[0]
        window = s >= s[-1] - FINAL_FRACTION * span
        actual = finals[name]
        spread = [finals[o[0]] for o in others]
        for c in cuts:
            seen = s <= s[0] + c * span if c > 0 else np.zeros(s.size, bool)
            pf = prior.forecast(
                s[seen], v[seen], s[window], covariates=cov, fraction=c, first_step=float(s[0]), seed=seed
            )
            lo, hi = pf.final["pi95"]
            cut = {
                "fraction": c,
                "n_seen": int(seen.sum()),
                "actual": actual,
                "prior": {
                    "median": pf.final["median"],
                    "pi95": [lo, hi],
                    "covered": bool(lo <= actual <= hi),
                    "error": abs(pf.final["median"] - actual),
                    "weight": pf.weight,
                    "tempering": pf.tempering,
                    "note": pf.note,
                },
            }
            base = persistence(v[seen]) if seen.sum() else float(np.mean(spread))
            cut["baseline"] = {
                "name": "persistence" if seen.sum() else "mean of the other runs' final levels",
                "prediction": base,
                "error": abs(base - actual),
            }
            cut["floor_se"] = _floor_se(v[window])
            cut["others_gain_error"] = _others_gain(others, finals, c, base if seen.sum() else None, actual)
            cut["sweep_spread"] = float(max(spread + [actual]) - min(spread + [actual]))
            if without and seen.sum() >= 2:
                fc = forecast_series(s[seen], v[seen], horizon_step=float(s[-1]), final_steps=s[window], seed=seed)
                if fc.final is not None:
                    flo, fhi = fc.final["pi95"]
                    cut["without"] = {
                        "median": fc.final["median"],
                        "pi95": [flo, fhi],
                        "covered": bool(flo <= actual and (fhi is None or actual <= fhi)),
                        "error": abs(fc.final["median"] - actual),
                    }
                else:
                    cut["without"] = {"median": None, "note": fc.doc.get("note")}
            entry["cuts"].append(cut)
        out.append(entry)
    return out


def _floor_se(final_values) -> float:
    """The sd of the final window's mean from the run's own (white) noise: what even a forecaster
    that knew the run's true mean level over that window would err by."""
    sig = noise_level(final_values)
    return float(sig / np.sqrt(final_values.size)) if np.isfinite(sig) else 0.0


def _others_gain(others, finals, frac, level_now, actual) -> float:
    """The error of the level reached plus the other runs' mean remaining gain from the same cut,
    taken from their true final levels (before the first step: their mean final level). What
    the other runs' outcomes give without covariates; when it misses a target on a sweep without
    covariates, the other runs do not carry the information the target asks for."""
    from grpofit.fitting.drift import persistence

    if level_now is None:
        return abs(float(np.mean([finals[o[0]] for o in others])) - actual)
    gains = [finals[name] - persistence(v[s <= s[0] + frac * (s[-1] - s[0])]) for name, s, v, _ in others]
    return abs(level_now + float(np.mean(gains)) - actual)


def floor_error(ses, seed: int = 0, draws: int = 2000) -> float | None:
    """The median (over runs) absolute error of a forecaster that knows each run's true final
    level, whose errors are the final windows' noise (``ses``): Monte Carlo, averaged over draws."""
    ses = np.asarray([x for x in ses if x is not None], dtype=float)
    if not ses.size:
        return None
    rng = np.random.default_rng(seed)
    return float(np.mean(np.median(np.abs(rng.standard_normal((draws, ses.size)) * ses), axis=1)))


def _med(xs):
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def _ratio(x, base):
    return {"median_error": x, "ratio_to_baseline": None if x is None or not base else x / base}


def _z_rms(cs) -> float | None:
    """Root mean square of the errors standardised by the pi95 half-width / 1.96: 1 for honest
    intervals, below 1 too wide, above 1 too narrow (finer than coverage on a few runs)."""
    zs = []
    for c in cs:
        lo, hi = c["prior"]["pi95"]
        half = (hi - lo) / 2.0 / 1.96
        if half > 0:
            zs.append((c["actual"] - c["prior"]["median"]) / half)
    return float(np.sqrt(np.mean(np.square(zs)))) if zs else None


def loo_summary(runs: list[dict]) -> dict:
    """Per cut: the prior's coverage, median error, ratio to the baseline's, width against the
    sweep's spread; grpofit's own (where it forecast) beside it."""
    out = {}
    fracs = sorted({c["fraction"] for r in runs for c in r["cuts"]})
    for f in fracs:
        cs = [c for r in runs for c in r["cuts"] if c["fraction"] == f]
        pe = _med([c["prior"]["error"] for c in cs])
        be = _med([c["baseline"]["error"] for c in cs])
        widths = [c["prior"]["pi95"][1] - c["prior"]["pi95"][0] for c in cs]
        wo = [c["without"] for c in cs if c.get("without") and c["without"].get("median") is not None]
        out[f"{f:.0%}"] = {
            "n": len(cs),
            "prior": {
                "coverage": float(np.mean([c["prior"]["covered"] for c in cs])) if cs else None,
                "median_error": pe,
                "ratio_to_baseline": None if not be else pe / be,
                "median_width": _med(widths),
                "median_weight": _med([c["prior"]["weight"] for c in cs]),
            },
            "baseline": {"name": cs[0]["baseline"]["name"] if cs else None, "median_error": be},
            "without": {
                "n": len(wo),
                "coverage": float(np.mean([w["covered"] for w in wo])) if wo else None,
                "median_error": _med([w["error"] for w in wo]),
            },
            "sweep_spread": _med([c["sweep_spread"] for c in cs]),
            "floor": _ratio(floor_error([c.get("floor_se") for c in cs]), be),
            "others_gain": _ratio(_med([c.get("others_gain_error") for c in cs]), be),
            "z_rms": _z_rms(cs),
        }
    return out


def loo_doc(runs, *, metric=None, without: bool = True, seed: int = 0) -> dict:
    """The ``grpofit.backtest/1`` document of ``backtest --prior-from-others``: each cut's
    ``predicted`` is the prior's forecast; ``without`` (grpofit's own) and the prior's weight sit
    beside it; ``summary.prior_from_others`` holds :func:`loo_summary`."""
    FF = FINAL_FRACTION  # the backtest's final level: the mean of the last 10% of steps
    from grpofit.core.vocabulary import SCHEMAS

    entries = loo_backtest(loo_items(runs, metric), without=without, seed=seed)
    out = []
    for e in entries:
        cuts = []
        for c in e["cuts"]:
            p = c["prior"]
            cuts.append(
                {
                    "fraction": c["fraction"],
                    "n_seen": c["n_seen"],
                    "predicted": {"mean": p["median"], "median": p["median"], "pi95": p["pi95"], "kind": "interval"},
                    "actual": c["actual"],
                    "covered": p["covered"],
                    "error": p["error"],
                    "baselines": {
                        "persistence" if c["n_seen"] else "others_mean": {
                            "prediction": c["baseline"]["prediction"],
                            "error": c["baseline"]["error"],
                        }
                    },
                    "prior": {"weight": p["weight"], "tempering": p["tempering"], "note": p["note"]},
                    "without": c.get("without"),
                }
            )
        out.append({"run": e["run"], "covariates": e["covariates"], "cuts": cuts, "note": e.get("note")})
    made = [c for r in out for c in r["cuts"]]
    summary = {
        "n_cuts": len(made),
        "coverage": float(np.mean([c["covered"] for c in made])) if made else None,
        "median_error": _med([c["error"] for c in made]),
        "prior_from_others": loo_summary(entries),
    }
    return {
        "schema": SCHEMAS["backtest"],
        "mode": "prior from the other runs (leave one out)",
        "final_level": f"mean of the last {FF:.0%} of steps",
        "runs": out,
        "summary": summary,
    }


def loo_markdown(summary: dict) -> str:
    """The per-cut summary as a markdown table."""
    f = lambda x, nd=3: "-" if x is None else f"{x:.{nd}g}"
    lines = [
        "| cut | n | pi95 coverage | median error | baseline | baseline's error | ratio | median pi95 width "
        "| sweep spread | prior weight | without prior: n, coverage, median error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for cut, s in summary.items():
        p, b, w = s["prior"], s["baseline"], s["without"]
        wo = "-" if not w["n"] else f"{w['n']}, {f(w['coverage'], 2)}, {f(w['median_error'])}"
        lines.append(
            f"| {cut} | {s['n']} | {f(p['coverage'], 2)} | {f(p['median_error'])} | {b['name']} | "
            f"{f(b['median_error'])} | {f(p['ratio_to_baseline'], 2)} | {f(p['median_width'])} | "
            f"{f(s['sweep_spread'])} | {f(p['median_weight'], 2)} | {wo} |"
        )
    return "\n".join(lines) + "\n"
