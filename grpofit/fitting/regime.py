"""When do the data tell the dynamics? The regime rule, the signal test and the reversal test.

- :func:`regime_rule`: the regime from the 95% interval of the damping ratio.
- :func:`signal_test`: is there a rise (or fall) at all? Without one, timescale, inertia and
  damping ratio are not identifiable.
- :func:`reversal_test`: an underdamped call needs the turn-over in the data. If a curve of the
  same law with no turning point inside the observed window (an overdamped or critical
  approach, or an underdamped one whose first peak comes at or after the last step) fits within
  the noise, the data cannot tell an overshoot from an approach. An underdamped call that
  passes it is tested once more with the forcing allowed for
  (:func:`grpofit.fitting.turnover.turnover_test`, called by
  :func:`grpofit.fitting.assemble.oscillator_fit`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grpofit.fitting.intervals import Ctx, thresholds
from grpofit.fitting.profile import Binned, Profile, at_timescales

__all__ = [
    "CRITICAL_BAND",
    "PREFER_DELTA_BIC",
    "regime_rule",
    "information_criteria",
    "signal_test",
    "Signal",
    "reversal_test",
    "Reversal",
    "peak_time",
]

#: ``critical`` only when the whole 95% interval of the damping ratio lies in this band
CRITICAL_BAND = (0.9, 1.1)
#: the oscillator is preferred when ``BIC(exponential) - BIC(oscillator) > PREFER_DELTA_BIC``;
#: a law shows a signal when it beats the constant by more than this
PREFER_DELTA_BIC = 2.0


def regime_rule(ci: tuple[float | None, float | None] | None) -> tuple[str, str]:
    """Regime from the 95% interval of the damping ratio (``None`` end = unbounded).

    ``critical`` if ``[lo, hi]`` lies inside :data:`CRITICAL_BAND`; ``overdamped`` if
    ``lo > 1``; ``underdamped`` if ``hi < 1``; else ``indeterminate``."""
    if ci is None or ci[0] is None and ci[1] is None:
        return "indeterminate", "damping ratio not identifiable"
    lo = ci[0] if ci[0] is not None else 0.0
    hi = ci[1] if ci[1] is not None else math.inf
    text = f"damping ratio 95% interval [{lo:.3g}, {'inf' if math.isinf(hi) else f'{hi:.3g}'}]"
    if CRITICAL_BAND[0] <= lo and hi <= CRITICAL_BAND[1]:
        return "critical", f"{text} inside {list(CRITICAL_BAND)}"
    if lo > 1.0:
        return "overdamped", f"{text} above one"
    if hi < 1.0:
        return "underdamped", f"{text} below one"
    return "indeterminate", f"{text} straddles one"


def information_criteria(ssr: float, n: int, k: int) -> tuple[float | None, float | None]:
    """``AIC = n ln(SSR/n) + 2k``, ``BIC = n ln(SSR/n) + k ln n`` (lmfit's convention)."""
    if not (ssr > 0 and math.isfinite(ssr)):
        return None, None
    ll = n * math.log(ssr / n)
    return ll + 2 * k, ll + k * math.log(n)


@dataclass
class Signal:
    detected: bool
    reason: str
    delta_bic: float | None  #: BIC(constant) - BIC(best law)
    gain_z: float | None  #: |plateau - initial| / HAC stderr
    trend_z: float | None = None  #: the whole run's slope / HAC stderr (model-free), when tested

    def summary(self) -> dict:
        return {
            "detected": self.detected,
            "reason": self.reason,
            "delta_bic_vs_constant": self.delta_bic,
            "gain_z": self.gain_z,
            "trend_z": self.trend_z,
        }


def with_trend(signal: Signal, trend: tuple[float, float] | None) -> Signal:
    """A rise the law's gain test misses may still be in the data: ``trend`` is the whole run's
    ``(z, critical value)`` of a model-free slope test. When the slope is significant, the reason
    says so (a rise, whose plateau the data do not pin down) instead of "no significant rise";
    ``detected`` stays False (the law's plateau and dynamics are still not identified)."""
    if signal.detected or trend is None or signal.gain_z is None and "gain is 0" not in signal.reason:
        return signal
    z, cv = trend
    if not (abs(z) > cv) or "standard errors from 0" not in signal.reason:
        signal.trend_z = z
        return signal
    word = "rise" if z > 0 else "fall"
    gz = "0" if signal.gain_z is None else f"{signal.gain_z:.2g}"
    reason = (
        f"a significant {word} (its slope is {abs(z):.2g} standard errors from 0), but no plateau: the "
        f"law's gain is {gz} standard errors from 0; the data cannot tell the dynamics"
    )
    return Signal(False, reason, signal.delta_bic, signal.gain_z, z)


def signal_test(
    sst: float, n: int, fits: list[tuple[float | None, int]], gain: float | None, gain_se: float | None, cv: float
) -> Signal:
    """A rise (or fall) is *detected* when both hold:

    - the better law beats a constant by more than :data:`PREFER_DELTA_BIC` in BIC
      (``BIC_const = n ln(SST/n) + ln n``; ``fits`` = ``(ssr, k)`` per law), and
    - the gain ``plateau - initial`` is outside ``cv`` HAC standard errors of 0.

    The BIC test catches noise that a flexible law "explains" (an oscillation at the noise
    scale); the gain test catches a slow drift of autocorrelated noise."""
    _, bic_c = information_criteria(sst, n, 1)
    bics = [information_criteria(s, n, k)[1] for s, k in fits if s is not None]
    bics = [b for b in bics if b is not None]
    delta = (bic_c - min(bics)) if (bic_c is not None and bics) else None
    z = (abs(gain) / gain_se) if (gain is not None and gain_se and gain_se > 0) else None
    if delta is not None and delta <= PREFER_DELTA_BIC:
        return Signal(
            False,
            f"no significant rise: no law beats a constant (BIC gain "
            f"{delta:.1f}, needs > {PREFER_DELTA_BIC:g}); the data cannot tell "
            "the dynamics",
            delta,
            z,
        )
    if gain is not None and (z is None and gain == 0 or z is not None and z <= cv):
        zt = "0" if z is None else f"{z:.2g}"
        return Signal(
            False,
            f"no significant rise: the gain is {zt} standard errors from 0 "
            f"(95% needs {cv:.2f}); the data cannot tell the dynamics",
            delta,
            z,
        )
    return Signal(True, "significant rise" if (gain or 0) >= 0 else "significant fall", delta, z)


def peak_time(ts, zeta):
    """Time of the first extremum of an underdamped response, ``pi / w_d`` with
    ``w_d = 2 zeta sqrt(1 - zeta^2) / Ts`` (``inf`` for ``zeta >= 1``)."""
    ts = np.asarray(ts, dtype=float)
    zeta = np.asarray(zeta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        wd = 2.0 * zeta * np.sqrt(np.clip(1.0 - zeta * zeta, 0.0, None)) / ts
        return np.where(zeta < 1.0, np.pi / wd, np.inf)


@dataclass
class Reversal:
    shown: bool
    reason: str
    plateau: tuple[float, float] | None  #: range of the plateaus of the monotone alternatives
    timescale: tuple[float, float] | None
    zeta_hi: float | None  #: largest damping ratio among them (``inf``: inertia 0)
    inertia: tuple[float, float] | None = None  #: range of their inertias ``Ts / (4 zeta^2)``


def reversal_test(prof: Profile, fit_zeta: float, fit_ts: float, b: Binned, ctx: Ctx, f_hat, r) -> Reversal:
    """Is the turn-over of an underdamped fit in the data?

    Alternatives: every profile row with ``zeta >= 1`` and, for ``zeta < 1`` (the grid and the
    fit's own), the best timescale whose first peak ``pi / w_d`` is at or after the last step
    ``t_end`` (``Ts >= 2 zeta sqrt(1 - zeta^2) t_end / pi``: the row itself if it complies,
    else that boundary). The turn-over is *shown* when the best alternative is rejected by the
    profile's sandwich likelihood-ratio threshold. The plateau and timescale ranges of the
    accepted alternatives and of the best ``zeta >= 1`` row, and their inertias, are returned
    for the intervals: the data cannot tell which of them holds."""
    t_end = float(ctx.t[-1])
    tb = ctx.bounds["timescale"]
    lv = ctx.bounds["plateau"]
    finite = np.isfinite(prof.ssr)
    zeta = np.append(prof.zeta[finite], fit_zeta)
    ts = np.append(prof.ts[finite], fit_ts)
    under = zeta < 1.0
    need = under & (peak_time(ts, zeta) < t_end)
    z_b = zeta[need]
    ts_b = np.clip(2.0 * z_b * np.sqrt(1.0 - z_b * z_b) * t_end / np.pi, tb[0], tb[1])
    keep_rows = prof.subset(finite)
    keep_ssr = np.append(keep_rows.ssr, math.inf)  # the fit itself is not an alternative
    mono = {"zeta": [], "ts": [], "plat": [], "init": [], "ssr": [], "g": []}
    ok = ~need[:-1]
    curves = keep_rows.curves is not None
    for key, src in (
        ("zeta", keep_rows.zeta),
        ("ts", keep_rows.ts),
        ("plat", keep_rows.plateau),
        ("init", keep_rows.initial),
        ("ssr", keep_ssr[:-1]),
        ("g", keep_rows.curves if curves else None),
    ):
        if src is not None:
            mono[key].append(src[ok])
    if z_b.size:
        bound = at_timescales(b, z_b, ts_b, lv)
        for key, src in (
            ("zeta", bound.zeta),
            ("ts", bound.ts),
            ("plat", bound.plateau),
            ("init", bound.initial),
            ("ssr", bound.ssr),
            ("g", bound.curves),
        ):
            mono[key].append(src)
    if not curves:
        del mono["g"]
    mono = {k: np.concatenate(v) for k, v in mono.items()}
    good = np.isfinite(mono["ssr"])
    mono = {k: v[good] for k, v in mono.items()}
    if mono["ssr"].size == 0:
        return Reversal(True, "no monotone alternative fits within the bounds", None, None, None)
    scale = float(r @ r) / max(ctx.n - 4, 1)
    d = np.maximum(mono["ssr"] - prof.best_ssr, 0.0)
    cand = np.flatnonzero(d <= ctx.cv**2 * 40.0 * scale)
    accepted = np.zeros(d.size, dtype=bool)
    if cand.size:
        thr = thresholds(
            mono["zeta"][cand],
            mono["ts"][cand],
            mono["plat"][cand],
            mono["init"][cand],
            f_hat,
            r,
            b,
            ctx,
            scale,
            mono["g"][cand] if "g" in mono else None,
        )
        accepted[cand] = d[cand] <= thr
    over = mono["zeta"] >= 1.0
    k_best = int(np.argmin(mono["ssr"]))
    if not accepted.any():
        return Reversal(
            True,
            f"the turn-over is in the data: the best curve without a turning "
            f"point before step {t_end:g} fits worse by dSSR "
            f"{d[k_best]:.3g}",
            None,
            None,
            None,
        )
    use = accepted.copy()
    if over.any():
        use[np.flatnonzero(over)[np.argmin(mono["ssr"][over])]] = True
    plat = (float(mono["plat"][use].min()), float(mono["plat"][use].max()))
    tss = (float(mono["ts"][use].min()), float(mono["ts"][use].max()))
    zeta_hi = float(mono["zeta"][use].max())
    ti = mono["ts"][use] / (4.0 * mono["zeta"][use] ** 2)  # zeta = inf (inertia 0): 0
    inertia = (float(ti.min()), float(ti.max()))
    reason = (
        "turn-over not observed: a curve with no turning point inside the window fits "
        "within the noise, so the data cannot tell an underdamped overshoot from an "
        "overdamped approach"
    )
    return Reversal(False, reason, plat, tss, zeta_hi, inertia)
