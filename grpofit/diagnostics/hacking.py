"""Reward hacking without an eval set: the KL and the response length give it away.

Three rules, with the thresholds a widely used post-training diagnostics toolkit applies to TRL
logs. They decide train-eval decoupling when the run has no eval series (or one too sparse to
judge: the eval check says ``unknown``); otherwise they are reported but do not gate
(``gates: false``), since the eval itself says whether the train reward transfers.

- ``kl_reward_slope``: over a sliding window of ``hack_window`` points, the reward slope > 0,
  the KL slope > ``kl_slope_min`` per step and KL slope / reward slope > ``kl_reward_slope_ratio``
  in at least ``hack_window / 2`` consecutive windows -> warn (the KL buys little reward), from
  the first such window;
- ``length_correlation``: ``|corr(reward, response length)| > length_corr_warn`` with the length
  moving more than ``length_drift`` from its early median, in the direction that raises the
  reward (corr and drift of the same sign) -> warn; above ``length_corr_strong`` it fails when a
  KL rule also fires (two independent signs of hacking). A reward that falls as the responses
  grow is degradation (truncation, entropy blow-up), not hacking;
- ``kl_target``: where a KL penalty is in use (the KL is logged as a loss term, ``kl_loss`` or
  ``actor/kl_loss``, or a KL coefficient column or config key, TRL ``beta``, verl
  ``kl_loss_coef``, OpenRLHF ``init_kl_coef``, is positive; a bare ``kl`` without either is
  ``unknown``), the late median of the KL above ``kl_target_fail`` -> fail, above
  ``kl_target_warn`` -> warn. ``ppo_kl``/``approx_kl`` measure the step, not the distance to the
  reference, and are never used.
"""

from __future__ import annotations

import re

import numpy as np

from grpofit.diagnostics.base import Context, fmt, late, onset_to_end  # noqa: F401
from grpofit.diagnostics.findings import Finding, Panel, constant, sustained
from grpofit.fitting.collapse import rolling_median

#: step-size KLs (PPO's approximate KL between consecutive policies), not a KL to the reference
_STEP_KL = re.compile(r".*(?:ppo_kl|approx_kl).*")


#: config keys of a KL penalty's coefficient (TRL beta, verl kl_loss_coef / kl_ctrl.kl_coef, OpenRLHF init_kl_coef)
_COEF_KEY = re.compile(r"(?:.*[./])?(?:beta|kl_coef|kl_loss_coef|init_kl_coef|kl_penalty_coef)\Z")
_COEF_COLUMN = re.compile(r".*kl_coef\Z")


def penalty_in_use(ctx: Context, col: str) -> tuple[bool | None, str]:
    """Is a KL penalty in use? ``(answer or None when the logs cannot tell, how we know)``."""
    if "kl_loss" in col or "kl_penalty" in col:
        return True, f"{col} is a loss term"
    for c in ctx.run.numeric_columns():
        if _COEF_COLUMN.match(c):
            v = ctx.run.metrics[c]
            v = v[np.isfinite(v)]
            if v.size:
                return bool(v.max() > 0), f"{c} {fmt(float(v.max()))}"
    config = getattr(ctx.run, "config", None) or {}
    for key, value in config.items():
        if key.endswith("use_kl_loss") and value in (False, "false", "False"):
            continue
        if _COEF_KEY.match(str(key)):
            try:
                x = float(value)
            except (TypeError, ValueError):
                continue
            return x > 0, f"config {key} = {value}"
    return None, "no KL coefficient in the logs or the config"


def _kl(ctx: Context):
    col = ctx.roles.get("kl")
    if col is None or _STEP_KL.match(col):
        return None
    kl = ctx.series("kl")
    if kl is None or constant(kl[1]):
        return None
    return kl[0], kl[1], col


def rolling_slopes(t: np.ndarray, y: np.ndarray, w: int) -> np.ndarray:
    """OLS slope of ``y`` on ``t`` over every window of ``w`` consecutive points (``n - w + 1``
    values), from cumulative sums: O(n) time and memory."""
    t = np.asarray(t, float) - float(t[0])
    y = np.asarray(y, float)

    def wsum(x):
        c = np.concatenate(([0.0], np.cumsum(x)))
        return c[w:] - c[:-w]

    st, sy, stt, sty = wsum(t), wsum(y), wsum(t * t), wsum(t * y)
    den = stt - st * st / w
    return (sty - st * sy / w) / np.where(den > 0, den, np.inf)


