"""From a :class:`~grpofit.core.runs.Run` to a fit: choose the metric column, cut a collapse, fit.

This is the one place where ``grpofit fit`` and ``grpofit diagnose`` turn a run into a
:class:`~grpofit.fitting.FitResult`, so both commands report the same fit for the same run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpofit.core.errors import MetricNotFound, TooFewPoints
from grpofit.core.roles import detect_roles

if TYPE_CHECKING:
    from grpofit.core.runs import Run
    from grpofit.fitting import FitResult


def resolve_column(run: "Run", role: str, name: str | None = None) -> str:
    """The column that plays ``role`` in ``run``; ``name`` (a ``--metric``-style override) wins.

    Raises :class:`MetricNotFound` listing the run's numeric columns when there is none.
    """
    numeric = run.numeric_columns()
    if name is not None:
        if name in run.metrics and name in numeric:
            return name
        what = "has no values" if name in run.metrics else "is not a column"
        option = {"eval_reward": "--eval-metric"}.get(role, "--metric")
        raise MetricNotFound(
            f"{option} {name!r} {what} in run {run.name}",
            path=run.source,
            columns=numeric,
            option=f"{option} {name!r}",
            fix=f"pass {option} with one of the numeric columns: " + _listing(numeric),
        )
    column = detect_roles(numeric).get(role)
    if column is None and role == "reward":
        from grpofit.core.roles import choose_reward

        column = choose_reward(numeric)["column"]  # a validation reward when no train reward is logged
    if column is None:
        label = role.replace("_", " ")
        empty = detect_roles(list(run.metrics)).get(role)
        if empty is not None:  # the column is there, but holds no finite value
            raise MetricNotFound(
                f"the {label} column {empty!r} has no finite values (all missing, NaN or infinite) in run {run.name}",
                path=run.source,
                columns=numeric,
                fix="check the logger, or pass --metric NAME with one of the numeric columns: " + _listing(numeric),
            )
        raise MetricNotFound(
            f"no {label} column found in run {run.name}",
            path=run.source,
            columns=numeric,
            fix="pass --metric NAME with one of the numeric columns: " + _listing(numeric),
        )
    return column


def _listing(columns: list[str], limit: int = 25) -> str:
    if not columns:
        return "(none: the file holds no numeric column)"
    shown = ", ".join(columns[:limit])
    return shown + (f", ... ({len(columns) - limit} more)" if len(columns) > limit else "")


def fit_run(
    run: "Run",
    *,
    metric: str | None = None,
    seed: int = 0,
    cut_collapse: bool = True,
    collapse_options: dict | None = None,
    warm: dict | None = None,
) -> "FitResult":
    """Fit both laws to the run's reward (or ``metric``).

    When the reward collapses (a sustained fall from its plateau that the oscillator fitted to
    the whole run does not predict, see :mod:`grpofit.fitting.collapse`;
    ``collapse_options`` are passed to :func:`~grpofit.fitting.collapse.find_collapse`) only the part
    before the break is fitted, and the collapse is attached as ``result.collapse`` so the
    plateau is never smeared by the fall. ``result.column_steps/column_values`` keep the whole
    series for plots. ``warm``: a dict kept between refits of a growing run (``grpofit watch``): each fit
    starts from the last refit's optimum (:func:`grpofit.fitting.fit_series`), the whole run's
    and the part before a collapse each from its own.
    """
    from grpofit.fitting import MIN_POINTS, fit_series
    from grpofit.fitting.outliers import exclude

    column = resolve_column(run, "reward", metric)
    outliers = exclude(run, column)  # one corrupted value must not move the fit or the verdict
    steps, values = run.series(column)
    _release_if_long(steps.size)
    if steps.size < MIN_POINTS:
        import numpy as np

        from grpofit.core.runs import FLOAT_EXACT

        merged = run.stats.get("duplicates") and run.steps.size and float(np.max(np.abs(run.steps))) > FLOAT_EXACT
        raise TooFewPoints(
            f"{column!r} has {steps.size} finite point(s) in run {run.name}; a fit needs at least {MIN_POINTS}"
            + (
                f" ({run.stats['duplicates']} steps above 2^53 merged: floats cannot tell them apart)" if merged else ""
            ),
            path=run.source,
            n=int(steps.size),
            minimum=MIN_POINTS,
            fix=(
                f"count {run.step_column!r} from 0 (subtract its first value), or pass --step with another column"
                if merged
                else "log more steps, or choose another column with --metric"
            ),
        )
    collapse, result = None, None
    from grpofit.fitting.bounds import metric_bounds
    from grpofit.fitting.fitcheck import metric_kind

    bounds = metric_bounds(column, values, config=getattr(run, "config", None))  # the whole run's, for every part

    if cut_collapse and metric_kind(column) == "decays":
        cut_collapse = False  # a loss, KL or cost falls by design: its fall is fitted as a decay
    if cut_collapse:
        collapse, result = _confirmed_collapse(run, column, steps, values, seed, collapse_options or {}, warm, bounds)
    if result is None:
        result = fit_series(
            steps,
            values,
            run=run.name,
            metric=column,
            step_column=run.step_column,
            seed=seed,
            warm=None if warm is None else warm.setdefault("whole", {}),
            bounds=bounds,
        )
    from grpofit.core.roles import choose_reward

    choice = choose_reward(run.numeric_columns(), column)
    result.role, result.metric_note = choice["role"], choice["note"]
    result.collapse = collapse
    result.outliers = outliers
    result.column_steps, result.column_values = steps, values
    return result


def _release_if_long(n: int) -> None:
    """Before fitting a long run, give the heap its reading freed (pandas' parse buffers: about
    1x a large CSV) back to the OS, so the fit's arrays do not stack on top of it (the CLI also
    has large blocks mapped on their own: :func:`grpofit.cli.entry.main`)."""
    from grpofit.fitting.hac import BLOCK

    if n > BLOCK:
        from grpofit.runtime.trim import release

        release()


#: candidates examined per run: an underdamped run may ring through a few before settling
MAX_COLLAPSE_CANDIDATES = 4


def _confirmed_collapse(run, column, steps, values, seed, options, warm=None, bounds=None):
    """``(collapse, fit of the part before it)`` or ``(None, fit of the whole run | None)``:
    :func:`confirmed_collapse` with this run's names and warm starts."""
    from grpofit.fitting import fit_series

    def fit(s, v, part="whole"):
        return fit_series(
            s,
            v,
            run=run.name,
            metric=column,
            step_column=run.step_column,
            seed=seed,
            warm=None if warm is None else warm.setdefault(part, {}),
            bounds=bounds,
        )

    return confirmed_collapse(steps, values, options=options, fit=fit)


