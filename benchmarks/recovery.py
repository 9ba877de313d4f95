"""Seeded recovery harness for grpofit's fitter (shared by tests/test_fitting.py).

``python -m benchmarks.recovery [N] [SEED]`` fits N synthetic runs (grpofit.testing.synthetic.recovery_set)
and prints the accuracy, interval coverage, regime calls and timing, next to a baseline: a
plain ``scipy.optimize.curve_fit`` loop of the oscillator with one start on the same data.

``python -m benchmarks.recovery --forced [N_PER_STRATUM] [SEED]`` fits runs whose forcing enters the
dynamics (theory §6, :func:`grpofit.testing.synthetic.forced_recovery_set`: forcing level x regime,
binomial observation noise, two-class runs) and prints, per stratum, the ``fit`` command's
95% interval coverage of the plateau and the timescale, recovery and confidently-wrong rates
(``docs/fit_coverage.md`` holds this table beside the oracle: ``python -m benchmarks.fit_targets``).
Not collected by pytest (its name does not start with ``test_``).
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from grpofit.fitting import fit_series
from grpofit.laws.models import guess_exponential, oscillator
from grpofit.testing.synthetic import recovery_set

PLATEAU_TOL = 0.03
TIMESCALE_TOL = 0.25


def _inside(ci, value) -> bool:
    if ci is None:
        return True  # no interval claimed: not "confidently wrong"
    lo = -math.inf if ci[0] is None else float(ci[0])
    hi = math.inf if ci[1] is None else float(ci[1])
    return bool(lo <= value <= hi)


def evaluate(truth: dict, result) -> dict:
    """Per-run scores of the oscillator fit against the truth."""
    osc = result.models["oscillator"]
    p = osc.params
    pv, tv = p["plateau"].value, p["timescale"].value
    p_ok = pv is not None and abs(pv - truth["plateau"]) <= PLATEAU_TOL
    t_ok = tv is not None and abs(tv / truth["timescale"] - 1) <= TIMESCALE_TOL
    p_cover = p["plateau"].ci95 is not None and _inside(p["plateau"].ci95, truth["plateau"])
    confident_wrong = (not (p_ok and t_ok)) and (
        (not p_ok and not _inside(p["plateau"].ci95, truth["plateau"]))
        or (not t_ok and not _inside(p["timescale"].ci95, truth["timescale"]))
    )
    zeta = truth["damping_ratio"]
    clear = zeta < 0.7 or zeta > 1.5
    true_regime = "overdamped" if zeta > 1 else "underdamped"
    return {
        "recovered": p_ok and t_ok,
        "plateau_ok": p_ok,
        "timescale_ok": t_ok,
        "plateau_covered": p_cover,
        "confident_wrong": confident_wrong,
        "clear": clear,
        "regime": osc.regime,
        "regime_wrong": clear and osc.regime not in ("indeterminate", true_regime),
        "regime_indeterminate": clear and osc.regime == "indeterminate",
        "zeta_covered": _inside(p["damping_ratio"].ci95, zeta) if p["damping_ratio"].ci95 else None,
        "preferred": result.preferred,
    }


def baseline_fit(table: dict):
    """Plain ``curve_fit`` of the oscillator, one start (tail/head/half-rise guess)."""
    from scipy.optimize import curve_fit

    t = table["step"] - table["step"][0]
    y = table["reward"]
    g = guess_exponential(t, y)
    p0 = [g["plateau"], g["initial"], g["timescale"], 0.1 * g["timescale"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            popt, pcov = curve_fit(oscillator, t, y, p0=p0)
        except Exception:
            return None, None
    return popt, pcov


def run_recovery(n: int = 120, seed: int = 0, *, baseline: bool = True) -> dict:
    """Fit ``n`` seeded runs; return the rates, timings and the per-run rows.

    Timing is fair: same process, same data, both warmed up, the two fitters alternate which
    goes first on each run (so load changes and cache effects hit both alike); the reported
    ratio is the one of the median per-run times (the total ratio is reported too)."""
    runs = recovery_set(n, seed=seed)
    warm = runs[0][1]
    fit_series(warm["step"], warm["reward"])  # imports and first-call costs out of the timings
    if baseline:
        baseline_fit(warm)
    rows, times, btimes, brec, bcov = [], [], [], [], []
    for i, (truth, table) in enumerate(runs):
        order = ("grpofit", "baseline") if i % 2 == 0 else ("baseline", "grpofit")
        for who in order:
            if who == "grpofit":
                t0 = time.perf_counter()
                res = fit_series(table["step"], table["reward"])
                times.append(time.perf_counter() - t0)
            elif baseline:
                t0 = time.perf_counter()
                popt, pcov = baseline_fit(table)
                btimes.append(time.perf_counter() - t0)
        row = evaluate(truth, res)
        row["truth"] = truth
        row["result"] = res
        rows.append(row)
        if baseline:
            ok = (
                popt is not None
                and abs(popt[0] - truth["plateau"]) <= PLATEAU_TOL
                and abs(popt[2] / truth["timescale"] - 1) <= TIMESCALE_TOL
            )
            brec.append(bool(ok))
            se = 0.0
            if popt is not None and np.isfinite(pcov[0, 0]) and pcov[0, 0] >= 0:
                se = math.sqrt(pcov[0, 0])
            bcov.append(popt is not None and abs(popt[0] - truth["plateau"]) <= 1.96 * se)
    out = {"n": n, "rows": rows, "time_total": float(np.sum(times)), "time_median": float(np.median(times))}
    m = lambda key: float(np.mean([r[key] for r in rows]))
    out["recovered"] = m("recovered")
    out["plateau_ok"] = m("plateau_ok")
    out["timescale_ok"] = m("timescale_ok")
    out["plateau_coverage"] = m("plateau_covered")
    out["confident_wrong"] = m("confident_wrong")
    clear = [r for r in rows if r["clear"]]
    out["n_clear"] = len(clear)
    out["regime_wrong"] = float(np.mean([r["regime_wrong"] for r in clear])) if clear else 0.0
    out["regime_indeterminate"] = float(np.mean([r["regime_indeterminate"] for r in clear])) if clear else 0.0
    zc = [r["zeta_covered"] for r in rows if r["zeta_covered"] is not None]
    out["zeta_coverage"] = float(np.mean(zc)) if zc else None
    if baseline:
        out["baseline_time_total"] = float(np.sum(btimes))
        out["baseline_time_median"] = float(np.median(btimes))
        out["baseline_recovered"] = float(np.mean(brec))
        out["baseline_plateau_coverage"] = float(np.mean(bcov))
        out["time_ratio_total"] = out["time_total"] / out["baseline_time_total"]
        out["time_ratio"] = out["time_median"] / out["baseline_time_median"]
    return out


def report(out: dict) -> str:
    """The summary printed by ``python -m benchmarks.recovery``."""
    lines = [
        f"runs: {out['n']}",
        f"recovered (plateau within {PLATEAU_TOL}, timescale within {TIMESCALE_TOL:.0%}): "
        f"{out['recovered']:.1%}  (plateau {out['plateau_ok']:.1%}, timescale {out['timescale_ok']:.1%})",
        f"off and confidently wrong: {out['confident_wrong']:.1%}",
        f"plateau 95% interval coverage: {out['plateau_coverage']:.1%}",
        f"clear regimes (zeta < 0.7 or > 1.5): {out['n_clear']}; wrong confident regime "
        f"{out['regime_wrong']:.1%}, indeterminate {out['regime_indeterminate']:.1%}",
        f"damping-ratio interval coverage: {out['zeta_coverage']:.1%}" if out["zeta_coverage"] is not None else "",
        f"time: total {out['time_total']:.2f} s, median {out['time_median'] * 1e3:.1f} ms per run",
    ]
    if "baseline_time_total" in out:
        lines += [
            f"baseline curve_fit (oscillator, one start): recovered {out['baseline_recovered']:.1%}, "
            f"stderr coverage {out['baseline_plateau_coverage']:.1%}, total {out['baseline_time_total']:.2f} s, "
            f"median {out['baseline_time_median'] * 1e3:.1f} ms",
            f"time ratio grpofit / baseline: median per run {out['time_ratio']:.2f}, "
            f"total {out['time_ratio_total']:.2f}",
        ]
    return "\n".join(x for x in lines if x)


def forced_row(truth: dict, result) -> dict:
    """Scores of one forced run: the oscillator's intervals (as :func:`evaluate`), the preferred
    law's plateau interval, the regime call and whether a printed ``± stderr`` agrees."""
    osc = result.models["oscillator"]
    p = osc.params
    pv, tv = p["plateau"].value, p["timescale"].value
    p_ok = pv is not None and abs(pv - truth["plateau"]) <= PLATEAU_TOL
    p_cov = p["plateau"].ci95 is not None and _inside(p["plateau"].ci95, truth["plateau"])
    if truth["regime"] == "two_class":  # one plateau, no single timescale to recover
        t_ok, t_cov = True, None
    else:
        t_ok = tv is not None and abs(tv / truth["timescale"] - 1) <= TIMESCALE_TOL
        t_cov = p["timescale"].ci95 is not None and _inside(p["timescale"].ci95, truth["timescale"])
    wrong = (not p_ok and not _inside(p["plateau"].ci95, truth["plateau"])) or (not t_ok and t_cov is False)
    best = result.models.get(result.preferred or "oscillator", osc)
    bp = best.params["plateau"]
    zeta = truth.get("damping_ratio")
    if zeta is None:  # two classes: a sum of decays never turns over
        regime_wrong = osc.regime == "underdamped"
        regime_right = osc.regime == "overdamped"
    else:
        true_regime = "overdamped" if zeta > 1 else "underdamped"
        clear = zeta < 0.7 or zeta > 1.5
        regime_wrong = clear and osc.regime not in ("indeterminate", true_regime)
        regime_right = clear and osc.regime == true_regime
    se = p["plateau"].stderr
    return {
        "plateau_covered": p_cov,
        "timescale_covered": t_cov,
        "recovered": p_ok and t_ok,
        "confident_wrong": bool(wrong),
        "regime_wrong": bool(regime_wrong),
        "regime_right": bool(regime_right),
        "preferred_plateau_covered": bp.ci95 is not None and _inside(bp.ci95, truth["plateau"]),
        "stderr_shown": se is not None,
        "stderr_covered": None if se is None or pv is None else abs(pv - truth["plateau"]) <= 1.96 * se,
    }


