"""The fit's targets on generated runs, beside the oracle (``docs/fit_coverage.md``).

``python -m benchmarks.fit_targets [N_PER_STRATUM] [SEED] [--out FILE]`` fits, in one pass over
the runs of :func:`grpofit.testing.synthetic.forced_recovery_set` (forcing inside the dynamics,
``N_PER_STRATUM`` per forcing level x regime) and of :func:`~grpofit.testing.synthetic.recovery_set`
(240 runs whose forcing is outside the dynamics, all settled, and the same runs cut while still
moving), and writes:

- the fit's 95% intervals per stratum (:func:`benchmarks.recovery.forced_report`);
- **the plateau against the oracle** that knows the true law and both noise levels
  (:func:`benchmarks.fit_oracle.oracle_row`, its posterior): p* within 0.03, covered by the
  95% interval, confidently wrong (off by more than 0.03 and outside the interval), for the
  oracle and for the fit (the preferred law's ``plateau``, as ``grpofit fit`` publishes it),
  and whether the fit's targets hold: recovery at least the oracle's minus 3 points,
  coverage at least 92%, confidently wrong at most the oracle's plus 2 points; beside them the
  recovery of the oracle that estimates both noise levels from the run (``estimated_p_ok`` of
  :func:`benchmarks.fit_oracle.oracle_row`);
- **plateau bounds** (``≥ level (still rising)``, :func:`grpofit.fitting.fitcheck.plateau_statement`):
  how often one is printed and how often the true p* contradicts it (below a lower bound,
  above an upper one), beside the rule of a significant late slope and a level past p* alone;
- **inertia and damping ratio**: how often their 95% intervals are printed and cover the truth,
  with the misses on each side.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.recovery import PLATEAU_TOL, _binomial_range, _inside, forced_rates, forced_report, forced_row

#: the fit's targets against the oracle (p* within 0.03): recovery at least the oracle's minus
#: this, confidently wrong at most the oracle's plus this, coverage at least COVERAGE_MIN
RECOVERY_SLACK, WRONG_SLACK, COVERAGE_MIN = 0.03, 0.02, 0.92
#: the recovery runs are also cut at these multiples of their slowest time (still moving)
CUTS = (1.0, 2.0, 4.0)
RECOVERY_RUNS = 240


def plateau_scores(truth: dict, result) -> dict:
    """The fit's plateau (the preferred law's, as published) against the truth."""
    e = result.param("plateau")
    v = None if e is None else e.value
    ok = v is not None and abs(v - truth["plateau"]) <= PLATEAU_TOL
    covers = e is not None and e.ci95 is not None and _inside(e.ci95, truth["plateau"])
    return {"p_ok": bool(ok), "p_covers": bool(covers), "p_wrong": bool(not ok and not covers)}


def bound_scores(truth: dict, result) -> dict:
    """Whether a bound is printed and contradicted, now and under the slope-and-level rule."""
    from grpofit.fitting.fitcheck import _late_checks, plateau_statement

    st = plateau_statement(result) or {}
    kind = st.get("kind")
    _, moving = _late_checks(result)
    law = result.param("plateau")
    old = None
    if moving and moving.get("direction") and law is not None and law.value is not None:
        up = moving["direction"] == "rising" and moving["level"] > law.value
        down = moving["direction"] == "falling" and moving["level"] < law.value
        old = ("lower_bound" if up else "upper_bound" if down else None, moving["level"])
    p = truth["plateau"]

    def wrong(k, level):
        return (k == "lower_bound" and p < level) or (k == "upper_bound" and p > level)

    printed = kind in ("lower_bound", "upper_bound")
    return {
        "printed": printed,
        "contradicted": printed and wrong(kind, st["value"]),
        "old_printed": bool(old and old[0]),
        "old_contradicted": bool(old and old[0] and wrong(*old)),
    }


def shape_scores(truth: dict, result) -> dict:
    """Inertia and damping ratio: printed (an interval), covered, and on which side a miss lies."""
    out = {}
    osc = result.models["oscillator"].params
    for name, value in (("inertia", truth.get("inertia")), ("damping_ratio", truth.get("damping_ratio"))):
        e = osc.get(name)
        shown = value is not None and e is not None and e.value is not None and e.ci95 is not None
        shown = shown and not str(e.note or "").startswith("not identifiable")
        if not shown:
            out[name] = None
            continue
        lo = -np.inf if e.ci95[0] is None else e.ci95[0]
        hi = np.inf if e.ci95[1] is None else e.ci95[1]
        out[name] = "in" if lo <= value <= hi else ("below" if value < lo else "above")
    return out


def _regime_of(truth: dict) -> str:
    if truth.get("regime"):
        return truth["regime"]
    return "underdamped" if truth["damping_ratio"] < 1 else "overdamped"


def run_targets(n_per_stratum: int = 10, seed: int = 0, *, n_recovery: int = RECOVERY_RUNS, only=None) -> dict:
    """Every section's per-stratum rows (``only``: just this ``(forcing_sd, regime)`` forced stratum,
    no recovery runs)."""
    from benchmarks.fit_oracle import oracle_row
    from grpofit.fitting import fit_series
    from grpofit.testing.synthetic import forced_recovery_set, recovery_set

    forced, oracle, bounds, shapes = {}, {}, {}, {}
    for truth, table in forced_recovery_set(n_per_stratum, seed=seed):
        key = (truth["forcing_sd"], truth["regime"])
        if only is not None and key != tuple(only):
            continue
        res = fit_series(table["step"], table["reward"])
        forced.setdefault(key, []).append(forced_row(truth, res))
        oracle.setdefault(key, []).append((oracle_row(truth, table), plateau_scores(truth, res)))
        bounds.setdefault(("forced runs", f"forcing sd {key[0]:g}"), []).append(bound_scores(truth, res))
        shapes.setdefault(("forced runs", f"forcing sd {key[0]:g}", key[1]), []).append(shape_scores(truth, res))
    runs = [] if only is not None else recovery_set(n_recovery, seed=seed)
    for truth, table in runs:
        res = fit_series(table["step"], table["reward"])
        bounds.setdefault(("settled runs", "forcing outside the dynamics"), []).append(bound_scores(truth, res))
        shapes.setdefault(("settled runs", "forcing outside the dynamics", _regime_of(truth)), []).append(
            shape_scores(truth, res)
        )
        t = table["step"] - table["step"][0]
        for c in CUTS:
            keep = t <= c * max(truth["timescale"], 2.0 * truth["inertia"])
            if keep.sum() < 40:
                continue
            cut = fit_series(table["step"][keep], table["reward"][keep])
            bounds.setdefault(("cut runs", f"cut at {c:g} x the slowest time"), []).append(bound_scores(truth, cut))
    return {"forced": forced, "oracle": oracle, "bounds": bounds, "shapes": shapes}


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def oracle_table(oracle: dict) -> str:
    lines = [
        "| forcing sd | regime | runs | p* within 0.03: oracle | oracle, noise estimated | fit | target met "
        "| p* 95% covers: oracle | fit | target met (>= 92%) | confidently wrong: oracle | fit | target met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (level, regime), rows in oracle.items():
        m = lambda who, k: float(np.mean([r[who][k] for r in rows]))
        o_ok, f_ok, e_ok = m(0, "p_ok"), m(1, "p_ok"), m(0, "estimated_p_ok")
        o_cov, f_cov = m(0, "p_covers"), m(1, "p_covers")
        o_w, f_w = m(0, "p_wrong"), m(1, "p_wrong")
        yes = lambda b: "yes" if b else "**no**"
        lines.append(
            f"| {level:g} | {regime} | {len(rows)} | {_pct(o_ok)} | {_pct(e_ok)} | {_pct(f_ok)} "
            f"| {yes(f_ok >= o_ok - RECOVERY_SLACK - 1e-9)} "
            f"| {_pct(o_cov)} | {_pct(f_cov)} | {yes(f_cov >= COVERAGE_MIN - 1e-9)} "
            f"| {_pct(o_w)} | {_pct(f_w)} | {yes(f_w <= o_w + WRONG_SLACK + 1e-9)} |"
        )
    return "\n".join(lines)


def bounds_table(bounds: dict) -> str:
    lines = [
        "| runs | stratum | n | bounds printed | contradicted by the true p* | slope and level alone: printed | contradicted |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {"settled runs": 0, "forced runs": 1, "cut runs": 2}
    for (kind, stratum), rows in sorted(bounds.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        s = lambda k: sum(r[k] for r in rows)
        lines.append(
            f"| {kind} | {stratum} | {len(rows)} | {s('printed')} | {s('contradicted')} "
            f"| {s('old_printed')} | {s('old_contradicted')} |"
        )
    return "\n".join(lines)


def shapes_table(shapes: dict) -> str:
    lines = [
        "| runs | stratum | regime | n | inertia: printed | covers | truth below / above | damping ratio: printed "
        "| covers | truth below / above |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (kind, stratum, regime), rows in shapes.items():
        if regime == "two_class":
            continue  # no inertia or damping ratio to recover
        cells = []
        for name in ("inertia", "damping_ratio"):
            got = [r[name] for r in rows if r.get(name) is not None]
            cov = None if not got else float(np.mean([g == "in" for g in got]))
            cells += [str(len(got)), _pct(cov), f"{got.count('below')} / {got.count('above')}"]
        lines.append(f"| {kind} | {stratum} | {regime} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


DOC = """# The fit on generated runs: intervals, the oracle, plateau bounds, inertia and damping ratio

