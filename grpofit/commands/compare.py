"""``grpofit compare A B``: what differs between two runs, or two groups of runs, and what does not.

Each side is one run or a group of runs (paths, folders, glob patterns, ``FILE::RUN``). Every run
is fitted as ``grpofit fit`` does (:func:`grpofit.fitting.analysis.fit_run`). The comparison rests only on
what the fit *publishes* for the oscillator law: each quantity's ``value`` and ``ci95``
(:func:`published`; ``ci95_ls``, the least-squares interval, where the fit widened an inertia or
damping ratio interval for the forcing, both sides of an underdamped fit's, one side of an overdamped one's: a bias two runs share cancels in their
difference, and the test's size is measured on same-settings pairs). Better intervals in the fit therefore make the comparison better without a
change here.

Per quantity (``plateau``, ``timescale``, ``inertia``, ``damping_ratio``):

- one run per side: its value; the standard error is read off its 95% interval on the side that
  faces the other run (``(hi - value) / 1.96`` when the other value is larger, else
  ``(value - lo) / 1.96``), so a skewed interval is used the way it points. An interval with no
  end on that side (or none at all) gives no standard error;
- a group: the mean of its runs' values; standard error ``max(sd / sqrt(n), rms(se_i) / sqrt(n))``
  (the run-to-run scatter, and never less than the runs' own uncertainty allows);
- difference ``b - a``, ``z = difference / sqrt(se_a^2 + se_b^2)``, two-sided p-value from the
  normal distribution (Student's t with ``min(n_a, n_b) - 1`` degrees of freedom when both sides
  are groups), and the 95% interval of the difference;
- verdict: ``differs`` when ``p < 0.05``: a Wald test on the difference of the two estimates
  (one run a side: the normal distribution, each side's standard error from its profile interval
  as above; the test's size is measured on same-settings bandit pairs by
  ``scripts/compare_calibration.py``, see the README); ``same`` when the whole 95% interval of
  the difference lies within the equivalence margin (``margin`` x the scale: the mean gain
  ``|plateau - initial|`` for the plateau, the mean magnitude for the others; two one-sided
  tests at 2.5% each); else ``cannot tell``. Without a standard error: ``differs`` only when
  the two 95% intervals are disjoint (p-value ``null``), else ``cannot tell``.

Every other law ``fit`` fits (the law registry) is compared the same way on its own quantities,
under ``laws`` (:func:`law_differences`); the verdicts and the summary rest on the oscillator.

The document is ``grpofit.compare/1`` (see the README).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from grpofit.core.errors import UsageError
from grpofit.core.numbers import finite as _f
from grpofit.readers.selection import expand_argument

__all__ = [
    "QUANTITIES",
    "MARGIN",
    "Interval",
    "published",
    "resolve_side",
    "compare_fits",
    "compare_paths",
    "law_differences",
]

QUANTITIES = ("plateau", "timescale", "inertia", "damping_ratio")
#: default equivalence margin, as a fraction of each quantity's scale
MARGIN = 0.1
#: the law whose parameters are compared (it carries all four quantities)
LAW = "oscillator"
Z95 = 1.959963984540054


@dataclass
class Interval:
    """One published estimate: value and 95% interval (``None`` ends are unbounded)."""

    value: float | None
    lo: float | None
    hi: float | None
    has_ci: bool

    def se_towards(self, other: float) -> float | None:
        """Standard error on the side facing ``other`` (None when that end is missing)."""
        if self.value is None or not self.has_ci:
            return None
        end = self.hi if other >= self.value else self.lo
        if end is None:
            return None
        return abs(end - self.value) / Z95


def published(fit_doc: dict, quantity: str, law: str = LAW) -> Interval:
    """The fit's published estimate of ``quantity``: the small interface compare rests on.

    ``fit_doc`` is one entry of ``grpofit fit --format json``'s runs list (``FitResult.summary()``).
    """
    p = ((fit_doc.get("models") or {}).get(law) or {}).get("params", {}).get(quantity) or {}
    # a difference between two runs: the least-squares interval where the fit widened it for the
    # forcing (the widening covers the truth; a bias two runs of a recipe share cancels in their
    # difference, and the test's size is measured on same-settings pairs either way)
    ci = p.get("ci95_ls") or p.get("ci95")
    lo, hi = ci if ci else (None, None)
    return Interval(_f(p.get("value")), _f(lo), _f(hi), ci is not None)


# --------------------------------------------------------------------------- reading the sides


@dataclass
class Side:
    label: str
    specs: list[str]
    fits: list[Any] = field(default_factory=list)  #: FitResult per run
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def docs(self) -> list[dict]:
        """Each run's ``grpofit fit`` entry (plateaus marked as bounds where ``fit`` marks them)."""
        cached = self.__dict__.get("_docs")
        if cached is None or len(cached) != len(self.fits):
            from grpofit.fitting.analysis import fit_summary

            cached = self.__dict__["_docs"] = [fit_summary(f) for f in self.fits]
        return cached

    @property
    def collapses(self) -> list[dict]:
        """``{"run", "step", "recovered", "recovered_step"}`` of each run that collapses (the
        collapse ``fit`` names; ``recovered_step`` None unless it recovered)."""
        return [
            {
                "run": f.run,
                "step": f.collapse.step,
                "recovered": bool(f.collapse.recovered),
                "recovered_step": f.collapse.recovered_step if f.collapse.recovered else None,
            }
            for f in self.fits
            if getattr(f, "collapse", None) is not None
        ]

    def summary(self) -> dict:
        return {
            "label": self.label,
            "inputs": list(self.specs),
            "n_runs": len(self.fits),
            "runs": [f.run for f in self.fits],
            "errors": list(self.errors),
            "collapses": self.collapses,
        }


