"""What the four checks share: the verdict type, the per-run context and cheap helpers.

The checks never refit the reward with bootstrap; the entropy and eval curves get one
:func:`quick_exponential` (a grid over the timescale with the two linear parameters solved in
closed form), which costs about a millisecond for a thousand points.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Mapping, Sequence, Union

import numpy as np

from grpofit.core.vocabulary import MODES, STATUS_RANK, STATUSES  # noqa: F401  (re-exported)
from grpofit.fitting.collapse import Collapse, default_window, find_rise, noise_sd, rolling_median

if TYPE_CHECKING:  # names for the annotations only (no import cycle, nothing loaded at run time)
    from grpofit.core.runs import Run
    from grpofit.diagnostics.findings import Finding
    from grpofit.diagnostics.thresholds import Thresholds
    from grpofit.fitting.results import FitResult

#: one value of a verdict's or a finding's ``details`` (the numbers behind the evidence): a number,
#: a flag, a text, nothing, or a list or a string-keyed dict of them (a collapse's or a rise's
#: ``summary()``, an interval); numpy scalars too, which the JSON makes plain
#: (:func:`grpofit.core.jsonout.jsonable`)
Detail = Union[float, int, bool, str, None, np.generic, Sequence["Detail"], Mapping[str, "Detail"]]


@dataclass
class Verdict:
    """One diagnostic's answer: a status and one sentence of evidence."""

    status: str  #: pass | warn | fail | unknown
    evidence: str  #: one sentence with the numbers and the step where the problem starts
    start_step: float | None = None  #: where the problem starts (warn/fail), when known
    details: dict[str, Detail] = field(default_factory=dict)  #: numbers behind the evidence
    findings: list[Finding] = field(default_factory=list)  #: the mode's rules
    own_status: str | None = None  #: the check's own status before its rules were folded in (None: ``status``)
    #: what gives the status (warn/fail): ``"check"`` (the mode's own check) and/or the rules
    #: (``"truncation"``, ``"length_cap"``, ...) at that status; filled by :func:`causes_of`
    causes: tuple[str, ...] = ()

    def summary(self) -> dict:
        from grpofit.core.jsonout import jsonable

        out: dict[str, Any] = {"status": self.status, "evidence": self.evidence}
        if self.start_step is not None:
            out["start_step"] = float(self.start_step)
        if self.details:
            out["details"] = jsonable(self.details)
        if self.findings:
            out["rules"] = {f.rule: f.summary() for f in self.findings}
        return out


def causes_of(verdict: "Verdict") -> tuple[str, ...]:
    """What gives a warn/fail verdict its status: ``"check"`` and/or the names of its rules at
    that status (empty for pass and unknown)."""
    if verdict.status not in ("warn", "fail"):
        return ()
    return verdict.causes or ("check",)


def worst(statuses) -> str:
    """``fail > warn > pass``; ``unknown`` only when nothing else was judged."""
    best = "unknown"
    for s in statuses:
        if STATUS_RANK[s] > STATUS_RANK[best]:
            best = s
    return best


def fmt(x: float | None, digits: int = 3) -> str:
    """A short number for evidence sentences."""
    if x is None or not np.isfinite(x):
        return "n/a"
    return f"{x:.{digits}g}"


def late(values: np.ndarray, fraction: float, window: int) -> np.ndarray:
    """The last ``fraction`` of the points, at least ``window`` of them."""
    k = max(int(round(fraction * values.size)), window, 1)
    return values[-k:]


def onset_to_end(steps: np.ndarray, mask: np.ndarray) -> float | None:
    """First step of the stretch of ``mask`` that lasts to the end; else of the first True."""
    if not mask.any():
        return None
    if mask[-1]:
        off = np.flatnonzero(~mask)
        return float(steps[off[-1] + 1]) if off.size else float(steps[0])
    return float(steps[np.flatnonzero(mask)[0]])


@dataclass
class QuickFit:
    """``y = plateau - (plateau - initial) exp(-(t - t0) / timescale)`` by grid + linear solve."""

    plateau: float
    initial: float
    timescale: float
    r2: float
    gain: float  #: fitted change over the observed range (end minus start)
    at_bound: bool  #: the timescale sits at the edge of the grid (a step or a straight line)