Generated by `python -m benchmarks.fit_targets {n} {seed} --out docs/fit_coverage.md` (seed {seed}
was not used while the intervals, the bound rule, the shape intervals' widening or the
inertia's upper end were tuned: those were chosen on seeds 1 and 11;
`tests/test_fit_targets.py` runs a small version and recomputes one stratum's rows). With {n} runs a stratum whose true coverage is 95% shows
between about {lo:.0%} and {hi:.0%} (binomial 95% range), so one row a few points outside 90–98% is
not by itself a miscalibration.

## The fit's 95% intervals under forcing inside the dynamics

Runs: `grpofit.testing.synthetic.forced_recovery_set`, forcing sd x regime, binomial
observation noise, {n} runs per stratum. Columns are the oscillator's `ci95` (as `grpofit fit`
publishes it), the preferred law's plateau `ci95`, recovery (plateau within 0.03, timescale
within 25%), confidently wrong (off and outside the interval), a clearly damped run called the
wrong regime, one called its own (the power of the regime call: a two-class run, a sum of
decays, is right when called overdamped and wrong when called underdamped), and how often
`± stderr` is printed and covers the truth at 1.96.

{forced}

## The plateau against the oracle

The oracle knows the true law, the forcing sd and the observation sd, and estimates the rest
from the exact likelihood (the posterior of [fit_oracle.md](fit_oracle.md): mean plateau,
95% interval). The fit is the preferred law's `plateau` as `grpofit fit` publishes it.
*Confidently wrong*: p* off by more than 0.03 and outside the 95% interval. Targets: p*
recovery at least the oracle's minus 3 points, coverage at least 92%, confidently wrong at most
the oracle's plus 2 points (set for forcing sd 0.03; applied here to every level). *Oracle,
noise estimated*: the same true law, but the forcing's and the observation noise's levels
estimated from the run as the fit estimates them (fit_oracle.md, *estimated noise*; its
posterior mean plateau): no method that must estimate them from one run has the oracle's
information, and under the strongest forcing it recovers p* less often than the oracle (the
fit's plateau is least squares: the state-space likelihood's own plateau estimates did worse,
`grpofit/fitting/statespace_ci.py`).