def resolve_side(
    label: str, specs: list[str], *, metric: str | None = None, step: str | None = None, run_pattern: str | None = None
) -> Side:
    """Read and fit every run of one side (paths, folders, globs, ``FILE::RUN``); ``run_pattern``
    (``--run``) keeps the runs it matches (:mod:`grpofit.readers.selection`)."""
    from grpofit.commands.pipeline import fit_paths
    from grpofit.core.errors import GrpofitError
    from grpofit.fitting.analysis import fit_run
    from grpofit.readers import read_path
    from grpofit.readers.selection import matches, no_match

    side = Side(label, list(specs))
    for spec in specs:
        for path in expand_argument(spec):
            base, sep, name = path.partition("::")
            if sep and os.path.isfile(base):
                runs = read_path(base, step=step)
                pick = [r for r in runs if r.name == name or r.name.split("::", 1)[-1] == name]
                if not pick:
                    names = ", ".join(r.name.split("::", 1)[-1] for r in runs[:10])
                    raise UsageError(f"{path}: no run named {name!r} in {base}", fix=f"use one of: {names}")
                for r in pick:
                    if not matches(r, run_pattern):
                        continue
                    try:
                        side.fits.append(fit_run(r, metric=metric))
                    except GrpofitError as e:
                        side.errors.append(e.one_line())
                continue
            try:
                done = fit_paths([path], metric=metric, step=step, run_pattern=run_pattern)
            except UsageError:
                if run_pattern:  # nothing in this path matches: the side as a whole decides below
                    continue
                raise
            side.fits.extend(done.results)
            side.errors.extend(e.error for e in done.errors)
            side.warnings.extend(done.warnings)
    if not side.fits and run_pattern and not side.errors:
        err = no_match(run_pattern, specs)
        raise UsageError(f"{label}: {err.message}", fix=err.fix)
    if not side.fits:
        raise UsageError(
            f"{label}: no run could be fitted from {' '.join(specs)}",
            fix="check the paths (each side needs at least one readable run with a reward column)",
        )
    return side


# --------------------------------------------------------------------------- the statistics