def confirmed_collapse(steps, values, *, options: dict | None = None, fit=None, whole=None, bounds=None):
    """The run's collapse: ``(collapse, fit of the part before it)`` or ``(None, fit of the
    whole run | None)``. The one computation every surface takes (``fit``, ``diagnose``,
    ``watch``, ``forecast``, ``compare``, the API), so they name the same collapse at the same step.

    Candidates come from :func:`~grpofit.fitting.collapse.find_collapse`. Each is checked against the
    law fitted to the whole run (:func:`~grpofit.fitting.collapse.explained_by_law`): a fall the law
    rings through is an oscillation, and the search goes on after it, from the level the run
    settled at. A candidate with fewer than ``MIN_POINTS`` before its onset has no settled
    level to fall from and ends the search. ``fit(steps, values, part)`` fits a part
    (default :func:`~grpofit.fitting.fit_series`, seed 0); ``whole``: the whole run's fit when
    the caller has it already; ``bounds``: the metric's, for the default ``fit``."""
    from grpofit.fitting import MIN_POINTS, fit_series
    from grpofit.fitting.collapse import explained_by_law, find_collapse

    if fit is None:

        def fit(s, v, part="whole"):
            return fit_series(s, v, bounds=bounds)

    options = options or {}
    after = None
    for _ in range(MAX_COLLAPSE_CANDIDATES):
        collapse = find_collapse(steps, values, after_step=after, level_noise=True, **options)
        if collapse is None:
            break
        keep = steps < collapse.step
        if keep.sum() < MIN_POINTS:
            break
        before = fit(steps[keep], values[keep], "before")
        whole = whole or fit(steps, values)
        w_osc, b_osc = whole.models.get("oscillator"), before.models.get("oscillator")
        if (
            _below_start(collapse, before, steps)
            or w_osc is None
            or b_osc is None
            or not explained_by_law(collapse, steps, values, w_osc.predict(steps), b_osc.predict(steps))
        ):
            return collapse, before
        after = collapse.detected_step
    return None, whole


def _below_start(collapse, before, steps) -> bool:
    """A run that rose (a significant rise before the onset) and then fell to or below where it
    started, to stay there or to recover later: never an oscillation the law rings through (a
    relaxation from the start, overshoot and all, stays above its start: each undershoot is
    smaller than the gain), whatever a law fitted to the whole run "explains" (a verl-like run at
    its floor -1 for 250 steps passed the gate that way; a run that fell from 1.6 to 0 for 330
    steps and came back was "explained" by a law started at its plateau, ringing once)."""
    rose = bool((getattr(before, "signal", None) or {}).get("detected"))
    if not rose and collapse.level_before - collapse.start_level >= collapse.threshold:
        # a rise in the data that the law fitted before the onset cannot tell from a constant
        # (a run that rose within its first few steps): the level before the onset is the
        # collapse's own threshold (>= noise_k sds of the level) above where the run started.
        # It stands in for the law's only for a fall held as long as a recovered collapse must
        # be (two windows, a twentieth of the run): a few low points at the end of a run being
        # followed are still judged by the law
        import numpy as np

        from grpofit.fitting.collapse import default_window

        s = np.asarray(steps, dtype=float)
        end = collapse.recovered_step if collapse.recovered else np.inf
        held = int(np.count_nonzero((s >= collapse.detected_step) & (s < end)))
        rose = held >= max(2 * default_window(s.size), s.size // 20)
    return rose and collapse.gain_fraction is not None and collapse.gain_fraction >= 1.0


def fit_summary(result: "FitResult") -> dict:
    """The contract's fit entry for one run (with the collapse it was cut at, if any), plus its fit check."""
    doc = result.summary()
    from grpofit.fitting.fitcheck import with_fit_check  # does the plateau agree with the late data?

    return with_fit_check(doc, result)
