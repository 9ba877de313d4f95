"""Group size ``G`` per run, and the paper's group-size predictions across runs.

``G`` comes from, in order: an explicit argument (``--group-size``), the run's config (TRL
``num_generations``, verl ``actor_rollout_ref.rollout.n``, OpenRLHF ``n_samples_per_prompt``,
``group_size``; flattened dotted keys, ``/`` or ``.`` separated, an optional ``.value`` suffix), or
the run's name (``G8``, ``g_16``, ``num_generations8``, ``group_size=4``, ``n16``).

Predictions tested by :func:`group_size_analysis` (docs/theory.md §3):

- group-size invariance: the fitted plateau and timescale do not depend on ``G``. Per distinct
  ``G`` the runs' values are combined (inverse-variance mean); then a chi-square consistency test
  over all runs, ``chi2 = sum((x_i - xbar_w)^2 / se_i^2)`` with ``k - 1`` dof, and pairwise
  ``z = (x_a - x_b) / sqrt(se_a^2 + se_b^2)`` between the ``G`` groups. ``se_i`` is read off the
  fit's published 95% interval (the larger half-width / 1.96), not the delta-method stderr,
  which is too small for autocorrelated residuals; better intervals in the fit make the test
  better. A p-value of 0.05 or more says "no significant dependence on G" (absence of evidence,
  not proof of invariance);
- the late-run fluctuation of the *policy* scales like ``1/G``: least squares of ``log var`` on
  ``log G`` over runs, slope with its 95% t-interval; ``-1`` is expected. The logged batch-mean
  reward of ``N`` binary rewards carries a sampling variance ``p (1 - p) / N`` that falls with
  the batch by construction, so :func:`policy_fluctuation` measures, per run, in this order: the
  variance of an ``expected_reward`` column (the policy's exact expected reward, e.g. the bandit
  simulator's) around the fitted curve; the logged variance minus ``p (1 - p) / N`` where the
  batch ``N`` is known (config, or the bandit's ``.meta.json``: ``groups x group_size``); else
  the logged variance, labelled as what it is (policy plus sampling noise).

Uses the exponential law's parameters for every run (always fitted, same definitions).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

CONFIG_KEYS = (
    "num_generations",
    "actor_rollout_ref.rollout.n",
    "rollout.n",
    "n_samples_per_prompt",
    "rollout.n_samples_per_prompt",
    "num_samples_per_prompt",
    "group_size",
)

_NAME = re.compile(
    r"(?:^|[^a-z0-9])(?:num_generations|group_size|n_samples|g|n)[_=-]?(\d{1,4})(?![0-9a-z.])",
    re.IGNORECASE,
)


#: a log file's suffix, removed before the name is searched (``run_G4.csv`` -> ``run_G4``)
_LOG_SUFFIX = re.compile(r"\.(csv|tsv|jsonl|json|log|txt|wandb|tfevents)\b", re.IGNORECASE)


@dataclass
class GroupSize:
    """``G`` and where it came from (``argument``, ``config:<key>``, ``name:<match>``), or None."""

    value: int | None
    source: str | None

    def summary(self) -> dict:
        return {"value": self.value, "source": self.source}


def _as_int(v: Any) -> int | None:
    if isinstance(v, Mapping) and "value" in v:
        v = v["value"]
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f.is_integer() and f >= 1 else None


def from_config(config: Mapping[str, Any]) -> GroupSize:
    """``G`` from flattened config keys (module docstring); the most specific key wins."""
    norm = {}
    for key, val in (config or {}).items():
        k = str(key).replace("/", ".")
        if k.endswith(".value"):
            k = k[: -len(".value")]
        norm[k] = (key, val)
    for want in CONFIG_KEYS:
        for k, (orig, val) in norm.items():
            if k == want or k.endswith("." + want):
                g = _as_int(val)
                if g is not None:
                    return GroupSize(g, f"config:{orig}")
    return GroupSize(None, None)


def from_name(name: str) -> GroupSize:
    """``G`` from a run name such as ``grpo_G8_seed1``, ``num_generations16`` or ``bandit_G4.csv``."""
    m = _NAME.search(_LOG_SUFFIX.sub("", name or ""))
    if not m:
        return GroupSize(None, None)
    g = int(m.group(1))
    return GroupSize(g, f"name:{m.group(0).strip('_-/ .')}") if g >= 2 else GroupSize(None, None)


def group_size_of(run: Any, explicit: int | None = None) -> GroupSize:
    """``G`` for a run: explicit argument, then config, then name."""
    if explicit is not None:
        return GroupSize(int(explicit), "argument")
    gs = from_config(getattr(run, "config", None) or {})
    if gs.value is not None:
        return gs
    return from_name(getattr(run, "name", ""))


# --------------------------------------------------------------------------- analysis


def _estimate(fit: Any, name: str) -> tuple[float | None, float | None]:
    """``(value, se)`` with ``se`` from the published 95% interval (larger half-width / 1.96)."""
    if isinstance(fit, GroupSizeInputs):
        return fit.estimates[("plateau", "timescale").index(name)]
    try:
        p = fit.param(name, "exponential")
    except AttributeError:  # no fit
        return None, None
    if p is None:
        return None, None
    ok = lambda x: x is not None and np.isfinite(x)  # noqa: E731
    v, ci = p.value, getattr(p, "ci95", None)
    if not ok(v):
        return None, None
    if not hasattr(p, "ci95"):  # an estimate without an interval (not a FitResult's): its stderr
        se = getattr(p, "stderr", None)
        return float(v), (float(se) if ok(se) and se > 0 else None)
    if ci is None or not (ok(ci[0]) and ok(ci[1])):
        return float(v), None
    se = max(float(ci[1]) - float(v), float(v) - float(ci[0])) / 1.959963984540054
    return float(v), (se if se > 0 else None)


#: what a run's late fluctuation variance measures, strongest first
MEASURES = ("policy", "policy (sampling variance subtracted)", "logged reward (policy plus sampling noise)")


def _batch(run: Any) -> tuple[int | None, str | None]:
    """Rewards per logged mean: the run's config, or the bandit simulator's ``.meta.json``."""
    try:
        from grpofit.readers.plan import batch_size  # one reading of the batch size for all commands

        n, src = batch_size(getattr(run, "config", None) or {})
    except Exception:  # an odd config (or no such reader) gives no batch size, not a crash
        n, src = None, None
    if n:
        return n, src
    meta, doc = _sidecar(run)
    try:
        g, groups = int(doc.get("group_size") or 0), int(doc.get("groups") or 0)
    except (AttributeError, ValueError, TypeError):
        return None, None
    if g > 0 and groups > 0:
        return g * groups, f"{os.path.basename(meta)}: groups x group_size"
    return None, None


def _sidecar(run: Any) -> tuple[str | None, dict | None]:
    """The bandit simulator's ``<log>.meta.json`` beside the run's file: ``(path, document)``,
    the document None when there is none or it cannot be read."""
    import json

    source = getattr(run, "source", None)
    meta = f"{source}.meta.json" if isinstance(source, str) else None
    if not (meta and os.path.isfile(meta)):
        return meta, None
    try:
        with open(meta, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return meta, None
    return meta, doc if isinstance(doc, dict) else None


def policy_fluctuation(run: Any, fit: Any) -> dict | None:
    """Late fluctuation variance of the policy's reward over the last third of the fitted part.

    ``{"variance", "measures", "logged_variance", "sampling_variance", "batch", "source"}``; see
    the module docstring for the order of methods. None when the fit cannot predict."""
    model = getattr(fit, "models", {}).get(getattr(fit, "preferred", None) or "")
    if model is None or not getattr(model, "ok", True):
        return None
    s, v = np.asarray(fit.steps, float), np.asarray(fit.values, float)
    k = s.size // 3
    if k < 5:
        return None
    window = s[-k:]
    curve = np.asarray(model.predict(window), float)
    logged = float(np.var(v[-k:] - curve, ddof=1))
    out: dict[str, Any] = {"logged_variance": logged, "sampling_variance": None, "batch": None}
    cols = run.numeric_columns() if hasattr(run, "numeric_columns") else []
    if "expected_reward" in cols:
        es, ev = run.series("expected_reward")
        keep = (es >= window[0]) & (es <= window[-1])
        if keep.sum() >= 5:
            var = float(np.var(ev[keep] - np.asarray(model.predict(es[keep]), float), ddof=1))
            out.update(variance=var, measures=MEASURES[0], source="expected_reward column")
            return out
    n, src = _batch(run)
    binary = bool(np.all((v >= 0) & (v <= 1)))
    if n and binary:
        p = np.clip(curve, 0.0, 1.0)
        samp = float(np.mean(p * (1 - p)) / n)
        out.update(sampling_variance=samp, batch=n, source=src, measures=MEASURES[1])
        se = logged * math.sqrt(2.0 / (k - 1))  # standard error of a variance from k points
        resolved = logged - samp > 2.0 * se
        out["variance"] = logged - samp if resolved else None
        if not resolved:
            out["note"] = (
                f"not resolved: the logged variance {logged:.3g} is within 2 standard errors ({se:.2g}) "
                f"of the binomial sampling variance {samp:.3g}"
            )
        return out
    out.update(variance=logged, measures=MEASURES[2], source="logged reward")
    return out


@dataclass(frozen=True)
class GroupSizeInputs:
    """What :func:`group_size_by_experiment` reads of one judged run, and nothing more (a few
    hundred bytes): ``diagnose`` keeps this of each run of a fleet, not the run's diagnosis."""

    name: str
    settings: dict | None
    group_size: int | None
    variance: float | None
    measures: str
    estimates: tuple  #: ``((value, se) of the plateau, (value, se) of the timescale)``

    @classmethod
    def of(cls, diagnosis: Any) -> "GroupSizeInputs":
        name, fit, g, (var, measures) = _unpack(diagnosis)
        estimates = (_estimate(fit, "plateau"), _estimate(fit, "timescale"))
        return cls(name, getattr(diagnosis, "settings", None), g, var, measures, estimates)