def _group(ivals: list[Interval], towards: float) -> tuple[float | None, float | None, int]:
    """``(value, se, n)`` of one side for one quantity."""
    vals = [iv for iv in ivals if iv.value is not None]
    n = len(vals)
    if n == 0:
        return None, None, 0
    if n == 1:
        return vals[0].value, vals[0].se_towards(towards), 1
    mean = sum(iv.value for iv in vals) / n
    sd = math.sqrt(sum((iv.value - mean) ** 2 for iv in vals) / (n - 1))
    ses = [iv.se_towards(towards) for iv in vals]
    within = math.sqrt(sum(s * s for s in ses) / n) / math.sqrt(n) if all(s is not None for s in ses) else None
    se = max(sd / math.sqrt(n), within) if within is not None else sd / math.sqrt(n)
    return mean, se, n


def _p_two_sided(z: float, df: int | None) -> float:
    if df is None:
        return math.erfc(abs(z) / math.sqrt(2.0))
    from scipy.stats import t as student

    return float(2.0 * student.sf(abs(z), df))


def _crit(df: int | None) -> float:
    if df is None:
        return Z95
    from scipy.stats import t as student

    return float(student.ppf(0.975, df))


def _scale(quantity: str, a_docs: list[dict], b_docs: list[dict], a: float, b: float, law: str = LAW) -> float:
    if quantity == "plateau":
        gains = []
        for d in a_docs + b_docs:
            p0 = published(d, "initial", law).value
            p = published(d, "plateau", law).value
            if p0 is not None and p is not None:
                gains.append(abs(p - p0))
        if gains:
            return sum(gains) / len(gains)
    return 0.5 * (abs(a) + abs(b))


def _bounds(docs: list[dict], quantity: str, law: str = LAW) -> list[str]:
    """The runs whose ``quantity`` ``fit`` states as a bound (still moving past the law's value,
    or a value the data do not pin down)."""
    out = []
    for d in docs:
        p = ((d.get("models") or {}).get(law) or {}).get("params", {}).get(quantity) or {}
        if p.get("kind") in ("lower_bound", "upper_bound"):
            rising = p["kind"] == "lower_bound"
            why = (
                "not identified"
                if p.get("bound_reason") == "unidentified"
                else f"still {'rising' if rising else 'falling'}"
            )
            out.append(f"{d.get('run')} ({why}: at {'least' if rising else 'most'} {p.get('bound'):.3g})")
    return out


def compare_quantity(
    quantity: str, a_docs: list[dict], b_docs: list[dict], margin: float = MARGIN, law: str = LAW
) -> dict:
    """One entry of ``differences`` (module docstring), on ``law``'s published parameters. A
    quantity ``fit`` states as a bound on either side (a run still moving past the law's plateau)
    is not compared: ``cannot tell``."""
    bounds = {side: _bounds(docs, quantity, law) for side, docs in (("A", a_docs), ("B", b_docs))}
    if bounds["A"] or bounds["B"]:
        which = "; ".join(f"{side}: {', '.join(b)}" for side, b in bounds.items() if b)
        out = _undecided()
        out["reason"] = f"a bound, not an estimate ({which}): bounds are not compared"
        return out
    ia = [published(d, quantity, law) for d in a_docs]
    ib = [published(d, quantity, law) for d in b_docs]
    a0 = [iv.value for iv in ia if iv.value is not None]
    b0 = [iv.value for iv in ib if iv.value is not None]
    out = _undecided()
    if not a0 or not b0:
        out["reason"] = "not identified in " + ("A" if not a0 else "B")
        return out
    a_mean, b_mean = sum(a0) / len(a0), sum(b0) / len(b0)
    a, se_a, na = _group(ia, b_mean)
    b, se_b, nb = _group(ib, a_mean)
    diff = b - a
    scale = _scale(quantity, a_docs, b_docs, a, b, law)
    tol = margin * scale
    out.update({"a": a, "b": b, "difference": diff, "n_a": na, "n_b": nb, "margin": tol})
    if na == 1:
        out["a_ci95"] = [ia[0].lo, ia[0].hi] if ia[0].has_ci else None
    if nb == 1:
        out["b_ci95"] = [ib[0].lo, ib[0].hi] if ib[0].has_ci else None
    if se_a is None or se_b is None:
        # no standard error: only disjoint 95% intervals can tell
        disjoint = _disjoint(out.get("a_ci95"), out.get("b_ci95"))
        out["verdict"] = "differs" if disjoint else "cannot tell"
        out["reason"] = (
            "the 95% intervals do not overlap"
            if disjoint
            else "an interval is missing or open on the side that matters"
        )
        return out
    df = min(na, nb) - 1 if na > 1 and nb > 1 else None
    se = math.sqrt(se_a * se_a + se_b * se_b)
    crit = _crit(df)
    lo, hi = diff - crit * se, diff + crit * se
    out["ci95"] = [lo, hi]
    out["p_value"] = _p_value(diff, se, df)
    # a side with one run: nothing measures the run-to-run scatter; the test rests on the
    # fits' profile intervals (requiring disjoint 95% intervals instead would be a test at
    # about 0.6%, with the power that costs)
    out["test"] = "z test on the difference (one run on a side)" if df is None else "Student t on the runs' scatter"
    out["verdict"] = _test_verdict(out["p_value"], lo, hi, tol)
    return out


