"""Truncated responses: a run whose responses run into the length cap is becoming unstable.

In large published RL scaling studies a truncated-response rate above 10-15% coincides with
instability, while healthy runs stay below 5% on more than 90% of the steps. The rate is verl's
``response_length/clip_ratio``, TRL's ``completions/clipped_ratio``, OpenRLHF's
``rollout/truncated_rate``, or ``truncated_count / rollout_count``.

- ``truncation``: late-run rate ``>= truncation_fail`` having risen from below
  ``truncation_healthy`` (or doubled) -> fail; late-run rate ``>= truncation_warn`` (a run that
  truncates much but steadily) -> warn; otherwise pass, with the share of steps at or below
  ``truncation_healthy``;
- ``length_cap``: without a rate, the mean response length sitting exactly at its maximum (every
  response truncated at the cap) on ``length_cap_share`` of the late steps -> fail.
"""

from __future__ import annotations

import numpy as np

from grpofit.diagnostics.base import Context, fmt, late, onset_to_end
from grpofit.diagnostics.findings import Finding, Panel
from grpofit.fitting.collapse import rolling_median

#: a change of the truncation rate smaller than this (absolute) is "steady"
_MOVE = 0.02


def _rate(ctx: Context) -> Finding | None:
    th = ctx.th
    ts = ctx.series("truncation")
    if ts is None:
        return None
    s, v = ts
    col = ctx.label("truncation")
    w = min(ctx.window, max(3, v.size // 5) | 1)
    lev = rolling_median(v, w)
    nb = max(w, int(th.baseline_fraction * v.size))
    early = float(np.median(v[:nb]))
    late_rate = float(np.median(late(v, th.late_fraction, w)))
    healthy_share = float(np.mean(v <= th.truncation_healthy))
    details = {"column": col, "early": early, "late": late_rate, "share_healthy_steps": healthy_share}
    panel = Panel(
        "truncated responses",
        col,
        s,
        v,
        [
            (th.truncation_healthy, "healthy", "0.5"),
            (th.truncation_warn, "warn", "orange"),
            (th.truncation_fail, "fail", "red"),
        ],
    )
    text = f"{col} {100 * early:.1f}% -> {100 * late_rate:.1f}% ({100 * healthy_share:.0f}% of steps at or below {100 * th.truncation_healthy:g}%)"
    if late_rate >= th.truncation_warn:
        start = onset_to_end(s, lev >= th.truncation_warn)
        rose = early < th.truncation_healthy or late_rate >= 2.0 * early
        if late_rate >= th.truncation_fail and rose:
            return Finding(
                "truncation", "fail", f"responses run into the length cap: {text}", start, details, panel=panel
            )
        why = "high" if rose else "high but falling" if late_rate < early - _MOVE else "steadily high"
        return Finding("truncation", "warn", f"truncation rate {why}: {text}", start, details, panel=panel)
    return Finding("truncation", "pass", text, None, details, panel=panel)


def _cap(ctx: Context) -> Finding | None:
    th = ctx.th
    ls = ctx.series("response_length")
    if ls is None:
        return None
    s, length = ls
    col = ctx.roles["response_length"]
    top = float(np.max(length))
    if not top > 0:
        return None
    at_cap = length >= top * (1.0 - 1e-3)
    k = max(int(round(th.late_fraction * length.size)), 3)
    share = float(at_cap[-k:].mean())
    details = {"column": col, "max_length": top, "late_share_at_max": share}
    panel = Panel("mean response length", col, s, length, [(top, f"max {fmt(top)}", "red")])
    if at_cap.sum() >= 3 and share >= th.length_cap_share:
        # the first step at the cap from which the run stays mostly at the cap
        suffix = np.cumsum(at_cap[::-1])[::-1] / np.arange(at_cap.size, 0, -1)
        hold = np.flatnonzero(at_cap & (suffix >= max(th.length_cap_share, 0.8 * share)))
        start = float(s[hold[0]]) if hold.size else float(s[np.flatnonzero(at_cap)[0]])
        return Finding(
            "length_cap",
            "fail",
            f"{col} pinned at its maximum {fmt(top)} on {100 * share:.0f}% of the late steps "
            f"(every response truncated at the cap) from step {start:g}",
            start,
            details,
            panel=panel,
        )
    return Finding(
        "length_cap",
        "pass",
        f"{col} at its maximum {fmt(top)} on {100 * share:.0f}% of the late steps",
        None,
        details,
        panel=panel,
    )


def rules(ctx: Context) -> list[Finding]:
    """The truncation rate when logged; the length cap otherwise (module docstring)."""
    rate = _rate(ctx)
    if rate is not None:
        return [rate]  # a measured rate says more than the length's maximum: length_cap does not apply
    cap = _cap(ctx)
    return [cap] if cap is not None else []
