"""One prediction: the closed form, both exact lag models and the finite-group-size section."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from grpofit.core.errors import UsageError
from grpofit.core.vocabulary import SCHEMAS
from grpofit.dynamics._common import _f
from grpofit.dynamics.closed import PAPER_LAG, ClosedForm, closed_form, stationary_variance
from grpofit.dynamics.exact import ExactStability, exact_fixed_delay, exact_sawtooth

__all__ = ["Prediction", "predict", "threshold_ratios"]


@dataclass
class Prediction:
    """Closed form plus the exact discrete answer for one set of hyperparameters."""

    lr: float
    momentum: float
    refresh_interval: float
    curvature: float
    delta: float
    closed: ClosedForm
    fixed: ExactStability | None
    sawtooth: ExactStability | None
    curvature_current: float = 0.0
    group_size: int | None = None
    noise: float | None = None  #: D used for the fluctuation (None: not computable)
    noise_source: str | None = None
    plateau: float | None = None  #: infinite-G plateau p* when known (given or fitted)
    group: dict[str, Any] | None = None  #: finite-G quantities (see predict)
    notes: list[str] = field(default_factory=list)

    # contract fields
    @property
    def mass(self) -> float:
        return self.closed.mass

    @property
    def damping(self) -> float:
        return self.closed.damping

    @property
    def stiffness(self) -> float:
        return self.closed.stiffness

    @property
    def damping_ratio(self) -> float:
        return self.closed.damping_ratio

    @property
    def regime(self) -> str:
        return self.closed.regime

    @property
    def stable(self) -> bool:
        return self.closed.stable

    @property
    def timescale(self) -> float | None:
        return self.closed.timescale

    @property
    def inertia(self) -> float | None:
        return self.closed.inertia

    @property
    def fluctuation_variance(self) -> float | None:
        if self.group_size is None or self.noise is None:
            return None
        return stationary_variance(self.noise, self.group_size, self.damping, self.stiffness)

    def summary(self) -> dict[str, Any]:
        """Contract keys first (``grpofit.predict/1``), then additive sections."""
        c = self.closed
        out: dict[str, Any] = {
            "schema": SCHEMAS["predict"],
            "mass": _f(c.mass),
            "damping": _f(c.damping),
            "stiffness": _f(c.stiffness),
            "damping_ratio": _f(c.damping_ratio),
            "regime": c.regime,
            "stable": bool(c.stable),
            "critical_refresh_interval": _f(c.critical_refresh_interval),
            "timescale": _f(c.timescale),
            "inertia": _f(c.inertia),
            "critical_lr": _f(c.critical_lr),
            "lag_model": PAPER_LAG,
            "inputs": {
                "lr": self.lr,
                "momentum": self.momentum,
                "refresh_interval": self.refresh_interval,
                "curvature": self.curvature,
                "curvature_current": self.curvature_current,
                "delta": self.delta,
                "group_size": self.group_size,
            },
        }
        out["exact_fixed_delay"] = self.fixed.summary() if self.fixed else None
        out["exact_sawtooth"] = self.sawtooth.summary() if self.sawtooth else None
        out["threshold_ratio"] = {k: _f(v) for k, v in threshold_ratios(c, self.fixed, self.sawtooth).items()} or None
        if self.group_size is not None:
            g = {
                "group_size": self.group_size,
                "noise_temperature": 1.0 / self.group_size if self.group_size > 0 else 0.0,
                "noise": _f(self.noise),
                "noise_source": self.noise_source,
                "fluctuation_variance": _f(self.fluctuation_variance),
                "fluctuation_sd": _f(math.sqrt(self.fluctuation_variance)) if self.fluctuation_variance else None,
            }
            g.update({k: (_f(v) if isinstance(v, float) else v) for k, v in (self.group or {}).items()})
            out["group"] = g
        out["notes"] = list(self.notes)
        return out

    def report(self) -> list[tuple[str, str]]:
        """Rows ``(quantity, value)`` for a table."""

        def fmt(v):
            if v is None:
                return "-"
            if isinstance(v, bool):
                return "yes" if v else "no"
            if isinstance(v, float):
                return f"{v:.4g}"
            return str(v)

        c = self.closed
        rows = [
            ("mass M", fmt(c.mass)),
            ("damping C", fmt(c.damping)),
            ("stiffness K_eff", fmt(c.stiffness)),
            ("damping ratio", fmt(c.damping_ratio)),
            ("regime (closed form)", c.regime),
            ("stable (closed form)", fmt(c.stable)),
            ("critical K_ref (closed form)", fmt(c.critical_refresh_interval)),
            ("critical lr (closed form)", fmt(c.critical_lr)),
            ("timescale C/K_eff", fmt(c.timescale)),
            ("inertia M/C", fmt(c.inertia)),
        ]
        for ex in (self.fixed, self.sawtooth):
            if ex is None:
                continue
            name = "fixed delay" if ex.lag_model == "fixed" else "sawtooth"
            rows += [
                (f"{name}: growth per step", fmt(ex.spectral_radius)),
                (f"{name}: stable / regime", f"{fmt(ex.stable)} / {ex.regime}"),
                (f"{name}: critical K_ref", fmt(ex.critical_refresh_interval)),
            ]
        if self.fluctuation_variance is not None:
            rows.append(("Var(e) = D/(2 G C K_eff)", fmt(self.fluctuation_variance)))
        if self.group and self.group.get("plateau_at_group_size") is not None:
            rows.append((f"plateau at G={self.group_size}", fmt(self.group["plateau_at_group_size"])))
        return rows


def predict(
    lr: float,
    momentum: float,
    refresh_interval: float,
    curvature: float,
    group_size: int | None = None,
    noise: float | None = None,
    delta: float = 1.0,
    *,
    plateau: float | None = None,
    curvature_current: float = 0.0,
    bandit: Mapping[str, Any] | None = None,
    exact: bool = True,
) -> Prediction:
    """Closed form + exact discrete stability for heavy-ball GRPO with a lagged policy.

    Closed form (lag ``L = K_ref``, see :func:`closed_form`); exact answers for the fixed delay
    and the sawtooth lag (see :func:`exact_fixed_delay`, :func:`exact_sawtooth`), only for an
    integer ``refresh_interval`` and ``delta = 1`` (step units).

    Group size ``G`` (when given): noise temperature ``1/G`` and ``Var(e) = D / (2 G C K_eff)``
    with ``D = noise`` (the fluctuation is not reported without it).
    With a ``plateau`` (the infinite-G ``p*``) it also reports the finite-G signal factor
    ``s_G(p*) = E_k[s_k^2/(s_k + eps)] / sqrt(p*(1-p*))`` (``k ~ Binomial(G, p*)``, ``s_k`` the
    population std of the group) and the zero-std fraction ``p*^G + (1-p*)^G``; with ``bandit``
    (keys ``beta``, ``arms``, ``correct``, optional ``advantage``) the corrected plateau of the
    softmax bandit at that ``G`` (:func:`grpofit.dynamics.bandit.plateau_at_group_size`).
    """
    cf = closed_form(lr, momentum, refresh_interval, curvature, delta, curvature_current)
    notes: list[str] = []
    fixed = saw = None
    if exact:
        if abs(refresh_interval - round(refresh_interval)) > 1e-9:
            notes.append("exact recursions need an integer refresh interval; skipped")
        else:
            fixed = exact_fixed_delay(lr, momentum, refresh_interval, curvature, curvature_current)
            saw = exact_sawtooth(lr, momentum, refresh_interval, curvature, curvature_current)
            if delta != 1.0:
                notes.append("exact recursions are in optimizer steps (delta = 1)")
    if cf.stable and fixed is not None and saw is not None and not (fixed.stable and saw.stable):
        notes.append("the closed form says stable but an exact lag model does not: trust the exact answer")
    ratios = threshold_ratios(cf, fixed, saw)
    if ratios:
        parts = [
            f"{label} {crit} = {r:.3g}x"
            for label, crit, r in (
                ("exact fixed delay", fixed and fixed.critical_refresh_interval, ratios.get("fixed_delay")),
                ("exact sawtooth", saw and saw.critical_refresh_interval, ratios.get("sawtooth")),
            )
            if r is not None
        ]
        notes.append(
            f"critical refresh interval, computed for these inputs: {', '.join(parts)} the closed "
            f"form's {cf.critical_refresh_interval:.4g} (the ratio depends on mu and eta K; "
            "no fixed factor holds)"
        )
    noise_source = None
    group = None
    if group_size is not None:
        if group_size < 0:
            raise UsageError(f"group size must be >= 0, got {group_size}", fix="pass --group-size G with G >= 1")
        # D is the strength of the forcing in p-space per step; it is not p*(1-p*) (the variance
        # of one binary reward), which would overstate the fluctuation by orders of magnitude
        noise_source = (
            "given"
            if noise is not None
            else ("not given: pass --noise D (e.g. noise_D from grpofit simulate bandit's .meta.json)")
        )
        group = _group_section(group_size, plateau, bandit)
    return Prediction(
        lr=lr,
        momentum=momentum,
        refresh_interval=refresh_interval,
        curvature=curvature,
        delta=delta,
        closed=cf,
        fixed=fixed,
        sawtooth=saw,
        curvature_current=curvature_current,
        group_size=group_size,
        noise=noise,
        noise_source=noise_source,
        plateau=plateau,
        group=group,
        notes=notes,
    )


def threshold_ratios(cf: ClosedForm, fixed: ExactStability | None, saw: ExactStability | None) -> dict[str, float]:
    """Exact critical refresh interval over the closed form's, per lag model (only where both exist)."""
    ck = cf.critical_refresh_interval
    out: dict[str, float] = {}
    if not (ck > 0 and math.isfinite(ck)):
        return out
    for key, ex in (("fixed_delay", fixed), ("sawtooth", saw)):
        if ex is not None and ex.critical_refresh_interval is not None:
            out[key] = ex.critical_refresh_interval / ck
    return out


def _group_section(G: int, plateau: float | None, bandit: Mapping[str, Any] | None) -> dict[str, Any]:
    from grpofit.dynamics import bandit as sim

    out: dict[str, Any] = {}
    if plateau is not None and 0 < plateau < 1 and G > 0:
        sig = sim.group_signal(plateau, G) / sim.group_signal(plateau, 0)
        out["advantage_signal_factor"] = float(sig)
        out["zero_std_fraction"] = float(plateau**G + (1 - plateau) ** G)
    if bandit is not None:
        kw = dict(
            beta=bandit["beta"],
            arms=bandit.get("arms", 8),
            correct=bandit.get("correct", 1),
            advantage=bandit.get("advantage", "std"),
        )
        out["plateau_at_group_size"] = float(sim.plateau_at_group_size(group_size=G, **kw))
        out["plateau_exact"] = float(sim.plateau_at_group_size(group_size=0, **kw))
    return out