def _unpack(item: Any) -> tuple[str, Any, int | None, float | None]:
    if isinstance(item, GroupSizeInputs):
        return item.name, item, item.group_size, (item.variance, item.measures)
    if isinstance(item, tuple):
        obj, g, var = (list(item) + [None, None])[:3]
    else:
        obj, g, var = item, None, None
    fit = getattr(obj, "fit", None) if hasattr(obj, "diagnostics") else obj
    if g is None:
        gs = getattr(obj, "group_size", None)
        g = gs.value if isinstance(gs, GroupSize) else gs
    measures = MEASURES[2]
    if var is None:
        fl = getattr(obj, "fluctuation", None)
        if fl:
            var, measures = fl.get("variance"), fl.get("measures", MEASURES[2])
        else:
            var = getattr(obj, "late_variance", None)
    else:
        measures = MEASURES[0]  # a variance handed in explicitly is taken as the policy's
    name = getattr(obj, "name", None) or getattr(fit, "run", "") or ""
    return str(name), fit, g, (var, measures)


def _consistency(rows: list[tuple[int, float, float]]) -> dict:
    """Chi-square and pairwise agreement of one parameter across runs (rows: G, value, se)."""
    from scipy import stats

    x = np.array([r[1] for r in rows])
    se = np.array([r[2] for r in rows])
    wts = 1.0 / se**2
    mean = float((wts * x).sum() / wts.sum())
    chi2 = float(((x - mean) ** 2 * wts).sum())
    dof = len(rows) - 1
    p = float(stats.chi2.sf(chi2, dof)) if dof > 0 else None
    by_g: dict[int, tuple[float, float]] = {}
    for g in sorted({r[0] for r in rows}):
        sel = [i for i, r in enumerate(rows) if r[0] == g]
        wg = wts[sel]
        by_g[g] = (float((wg * x[sel]).sum() / wg.sum()), float(1.0 / math.sqrt(wg.sum())))
    pairs = []
    gs = sorted(by_g)
    for i, a in enumerate(gs):
        for b in gs[i + 1 :]:
            (xa, sa), (xb, sb) = by_g[a], by_g[b]
            z = (xa - xb) / math.sqrt(sa**2 + sb**2)
            pairs.append({"G": [a, b], "difference": xa - xb, "z": z, "agree": abs(z) < 1.96})
    rel = float(np.median(se / np.maximum(np.abs(x), 1e-12)))
    return {
        "by_group_size": {str(g): {"value": v, "stderr": s} for g, (v, s) in by_g.items()},
        "weighted_mean": mean,
        "chi2": chi2,
        "dof": dof,
        "p_value": p,
        "consistent": (p is None or p >= 0.05),
        "median_relative_stderr": rel,
        "pairs": pairs,
    }