def run_forced_recovery(
    n_per_stratum: int = 10, seed: int = 0, *, rows: list | None = None, only: tuple | None = None, **strata
) -> list[dict]:
    """Per-stratum rates of the fit's intervals on runs with forcing inside the dynamics
    (``rows``: a list that receives every run's ``(truth, scores, result)``; ``only``: fit just
    this ``(forcing_sd, regime)`` stratum of the full set)."""
    from grpofit.testing.synthetic import forced_recovery_set

    groups: dict = {}
    for truth, table in forced_recovery_set(n_per_stratum, seed=seed, **strata):
        if only is not None and (truth["forcing_sd"], truth["regime"]) != tuple(only):
            continue  # one stratum of the full set (the same runs as in the full table)
        res = fit_series(table["step"], table["reward"])
        row = forced_row(truth, res)
        if rows is not None:
            rows.append((truth, row, res))
        groups.setdefault((truth["forcing_sd"], truth["regime"]), []).append(row)
    return forced_rates(groups)


def forced_rates(groups: dict) -> list[dict]:
    """Per-stratum rates from ``{(forcing_sd, regime): [forced_row, ...]}``."""
    out = []
    mean = lambda v: float(np.mean(v)) if len(v) else None
    for (level, regime), rs in groups.items():
        tc = [r["timescale_covered"] for r in rs if r["timescale_covered"] is not None]
        sc = [r["stderr_covered"] for r in rs if r["stderr_covered"] is not None]
        out.append(
            {
                "forcing_sd": level,
                "regime": regime,
                "n": len(rs),
                "plateau_coverage": mean([r["plateau_covered"] for r in rs]),
                "timescale_coverage": mean(tc),
                "preferred_plateau_coverage": mean([r["preferred_plateau_covered"] for r in rs]),
                "recovered": mean([r["recovered"] for r in rs]),
                "confident_wrong": mean([r["confident_wrong"] for r in rs]),
                "regime_wrong": mean([r["regime_wrong"] for r in rs]),
                "regime_right": mean([r["regime_right"] for r in rs]),
                "stderr_shown": mean([r["stderr_shown"] for r in rs]),
                "stderr_coverage": mean(sc),
            }
        )
    return out