def _undecided() -> dict[str, Any]:
    """A ``differences`` entry with nothing compared yet: no numbers, verdict ``cannot tell``."""
    return {
        "a": None,
        "b": None,
        "difference": None,
        "ci95": None,
        "p_value": None,
        "verdict": "cannot tell",
    }


def _disjoint(ca, cb) -> bool:
    """Whether two 95% intervals (``[lo, hi]`` or ``None``; an end may be ``None``: open) are
    known not to overlap."""
    if not (ca and cb):
        return False
    (alo, ahi), (blo, bhi) = ca, cb
    return (ahi is not None and blo is not None and ahi < blo) or (bhi is not None and alo is not None and bhi < alo)


def _p_value(diff: float, se: float, df: int | None) -> float:
    """The two-sided p value of the difference (``df=None``: a z test); with no standard error,
    1 for no difference and 0 otherwise."""
    if se == 0:
        return 1.0 if diff == 0 else 0.0
    return _p_two_sided(diff / se, df)


def _test_verdict(p_value: float, lo: float, hi: float, tol: float) -> str:
    """``differs`` below p = 0.05, ``same`` when the 95% interval ``[lo, hi]`` lies within the
    margin ``±tol``, else ``cannot tell``."""
    if p_value < 0.05:
        return "differs"
    if -tol <= lo and hi <= tol:
        return "same"
    return "cannot tell"


def _sentence(quantity: str, d: dict) -> str:
    name = quantity.replace("_", " ")
    if d["a"] is None or d["b"] is None:
        return f"{name}: cannot tell ({d.get('reason', 'not identified')})"
    vals = f"{d['a']:.3g} vs {d['b']:.3g}"
    if d["verdict"] == "differs":
        extra = f"p={d['p_value']:.2g}" if d["p_value"] is not None else d.get("reason", "")
        return f"{name} differs ({vals}, {extra})"
    if d["verdict"] == "same":
        return f"{name} is the same within ±{d['margin']:.3g} ({vals})"
    why = d.get("reason") or "the intervals are too wide to separate them or to call them equal"
    return f"{name}: cannot tell ({vals}; {why})"