def _slope(gv: list[tuple[int, float]]) -> dict:
    from scipy import stats

    lg = np.log([g for g, _ in gv])
    lv = np.log([v for _, v in gv])
    n = lg.size
    res = stats.linregress(lg, lv)
    out: dict[str, Any] = {"n_runs": n, "slope": float(res.slope), "expected": -1.0, "ci95": None}
    if n >= 3:
        half = float(stats.t.ppf(0.975, n - 2) * res.stderr)
        lo, hi = res.slope - half, res.slope + half
        out["ci95"] = [lo, hi]
        out["consistent_with_1_over_G"] = bool(lo <= -1.0 <= hi)
        out["consistent_with_no_dependence"] = bool(lo <= 0.0 <= hi)
        out["decided"] = out["consistent_with_1_over_G"] != out["consistent_with_no_dependence"]
    else:
        out["decided"] = False
    return out


def group_size_analysis(items: list) -> dict:
    """Test group-size invariance and the ``1/G`` fluctuation law across runs (module docstring).

    ``items``: RunDiagnosis objects (``.fit``, ``.group_size``, ``.late_variance``) or tuples
    ``(RunDiagnosis | FitResult, G, late variance)``. Always returns a dict with ``testable``,
    ``summary`` (one sentence, says plainly when the data cannot tell) and the tests when possible.
    """
    rows = [_unpack(it) for it in items]
    measures = {m for *_, (_, m) in rows}
    rows = [(n, f, g, v) for n, f, g, (v, _) in rows]
    with_g = [r for r in rows if r[2] is not None]
    distinct = sorted({r[2] for r in with_g})
    out: dict[str, Any] = {"runs": len(rows), "runs_with_group_size": len(with_g), "group_sizes": distinct}
    if len(distinct) < 2:
        why = "no run has a known group size" if not distinct else f"every run has G={distinct[0]}"
        out.update(testable=False, summary=f"group-size predictions not testable: {why} (need at least 2 distinct G)")
        return out
    out["testable"] = True
    sentences = []
    for pname in ("plateau", "timescale"):
        out[pname], sentence = _parameter_test(with_g, pname)
        sentences.append(sentence)
    out["variance_scaling"], sentence = _variance_test(with_g, measures)
    sentences.append(sentence)
    out["summary"] = "; ".join(sentences)
    return out


