"""Exact GRPO on a softmax bandit (docs/theory.md §5), written as a real GRPO log.

The model
---------
Policy ``pi = softmax(theta)`` over ``A`` arms; arms ``0 .. correct-1`` pay reward 1, the rest 0;
reference policy ``pi_ref`` (uniform unless given). The run starts at ``theta = log pi_ref``.
Each step ``n``:

1. every ``K_ref`` steps the sampling policy is refreshed: ``theta_old <- theta``;
2. ``groups`` groups of ``G`` arms are drawn from ``pi_old``; within a group the advantage is
   ``A_i = (r_i - mean r) / (s + eps)`` with ``s`` the **population** std of the group's rewards
   (``advantage="std"``, default; ``"sample_std"`` uses the ``G-1`` std as TRL's ``torch.std``
   does; ``"none"`` leaves ``r_i - mean r``, Dr. GRPO style). ``eps = 1e-4``. A zero-variance
   group has ``r_i = mean r`` for all ``i`` and contributes nothing;
3. policy gradient ``g_pg = (1/N) sum_i w_i (e_{a_i} - pi)`` over the ``N = groups * G`` samples,
   ``w_i = A_i`` by default (**no importance ratio**: because advantages are mean-centred within
   each group the ``-pi`` term cancels, so the reward signal depends only on the stale samples: the
   gradient is frozen at the last refresh, the paper's lag) or ``w_i = A_i pi(a_i)/pi_old(a_i)``
   with ``importance_ratio=True`` (an unclipped PPO ratio, which removes most of the lag);
4. minus ``beta`` times the exact KL gradient ``d KL(pi || pi_ref) / d theta_j = pi_j (log(pi_j /
   pi_ref_j) - KL)``, evaluated at the sampling policy (``kl_at="sampling"``, default: the whole
   gradient is frozen at the last refresh, the paper's lag model; akin to a KL penalty computed at
   rollout time) or at the current policy (``kl_at="current"``: a KL *loss* as in TRL's ``beta`` or
   verl's ``use_kl_loss``; then most of the restoring force has no lag, see :class:`FixedPoint`);
5. heavy-ball momentum: ``v <- mu v + g``, ``theta <- theta + eta v``.

The theory (exact expected gradients for ``group_size=0`` and finite ``G``, the fixed point ``p*``
and the curvature ``K``) lives in :mod:`grpofit.dynamics.bandit`; this module only simulates the
update above and writes the log.

Log columns: ``step`` (1..N), ``reward`` (batch mean of the sampled rewards; ``G=0``: the expected
reward ``p_old`` of the sampling policy), ``reward_std`` (mean over groups of the population std
used in the advantage; ``G=0``: ``sqrt(p_old (1-p_old))``), ``frac_reward_zero_std`` (fraction of
groups with zero std; ``G=0``: 0, the ``G -> infinity`` limit of ``p^G + (1-p)^G``), ``entropy``,
``kl`` (``KL(pi || pi_ref)``), ``grad_norm`` (of ``g`` before momentum), ``expected_reward`` (exact
``p`` of the current policy). Row ``n`` holds the policy *before* update ``n`` (row 1 = the start).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from grpofit.core.errors import UsageError
from grpofit.core.vocabulary import SCHEMAS
from grpofit.dynamics.bandit import (  # the theory; re-exported for existing callers
    ADVANTAGES,
    EPS,
    FixedPoint,
    NoInteriorFixedPoint,
    _advantages,
    _kl_grad,
    _kl_theta,
    _log_ref,
    _log_softmax,
    _noise_force_variance,
    _pg_expected,
    fixed_point,
    group_signal,
    mean_field_gradient,
    plateau_at_group_size,
    surrogate,
)

__all__ = [
    "EPS",
    "COLUMNS",
    "FixedPoint",
    "NoInteriorFixedPoint",
    "BanditRun",
    "group_signal",
    "mean_field_gradient",
    "surrogate",
    "fixed_point",
    "plateau_at_group_size",
    "simulate_bandit",
    "classify_trajectory",
    "write_log",
    "run_simulation",
]

COLUMNS = ("step", "reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "grad_norm", "expected_reward")
SCHEMA = SCHEMAS["bandit"]


#: what the sidecar says where the flow has no interior fixed point (p*, K and D are null)
NO_FIXED_POINT = (
    "no interior fixed point: the expected reward rises to 1 (beta 0, or a KL pull that the "
    "std-normalised push beats near p = 1); p*, K and D are not defined"
)


@dataclass
class BanditRun:
    """One simulated run: the log's columns, its hyperparameters and the measured fixed point."""

    params: dict[str, Any]
    columns: dict[str, np.ndarray]
    fixed: FixedPoint | None
    plateau_exact: float | None
    noise_D: float | None = None
    diverged_at: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def steps(self) -> np.ndarray:
        return self.columns["step"]

    def late_stats(self, fraction: float = 0.25) -> dict[str, float | None]:
        """Mean and variance of ``expected_reward`` and ``reward`` over the last ``fraction`` of rows."""
        n = len(self.steps)
        if n == 0:
            return {"late_mean": None, "late_variance": None, "late_reward_variance": None}
        lo = int(n * (1 - fraction))
        p = self.columns["expected_reward"][lo:]
        r = self.columns["reward"][lo:]
        return {"late_mean": float(p.mean()), "late_variance": float(p.var()), "late_reward_variance": float(r.var())}

    def prediction(self):
        """Closed form + exact recursions at this run's hyperparameters and measured K (split)."""
        from grpofit.dynamics import predict

        if self.fixed is None or self.fixed.curvature <= 0:
            return None
        P = self.params
        k_now = min(max(self.fixed.curvature_current, 0.0), self.fixed.curvature)
        return predict(P["lr"], P["momentum"], P["refresh_interval"], self.fixed.curvature, curvature_current=k_now)

    def summary(self) -> dict[str, Any]:
        """JSON-safe: hyperparameters at the top level (readable as a run config), then results."""
        from grpofit.dynamics._common import _f

        out: dict[str, Any] = {"schema": SCHEMA, **self.params}
        fp = self.fixed
        out.update(
            {
                "fixed_point": None if fp is None else _f(fp.p),
                "plateau_exact": _f(self.plateau_exact),
                "curvature": None if fp is None else _f(fp.curvature),
                "curvature_lagged": None if fp is None else _f(fp.curvature_lagged),
                "curvature_current": None if fp is None else _f(fp.curvature_current),
                "curvature_method": "Jacobian of the mean-field flow at the fixed point, mode that moves p",
                "noise_D": _f(self.noise_D),
                "n_rows": int(len(self.steps)),
                "diverged_at_step": self.diverged_at,
            }
        )
        out.update({k: _f(v) for k, v in self.late_stats().items()})
        pred = self.prediction()
        if fp is not None and len(self.steps):
            noisy = self.params["group_size"] > 0
            growth = None
            if noisy and pred is not None and pred.sawtooth is not None:
                growth = pred.sawtooth.spectral_radius  # the simulator's lag model, K split
            out["trajectory"] = classify_trajectory(self.columns["expected_reward"], fp.p, noisy=noisy, growth=growth)
        if pred is not None:
            s = pred.summary()
            out["predicted"] = {
                "damping_ratio": s["damping_ratio"],
                "regime": s["regime"],
                "stable": s["stable"],
                "timescale": s["timescale"],
                "inertia": s["inertia"],
                "critical_refresh_interval": s["critical_refresh_interval"],
                "exact_sawtooth": s["exact_sawtooth"],
                "exact_fixed_delay": s["exact_fixed_delay"],
                "note": "closed form and exact recursions with K split into lagged and current parts",
            }
            if self.noise_D is not None and pred.stable:
                var = self.noise_D / (2 * self.params["group_size"] * pred.damping * pred.stiffness)
                out["predicted"]["fluctuation_variance"] = _f(var)
        out.update(self.extra)
        out["columns"] = list(self.columns)
        return out

    def report(self) -> list[tuple[str, str]]:
        s = self.summary()
        rows = []
        for k, v in s.items():
            if isinstance(v, dict):
                continue
            rows.append((k, "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))))
        return rows

    def write(self, out: str | Path) -> Path:
        """Write the log (``.csv`` or ``.jsonl``) and ``<out>.meta.json``; returns the meta path."""
        return write_log(self, out)


def simulate_bandit(
    arms: int = 8,
    correct: int = 1,
    lr: float = 0.1,
    momentum: float = 0.0,
    refresh_interval: int = 1,
    group_size: int = 16,
    beta: float = 1.0,
    steps: int = 500,
    seed: int = 0,
    ref: Sequence[float] | None = None,
    importance_ratio: bool = False,
    advantage: str = "std",
    groups: int = 16,
    eps: float = EPS,
    kl_at: str = "sampling",
    measure: bool = True,
    theta0: np.ndarray | None = None,
) -> BanditRun:
    """Simulate GRPO with heavy-ball momentum and a stale sampling policy on a softmax bandit.

    See the module docstring for the exact update. ``group_size=0``: the exact ``G -> inf``
    expected gradient (deterministic). ``measure``: also solve for the fixed point, ``K`` and the
    noise ``D`` (skip it in inner loops). ``theta0``: start here instead of at the reference.
    A run whose parameters leave the float range stops there (``diverged_at``).
    """
    if not 1 <= correct < arms:
        raise UsageError(
            f"need 1 <= correct < arms, got correct={correct}, arms={arms}", fix="e.g. --arms 8 --correct 1"
        )
    if refresh_interval < 1 or int(refresh_interval) != refresh_interval:
        raise UsageError("the refresh interval must be a whole number >= 1", fix="--refresh-interval 1 is on-policy")
    if group_size < 0 or groups < 1 or steps < 1:
        raise UsageError(
            "need group_size >= 0, groups >= 1 and steps >= 1", fix="--group-size 0 is the mean-field limit"
        )
    if not 0 <= momentum < 1 or lr <= 0 or beta < 0:
        raise UsageError("need lr > 0, 0 <= momentum < 1, beta >= 0", fix="check --lr, --momentum and --beta")
    if advantage not in ADVANTAGES:
        raise UsageError(f"unknown advantage {advantage!r}", fix=f"use one of {', '.join(ADVANTAGES)}")
    _kl_theta(None, None, kl_at)
    frozen_kl = kl_at == "sampling"
    kref = int(refresh_interval)
    G = int(group_size)
    rng = np.random.default_rng(seed)
    log_ref = _log_ref(arms, ref)
    theta = log_ref.copy() if theta0 is None else np.asarray(theta0, dtype=float).copy()
    v = np.zeros(arms)
    cols = {c: np.full(steps, np.nan) for c in COLUMNS}
    cols["step"] = np.arange(1, steps + 1, dtype=float)
    is_correct = np.arange(arms) < correct
    N = groups * G
    diverged = None
    for n in range(steps):
        if n % kref == 0:
            theta_old = theta.copy()
            logpi_old = _log_softmax(theta_old)
            pi_old = np.exp(logpi_old)
            p_old = float(pi_old[:correct].sum())
            cdf = np.cumsum(pi_old)
            cdf[-1] = 1.0
            if frozen_kl:
                klg_old, _ = _kl_grad(logpi_old, log_ref)
        logpi = _log_softmax(theta)
        pi = np.exp(logpi)
        klg, kl = _kl_grad(logpi, log_ref)
        if frozen_kl:
            klg = klg_old
        cols["expected_reward"][n] = pi[:correct].sum()
        cols["entropy"][n] = -float(pi @ logpi)
        cols["kl"][n] = kl
        if G == 0:
            pg = _pg_expected(theta, theta_old, correct, 0, importance_ratio, advantage, eps)
            cols["reward"][n] = p_old
            cols["reward_std"][n] = math.sqrt(max(p_old * (1 - p_old), 0.0))
            cols["frac_reward_zero_std"][n] = 0.0
        else:
            a = np.minimum(np.searchsorted(cdf, rng.random((groups, G)), side="right"), arms - 1)
            r = is_correct[a].astype(float)
            A, s, _ = _advantages(r, advantage, eps)
            w = A * np.exp(logpi[a] - logpi_old[a]) if importance_ratio else A
            pg = (np.bincount(a.ravel(), weights=w.ravel(), minlength=arms) - pi * w.sum()) / N
            cols["reward"][n] = r.mean()
            cols["reward_std"][n] = s.mean()
            cols["frac_reward_zero_std"][n] = float(np.mean(s == 0))
        g = pg - beta * klg
        cols["grad_norm"][n] = float(np.sqrt(g @ g))
        v = momentum * v + g
        theta = theta + lr * v
        if not np.all(np.isfinite(theta)) or np.abs(theta).max() > 1e12:
            diverged = n + 1
            cols = {k: c[: n + 1] for k, c in cols.items()}
            break
    params = {
        "arms": int(arms),
        "correct": int(correct),
        "lr": float(lr),
        "momentum": float(momentum),
        "refresh_interval": kref,
        "group_size": G,
        "groups": int(groups),
        "beta": float(beta),
        "steps": int(steps),
        "seed": int(seed),
        "importance_ratio": bool(importance_ratio),
        "advantage": advantage,
        "eps": float(eps),
        "kl_at": kl_at,
        "reference": "uniform" if ref is None else [float(x) for x in np.exp(log_ref)],
    }
    fp = plateau = D = None
    extra: dict[str, Any] = {}
    if measure and beta == 0:
        extra["fixed_point_note"] = NO_FIXED_POINT
    if measure and beta > 0:
        try:
            fp = fixed_point(
                arms,
                correct,
                beta,
                G,
                ref=ref,
                advantage=advantage,
                eps=eps,
                importance_ratio=importance_ratio,
                kl_at=kl_at,
            )
        except NoInteriorFixedPoint:  # the reward rises to 1: simulated all the same, with no p* to measure
            extra["fixed_point_note"] = NO_FIXED_POINT
    if fp is not None:
        try:
            plateau = fp.p if G == 0 else fixed_point(arms, correct, beta, 0, ref=ref, advantage=advantage, eps=eps).p
        except NoInteriorFixedPoint:
            plateau = None
        if G > 0:
            var = _noise_force_variance(
                fp,
                arms=arms,
                correct=correct,
                beta=beta,
                ref=ref,
                group_size=G,
                groups=groups,
                advantage=advantage,
                eps=eps,
                importance_ratio=importance_ratio,
                seed=seed,
            )
            D = lr**2 * G * var  # so that D / G is the variance of the force on e per step
    return BanditRun(params, cols, fp, plateau, D, diverged, extra)


def classify_trajectory(
    p: np.ndarray, p_star: float, tol: float | None = None, *, noisy: bool = False, growth: float | None = None
) -> dict[str, Any]:
    """Label a trajectory of ``p`` around ``p*``: monotone / oscillatory / unstable / diverged.

    ``e = p - p*``; ``tol`` defaults to ``1e-3 |e_0|``. Without noise (``noisy=False``, the
    exact mean-field gradient): ``unstable`` when the largest ``|e|`` over the last quarter
    exceeds ``tol`` and is at least 0.9 of that over the third quarter (no decay: growth, a limit
    cycle or bounded chaos, since the softmax keeps ``p`` in [0, 1]); ``oscillatory``: converging,
    with an overshoot past ``p*`` larger than ``tol``; ``monotone``: converging without overshoot.

    With sampling noise (``noisy=True``) a run that stops decaying may just fluctuate around
    ``p*``: a stationary fluctuation is not instability. ``unstable`` then needs the exact
    per-step ``growth`` factor of the linearised recursion to be at least one and a late
    amplitude above ``tol`` (``growth=None`` with no decay: ``unknown`` rather than a guess);
    a stable run that keeps fluctuating gets
    ``fluctuation = "stationary"`` with its sd, and an overshoot only counts when it exceeds
    both ``tol`` and three sds of that late fluctuation (``sd`` of ``e`` over the last half).
    Also returns the overshoot and the late amplitude (fractions of ``|e_0|``).
    """
    p = np.asarray(p, dtype=float)
    if len(p) < 8 or not np.all(np.isfinite(p)):
        return {
            "label": "diverged" if len(p) and not np.all(np.isfinite(p)) else "unknown",
            "overshoot": None,
            "late_amplitude": None,
        }
    e = p - p_star
    e0 = abs(e[0]) or 1.0
    tol = 1e-3 * e0 if tol is None else tol
    n = len(e)
    late = float(np.abs(e[3 * n // 4 :]).max())
    prev = float(np.abs(e[n // 2 : 3 * n // 4]).max())
    overshoot = float(max(0.0, (-np.sign(e[0]) * e).max()))
    out: dict[str, Any] = {}
    no_decay = late > tol and late >= 0.9 * prev
    if not noisy:
        label = "unstable" if no_decay else ("oscillatory" if overshoot > tol else "monotone")
    else:
        sd = float(np.std(e[n // 2 :]))
        out["late_sd"] = sd / e0
        out["growth_factor"] = growth
        significant = overshoot > max(tol, 3.0 * sd)
        if growth is None and no_decay:
            label = "unknown"
        elif growth is not None and growth >= 1.0 and late > tol:
            label = "unstable"
        else:
            label = "oscillatory" if significant else "monotone"
            if no_decay:
                out["fluctuation"] = "stationary"
    return {"label": label, "overshoot": overshoot / e0, "late_amplitude": late / e0, **out}


# --------------------------------------------------------------------------- output


def _cell(v: float) -> str:
    if not math.isfinite(v):
        return ""
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def write_log(run: BanditRun, out: str | Path) -> Path:
    """Write ``run`` as CSV or JSONL (by suffix) plus ``<out>.meta.json``; returns the meta path.

    NaN cells are empty in CSV and ``null`` in JSONL.
    """
    from grpofit.core.jsonout import dumps
    from grpofit.runtime.atomic import replacing

    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise UsageError(f"cannot tell the log format from {out.name!r}", fix="end --out with .csv or .jsonl")
    names = list(run.columns)
    data = [run.columns[c] for c in names]
    n = len(data[0]) if data else 0
    if suffix == ".csv":
        lines = [",".join(names)]
        lines += [",".join(_cell(col[i]) for col in data) for i in range(n)]
    else:
        lines = []
        for i in range(n):
            row = {}
            for c, col in zip(names, data):
                v = float(col[i])
                row[c] = (int(v) if c == "step" else v) if math.isfinite(v) else None
            lines.append(json.dumps(row))
    meta = out.with_name(out.name + ".meta.json")
    doc = run.summary()
    doc["log"] = out.name
    # whole or not at all: an interrupt or a full disk never leaves a truncated log or sidecar
    with replacing(out, create_parent=False) as tmp_log, replacing(meta, create_parent=False) as tmp_meta:
        tmp_log.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp_meta.write_text(dumps(doc) + "\n", encoding="utf-8")
    return meta


def run_simulation(out: str | Path, **params: Any) -> dict[str, Any]:
    """Simulate, write the log and its sidecar, and return the summary (with ``out`` and ``meta``)."""
    run = simulate_bandit(**params)
    meta = write_log(run, out)
    doc = run.summary()
    doc["out"] = str(out)
    doc["meta"] = str(meta)
    return doc