def compare_fits(a: Side, b: Side, *, margin: float = MARGIN) -> dict:
    """The ``grpofit.compare/1`` document for two fitted sides."""
    from grpofit.core.vocabulary import SCHEMAS

    a_docs, b_docs = a.docs, b.docs
    diffs = {q: compare_quantity(q, a_docs, b_docs, margin) for q in QUANTITIES}
    differs = [q for q, d in diffs.items() if d["verdict"] == "differs"]
    same = [q for q, d in diffs.items() if d["verdict"] == "same"]
    unclear = [q for q, d in diffs.items() if d["verdict"] == "cannot tell"]

    def names(qs):
        return ", ".join(q.replace("_", " ") for q in qs)

    parts = []
    if differs:
        parts.append(f"B differs from A in {names(differs)}")
    if same:
        parts.append(
            f"{names(same)} the same within {100 * margin:.0f}% of {'its' if len(same) == 1 else 'their'} scale"
        )
    if unclear:
        parts.append(f"cannot tell for {names(unclear)}")
    summary = "; ".join(parts) + ". " + "; ".join(_sentence(q, diffs[q]) for q in QUANTITIES) + "."
    collapse_text = _collapse_sentence(a, b)
    if collapse_text:
        summary = collapse_text + " " + summary
    return {
        "schema": SCHEMAS["compare"],
        "a": a.summary(),
        "b": b.summary(),
        "differences": diffs,
        "summary": summary,
        "law": LAW,
        "laws": law_differences(a_docs, b_docs, margin),
        "margin": margin,
        "method": "published 95% intervals of each fit; one run a side: z test on b - a with each side's standard "
        "error read off its interval on the side facing the other; groups: Student t on the runs' scatter; "
        "'differs' = p < 0.05, 'same' = 95% interval of the difference inside +-margin x scale",
    }


def law_quantities(law) -> tuple[str, ...]:
    """The quantities compared for a law of the registry: the plateau, its parameters in steps
    and its derived quantities (the levels' ``initial`` is the start, not a property of the run)."""
    return ("plateau",) + tuple(law.time_params) + tuple(law.derived_names)


def law_differences(a_docs: list[dict], b_docs: list[dict], margin: float = MARGIN) -> dict:
    """``laws`` of the document: the same comparison on every other law ``fit`` fits (the rows of
    :data:`grpofit.laws.registry.MODELS` besides :data:`LAW`, whose comparison is
    ``differences``), each on its own quantities (:func:`law_quantities`). They are reported,
    not summarised: the verdict of the comparison is the one on :data:`LAW`."""
    from grpofit.laws.registry import MODELS

    return {
        name: {q: compare_quantity(q, a_docs, b_docs, margin, name) for q in law_quantities(law)}
        for name, law in MODELS.items()
        if name != LAW
    }


def _collapse_sentence(a: Side, b: Side) -> str | None:
    """``A collapses (run at step 892); B does not.``: the collapses ``fit`` names, which the
    quantities (fitted on the part before a collapse) do not show."""

    def side(label, sd):
        cs = sd.collapses
        if not cs:
            return f"{label} does not collapse"
        runs = ", ".join(
            f"{c['run']} at step {c['step']:g}"
            + (f", recovered by step {c['recovered_step']:g}" if c["recovered"] else "")
            for c in cs
        )
        return f"{label} collapses ({runs})"

    if not a.collapses and not b.collapses:
        return None
    return f"{side('A', a)}; {side('B', b)}: the quantities compared are those of the part before a collapse."


def compare_paths(
    a_specs: list[str],
    b_specs: list[str],
    *,
    metric: str | None = None,
    step: str | None = None,
    margin: float = MARGIN,
    run_pattern: str | None = None,
) -> tuple[dict, Side, Side]:
    """Read, fit and compare; returns the document and both sides (for plots)."""
    if not (0 < margin < 1):
        raise UsageError(f"--margin {margin}: must lie between 0 and 1", fix="e.g. --margin 0.1 (10% of the scale)")
    a = resolve_side("A", a_specs, metric=metric, step=step, run_pattern=run_pattern)
    b = resolve_side("B", b_specs, metric=metric, step=step, run_pattern=run_pattern)
    return compare_fits(a, b, margin=margin), a, b