def _parameter_test(with_g: list, pname: str) -> tuple[dict, str]:
    """The group-size consistency test of the fitted ``pname`` (plateau or timescale) across the
    runs with a known G, and its sentence for the summary."""
    pr = []
    for _, fit, g, _ in with_g:
        v, se = _estimate(fit, pname)
        if v is not None and se is not None:
            pr.append((int(g), v, se))
    if len({r[0] for r in pr}) < 2:
        return {"testable": False}, f"{pname}: too few runs with an interval"
    c = _consistency(pr)
    c["testable"] = True
    if c["median_relative_stderr"] > 0.5:
        c["verdict"] = "intervals too wide to tell"
    else:
        c["verdict"] = "no significant dependence on G" if c["consistent"] else "depends on G"
    pv = c["p_value"]
    return c, f"{pname} {c['verdict']}" + (f" (chi2 p={pv:.2g})" if pv is not None else "")


def _variance_test(with_g: list, measures: set) -> tuple[dict, str]:
    """The late-run variance's slope against G on log axes (the ``1/G`` law), what it measures,
    and its sentence for the summary."""
    gv = [(int(g), float(v)) for _, _, g, v in with_g if v is not None and np.isfinite(v) and v > 0]
    measured = next(m for m in reversed(MEASURES) if m in measures) if measures else MEASURES[2]
    label = {
        MEASURES[0]: "policy variance",
        MEASURES[1]: "policy variance (sampling part subtracted)",
        MEASURES[2]: "logged-reward variance (includes sampling noise, not the policy's alone)",
    }[measured]
    if len({g for g, _ in gv}) < 2:
        return {"testable": False, "measures": measured}, f"variance scaling: no late-run {label.split(' (')[0]}s"
    sl = _slope(gv)
    sl["measures"] = measured
    if sl["ci95"] is None:
        return sl, f"{label} slope {sl['slope']:.2f} vs -1 expected (too few runs for an interval)"
    lo, hi = sl["ci95"]
    tell = _variance_verdict(sl, measured)
    return sl, f"{label} slope {sl['slope']:.2f} [{lo:.2f}, {hi:.2f}] vs -1 expected: {tell}"