{oracle}

## Plateau bounds

A plateau is printed as a bound (`≥ b (still rising)`, `≤ b (still falling)`) where the data
show a drift past the law (`grpofit.fitting.fitcheck.plateau_bound`), or where the law's p* is
not pinned down (its interval runs to the fit bound) and lies beyond the level the run has
reached (`statement_bound`, `not identified`). The bound `b` is that level (the mean of the last
tenth) less (plus) `grpofit.fitting.fitcheck.LATE_Z` of its standard errors
(`fitcheck.level_stderr`: the late mean's and the sd of the last five tenths' means together).
At the level itself a run's noise or wander above its plateau contradicted it: on this seed 1
of 3 bounds under forcing sd 0.03 and 30 of 211 on the cut runs. The true p* contradicts
a lower bound when it lies below `b`, an upper bound when above. The last two columns are the
rule of a significant late slope and a level past the law's p* alone (the rule before the drift
conditions). *Settled runs*: `recovery_set({n_rec}, seed={seed})`, every run long enough to
settle (a bound there is a false alarm); *cut runs*: the same runs cut at 1, 2 and 4 times
their slowest time (`max(timescale, 2 x inertia)`), still rising or overshooting.

{bounds}

## Inertia and damping ratio

How often the oscillator's 95% intervals are printed (an interval, not `not identifiable`)
and cover the truth, with the misses below and above. The least-squares intervals of a fit
whose damping ratio is below one are widened in log by the timescale state-space interval's
inflation over the least-squares one, to the power
`grpofit.fitting.statespace_ci.SHAPE_INFLATION` (chosen on seed 11: before it, the underdamped
runs here covered 78% (inertia) and 70% (damping ratio) under forcing sd 0.03, 87% and 83% under
0.015); a regime call the widened interval no longer supports becomes `indeterminate`. A fit
whose damping ratio is above one is widened so on one side only, its damping ratio's upper end
and its inertia's lower end, where the state-space likelihood finds the forcing (posterior
forcing/noise ratio at least `grpofit.fitting.statespace_ci.SHAPE_FORCING`; chosen on seed 11:
before it, its overdamped runs under forcing sd 0.03 covered 89% (damping ratio) and 96%
(inertia), all 12 misses on that side); the lower end, which makes the overdamped call, stays. An
inertia interval that holds 0 (`[0, hi]`, most overdamped runs) takes `hi` from the profile
rows beyond the fit accepted at `grpofit.fitting.intervals.INERTIA_FAR` of their threshold
(chosen on seed 11; at the full threshold the overdamped rows here covered 100%, 98%, 100%,
98% and 100% of the settled runs).

{shapes}
"""


def main(argv: list[str] | None = None) -> None:
    from benchmarks.fit_oracle import count_seed_out

    n, seed, out = count_seed_out(argv)
    r = run_targets(n, seed)
    lo, hi = _binomial_range(n, 0.95)
    text = DOC.format(
        n=n,
        seed=seed,
        lo=lo,
        hi=hi,
        n_rec=RECOVERY_RUNS,
        forced=forced_report(forced_rates(r["forced"])),
        oracle=oracle_table(r["oracle"]),
        bounds=bounds_table(r["bounds"]),
        shapes=shapes_table(r["shapes"]),
    )
    print(text)
    if out:
        Path(out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
