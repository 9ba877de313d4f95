"""Train-eval decoupling (reward hacking): the train reward keeps rising, the eval does not.

The eval metric is sparse (every ``test_freq`` steps); the train reward's rolling median is read
at the eval steps, both before any reward collapse. With ``n`` eval points (``< eval_min_points``
-> unknown), eval levels are medians of ``max(3, n // 4)`` points (start, middle, end) and the
eval peak is the maximum of the eval's rolling median; ``sd`` are the sds of those medians.

- **fail**, eval falls: ``peak - end >= max(eval_drop * eval gain, eval_noise_k * sd,
  eval_fall_min * peak)`` while the train reward over the same steps does not fall (its medians
  over the steps of the peak's window and of the last ``k`` evals, by more than ``eval_noise_k``
  of their standard errors); the sentence quotes those windows' medians and names their steps
  (no value "at step S" that is not the value at S); the last term keeps a flat benchmark (no
  gain, tiny noise: a large eval set far from the training data) from "falling" by a point;
- **warn**, eval stalls: the train still makes ``>= eval_stall_share`` of its gain in the second
  half (significantly), and the eval's second-half gain is below a quarter of what the same share
  of its first-half gain would give (by more than ``eval_noise_k`` sds);
- **warn**, the eval's rate or plateau diverges from the train reward's: with ``>= eval_fit_points``
  eval points, :func:`grpofit.diagnostics.evals.divergence` on 95% profile intervals: the whole
  interval of eval timescale / train timescale below ``1 / eval_timescale_ratio`` (saturates
  early), or, independently of the rates, the eval's plateau as a share of its headroom (0-1
  metrics) wholly below ``1 / eval_plateau_ratio`` of the train reward's (it levels off low);
- otherwise pass, with the timescales and gains as evidence.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, Verdict, fmt, quick_exponential
from grpofit.diagnostics.evals import divergence, divergence_text
from grpofit.fitting.collapse import noise_sd, rolling_median


def check(ctx: Context) -> Verdict:
    """Judge train-eval decoupling (module docstring)."""
    th = ctx.th
    es = ctx.series("eval_reward", before_collapse=True)
    if es is None:
        col = ctx.roles.get("eval_reward")
        n = 0 if col is None else int(np.isfinite(ctx.run.metrics[col]).sum())
        return Verdict("unknown", "no eval metric" if col is None else f"{col} has only {n} point(s)")
    s, e = es
    col = ctx.roles["eval_reward"]
    inside = s <= ctx.end_step  # an eval before the first train step is the baseline
    s, e = s[inside], e[inside]
    n = s.size
    if n < th.eval_min_points:
        return Verdict("unknown", f"{col} has only {n} point(s) within the train reward's steps")
    k = max(3, n // 4)
    m = n // 2
    sd_e = max(noise_sd(e), 1e-9) * 1.25 / np.sqrt(k)
    e0, e_end = float(np.median(e[:k])), float(np.median(e[-k:]))
    e_mid = float(np.median(e[max(0, m - k // 2) : m - k // 2 + k]))
    lev_e = rolling_median(e, min(k, 5) | 1)
    pk = int(np.argmax(lev_e))
    e_peak = float(max(lev_e[pk], e0))

    tr = np.interp(s, ctx.steps, ctx.level)
    sd_t = max(ctx.noise, 1e-9) * 1.25 / np.sqrt(ctx.window)
    t0, t_mid, t_end = float(tr[0]), float(tr[m]), float(tr[-1])
    t_gain = t_end - t0
    e_gain = e_end - e0
    details = {"eval_points": n, "eval_gain": e_gain, "train_gain": t_gain}

    # eval falls from its peak while train does not fall; every number quoted is the median of
    # the points of a named window of steps, the train reward's over the same steps
    fall = e_peak - e_end
    fall_thr = max(
        th.eval_drop * max(e_peak - e0, 0.0), th.eval_noise_k * sd_e * np.sqrt(2.0), th.eval_fall_min * abs(e_peak)
    )
    h = (min(k, 5) | 1) // 2
    peak_win = (0, k - 1) if e0 > lev_e[pk] else (max(0, pk - h), min(n - 1, pk + h))
    end_win = (n - k, n - 1)
    t_a, se_a = _train_over(ctx, s[peak_win[0]], s[peak_win[1]])
    t_b, se_b = _train_over(ctx, s[end_win[0]], s[end_win[1]])
    train_after = t_b - t_a if np.isfinite(t_a) and np.isfinite(t_b) else t_end - float(tr[pk])
    train_thr = -th.eval_noise_k * (np.hypot(se_a, se_b) if np.isfinite(t_a) and np.isfinite(t_b) else sd_t)
    if peak_win[1] < end_win[0] and fall >= fall_thr and train_after >= train_thr:
        return Verdict(
            "fail",
            f"{col} falls from {fmt(e_peak)} {_span(s, peak_win)} to {fmt(e_end)} {_span(s, end_win)} "
            f"while the train reward goes {fmt(t_a)} -> {fmt(t_b)} over the same steps (medians)",
            start_step=float(s[peak_win[0]]),
            details=details,
        )

    # eval stalls in the second half while train keeps rising
    t2 = t_end - t_mid
    share = t2 / t_gain if t_gain > 0 else 0.0
    e1 = e_mid - e0
    coupled = max(e1, 0.0) * share / max(1.0 - share, 1e-6) if share < 1 else max(e1, 0.0)
    e2 = e_end - e_mid
    if (
        share >= th.eval_stall_share
        and t2 > th.eval_noise_k * sd_t
        and e2 < 0.25 * coupled
        and coupled - e2 > th.eval_noise_k * sd_e * np.sqrt(2.0)
    ):
        return Verdict(
            "warn",
            f"{col} stalls from step {s[m]:g} ({fmt(e_mid)} -> {fmt(e_end)}) while the train reward still gains "
            f"{fmt(t2)} ({100 * share:.0f}% of its gain)",
            start_step=float(s[m]),
            details=details,
        )

    text = f"{col} gain {fmt(e_gain)} vs train {fmt(t_gain)} over steps {s[0]:g}-{s[-1]:g}"
    if n >= th.eval_fit_points:
        qe = quick_exponential(s, e)
        qt = quick_exponential(*ctx.pre)
        if qe is not None and qt is not None:
            details.update(
                eval_timescale=qe.timescale,
                train_timescale=qt.timescale,
                eval_fitted_gain=qe.gain,
                train_fitted_gain=qt.gain,
            )
            text = (
                f"eval timescale {fmt(qe.timescale)} vs train {fmt(qt.timescale)} steps; "
                f"fitted eval gain {fmt(qe.gain)} vs train {fmt(qt.gain)} ({col}, {n} points)"
            )
        # the eval's rate or plateau diverging from the train reward's, judged on 95% intervals
        d = divergence(
            s,
            e,
            *ctx.pre,
            ratio=th.eval_timescale_ratio,
            plateau_ratio=th.eval_plateau_ratio,
            names=(col, ctx.roles.get("reward") or ""),
        )
        if d is not None:
            details["divergence"] = d
            if d["diverges"]:
                Te = details.get("eval_timescale") or 0.0
                return Verdict(
                    "warn",
                    f"{col} {divergence_text(d)} ({text})",
                    start_step=float(s[0] + 3 * Te) if Te else float(s[-1]),
                    details=details,
                )
    return Verdict("pass", text, details=details)


def _train_over(ctx: Context, a: float, b: float) -> tuple[float, float]:
    """The median of the train reward (before any collapse) at steps ``a .. b`` and its standard error."""
    st, v = ctx.pre
    inside = (st >= a) & (st <= b)
    c = int(inside.sum())
    if c == 0:
        return float("nan"), float("nan")
    return float(np.median(v[inside])), max(ctx.noise, 1e-9) * 1.25 / np.sqrt(c)


def _span(s: np.ndarray, win: tuple[int, int]) -> str:
    """``at step 50`` or ``(median of the evals at steps 1-100)``."""
    i, j = win
    if i == j:
        return f"at step {s[i]:g}"
    return f"(median of the {j - i + 1} evals at steps {s[i]:g}-{s[j]:g})"