def _variance_verdict(sl: dict, measured: str) -> str:
    """What the variance slope ``sl`` says about the ``1/G`` law; the logged reward's variance is
    no test of it (``sl["decided"]`` is then set False)."""
    if measured == MEASURES[2]:
        sl["decided"] = False
        return (
            "not a test of the policy's 1/G law: the sampling part falls with the batch by "
            "construction (log expected_reward, or the batch size, to separate them)"
        )
    if not sl["decided"]:
        return "cannot tell"
    return "consistent with 1/G" if sl["consistent_with_1_over_G"] else "not 1/G"


#: config keys that name, place or seed a run rather than set its training (ignored when runs are
#: compared for relatedness)
_BOOKKEEPING = re.compile(
    r"(?:^|[._/])(?:seed|\w*name|\w*_?dir|\w*path|project|entity|group|tags?|notes?|wandb\w*|run_?id|id|"
    r"logging\w*|log_\w*|report_to|save\w*|output\w*|checkpoint\w*|resume\w*|push_to_hub\w*|hub_\w*|"
    r"timestamp|date|time|world_size|local_rank|rank|nnodes|n_gpus_per_node|port|host\w*|device\w*)\Z",
    re.IGNORECASE,
)
#: the bandit simulator's sidecar: its inputs (outputs such as the fixed point are derived)
_BANDIT_INPUTS = (
    "arms",
    "correct",
    "lr",
    "momentum",
    "refresh_interval",
    "groups",
    "beta",
    "steps",
    "importance_ratio",
    "advantage",
    "eps",
    "kl_at",
    "reference",
)


def _is_group_size_key(key: str) -> bool:
    k = str(key).replace("/", ".")
    k = k[: -len(".value")] if k.endswith(".value") else k
    return any(k == w or k.endswith("." + w) for w in CONFIG_KEYS)


def run_settings(run: Any) -> dict | None:
    """What a run was trained with, but its group size: its config without the group-size keys
    and the bookkeeping (names, paths, seeds, logging), or the bandit simulator's inputs from its
    ``.meta.json``; None when the run carries neither."""
    config = getattr(run, "config", None) or {}
    if config:
        out = {}
        for key, val in config.items():
            if _is_group_size_key(key) or _BOOKKEEPING.search(str(key).replace("/", ".")):
                continue
            if isinstance(val, Mapping) and "value" in val:
                val = val["value"]
            out[str(key)] = val if isinstance(val, (int, float, str, bool)) or val is None else repr(val)
        return out
    _, doc = _sidecar(run)
    if doc is not None and str(doc.get("schema", "")).startswith("grpofit.bandit"):
        return {k: doc.get(k) for k in _BANDIT_INPUTS}
    return None


