"""Dynamical instability: runaway gradients or importance ratios, oscillation, reward collapse.

Rules (thresholds in :class:`~grpofit.diagnostics.thresholds.Thresholds`):

- reward collapse (:func:`grpofit.fitting.analysis.confirmed_collapse`) -> fail, with the break
  step; a collapse the reward recovered from (back in its plateau band to the end) -> warn, with
  the collapse and recovery steps (docs/diagnostics.md says why);
- ``grad_norm``, importance-sampling ratio, clip fraction: a sustained rise of the rolling
  median to ``rise_fail`` x the early median -> fail, to ``rise_warn`` x -> warn
  (:func:`grpofit.fitting.collapse.find_rise`); the first precursor spike (``spike_factor`` x) before the
  rise is reported too; a clip fraction must also reach ``clip_min_level``;
- an isolated point ``spike_warn`` x above the baseline, without a sustained rise -> warn;
- the oscillator fit preferred with a *decided* underdamped regime -> warn, and fail when the
  damping ratio is at or below ``oscillation_fail_zeta``.

Never unknown: the reward itself is always checked for collapse and oscillation.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, Verdict, fmt, model_param, worst
from grpofit.fitting.collapse import default_window, early_baseline, rolling_median

_METRICS = (("grad_norm", "grad_norm"), ("is_ratio", "importance ratio"), ("clip_ratio", "clip fraction"))


def _rise_check(ctx: Context, role: str):
    """(status, sentence, start step) for one positive metric, or None when absent/quiet."""
    th = ctx.th
    series = ctx.series(role)
    if series is None:
        return None
    s, v = series
    col = ctx.roles[role]
    rise = ctx.rise(s, v)
    if rise is not None and role == "clip_ratio" and rise.level < th.clip_min_level:
        rise = None
    if rise is not None:
        status = "fail" if rise.ratio >= th.rise_fail else "warn"
        text = f"{col} x{rise.ratio:.1f} above its early median {fmt(rise.baseline)} from step {rise.step:g}"
        if rise.precursor_step is not None:
            text += f" (first spike x{rise.precursor_ratio:.1f} at step {rise.precursor_step:g})"
        return status, text, rise.first_step, {"rise": rise.summary()}
    n = v.size
    # the initial transient (e.g. the first steps' large gradients) is neither baseline nor spike
    base, t0 = early_baseline(v, factor=th.rise_warn, baseline_fraction=th.baseline_fraction)
    if base > 0 and n >= 3:
        # a spike stands out from its early median *and* from its own local level
        local = rolling_median(v, default_window(n))[t0:]
        s, v = s[t0:], v[t0:]
        spiky = (v >= th.spike_warn * base) & (v >= th.spike_warn * local)
        i = int(np.argmax(np.where(spiky, v, -np.inf))) if spiky.any() else int(np.argmax(v))
        r = float(v[i] / base)
        if spiky.any() and (role != "clip_ratio" or v[i] >= th.clip_min_level):
            count = int(spiky.sum())
            text = f"isolated {col} spike x{r:.0f} above its early median at step {s[i]:g} ({count} point(s), no sustained rise)"
            first = float(s[np.flatnonzero(spiky)[0]])
            return "warn", text, first, {"spike_ratio": r}
        if role == "clip_ratio":
            return "pass", f"{col} at most {fmt(float(v[i]))}", None, {}
        return "pass", f"{col} peaks at x{r:.1f} its early median", None, {}
    return "pass", f"{col} has no positive early baseline (median {fmt(base)})", None, {}


def _oscillation(ctx: Context):
    fit = ctx.fit
    osc = getattr(fit, "models", {}).get("oscillator") if fit is not None else None
    if osc is None or getattr(fit, "preferred", None) != "oscillator":
        return None
    if getattr(osc, "regime", None) != "underdamped":
        return None
    zeta = model_param(fit, "oscillator", "damping_ratio")
    ob = getattr(osc, "observed_overshoot", None) or {}
    if zeta is None or not ob.get("significant"):
        return None  # the verdict rests on an overshoot observed in the data (grpofit.fitting.overshoot)
    status = "fail" if zeta <= ctx.th.oscillation_fail_zeta else "warn"
    seen = f", observed overshoot {100 * ob['value']:.0f}% of the gain at step {ob['peak_step']:g}"
    return (
        status,
        f"reward oscillates (underdamped, damping ratio {zeta:.2f}{seen})",
        float(ctx.steps[0]),
        {"damping_ratio": zeta, "observed_overshoot": ob},
    )


def check(ctx: Context) -> Verdict:
    """Judge dynamical instability (module docstring)."""
    found = []  # (status, text, start, details)
    for role, _ in _METRICS:
        r = _rise_check(ctx, role)
        if r is not None:
            found.append(r)
    osc = _oscillation(ctx)
    if osc is not None:
        found.append(osc)
    if ctx.collapse is not None:
        c = ctx.collapse
        status = "warn" if c.recovered else "fail"  # the run is back at its plateau: a warning, not broken
        found.append(
            (status, c.describe() + f", detected at step {c.detected_step:g}", c.step, {"collapse": c.summary()})
        )
    bad = [f for f in found if f[0] in ("warn", "fail")]
    if bad:
        status = worst(f[0] for f in bad)
        start = min(f[2] for f in bad if f[2] is not None)
        details = {}
        for f in bad:
            details.update(f[3])
        return Verdict(status, "; ".join(f[1] for f in bad), start_step=start, details=details)
    checked = [f[1] for f in found]
    absent = [label for role, label in _METRICS if ctx.series(role) is None]
    regime = getattr(getattr(ctx.fit, "models", {}).get("oscillator"), "regime", None) if ctx.fit else None
    text = "no reward collapse"
    if regime:
        text += f", oscillator regime {regime}"
    if checked:
        text += "; " + "; ".join(checked)
    if absent:
        text += "; not logged: " + ", ".join(absent)
    return Verdict("pass", text)
