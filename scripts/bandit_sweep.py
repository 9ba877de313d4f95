#!/usr/bin/env python
"""Reproduction experiment: refresh-interval / momentum sweep and group-size check on the bandit.

Exact GRPO on an 8-arm softmax bandit (1 correct arm, beta = 1, uniform reference, population std
in the advantage) with the exact mean-field gradient (group size 0). The curvature K is measured
once, independently of the sweep, as the relaxation rate of p at the fixed point (Jacobian of the
mean-field flow). Each simulated run is then compared with three predictions made from that K:

- closed form (second-order expansion, lag = K_ref): regime from the damping ratio, unstable when
  eta K K_ref > 1 - mu;
- exact fixed-delay recursion (constant lag K_ref): spectral radius of the companion matrix;
- exact sawtooth recursion (gradient frozen at the last refresh, which is what the simulator does):
  spectral radius of the monodromy matrix.

Per run: the full trajectory from the reference policy (its label: monotone / oscillatory /
unstable, and an oscillator fit with grpofit.fitting.fit_series), and a linear-response run started
next to the fixed point, whose per-step growth factor is compared with the predicted spectral radii.

Writes docs/bandit_sweep.md (tables) and docs/bandit_sweep.png. Usage:
    python scripts/bandit_sweep.py [--out-dir docs] [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import numpy as np  # noqa: E402

from grpofit import dynamics as dyn  # noqa: E402
from grpofit.dynamics import simulation as sim  # noqa: E402

ARMS, CORRECT, BETA, LR = 8, 1, 1.0, 0.1
MOMENTA = (0.0, 0.5, 0.9)
KREFS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 72, 80, 96)


def fit_oscillator(steps, values):
    """Oscillator fit of one run: grpofit.fitting.fit_series (written by the fitting helper)."""
    try:
        from grpofit.fitting import fit_series
    except ImportError:  # pragma: no cover - the package ships fit_series
        return None
    res = fit_series(steps, values, metric="expected_reward")
    osc = res.models.get("oscillator")
    if osc is None or not osc.ok:
        return None
    return {
        "regime": osc.regime,
        "damping_ratio": osc.params["damping_ratio"].value,
        "timescale": osc.params["timescale"].value,
        "inertia": osc.params["inertia"].value,
        "r2": osc.r2,
    }


def linear_growth(fp, mu, kref, kl_at="sampling", lr=LR):
    """Per-step growth factor of |p - p*| for a run started 1e-7 away from the fixed point.

    Envelope (max |e| over blocks of 2 K_ref + 10 steps plus two predicted oscillation periods;
    the prediction only sets the window) between 1e-12 and 1e-3, log-linear fit. Below 1e-12 the
    error meets the round-off floor of p* (which differs between CPUs: numpy and OpenBLAS pick
    AVX-512 or AVX2 kernels at run time) and the slope would measure that floor, not the decay.
    """
    steps = 40 * kref + 3000
    pred = dyn.exact_sawtooth(lr, mu, kref, fp.curvature, max(fp.curvature_current, 0.0), with_threshold=False)
    th = fp.theta.copy()
    th[0] += 1e-5 if pred.stable else 1e-10  # the prediction only picks the start, not the rate
    run = sim.simulate_bandit(
        arms=ARMS,
        correct=CORRECT,
        beta=BETA,
        lr=lr,
        momentum=mu,
        refresh_interval=kref,
        group_size=0,
        steps=steps,
        theta0=th,
        measure=False,
        kl_at=kl_at,
    )
    e = np.abs(run.columns["expected_reward"] - fp.p)
    period = pred.oscillation_period or 0.0
    B = max(2 * kref, int(min(period, 1000))) + 10
    nb = len(e) // B
    m = e[: nb * B].reshape(nb, B).max(axis=1)
    j = np.arange(nb)
    ok = (m > 1e-12) & (m < 1e-3) & (j >= 1)  # above the round-off floor of p* (CPU-dependent)
    if ok.sum() < 3:
        return None
    return float(np.exp(np.polyfit(j[ok], np.log(m[ok]), 1)[0] / B))


def closed_form_growth(mu, kref, K):
    """Per-step growth factor exp(Re s) of the closed-form oscillator M s^2 + C s + K_eff = 0."""
    cf = dyn.closed_form(LR, mu, kref, K)
    s = np.roots([cf.mass, cf.damping, cf.stiffness])
    return float(np.exp(s.real.max()))


def sim_threshold(fp, mu, lo, hi, kl_at="sampling"):
    """Smallest integer K_ref whose linear-response run grows (bisection between lo stable, hi unstable)."""

    def unstable(k):
        g = linear_growth(fp, mu, k, kl_at)
        return g is not None and g >= 1.0

    if unstable(lo) or not unstable(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if unstable(mid) else (mid, hi)
    return hi


def fmt(v, nd=3):
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "inf"
        return f"{v:.{nd}g}" if abs(v) < 1e4 else f"{v:.3g}"
    return str(v)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def sweep(fp, krefs, steps, do_fit=True):
    K = fp.curvature
    rows, curves = [], {}
    for mu in MOMENTA:
        for kref in krefs:
            cf = dyn.closed_form(LR, mu, kref, K)
            fx = dyn.exact_fixed_delay(LR, mu, kref, K, with_threshold=False)
            sw = dyn.exact_sawtooth(LR, mu, kref, K, with_threshold=False)
            run = sim.simulate_bandit(
                arms=ARMS,
                correct=CORRECT,
                beta=BETA,
                lr=LR,
                momentum=mu,
                refresh_interval=kref,
                group_size=0,
                steps=steps,
                measure=False,
            )
            p = run.columns["expected_reward"]
            label = sim.classify_trajectory(p, fp.p)["label"]
            growth = linear_growth(fp, mu, kref)
            fit = fit_oscillator(run.columns["step"], p) if do_fit and label != "unstable" else None
            curves[(mu, kref)] = p
            rows.append(
                {
                    "mu": mu,
                    "kref": kref,
                    "cf_zeta": cf.damping_ratio,
                    "cf_regime": cf.regime,
                    "cf_T": cf.timescale,
                    "cf_I": cf.inertia,
                    "fx_rho": fx.spectral_radius,
                    "fx_regime": fx.regime,
                    "sw_rho": sw.spectral_radius,
                    "sw_regime": sw.regime,
                    "sim_growth": growth,
                    "sim_label": label,
                    "fit": fit,
                }
            )
    return rows, curves


def thresholds(fp, kl_at="sampling"):
    K = fp.curvature
    k_now = max(fp.curvature_current, 0.0)
    out = []
    for mu in MOMENTA:
        cf = dyn.closed_form(LR, mu, 1, K, curvature_current=0.0).critical_refresh_interval
        cf_split = dyn.closed_form(LR, mu, 1, K, curvature_current=k_now).critical_refresh_interval if k_now else cf
        fx = dyn.critical_refresh_interval(LR, mu, K, "fixed")
        sw = dyn.critical_refresh_interval(LR, mu, K, "sawtooth")
        sw_split = dyn.critical_refresh_interval(LR, mu, K, "sawtooth", curvature_current=k_now, max_interval=4096)
        if sw_split is not None:
            simk = sim_threshold(fp, mu, max(1, int(0.8 * sw_split)), int(1.25 * sw_split) + 1, kl_at)
        else:  # no predicted threshold: show what long refresh intervals do
            labels = []
            for k in (128, 512):
                run = sim.simulate_bandit(
                    arms=ARMS,
                    correct=CORRECT,
                    beta=BETA,
                    lr=LR,
                    momentum=mu,
                    refresh_interval=k,
                    group_size=0,
                    steps=8 * k,
                    measure=False,
                    kl_at=kl_at,
                )
                labels.append(f"K_ref={k}: {sim.classify_trajectory(run.columns['expected_reward'], fp.p)['label']}")
            simk = "none found (" + ", ".join(labels) + ")"
        out.append(
            {
                "mu": mu,
                "cf": cf,
                "cf_split": cf_split,
                "fx": fx,
                "sw": sw,
                "sw_split": sw_split,
                "theory_fx": math.pi / 2 * (1 - mu) / (LR * K),
                "theory_sw": 2 * (1 - mu) / (LR * K),
                "sim": simk,
            }
        )
    return out


def group_size_section(seeds=3, steps=3000, lr=0.5):
    rows = []
    for G in (4, 16, 0):
        theory = sim.plateau_at_group_size(BETA, ARMS, CORRECT, G)
        fp = sim.fixed_point(ARMS, CORRECT, BETA, G)
        lates, vars_, Ts = [], [], []
        pred_var = None
        for seed in range(seeds if G else 1):
            run = sim.simulate_bandit(
                arms=ARMS, correct=CORRECT, beta=BETA, lr=lr, group_size=G, steps=steps, seed=seed
            )
            st = run.late_stats()
            lates.append(st["late_mean"])
            vars_.append(st["late_variance"])
            s = run.summary()
            pred_var = s.get("predicted", {}).get("fluctuation_variance")
            fit = fit_oscillator(run.columns["step"][:600], run.columns["expected_reward"][:600])
            if fit:
                Ts.append(fit["timescale"])
        phi_ratio = sim.group_signal(theory, G) / sim.group_signal(theory, 0) if G else 1.0
        rows.append(
            {
                "G": G,
                "theory": theory,
                "sim": float(np.mean(lates)),
                "sim_sd": float(np.std(lates)),
                "K": fp.curvature,
                "pred_T": (1 - lr * fp.curvature) / (lr * fp.curvature),
                "fit_T": float(np.mean(Ts)) if Ts else None,
                "var": float(np.mean(vars_)) if G else 0.0,
                "pred_var": pred_var if G else 0.0,
                "signal": phi_ratio,
                "zero_std": theory**G + (1 - theory) ** G if G else 0.0,
            }
        )
    return rows


def plot(fp, rows, curves, thr, path, steps):
    from matplotlib.figure import Figure

    K = fp.curvature
    fig = Figure(figsize=(5 * len(MOMENTA), 8.5))
    axes = fig.subplots(2, len(MOMENTA))
    for col, mu in enumerate(MOMENTA):
        ax = axes[0, col]
        dense = sorted(set(np.unique(np.round(np.geomspace(1, 120, 60)).astype(int))))
        ax.plot(
            dense,
            [dyn.exact_sawtooth(LR, mu, k, K, with_threshold=False).spectral_radius for k in dense],
            color="C0",
            label="exact sawtooth (simulator's lag)",
        )
        ax.plot(
            dense,
            [dyn.exact_fixed_delay(LR, mu, k, K, with_threshold=False).spectral_radius for k in dense],
            color="C1",
            ls="--",
            label="exact fixed delay L = K_ref",
        )
        ax.plot(dense, [closed_form_growth(mu, k, K) for k in dense], color="C2", ls=":", label="closed form exp(Re s)")
        pts = [(r["kref"], r["sim_growth"]) for r in rows if r["mu"] == mu and r["sim_growth"] is not None]
        if pts:
            ax.plot(*zip(*pts), "ko", ms=4, label="simulated (linear response)")
        t = next(x for x in thr if x["mu"] == mu)
        for key, c in (("cf", "C2"), ("fx", "C1"), ("sw", "C0")):
            if t[key] is not None and math.isfinite(t[key]):
                ax.axvline(t[key], color=c, lw=0.8, alpha=0.7)
        ax.axhline(1.0, color="0.4", lw=0.8)
        ax.set_xscale("log")
        ax.set_ylim(0.85, 1.06)
        ax.set_title(f"mu = {mu}: growth per step vs K_ref (eta K = {LR * K:.4f})", fontsize=9)
        ax.set_xlabel("refresh interval K_ref")
        ax.set_ylabel("|e_n| growth factor per step")
        if col == 0:
            ax.legend(fontsize=7, loc="lower left")
        ax2 = axes[1, col]
        sw_crit = t["sw"] or 64
        picks = sorted({1, max(2, int(0.5 * sw_crit)), max(3, int(0.85 * sw_crit)), int(1.3 * sw_crit) + 1})
        for k in picks:
            run = sim.simulate_bandit(
                arms=ARMS,
                correct=CORRECT,
                beta=BETA,
                lr=LR,
                momentum=mu,
                refresh_interval=k,
                group_size=0,
                steps=steps,
                measure=False,
            )
            ax2.plot(run.columns["step"], run.columns["expected_reward"], lw=1, label=f"K_ref = {k}")
        ax2.axhline(fp.p, color="0.4", lw=0.8, ls="--")
        ax2.set_title(f"mu = {mu}: trajectories (sawtooth threshold {t['sw']})", fontsize=9)
        ax2.set_xlabel("step")
        ax2.set_ylabel("expected reward p")
        ax2.set_ylim(0, 1)
        ax2.legend(fontsize=7)
    fig.suptitle(
        f"GRPO on an {ARMS}-arm bandit (beta={BETA}, G=inf, lr={LR}): K = {K:.4f} measured at p* = {fp.p:.4f}",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


STEPS = 1500


def build(quick: bool = False) -> dict:
    """Every number of the sweep: ``md`` (the text of docs/bandit_sweep.md) and the pieces behind it
    (``fp``, ``rows``, ``curves``, ``thr``, ``gs``). The figure is drawn from these by ``main``."""
    krefs = (1, 4, 16, 48, 96) if quick else KREFS
    fp = sim.fixed_point(ARMS, CORRECT, BETA, 0)
    fp_cur = sim.fixed_point(ARMS, CORRECT, BETA, 0, kl_at="current")
    rows, curves = sweep(fp, krefs, STEPS, do_fit=not quick)
    thr = thresholds(fp)
    thr_cur = thresholds(fp_cur, kl_at="current")
    gs = [] if quick else group_size_section()
    fr = [] if quick else from_run_section(fp)
    md = render(fp, fp_cur, rows, thr, thr_cur, gs, fr)
    return {
        "md": md,
        "fp": fp,
        "fp_cur": fp_cur,
        "rows": rows,
        "curves": curves,
        "thr": thr,
        "thr_cur": thr_cur,
        "gs": gs,
        "fr": fr,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default=str(ROOT / "docs"))
    ap.add_argument("--quick", action="store_true", help="fewer K_ref values, no fits (for smoke tests)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    b = build(quick=args.quick)
    plot(b["fp"], b["rows"], b["curves"], b["thr"], out / "bandit_sweep.png", STEPS)
    (out / "bandit_sweep.md").write_text(b["md"], encoding="utf-8")
    print(f"wrote {out / 'bandit_sweep.md'} and {out / 'bandit_sweep.png'} in {time.perf_counter() - t0:.1f} s")


def from_run_section(fp):
    """The falsifiable check of grpofit predict --from-run on simulated runs."""
    from grpofit.fitting import fit_series

    out = []
    for mu, kref in ((0.0, 1), (0.0, 8), (0.5, 4), (0.9, 1)):
        for start in ("reference", "near p*"):
            theta0 = None
            if start == "near p*":  # p0 = p* - 0.1 on the symmetric line
                p0 = fp.p - 0.1
                theta0 = np.zeros(ARMS)
                theta0[:CORRECT] = math.log(p0 / (1 - p0) * (ARMS - CORRECT) / CORRECT)
            run = sim.simulate_bandit(
                arms=ARMS,
                correct=CORRECT,
                beta=BETA,
                lr=LR,
                momentum=mu,
                refresh_interval=kref,
                group_size=0,
                steps=1500,
                measure=False,
                theta0=theta0,
            )
            res = fit_series(run.columns["step"], run.columns["expected_reward"])
            try:
                rp = dyn.from_run(res, LR, mu, kref)
            except Exception as exc:  # noqa: BLE001 - report, do not hide
                out.append({"mu": mu, "kref": kref, "start": start, "error": str(exc)})
                continue
            out.append(
                {
                    "mu": mu,
                    "kref": kref,
                    "start": start,
                    "K_fit": rp.curvature,
                    "K_true": fp.curvature,
                    "I_fit": rp.fitted_inertia,
                    "I_ci": rp.fitted_inertia_ci95,
                    "I_pred": rp.predicted_inertia,
                    "agrees": rp.agrees,
                }
            )
    return out


def render(fp, fp_cur, rows, thr, thr_cur, gs, fr):
    K = fp.curvature
    L = []
    L.append("# Bandit sweep: closed form vs exact recursion vs simulation\n")
    L.append(
        f"Generated by `python scripts/bandit_sweep.py` (deterministic: mean-field runs, seeded group-size runs; "
        "tests/test_generated_docs.py rebuilds this text and checks every number the README quotes). Exact GRPO on a softmax bandit: "
        f"{ARMS} arms, {CORRECT} correct, beta = {BETA}, uniform reference, population-std advantages, "
        f"exact mean-field gradient (G -> inf), lr = {LR}, heavy-ball momentum mu, sampling policy refreshed "
        "every K_ref steps; the whole gradient (reward signal and KL) is evaluated at the sampling policy "
        '(`kl_at="sampling"`), i.e. frozen at the last refresh.\n'
    )
    L.append(
        f"Measured independently of the sweep: fixed point p* = {fp.p:.4f}, curvature K = {K:.4f} "
        f"(Jacobian of the mean-field flow at p*), so eta K = {LR * K:.4f}.\n"
    )
    L.append("## Stability thresholds (smallest unstable K_ref)\n")
    L.append(
        table(
            [
                "mu",
                "closed form (1-mu)/(eta K)",
                "exact fixed delay",
                "(pi/2)(1-mu)/(eta K)",
                "exact sawtooth",
                "2(1-mu)/(eta K)",
                "simulation",
            ],
            [[t["mu"], t["cf"], t["fx"], t["theory_fx"], t["sw"], t["theory_sw"], t["sim"]] for t in thr],
        )
    )
    L.append(
        "\nThe simulator freezes the gradient at the last refresh, so the **sawtooth** recursion is the exact "
        "linearisation of what it does; the simulated threshold (linear-response runs, bisection on K_ref) "
        "should equal it. The closed form puts the threshold where C = 0, i.e. at the fixed-delay lag "
        "expanded to second order: it is conservative by a factor ~pi/2 against the fixed delay and ~2 "
        "against the sawtooth.\n"
    )
    L.append("## Sweep\n")
    L.append(
        "rho = per-step growth factor of |p - p*| (< 1 decays). Simulated rho from a linear-response run "
        "started next to p* (theta_correct shifted by 1e-5, or 1e-10 when growth is expected); label from the full run started at the reference policy (p0 = 1/8); fit = "
        "grpofit.fitting.fit_series oscillator on that full run (expected reward).\n"
    )
    hdr = [
        "mu",
        "K_ref",
        "closed zeta",
        "closed regime",
        "fixed rho",
        "fixed regime",
        "sawtooth rho",
        "sawtooth regime",
        "sim rho",
        "sim label",
        "fit regime",
        "fit zeta",
        "fit T",
        "closed T",
        "fit inertia",
        "closed inertia",
    ]
    body = []
    for r in rows:
        f = r["fit"] or {}
        body.append(
            [
                r["mu"],
                r["kref"],
                r["cf_zeta"],
                r["cf_regime"],
                r["fx_rho"],
                r["fx_regime"],
                r["sw_rho"],
                r["sw_regime"],
                r["sim_growth"],
                r["sim_label"],
                f.get("regime"),
                f.get("damping_ratio"),
                f.get("timescale"),
                r["cf_T"],
                f.get("inertia"),
                r["cf_I"],
            ]
        )
    L.append(table(hdr, body))
    # agreement summary
    diffs = [abs(r["sim_growth"] - r["sw_rho"]) for r in rows if r["sim_growth"] is not None]
    regime_match = sum(1 for r in rows if _same(r["sim_label"], r["sw_regime"]))
    cf_match = sum(1 for r in rows if _same(r["sim_label"], _cf_label(r["cf_regime"])))
    L.append(
        f"\nAgreement: simulated linear growth vs exact sawtooth rho: max |difference| = "
        f"{max(diffs) if diffs else float('nan'):.2e} over {len(diffs)} runs. Run label (monotone/oscillatory/"
        f"unstable) equals the sawtooth regime in {regime_match}/{len(rows)} runs and the closed-form regime "
        f"(overdamped->monotone, underdamped->oscillatory) in {cf_match}/{len(rows)}.\n"
    )
    L.append(_honest_notes(rows, thr))
    L.append('## KL on the current policy (`kl_at="current"`, a KL loss as in TRL/verl)\n')
    L.append(
        f"Same bandit, but the KL gradient is taken at the current policy. K is unchanged "
        f"({fp_cur.curvature:.4f}) but splits into a lagged part (reward signal, {fp_cur.curvature_lagged:.4f}) "
        f"and an unlagged part (KL pull, {fp_cur.curvature_current:.4f}). Near p* ~ 0.5 the std-normalised "
        "reward force is flat (sqrt(p(1-p)) peaks at 1/2), so almost all of the restoring force has no lag.\n"
    )
    L.append(
        table(
            [
                "mu",
                "paper closed form (all of K lagged)",
                "closed form with split",
                "exact sawtooth with split",
                "simulation",
            ],
            [[t["mu"], t["cf"], t["cf_split"], t["sw_split"], t["sim"]] for t in thr_cur],
        )
    )
    L.append(
        "\nWith the split, the exact recursion predicts no lag instability at all (K_lag < K_now: the frozen "
        "force can never beat the current one); a closed form that lags all of K would wrongly flag "
        "K_ref >= (1-mu)/(eta K). `grpofit predict --curvature-current` style inputs (dynamics.predict("
        "curvature_current=...)) take this into account.\n"
    )
    if fr:
        L.append("## The falsifiable check (`predict --from-run`) on simulated runs\n")
        L.append(
            "K measured from the fitted oscillator timescale, K = (1-mu)/(eta (T + K_ref)), against the Jacobian "
            "K; inertia predicted from that K against the fitted inertia's 95% interval.\n"
        )
        L.append(
            table(
                [
                    "mu",
                    "K_ref",
                    "start",
                    "K from fit",
                    "K Jacobian",
                    "fitted inertia",
                    "inertia ci95",
                    "predicted inertia",
                    "agrees",
                ],
                [
                    [
                        r["mu"],
                        r["kref"],
                        r["start"],
                        r.get("K_fit"),
                        r.get("K_true"),
                        r.get("I_fit"),
                        "-" if not r.get("I_ci") else f"[{r['I_ci'][0]:.3g}, {r['I_ci'][1]:.3g}]",
                        r.get("I_pred"),
                        r.get("agrees", r.get("error")),
                    ]
                    for r in fr
                ],
            )
        )
        near = [r["K_fit"] / r["K_true"] for r in fr if r["start"] == "near p*" and "K_fit" in r]
        far = [r["K_fit"] / r["K_true"] for r in fr if r["start"] == "reference" and "K_fit" in r]
        n_ok = sum(1 for r in fr if r.get("agrees"))
        L.append(
            f"\nK from the fitted timescale / Jacobian K: {min(near):.2f} to {max(near):.2f} for runs started "
            f"near p*, {min(far):.2f} to {max(far):.2f} from the reference policy (the nonlinear rise from p0 = "
            f"1/8 is slower than the local rate). The inertia check passes in {n_ok}/{len(fr)} runs. From the "
            "reference start the fitted inertia (several steps) is the slow start of the nonlinear rise (the "
            "std-normalised signal is weak at small p), not momentum or lag mass. Near p* with mu = 0 and "
            "K_ref = 1 the recursion is first order (a pure exponential, fitted inertia ~0), while the closed "
            "form's M = (delta^2/2)(1 + mu + ...) gives ~0.5 steps from the Taylor expansion of the step "
            "itself. On this bandit the inertia is therefore not a clean falsifiable quantity; the spectral "
            "radius, regime and stability threshold are.\n"
        )
    if gs:
        L.append("## Group size (beta = 1, 8 arms, 1 correct, population std)\n")
        L.append(
            table(
                [
                    "G",
                    "plateau theory (finite-G fixed point)",
                    "plateau simulated (late mean)",
                    "seed sd",
                    "signal factor phi_G/phi_inf at p*",
                    "zero-std fraction at p*",
                    "K",
                    "closed T (lr 0.5)",
                    "fitted T",
                    "late Var(p)",
                    "predicted Var = D/(2 G C K_eff), D measured",
                ],
                [
                    [
                        g["G"] or "exact",
                        g["theory"],
                        g["sim"],
                        g["sim_sd"],
                        g["signal"],
                        g["zero_std"],
                        g["K"],
                        g["pred_T"],
                        g["fit_T"],
                        g["var"],
                        g["pred_var"],
                    ]
                    for g in gs
                ],
            )
        )
        v4 = next(g["var"] for g in gs if g["G"] == 4)
        v16 = next(g["var"] for g in gs if g["G"] == 16)
        L.append(
            f"\nThe reference implementation's plateaus (~0.42, ~0.50, ~0.514) are reproduced. Mechanism: the "
            "expected policy gradient is phi_G(p)(u_C - u_W) with phi_G(p) = E_k[s_k^2/(s_k + eps)], "
            "k ~ Binomial(G, p), s_k the group's population std. phi_G < sqrt(p(1-p)) (Jensen, and zero-variance "
            "groups give nothing), so a small group weakens the reward force against the unchanged KL pull and "
            "the fixed point drops. The deterministic approach rate (K, timescale) hardly moves with G. "
            f"Late-run variance ratio G=4/G=16 = {v4 / v16:.1f} (1/G scaling would give 4): with one correct arm "
            "the noise along p comes only from the fluctuation of the group std s_k, whose leading 1/G term "
            "vanishes near p = 1/2, so the noise falls faster than 1/G at fixed groups per step. "
            "Var(e) = D/(2 G C K_eff) with D measured at p* matches the simulated variance.\n"
        )
    return "\n".join(L) + "\n"


def _cf_label(regime):
    return {"overdamped": "monotone", "critical": "monotone", "underdamped": "oscillatory"}.get(regime, regime)


def _same(sim_label, exact_regime):
    return sim_label == exact_regime


def _honest_notes(rows, thr):
    lines = ["### Where the closed form and the simulation disagree\n"]
    bad_stab = [r for r in rows if r["cf_regime"] == "unstable" and r["sim_label"] != "unstable"]
    if bad_stab:
        lines.append(
            f"- Stability: the closed form calls {len(bad_stab)} runs unstable that the simulation "
            "(and the exact sawtooth) shows decaying, e.g. "
            + ", ".join(f"mu={r['mu']} K_ref={r['kref']}" for r in bad_stab[:4])
            + "."
        )
    osc = [r for r in rows if r["cf_regime"] == "underdamped" and r["sim_label"] == "monotone"]
    if osc:
        lines.append(
            f"- Regime: {len(osc)} runs are underdamped by the closed form but rise monotonically in the "
            "simulation (the sawtooth's dominant eigenvalue stays real): "
            + ", ".join(f"mu={r['mu']} K_ref={r['kref']}" for r in osc[:4])
            + "."
        )
    tt = [r for r in rows if r["fit"] and r["cf_T"] and r["fit"].get("timescale")]
    if tt:
        ratios = [r["fit"]["timescale"] / r["cf_T"] for r in tt]
        lines.append(
            f"- Timescale: fitted oscillator timescale / closed-form C/K_eff ranges "
            f"{min(ratios):.2f} to {max(ratios):.2f} over {len(tt)} fitted runs. K is a local (linear) "
            "rate at p*; the rise from p0 = 1/8 is nonlinear (the std-normalised signal sqrt(p(1-p)) is "
            "weak at small p), so the full-trajectory timescale is longer than C/K_eff, and the fitted "
            "inertia absorbs the slow start."
        )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