#: separators, timestamps (6+ digits) and seeds in a run name: not what a sweep varies
_NAME_NOISE = re.compile(r"(?:seed|(?<![a-z])s)[_=-]?\d+|\d{6,}", re.IGNORECASE)


def name_without_group_size(name: str) -> str:
    """A run's name with its group-size token, timestamps and seeds removed: runs of one G sweep
    (``grpo_n32_0113``, ``grpo_n64``) share it, runs of other methods do not."""
    base = _LOG_SUFFIX.sub("", os.path.basename(str(name).split("::", 1)[-1]))
    m = _NAME.search(base)
    if m:
        base = base[: m.start()] + base[m.end() :]
    base = _NAME_NOISE.sub("", base.lower())
    return re.sub(r"[^a-z0-9.]+", "-", base).strip("-")


def related_key(d: Any) -> tuple:
    """Runs with the same key differ at most in their group size (and seed): by their settings
    when they carry them, else by their names without the group-size token."""
    settings = getattr(d, "settings", None)
    if settings:
        return ("settings", tuple(sorted((k, repr(v)) for k, v in settings.items())))
    return ("name", name_without_group_size(getattr(d, "name", "")))


def experiment_of(run_name: str) -> str:
    """The experiment a run belongs to: the folder of its log (runs of one panel export share it)."""
    import os

    return os.path.dirname(run_name.split("::", 1)[0]) or "."


def group_size_by_experiment(diagnoses: list) -> dict:
    """:func:`group_size_analysis` within each experiment, never across unrelated runs.

    An experiment is a folder (runs in different folders have other models, data or
    hyperparameters) and, inside it, the runs that differ in their group size alone
    (:func:`related_key`: equal settings but G, seed and bookkeeping when the runs carry a config
    or a bandit sidecar; else equal names once the G token, seeds and timestamps are removed).
    With one testable experiment its analysis is returned (with ``experiment``); with several,
    ``experiments`` maps its label (the folder, with the shared name when names decided) to the
    analysis. When distinct G exist only across unrelated runs, the summary says so.
    """
    groups: dict[tuple, list] = {}
    for d in diagnoses:
        groups.setdefault((experiment_of(d.name), related_key(d)), []).append(d)
    labels = {}
    for folder, key in groups:
        same_folder = sum(1 for f, _ in groups if f == folder)
        labels[(folder, key)] = (
            folder
            if same_folder == 1
            else (f"{folder} [{key[1]}]" if key[0] == "name" else f"{folder} [settings {len(labels) + 1}]")
        )
    analyses = {labels[k]: group_size_analysis(items) for k, items in groups.items()}
    testable = {label: a for label, a in analyses.items() if a.get("testable")}
    if not testable:
        out = group_size_analysis(diagnoses)
        if out.get("testable"):  # distinct G exist, but only across unrelated runs
            out = {k: v for k, v in out.items() if k in ("runs", "runs_with_group_size", "group_sizes")}
            folders = {experiment_of(d.name) for d in diagnoses if _unpack(d)[2] is not None}
            why = (
                (
                    "runs with different G are in different folders (different experiments); put the runs of "
                    "one G sweep in one folder"
                )
                if len(folders) > 1
                else (
                    "the runs with different G differ in more than G (their settings, or their names once G, "
                    "seeds and timestamps are removed), so their plateaus say nothing about G"
                )
            )
            out.update(testable=False, summary=f"group-size predictions not testable: {why}")
        return out
    if len(testable) == 1:
        label, analysis = next(iter(testable.items()))
        return {"experiment": label, **analysis, "summary": f"{label}: {analysis['summary']}"}
    return {
        "testable": True,
        "experiments": testable,
        "summary": "; ".join(f"{label}: {a['summary']}" for label, a in testable.items()),
    }