@dataclass
class ExponentialGrid:
    """``y = a + b exp(-t/T)`` (``t`` from the first step) on a log grid of timescales ``T``,
    ``a`` and ``b`` solved in closed form at each: arrays over the grid, ``k`` the best."""

    t: np.ndarray  #: the steps, from the first
    span: float
    grid: np.ndarray  #: the timescales
    e_mean: np.ndarray  #: mean of exp(-t/T) over the points, per T
    e_var: np.ndarray  #: sum of its squared deviations per T (inf where it has none)
    a: np.ndarray
    b: np.ndarray
    sse: np.ndarray  #: squared error per T (at least 1e-300)
    sst: float  #: squared deviations of y from its mean
    k: int
    residuals: np.ndarray  #: of the best T, from y's mean


def exponential_grid(steps: np.ndarray, values: np.ndarray, n_grid: int) -> ExponentialGrid | None:
    """For each ``T`` on a log grid from half the step spacing to 5x the span the model
    ``a + b exp(-t/T)`` is linear in ``(a, b)``: their least squares and squared error, all at
    once; None when the steps do not advance. The one grid fit of :func:`quick_exponential` and
    :func:`grpofit.diagnostics.evals.profile_fit`.

    The checks of one run ask for the same series' grid two or three times (the eval series by
    the decoupling check and by the eval table, the train reward over an eval's steps by each):
    the last few grids are kept, keyed by the series' bytes, and handed out again (read-only)."""
    t = np.asarray(steps, float)
    y = np.asarray(values, float)
    if t.ndim != 1 or t.shape != y.shape:
        return _exponential_grid(t, y, n_grid)
    return _cached_grid(t.tobytes(), y.tobytes(), int(n_grid))


@functools.lru_cache(maxsize=8)
def _cached_grid(t: bytes, y: bytes, n_grid: int) -> ExponentialGrid | None:
    g = _exponential_grid(np.frombuffer(t), np.frombuffer(y), n_grid)
    if g is not None:
        for a in vars(g).values():
            if isinstance(a, np.ndarray):
                a.flags.writeable = False  # shared by every caller that asks for this series
    return g


def _exponential_grid(t: np.ndarray, y: np.ndarray, n_grid: int) -> ExponentialGrid | None:
    t = t - t[0]
    span = float(t[-1])
    if span <= 0:
        return None
    dt = float(np.median(np.diff(t)))
    grid = np.geomspace(max(0.5 * dt, span / 2000.0), 5.0 * span, n_grid)
    e = np.exp(-t[:, None] / grid[None, :])
    em = e.mean(axis=0)
    ec = e - em
    ym = y.mean()
    yc = y - ym
    var = np.einsum("ij,ij->j", ec, ec)
    ok = var > 1e-300
    var = np.where(ok, var, np.inf)
    cov = yc @ ec
    b = np.where(ok, cov / var, 0.0)
    a = ym - b * em
    sst = float(yc @ yc)
    sse = np.maximum(sst - cov**2 / var, 1e-300)
    k = int(np.argmin(sse))
    return ExponentialGrid(t, span, grid, em, var, a, b, sse, sst, k, yc - b[k] * ec[:, k])


def quick_exponential(steps: np.ndarray, values: np.ndarray, *, n_grid: int = 48) -> QuickFit | None:
    """Least-squares single exponential without bootstrap (:func:`exponential_grid`); None below
    4 points."""
    if np.size(steps) < 4:
        return None
    g = exponential_grid(steps, values, n_grid)
    if g is None:
        return None
    k = g.k
    a, b, T = float(g.a[k]), float(g.b[k]), float(g.grid[k])
    r2 = 1.0 - float(g.sse[k]) / g.sst if g.sst > 0 else 0.0
    gain = -b * (1.0 - np.exp(-g.span / T))
    return QuickFit(plateau=a, initial=a + b, timescale=T, r2=r2, gain=float(gain), at_bound=k in (0, n_grid - 1))


def model_param(fit: FitResult | None, model: str, name: str) -> float | None:
    """``fit.param(name, model).value`` as a float, or None (no fit, a failed fit, not finite)."""
    try:
        est = fit.param(name, model)
    except AttributeError:  # no fit
        return None
    v = None if est is None else est.value
    return float(v) if v is not None and np.isfinite(v) else None


