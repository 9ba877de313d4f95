"""Policy concentration: the entropy collapses while the reward is still far from its plateau.

With ``H0`` the median entropy over the first window (before any reward collapse):

- ``left_half`` = entropy level / ``H0`` at the step where the reward reaches half its gain;
  ``<= entropy_half_fail`` -> fail, ``<= entropy_half_warn`` -> warn;
- ``ratio`` = reward timescale / entropy timescale (one quick exponential fit to the entropy);
  ``>= entropy_ratio_fail`` with the entropy down >= 50% -> fail, ``>= entropy_ratio_warn``
  with the entropy down >= ``entropy_min_drop`` -> warn;
- final entropy ``<= entropy_floor_warn`` x ``H0`` -> warn (near-deterministic policy);
- otherwise pass: a gradual decline during learning is normal. No entropy column -> unknown.
"""

from __future__ import annotations

import numpy as np

from grpofit.collapse import rolling_median
from grpofit.diagnostics.base import Context, Verdict, fmt, quick_exponential, worst


def check(ctx: Context) -> Verdict:
    """Judge policy concentration (module docstring)."""
    th = ctx.th
    es = ctx.series("entropy", before_collapse=True)
    if es is None:
        return Verdict("unknown", "no entropy column")
    s, h = es
    col = ctx.roles["entropy"]
    w = min(ctx.window, max(3, h.size // 5) | 1)
    h0 = float(np.median(h[:w]))
    if not h0 > 0:
        return Verdict("unknown", f"{col} does not start positive ({fmt(h0)}); cannot judge concentration")
    lev = rolling_median(h, w)
    left_end = float(np.median(h[-w:])) / h0
    drop = 1.0 - left_end
    q = quick_exponential(s, h)
    T_h = q.timescale if (q is not None and q.gain < 0 and q.r2 > 0.2) else None
    T_r = ctx.reward_timescale
    half = ctx.reward_half_step
    ratio = T_r / T_h if (T_h and T_r and half is not None) else None
    left_half = float(np.interp(half, s, lev)) / h0 if half is not None else None

    found = []  # (status, text, start)
    if left_half is not None and left_half <= th.entropy_half_warn:
        st = "fail" if left_half <= th.entropy_half_fail else "warn"
        found.append((st, f"{col} down to {100 * left_half:.0f}% of its start {fmt(h0)} by step {half:g}, when the reward is only half-way to its plateau", half))
    if ratio is not None:
        if ratio >= th.entropy_ratio_fail and drop >= 0.5:
            found.append(("fail", f"entropy timescale {fmt(T_h)} vs reward {fmt(T_r)} steps (x{ratio:.1f} faster)", None))
        elif ratio >= th.entropy_ratio_warn and drop >= th.entropy_min_drop:
            found.append(("warn", f"entropy timescale {fmt(T_h)} vs reward {fmt(T_r)} steps (x{ratio:.1f} faster)", None))
    if left_end <= th.entropy_floor_warn:
        found.append(("warn", f"{col} ends at {100 * left_end:.0f}% of its start (near-deterministic policy)", None))

    # where the entropy has lost half of its total drop
    target = h0 * (1.0 - 0.5 * max(drop, 0.0))
    hit = np.flatnonzero(lev <= target)
    mid_step = float(s[hit[0]]) if hit.size and drop > 0 else None
    details = {"entropy_start": h0, "entropy_left_end": left_end, "entropy_left_at_reward_half": left_half,
               "entropy_timescale": T_h, "reward_timescale": T_r, "timescale_ratio": ratio}
    if found:
        status = worst(f[0] for f in found)
        starts = [f[2] for f in found if f[2] is not None] + ([mid_step] if mid_step is not None else [])
        text = "; ".join(f[1] for f in found if f[0] == status)
        return Verdict(status, text, start_step=min(starts) if starts else None, details=details)
    text = f"{col} {fmt(h0)} -> {fmt(h0 * left_end)} ({100 * left_end:.0f}% left)"
    if ratio is not None:
        text += f"; entropy timescale {fmt(T_h)} vs reward {fmt(T_r)} steps"
    if left_half is not None:
        text += f"; {100 * left_half:.0f}% left at the reward's half-gain step {half:g}"
    return Verdict("pass", text, details=details)
