"""One rule's answer (:class:`Finding`), its figure panel (:class:`Panel`), and how the rules of a
mode fold into the mode's :class:`~grpofit.diagnostics.base.Verdict`.

The four checks judge the four failure modes; the diagnostic rules (KL and length, truncation,
entropy floors and blow-ups, group statistics, off-policy health, the entropy-reward law, spike
clusters) each add a finding to one mode. A finding carries its own status, evidence sentence,
start step and numbers (the ``rules`` object of a diagnostic in the JSON output) and a panel for
``--plot-dir``. A finding with ``gates=False`` is reported but does not change the mode's status
(the KL/length hacking rules when an eval set decides train-eval decoupling).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from grpofit.diagnostics.base import Detail, Verdict, worst


@dataclass
class Panel:
    """A figure panel: one series, the rule's threshold lines and where the problem starts."""

    title: str
    label: str  #: the column (or derived quantity) drawn
    steps: np.ndarray
    values: np.ndarray
    lines: list[tuple[float, str, str]] = field(default_factory=list)  #: (level, label, colour)
    logy: bool = False
    other: tuple[np.ndarray, np.ndarray, str] | None = None  #: a second series on a twin axis


@dataclass
class Finding:
    """One rule's result."""

    rule: str  #: rule name (``kl_target``, ``truncation``, ...)
    status: str  #: pass | warn | fail | unknown
    evidence: str
    start_step: float | None = None
    details: dict[str, Detail] = field(default_factory=dict)
    gates: bool = True  #: False: reported, but the mode's status ignores it
    panel: Panel | None = None

    def summary(self) -> dict:
        from grpofit.core.jsonout import jsonable

        out: dict[str, Any] = {"status": self.status, "evidence": self.evidence}
        if self.start_step is not None:
            out["start_step"] = float(self.start_step)
        if not self.gates:
            out["gates"] = False
        if self.details:
            out["details"] = jsonable(self.details)
        return out


def fold(base: Verdict, findings: list[Finding]) -> Verdict:
    """The mode's verdict with its rules' findings: the worst gating status wins.

    The evidence lists the failing sentences (the base check's first), then the warning ones, and
    the start step is the earliest of theirs (the first sign of trouble); a passing mode keeps the base check's sentence (each rule's own sentence is in ``rules``), and
    an ``unknown`` base check judged by passing rules puts its reason before theirs.
    """
    if not findings:
        return base
    gating = [f for f in findings if f.gates]
    status = worst([base.status] + [f.status for f in gating])
    if status in ("warn", "fail"):
        parts, starts = [], []
        for level in ("fail", "warn"):
            if base.status == level:
                parts.append(base.evidence)
                starts.append(base.start_step)
            parts += [f.evidence for f in gating if f.status == level]
            starts += [f.start_step for f in gating if f.status == level]
        known = [x for x in starts if x is not None]
        start = min(known) if known else None
    elif base.status == "unknown" and status == "pass":
        parts, start = [base.evidence] + [f.evidence for f in gating if f.status == "pass"], None
    else:
        parts, start = [base.evidence], base.start_step
    causes = (("check",) if base.status == status else ()) + tuple(f.rule for f in gating if f.status == status)
    return replace(
        base,
        status=status,
        evidence="; ".join(p for p in parts if p),
        start_step=start,
        findings=list(base.findings) + list(findings),
        own_status=base.own_status or base.status,
        causes=causes if status in ("warn", "fail") else (),
    )


def sustained(steps: np.ndarray, mask: np.ndarray, min_points: int) -> tuple[float | None, int]:
    """``(first step, length)`` of the longest run of True in ``mask`` (None when shorter than
    ``min_points``, unless it lasts to the end)."""
    best_i, best_n, i, n = -1, 0, 0, mask.size
    while i < n:
        if mask[i]:
            j = i
            while j < n and mask[j]:
                j += 1
            if j - i > best_n or (j == n and j - i >= best_n):
                best_i, best_n = i, j - i
            i = j
        else:
            i += 1
    if best_n == 0:
        return None, 0
    if best_n < min_points and best_i + best_n < n:
        return None, best_n
    return float(steps[best_i]), best_n


def constant(values: np.ndarray) -> bool:
    """A column that never changes (e.g. an entropy logged as 0 throughout) carries no signal."""
    v = values[np.isfinite(values)]
    return v.size == 0 or float(np.ptp(v)) == 0.0