@dataclass
class Context:
    """One run, ready to be judged: its roles, the reward (full and before any collapse), the fit."""

    run: Run
    roles: dict[str, str | None]
    reward_column: str
    steps: np.ndarray  #: reward steps, whole run
    values: np.ndarray  #: reward values, whole run
    collapse: Collapse | None
    fit: FitResult | None  #: the fit of the part before the collapse (None: no fit)
    group_size: int | None
    th: Thresholds
    eval_columns: tuple[str, ...] = ()  #: every eval series judged (several benchmarks)

    @cached_property
    def window(self) -> int:
        return default_window(self.steps.size)

    @cached_property
    def level(self) -> np.ndarray:
        """Rolling median of the reward over the whole run."""
        return rolling_median(self.values, self.window)

    @cached_property
    def noise(self) -> float:
        return noise_sd(self.values)

    @property
    def end_step(self) -> float:
        """Last step of the healthy part (before the collapse)."""
        return float(self.collapse.step) if self.collapse is not None else float(self.steps[-1])

    def series(self, role: str, *, before_collapse: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
        """Finite ``(steps, values)`` of the column playing ``role``; None when absent (< 3 points).

        Two roles can be derived when their column is absent: ``zero_std_frac`` as one minus
        OpenRLHF's ``dynamic_filtering_pass_rate``, ``truncation`` as ``truncated_count`` over
        ``rollout_count``.
        """
        col = self.roles.get(role)
        if col is None or col not in self.run.metrics:
            derived = self._derived(role)
            if derived is None:
                return None
            s, v = derived
        else:
            s, v = self.run.series(col)
        if before_collapse and self.collapse is not None:
            keep = s < self.collapse.step
            if keep.sum() >= 3:
                s, v = s[keep], v[keep]
        return (s, v) if s.size >= 3 else None

    def rise(self, s: np.ndarray, v: np.ndarray):
        """The sustained rise of a diagnostic series above its early median at the warn factor
        (:func:`grpofit.fitting.collapse.find_rise` with these thresholds), or None."""
        th = self.th
        return find_rise(
            s,
            v,
            factor=th.rise_warn,
            min_duration=th.rise_min_duration,
            baseline_fraction=th.baseline_fraction,
            spike_factor=th.spike_factor,
            lookback=th.precursor_lookback,
        )

    def label(self, role: str) -> str:
        """The column name of ``role``, or how it was derived."""
        col = self.roles.get(role)
        if col is not None:
            return col
        if role == "zero_std_frac" and self.roles.get("filter_pass_rate"):
            return f"1 - {self.roles['filter_pass_rate']}"
        if role == "truncation" and self.roles.get("truncated_count"):
            return f"{self.roles['truncated_count']} / {self.roles['rollout_count']}"
        return role

    def _derived(self, role: str) -> tuple[np.ndarray, np.ndarray] | None:
        r = self.roles
        if role == "zero_std_frac" and r.get("filter_pass_rate") in self.run.metrics:
            s, v = self.run.series(r["filter_pass_rate"])
            scale = 100.0 if v.size and np.nanmax(v) > 1.0 else 1.0  # OpenRLHF logs a percentage
            return s, 1.0 - v / scale
        if (
            role == "truncation"
            and r.get("truncated_count") in self.run.metrics
            and r.get("rollout_count") in self.run.metrics
        ):
            s1, c = self.run.series(r["truncated_count"])
            s2, n = self.run.series(r["rollout_count"])
            common, i1, i2 = np.intersect1d(s1, s2, return_indices=True)
            ok = n[i2] > 0
            return common[ok], c[i1][ok] / n[i2][ok]
        return None

    @cached_property
    def pre(self) -> tuple[np.ndarray, np.ndarray]:
        """Reward before the collapse (the fitted part)."""
        if self.collapse is None:
            return self.steps, self.values
        keep = self.steps < self.collapse.step
        return self.steps[keep], self.values[keep]

    @cached_property
    def reward_gain(self) -> tuple[float, float, bool]:
        """``(start level, end level, significant)`` of the reward before the collapse."""
        s, v = self.pre
        w = min(self.window, max(3, v.size // 4))
        start = float(np.median(v[:w]))
        end = float(np.median(v[-w:]))
        sd = self.noise * 1.25 / np.sqrt(w)
        return start, end, abs(end - start) > 4.0 * sd * np.sqrt(2.0)

    @cached_property
    def reward_timescale(self) -> float | None:
        """Exponential timescale of the reward (the fit's, else a quick fit)."""
        T = model_param(self.fit, "exponential", "timescale")
        if T is not None and T > 0:
            return T
        q = quick_exponential(*self.pre)
        return q.timescale if q is not None and not q.at_bound else None

    @cached_property
    def reward_half_step(self) -> float | None:
        """First step where the reward level reaches half its gain; None without a real gain."""
        start, end, significant = self.reward_gain
        if not significant:
            return None
        s, _ = self.pre
        lev = self.level[: s.size]
        half = start + 0.5 * (end - start)
        hit = np.flatnonzero(lev >= half) if end > start else np.flatnonzero(lev <= half)
        return float(s[hit[0]]) if hit.size else None
