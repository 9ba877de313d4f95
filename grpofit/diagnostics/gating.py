"""The CI gate of ``grpofit diagnose``: one verdict per run, used by every output.

A :class:`GatePolicy` (``--fail-on``, ``--min-r2``, ``--strict``) decides what counts as failing.
:func:`judge_entry` applies it to one run's contract entry (a ``diagnose`` JSON run dict): the
run's ``verdict`` becomes the gated verdict and ``gate`` holds whether it fails and why;
:func:`gate_document` gathers the runs into the document's ``gate`` object. The table, the
markdown, the JUnit report, the JSON and the exit code all read these two, so they cannot
disagree.

Rules, in order:

- a mode in ``fail_on`` whose status is ``fail`` fails the run; with ``strict`` a ``warn`` does too;
- a ``fail`` in a mode outside ``fail_on`` does not gate: it counts as a warning
  (the mode's own status stays ``fail``, marked "not gating");
- with ``min_r2``, a run whose preferred fit has R² below it (or no usable fit) fails;
- a reward that is falling (``trend.unexpected``) is a warning of the run (with ``strict``, a
  failure), whatever the modes say: its p* is where it falls to, not a plateau;
- the verdict is ``fail`` when the run fails, else the worst remaining status
  (``warn`` > ``pass`` > ``unknown``; ``unknown`` never fails a run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from grpofit.core.vocabulary import STATUS_RANK as _RANK


@dataclass(frozen=True)
class GatePolicy:
    """What fails the gate: ``fail_on`` modes (None: every mode), ``min_r2``, ``strict``."""

    fail_on: tuple[str, ...] | None = None
    min_r2: float | None = None
    strict: bool = False

    def gates(self, mode: str) -> bool:
        return self.fail_on is None or mode in self.fail_on

    def summary(self) -> dict:
        return {
            "fail_on": None if self.fail_on is None else list(self.fail_on),
            "min_r2": self.min_r2,
            "strict": self.strict,
        }


def preferred_r2(fit: dict | None) -> float | None:
    """R² of the preferred model of a contract ``fit`` object (None without a usable fit)."""
    if not fit:
        return None
    models = fit.get("models") or {}
    model = models.get(fit.get("preferred") or "") or {}
    r2 = model.get("r2")
    return float(r2) if isinstance(r2, (int, float)) and r2 == r2 else None


def _r2_text(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".") if abs(x) < 1 else f"{x:.3g}"


def judge_entry(entry: dict, policy: GatePolicy) -> dict:
    """``{"failed", "verdict", "reasons", "not_gating"}`` of one run entry under ``policy``."""
    diags = entry.get("diagnostics") or {}
    reasons: list[str] = []
    not_gating: list[str] = []
    rest = []
    for mode, d in diags.items():
        status = (d or {}).get("status", "unknown")
        if policy.gates(mode):
            if status == "fail":
                reasons.append(f"{mode} fail")
            elif status == "warn" and policy.strict:
                reasons.append(f"{mode} warn (--strict)")
            rest.append(status)
        elif status == "fail":
            not_gating.append(mode)
            rest.append("warn")
        else:
            rest.append(status)
    trend = entry.get("trend") or {}
    if trend.get("unexpected") and trend.get("direction") == "falling":
        rest.append("warn")
        if policy.strict:
            reasons.append("reward falling (--strict)")
    if policy.min_r2 is not None:
        r2 = preferred_r2(entry.get("fit"))
        if r2 is None:
            reasons.append(f"no usable fit for --min-r2 {policy.min_r2:g}")
        elif r2 < policy.min_r2:
            reasons.append(f"R² {_r2_text(r2)} below --min-r2 {policy.min_r2:g}")
    verdict = "fail" if reasons else max(rest, key=_RANK.__getitem__, default="unknown")
    if verdict == "fail" and not reasons:  # cannot happen: a fail that gates has a reason
        verdict = "warn"
    return {"failed": bool(reasons), "verdict": verdict, "reasons": reasons, "not_gating": not_gating}


def apply_policy(entry: dict, policy: GatePolicy) -> dict:
    """Write the gated ``verdict`` and the ``gate`` object into ``entry`` (in place); returns it.

    ``status_verdict`` keeps the worst status of the modes, whatever gates.
    """
    judged = judge_entry(entry, policy)
    statuses = [(d or {}).get("status", "unknown") for d in (entry.get("diagnostics") or {}).values()]
    entry["status_verdict"] = max(statuses, key=_RANK.__getitem__, default="unknown")
    entry["verdict"] = judged["verdict"]
    entry["gate"] = {"failed": judged["failed"], "reasons": judged["reasons"], "not_gating": judged["not_gating"]}
    return entry


def run_gate(entry: dict, policy: GatePolicy | None = None) -> dict:
    """The ``gate`` object of an entry (judging it now when it has none)."""
    g = entry.get("gate")
    if isinstance(g, dict) and "failed" in g:
        return g
    judged = judge_entry(entry, policy or GatePolicy())
    return {"failed": judged["failed"], "reasons": judged["reasons"], "not_gating": judged["not_gating"]}


def gate_document(entries: Iterable[dict], policy: GatePolicy, errors: Iterable[dict] = ()) -> dict:
    """The document's ``gate``: ``passed``, ``failed_runs`` (contract), ``reasons`` per failed run,
    the policy, and ``reason``: one sentence saying why it failed (None when it passed)."""
    failed_runs: list[str] = []
    reasons: dict[str, list[str]] = {}
    for entry in entries:
        g = run_gate(entry, policy)
        if g["failed"]:
            failed_runs.append(entry.get("run"))
            reasons[str(entry.get("run"))] = list(g["reasons"])
    errors = list(errors)
    parts = []
    if failed_runs:
        parts.append(f"{len(failed_runs)} run{'s' if len(failed_runs) != 1 else ''} failed")
    if errors:
        parts.append(f"{len(errors)} run{'s' if len(errors) != 1 else ''} could not be read or judged")
    return {
        "passed": not parts,
        "failed_runs": failed_runs,
        "reasons": reasons,
        "reason": "; ".join(parts) or None,
        "policy": policy.summary(),
    }


def reason_lines(doc: dict) -> list[str]:
    """``run: reason; reason`` for every run that failed the gate (for the table and markdown)."""
    gate = doc.get("gate") or {}
    return [f"{run}: {'; '.join(rs)}" for run, rs in (gate.get("reasons") or {}).items()]


def gate_line(doc: dict) -> str:
    """``Gate: passed`` or ``Gate: failed (why)``, from the document's ``gate`` object."""
    gate = doc.get("gate") or {}
    if gate.get("passed"):
        return "Gate: passed"
    return f"Gate: failed ({gate.get('reason') or 'see the runs'})"


def check_modes(modes: Iterable[str], known: Iterable[str], option: str = "--fail-on") -> tuple[str, ...]:
    """``modes`` validated against ``known`` (a :class:`~grpofit.core.errors.UsageError` names the option)."""
    from grpofit.core.errors import UsageError

    modes = tuple(modes)
    known = tuple(known)
    bad = [m for m in modes if m not in known]
    if bad:
        raise UsageError(f"{option}: unknown mode(s) {', '.join(bad)}", fix="valid modes: " + ", ".join(known))
    return modes


__all__ = ["GatePolicy", "judge_entry", "apply_policy", "gate_document", "gate_line", "reason_lines", "check_modes"]