def _slopes(ctx: Context, kl, gates: bool) -> Finding:
    th = ctx.th
    ks, kv, col = kl
    s, r = ctx.steps, ctx.values
    inside = (s >= ks[0]) & (s <= ks[-1])
    s, r = s[inside], r[inside]
    k = np.interp(s, ks, kv)
    w = int(th.hack_window)
    if s.size < w + 1 or w < 3:
        return Finding(
            "kl_reward_slope", "unknown", f"fewer than {w + 1} points with both the reward and {col}", gates=gates
        )
    rs, kslope = rolling_slopes(s, r, w), rolling_slopes(s, k, w)
    hit = (rs > 0) & (kslope > th.kl_slope_min) & (kslope > th.kl_reward_slope_ratio * rs)
    starts = s[: s.size - w + 1]
    first, run_length = sustained(starts, hit, max(3, w // 2))
    panel = Panel(
        "KL slope per step (sliding window)",
        f"slope of {col}",
        starts,
        kslope,
        [(th.kl_slope_min, f"{th.kl_slope_min:g}/step", "orange")],
    )
    details = {
        "kl_column": col,
        "windows": int(hit.size),
        "windows_hit": int(hit.sum()),
        "max_kl_slope": float(kslope.max()),
    }
    if first is not None:
        i = int(np.searchsorted(starts, first))
        ratio = kslope[i] / rs[i]
        text = (
            f"{col} climbs {fmt(kslope[i])}/step while the reward climbs {fmt(rs[i])}/step (x{ratio:.0f}) "
            f"from step {starts[i]:g} for {run_length} consecutive windows of {w} points"
        )
        return Finding("kl_reward_slope", "warn", text, float(starts[i]), details, gates, panel)
    return Finding(
        "kl_reward_slope", "pass", f"{col} slope at most {fmt(float(kslope.max()))}/step", None, details, gates, panel
    )


def _length(ctx: Context, kl_found: bool, gates: bool) -> Finding | None:
    th = ctx.th
    ls = ctx.series("response_length")
    if ls is None or constant(ls[1]):
        return None
    s, length = ls
    col = ctx.roles["response_length"]
    r = np.interp(s, ctx.steps, ctx.values)
    if s.size < 10 or np.std(r) == 0:
        return None
    corr = float(np.corrcoef(r, length)[0, 1])
    nb = max(3, int(ctx.th.baseline_fraction * s.size))
    l0 = float(np.median(length[:nb]))
    l1 = float(np.median(late(length, th.late_fraction, 3)))
    drift = (l1 - l0) / l0 if l0 > 0 else 0.0
    lev = rolling_median(length, min(ctx.window, max(3, s.size // 5) | 1))
    moved = np.flatnonzero(np.abs(lev - l0) >= 0.5 * abs(drift) * l0) if drift else np.array([], int)
    start = float(s[moved[0]]) if moved.size else None
    details = {"length_column": col, "corr": corr, "length_start": l0, "length_end": l1, "drift": drift}
    panel = Panel("response length vs reward", col, s, length, other=(ctx.steps, ctx.values, ctx.reward_column))
    text = f"corr(reward, {col}) {corr:+.2f}, length {fmt(l0)} -> {fmt(l1)} ({100 * drift:+.0f}%)"
    # hacking: the reward rises with the length drift (corr and drift of the same sign); a reward
    # that falls as the responses grow (corr < 0, drift > 0) is degradation, judged elsewhere
    if abs(corr) > th.length_corr_warn and abs(drift) > th.length_drift and corr * drift > 0:
        strong = abs(corr) > th.length_corr_strong
        status = "fail" if strong and kl_found else "warn"
        why = "strong, with a KL sign of hacking" if status == "fail" else ("strong" if strong else "moderate")
        return Finding(
            "length_correlation", status, f"reward tracks response length ({why}): {text}", start, details, gates, panel
        )
    return Finding("length_correlation", "pass", text, None, details, gates, panel)


def _target(ctx: Context, kl, gates: bool) -> Finding:
    th = ctx.th
    s, v, col = kl
    used, how = penalty_in_use(ctx, col)
    if not used:
        what = "no KL penalty in use" if used is False else "cannot tell whether a KL penalty is in use"
        return Finding("kl_target", "unknown", f"{what} ({how}); the KL target applies to penalised runs", gates=gates)
    lev = rolling_median(v, min(ctx.window, max(3, v.size // 5) | 1))
    k_late = float(np.median(late(v, th.late_fraction, ctx.window)))
    panel = Panel(
        "KL to the reference",
        col,
        s,
        v,
        [(th.kl_target_warn, "warn", "orange"), (th.kl_target_fail, "fail", "red")],
        logy=bool(np.nanmin(v) > 0),
    )
    details = {"kl_column": col, "kl_late": k_late, "kl_max_level": float(np.max(lev))}
    if k_late > th.kl_target_warn:
        status = "fail" if k_late > th.kl_target_fail else "warn"
        start = onset_to_end(s, lev > th.kl_target_warn)
        return Finding(
            "kl_target",
            status,
            f"{col} {fmt(k_late)} over the late run, above the target {th.kl_target_warn:g}"
            + (f" from step {start:g}" if start is not None else ""),
            start,
            details,
            gates,
            panel,
        )
    return Finding(
        "kl_target",
        "pass",
        f"{col} {fmt(k_late)} over the late run (target {th.kl_target_warn:g})",
        None,
        details,
        gates,
        panel,
    )


def rules(ctx: Context) -> list[Finding]:
    """The three hacking rules that apply to this run's columns (module docstring)."""
    gates = not ctx.eval_columns and ctx.roles.get("eval_reward") is None
    kl = _kl(ctx)
    out = []
    if kl is not None:
        out.append(_slopes(ctx, kl, gates))
        out.append(_target(ctx, kl, gates))
    kl_found = any(f.status in ("warn", "fail") for f in out)
    length = _length(ctx, kl_found, gates)
    if length is not None:
        out.append(length)
    return out