def forced_report(rows: list[dict]) -> str:
    pct = lambda x: "-" if x is None else f"{x:.0%}"
    lines = [
        "| forcing sd | regime | runs | plateau ci95 covers | timescale ci95 covers | preferred law's plateau ci95 covers "
        "| recovered | confidently wrong | regime wrong | regime right | ± stderr shown | ± 1.96 stderr covers |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['forcing_sd']:g} | {r['regime']} | {r['n']} | {pct(r['plateau_coverage'])} | "
            f"{pct(r['timescale_coverage'])} | {pct(r['preferred_plateau_coverage'])} | "
            f"{pct(r['recovered'])} | {pct(r['confident_wrong'])} | {pct(r['regime_wrong'])} | {pct(r['regime_right'])} | "
            f"{pct(r['stderr_shown'])} | {pct(r['stderr_coverage'])} |"
        )
    return "\n".join(lines)


def check_committed_row(doc_name: str, command: str, report: str, prefix: str) -> str:
    """The committed ``docs/doc_name`` says it is ``command``'s output and holds the last row of
    ``report`` (recomputed by a test), which starts with ``prefix``; returns the doc's text."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / doc_name).read_text(encoding="utf-8")
    assert command in doc
    line = report.splitlines()[-1]
    assert line.startswith(prefix)
    assert line in doc.splitlines()
    return doc


def _binomial_range(n: int, p: float) -> tuple[float, float]:
    """The central 95% range of the observed rate of ``n`` Bernoulli(``p``) trials."""
    from scipy.stats import binom

    return float(binom.ppf(0.025, n, p)) / n, float(binom.ppf(0.975, n, p)) / n


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--forced":
        out = None
        if "--out" in argv:
            i = argv.index("--out")
            out = argv[i + 1]
            argv = argv[:i] + argv[i + 2 :]
        n = int(argv[1]) if len(argv) > 1 else 10
        seed = int(argv[2]) if len(argv) > 2 else 0
        text = forced_report(run_forced_recovery(n, seed))
        print(text)
        if out:  # docs/fit_coverage.md holds this table and more: python -m benchmarks.fit_targets
            Path(out).write_text(text + "\n", encoding="utf-8")
        return
    n = int(argv[0]) if argv else 120
    seed = int(argv[1]) if len(argv) > 1 else 0
    out = run_recovery(n, seed)
    print(report(out))
    bad = [r for r in out["rows"] if not r["recovered"] or r["regime_wrong"] or not r["plateau_covered"]]
    for r in bad:
        tr = r["truth"]
        o = r["result"].models["oscillator"].params
        print(
            f"  #{tr['index']}: zeta {tr['damping_ratio']:.2f} Ts {tr['timescale']:.0f} p* {tr['plateau']:.3f}"
            f" len {tr['length']} stride {tr['stride']} | fit p* {o['plateau'].value:.3f} {o['plateau'].ci95}"
            f" Ts {o['timescale'].value:.0f} zeta-ci {o['damping_ratio'].ci95} {r['regime']}"
        )


if __name__ == "__main__":
    main()
