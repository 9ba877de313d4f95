"""The Python API: what the command line does, for a notebook or a script.

    import grpofit
    runs = grpofit.read("logs/")             # list[Run]; also a DataFrame, a dict of columns or (steps, values)
    res = grpofit.fit(runs[0])               # Fit: .params, .summary(), .plot(ax=None), HTML in Jupyter
    grpofit.diagnose(runs).verdicts          # {run: verdict}, the same document as `diagnose --format json`
    grpofit.forecast(runs[0], horizon=1000).expected   # the `forecast --format json` entry of one run
    grpofit.predict(lr=1e-6, momentum=0.9, refresh_interval=4, curvature=2000)

Every result keeps the document the command line prints as JSON (``.to_dict()``), so a script
that moves from the CLI to the API reads the same keys. Nothing here computes: it calls the same
library functions as the commands and wraps what they return.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from grpofit.core.errors import UsageError

if TYPE_CHECKING:
    from grpofit.core.runs import Run

__all__ = [
    "Document",
    "Fit",
    "Diagnosis",
    "Forecast",
    "Backtest",
    "Prediction",
    "read",
    "fit",
    "diagnose",
    "forecast",
    "backtest",
    "predict",
]


# --------------------------------------------------------------------------- results


@dataclass
class Document:
    """A result: the command's JSON document, rendered as an HTML table in Jupyter."""

    doc: dict

    def to_dict(self) -> dict:
        """The document ``grpofit <command> --format json`` prints (JSON-safe)."""
        return self.doc

    def to_json(self) -> str:
        from grpofit.core.jsonout import dumps

        return dumps(self.doc)

    def _repr_html_(self) -> str:
        return _html(self.doc)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(schema={self.doc.get('schema')!r})"


@dataclass(repr=False)
class Fit(Document):
    """Both laws fitted to one run (one entry of ``fit --format json``'s ``runs``)."""

    result: Any = None  #: the underlying :class:`grpofit.fitting.FitResult`

    @property
    def preferred(self) -> str | None:
        return self.doc.get("preferred")

    @property
    def params(self) -> dict[str, dict[str, float | None]]:
        """``{model: {name: value}}``; intervals are in ``summary()``."""
        return {
            model: {name: p.get("value") for name, p in entry.get("params", {}).items()}
            for model, entry in self.doc.get("models", {}).items()
        }

    @property
    def collapse(self) -> dict | None:
        """The collapse ``grpofit fit`` and ``diagnose`` name (``step``, ``recovered``,
        ``recovered_step``, levels, ...), or None: the fit covers the part before it."""
        return self.doc.get("collapse")

    @property
    def plateau(self) -> dict | None:
        """The plateau as ``grpofit fit`` states it: ``{"kind", "value", "ci95", "law_value"}``;
        ``kind`` ``lower_bound``/``upper_bound`` when the run is still moving past the law's p*
        (``value`` is then the level reached, shown ``≥``/``≤``), else ``estimate``."""
        from grpofit.fitting.fitcheck import plateau_statement

        if self.result is not None:
            return plateau_statement(self.result)
        p = (self.doc.get("models", {}).get(self.preferred or "", {}).get("params", {}) or {}).get("plateau")
        if not p or p.get("value") is None:
            return None
        if p.get("kind") in ("lower_bound", "upper_bound") and p.get("bound") is not None:
            return {"kind": p["kind"], "value": p["bound"], "ci95": None, "law_value": p["value"]}
        return {"kind": "estimate", "value": p["value"], "ci95": p.get("ci95"), "law_value": p["value"]}

    def param(self, name: str, model: str | None = None) -> float | None:
        """One fitted value, from the preferred law unless ``model`` is given (``None`` when that
        law has no such parameter or its fit failed). ``plateau`` of the preferred law is the
        number ``grpofit fit`` shows: the level reached when the plateau is a bound (see
        :attr:`plateau` for its kind)."""
        if name == "plateau" and model is None:
            st = self.plateau
            return None if st is None else st["value"]
        if self.result is not None:
            est = self.result.param(name, model)
            return None if est is None else est.value
        entry = self.doc.get("models", {}).get(model or self.preferred or "", {})
        return (entry.get("params", {}).get(name) or {}).get("value")

    def summary(self) -> dict:
        return self.doc

    def plot(self, ax=None):
        """Data, both fitted curves and the plateau band on ``ax`` (a new figure if None).

        Returns the matplotlib Figure. The user's matplotlib backend is never changed.
        """
        from grpofit.render.plotting import draw_fit

        if ax is None:
            from matplotlib.figure import Figure

            fig = Figure(figsize=(6.5, 4.2))
            ax = fig.add_subplot(1, 1, 1)
        draw_fit(self.result, ax)
        return ax.figure

    def __repr__(self) -> str:
        p = self.plateau or {}
        sign = {"lower_bound": ">= ", "upper_bound": "<= "}.get(p.get("kind"), "")
        return f"Fit(run={self.doc.get('run')!r}, preferred={self.preferred!r}, plateau={sign}{p.get('value')!r})"


@dataclass(repr=False)
class Diagnosis(Document):
    """``diagnose``'s document: every run's fit, four verdicts and the gate."""

    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.doc.get("gate", {}).get("passed"))

    @property
    def verdicts(self) -> dict[str, str]:
        return {r["run"]: r["verdict"] for r in self.doc.get("runs", [])}

    def _repr_html_(self) -> str:
        rows = []
        for r in self.doc.get("runs", []):
            cells = [r["run"], *(v["status"] for v in r["diagnostics"].values()), r["verdict"]]
            rows.append(cells)
        modes = list(self.doc["runs"][0]["diagnostics"]) if self.doc.get("runs") else []
        head = ["run", *modes, "verdict"]
        gate = "passed" if self.passed else "failed"
        return _table(head, rows) + f"<p>gate: <b>{gate}</b></p>"


@dataclass(repr=False)
class Forecast(Document):
    """One run's forecast (one entry of ``forecast --format json``'s ``runs``): expected reward
    at the planned end with 80/95% prediction intervals, plateau, steps to 90/95% of the gain."""

    result: Any = None  #: the engine's :class:`grpofit.forecasting.engine.Forecast` (fan, curve)
    rest: Any = None  #: ``(steps, values)`` after ``until`` (not seen by the forecast), or None

    @property
    def horizon(self) -> int | float | None:
        """The planned last step the forecast is for (None without a plan length)."""
        return (self.doc.get("horizon") or {}).get("step")

    @property
    def expected(self) -> float | None:
        """Expected reward at the planned end (None when it cannot be forecast: see ``note``)."""
        at = self.doc.get("at") or [{}]
        return at[0].get("mean")

    @property
    def pi95(self) -> list | None:
        """95% prediction interval of the reward logged at the planned end."""
        at = self.doc.get("at") or [{}]
        return at[0].get("pi95")

    @property
    def plateau(self) -> float | None:
        return (self.doc.get("plateau") or {}).get("value")

    @property
    def note(self) -> str | None:
        return self.doc.get("note")

    def plot(self, ax=None):
        """The fan chart on ``ax`` (a new figure if None): data, the fitted law, the median
        forecast with its 80% and 95% bands, the planned end. Returns the matplotlib Figure;
        the user's backend is never changed."""
        from grpofit.render.fanchart import draw_fan

        if ax is None:
            from matplotlib.figure import Figure

            fig = Figure(figsize=(6.5, 4.2))
            ax = fig.add_subplot(1, 1, 1)
        draw_fan(ax, self.result, self.doc, rest=self.rest)
        return ax.figure

    def __repr__(self) -> str:
        return (
            f"Forecast(run={self.doc.get('run')!r}, horizon={self.horizon!r}, expected={self.expected!r}, "
            f"pi95={self.pi95!r})"
        )


@dataclass(repr=False)
class Backtest(Document):
    """``backtest``'s document: forecasts from cut points of finished runs against what happened
    (95% coverage of the final level, error against persistence and a plain exponential)."""

    warnings: list[str] = field(default_factory=list)

    @property
    def coverage(self) -> float | None:
        """Share of the cuts whose 95% interval held the final level (None: no forecast made)."""
        return (self.doc.get("summary") or {}).get("coverage")

    def _repr_html_(self) -> str:
        rows = []
        for r in self.doc.get("runs", []):
            for c in r.get("cuts", []):
                pred = c.get("predicted") or {}
                rows.append(
                    [
                        r["run"],
                        f"{c['fraction']:.0%}",
                        _scalar(c.get("step")),
                        _scalar(pred.get("mean")),
                        _scalar(c.get("actual")),
                        {True: "yes", False: "no", None: "–"}[c.get("covered")],
                        _scalar(c.get("error")),
                    ]
                )
        head = ["run", "cut", "step", "forecast", "actual", "in 95%", "error"]
        s = self.doc.get("summary") or {}
        return (
            _table(head, rows)
            + f"<p>coverage: <b>{_scalar(s.get('coverage'))}</b> over {s.get('n_forecasts', 0)} forecasts</p>"
        )


class Prediction(Document):
    """``predict``'s document: closed-form coefficients, regime and stability."""


# --------------------------------------------------------------------------- functions


def read(source: Any, *, step: str | None = None, name: str | None = None) -> list["Run"]:
    """Every run in ``source``: a path (file, run folder, log directory), a pandas DataFrame,
    a dict of columns, or a ``(steps, values)`` pair (the values become the ``reward`` column).

    ``step`` names the step column; ``name`` names an in-memory run.
    """
    from grpofit.core.runs import Run

    if isinstance(source, Run):
        return [source]
    if isinstance(source, (str, os.PathLike)):
        return _read_paths(os.fspath(source), step)
    return [_run_from_memory(source, step=step, name=name or "run")]


def fit(run: Any, *, metric: str | None = None, step: str | None = None) -> Fit:
    """Fit the single exponential and the damped oscillator to one run's reward (or ``metric``).

    ``run`` is anything :func:`read` takes that holds exactly one run.
    """
    from grpofit.fitting.analysis import fit_run, fit_summary

    result = fit_run(_one(run, step), metric=metric)
    return Fit(fit_summary(result), result=result)


def diagnose(
    runs: Any,
    *,
    metric: str | None = None,
    eval_metric: str | None = None,
    min_r2: float | None = None,
    fail_on: Sequence[str] | None = None,
    group_size: int | None = None,
    thresholds: dict[str, float] | None = None,
    step: str | None = None,
) -> Diagnosis:
    """Judge the four failure modes of every run (paths, folders or :class:`Run` objects)."""
    from grpofit.commands.pipeline import diagnose_paths

    items = _items(runs, step)
    doc, warnings = diagnose_paths(
        items,
        metric=metric,
        step=step,
        eval_metric=eval_metric,
        min_r2=min_r2,
        fail_on=tuple(fail_on) if fail_on else None,
        group_size=group_size,
        thresholds=thresholds,
    )
    return Diagnosis(doc, warnings=list(warnings))


def predict(
    *,
    lr: float,
    momentum: float,
    refresh_interval: float,
    curvature: float | None = None,
    group_size: int | None = None,
    noise: float | None = None,
    adam: bool = False,
    from_run: str | None = None,
    metric: str | None = None,
) -> Prediction:
    """Mass, damping, stiffness, regime and stability from the optimizer's hyperparameters
    (``curvature`` given, or measured from ``from_run``'s fitted timescale)."""
    from grpofit.commands.predict import run_predict

    doc, _ = run_predict(
        lr=lr,
        momentum=momentum,
        refresh_interval=refresh_interval,
        curvature=curvature,
        group_size=group_size,
        noise=noise,
        adam=adam,
        from_run=from_run,
        metric=metric,
    )
    return Prediction(doc)


def forecast(
    run: Any,
    *,
    horizon: int | None = None,
    at: Sequence[float] = (),
    until: float | None = None,
    batch_size: int | None = None,
    metric: str | None = None,
    step: str | None = None,
    prior: Any = None,
    covariates: dict | None = None,
    bounds: tuple[float, float] | str | None = None,
) -> Forecast:
    """Forecast one run from the steps seen so far: expected reward at the planned end
    (``horizon``, else the run's config) with 80/95% prediction intervals, the plateau, the steps
    to 90/95% of the gain. ``until`` cuts the run first (what would have been forecast then).
    ``bounds``: the metric's range ``(low, high)`` (or ``"LO,HI"``); default from its name, the
    config, or [0, 1] when every value lies there.

    ``run`` is anything :func:`read` takes that holds exactly one run. ``prior``: finished runs
    (a path or list of paths) or a saved ``grpofit.prior/1`` file, document or
    :class:`grpofit.forecasting.prior.Prior`, as ``forecast --prior`` (docs/prior.md);
    ``covariates``: the run's, as ``--covariate`` (``{"lr": 1e-5, "size": 7e9}``).
    """
    from grpofit.commands.forecast import ForecastOptions, check_options, forecast_run
    from grpofit.forecasting.prior import parse_covariates, resolve_prior

    if bounds is not None and not isinstance(bounds, str):
        bounds = ",".join(repr(float(b)) for b in bounds)
    opts = ForecastOptions(
        metric=metric,
        step=step,
        horizon=horizon,
        at=list(at),
        until=until,
        batch_size=batch_size,
        bounds=bounds,
        prior=resolve_prior(prior, metric=metric, step=step),
        covariates=parse_covariates([f"{k}={v}" for k, v in (covariates or {}).items()]),
    )
    check_options(opts)
    entry, fc, rest = forecast_run(_one(run, step), opts)
    return Forecast(entry, result=fc, rest=rest)


def backtest(
    runs: Any,
    *,
    cuts: Sequence[float] | None = None,
    batch_size: int | None = None,
    metric: str | None = None,
    step: str | None = None,
) -> Backtest:
    """Forecast finished runs (paths, folders or :class:`Run` objects) from cut points, in
    percent of their steps (default 20, 30, 50, 70), and compare with what happened."""
    from grpofit.commands.backtest import DEFAULT_CUTS, backtest_paths, backtest_run, parse_cuts, summarise

    chosen = DEFAULT_CUTS if cuts is None else parse_cuts(",".join(str(c) for c in cuts))
    items = _items(runs, step)
    paths = [i for i in items if isinstance(i, str)]
    in_memory = [i for i in items if not isinstance(i, str)]
    if paths and not in_memory:
        doc, warnings = backtest_paths(paths, metric=metric, step=step, cuts=chosen, batch_size=batch_size)
        return Backtest(doc, warnings=list(warnings))
    from grpofit.commands.backtest import FINAL_FRACTION
    from grpofit.core.vocabulary import SCHEMAS

    runs_read = [r for i in items for r in (read(i, step=step) if isinstance(i, str) else [i])]
    entries = [backtest_run(r, metric=metric, cuts=chosen, batch_size=batch_size) for r in runs_read]
    doc = {
        "schema": SCHEMAS["backtest"],
        "final_level": f"mean of the last {FINAL_FRACTION:.0%} of steps",
        "runs": entries,
        "summary": summarise(entries),
    }
    return Backtest(doc)


# --------------------------------------------------------------------------- inputs


def _read_paths(path: str, step: str | None) -> list["Run"]:
    from grpofit.readers import discover, read_path

    if not os.path.isdir(path):
        return read_path(path, step=step)
    runs: list = []
    for src in discover([path]):
        runs.extend(read_path(src.path, step=step))
    return runs


def _run_from_memory(source: Any, *, step: str | None, name: str) -> "Run":
    from grpofit.core.runs import make_run

    if isinstance(source, tuple) and len(source) == 2:
        steps, values = source
        table = {"step": _column(steps), "reward": _column(values)}
        _same_lengths(table, "the (steps, values) pair")
        return make_run(name, "<memory>", "memory", table, step="step")
    columns = getattr(source, "columns", None)
    if columns is not None and hasattr(source, "to_numpy"):  # a pandas DataFrame
        table = {str(c): source[c].to_numpy() for c in columns}
    elif isinstance(source, dict):
        table = {str(k): _column(v) for k, v in source.items()}
        _same_lengths(table, "the dict's columns")
    else:
        raise UsageError(
            f"cannot read a {type(source).__name__}",
            fix="pass a path, a pandas DataFrame, a dict of columns or a (steps, values) pair",
        )
    return make_run(name, "<memory>", "memory", table, step=step)


def _column(values: Any) -> Any:
    """An in-memory column as given when it is an array (an int64 step column keeps its
    integers, see :func:`grpofit.core.runs.make_run`), else as a list."""
    import numpy as np

    if isinstance(values, np.ndarray) and values.ndim == 1:
        return values
    try:
        return list(values)
    except TypeError:
        raise UsageError(
            f"a column must be a sequence of numbers, not a {type(values).__name__}",
            fix="pass lists or 1-D arrays of equal length",
        ) from None


def _same_lengths(table: dict, what: str) -> None:
    lengths = {k: len(v) for k, v in table.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k!r} {n}" for k, n in list(lengths.items())[:6])
        raise UsageError(
            f"{what}: columns of different lengths ({shown})", fix="pass columns of equal length, one value per step"
        )


def _one(run: Any, step: str | None) -> "Run":
    runs = read(run, step=step)
    if len(runs) != 1:
        names = ", ".join(r.name for r in runs[:5])
        raise UsageError(
            f"{run!r} holds {len(runs)} runs ({names}{', ...' if len(runs) > 5 else ''})",
            fix="pick one: runs = grpofit.read(path); grpofit.fit(runs[i])",
        )
    return runs[0]


def _items(runs: Any, step: str | None) -> list:
    """Paths stay paths (diagnose walks folders itself); everything else becomes Runs."""
    from grpofit.core.runs import Run

    if isinstance(runs, (str, os.PathLike, Run)) or not isinstance(runs, Iterable) or isinstance(runs, tuple):
        runs = [runs]
    out: list = []
    for item in runs:
        if isinstance(item, (str, os.PathLike)):
            out.append(os.fspath(item))
        else:
            out.extend(read(item, step=step))
    return out


# --------------------------------------------------------------------------- HTML


def _html(value: Any) -> str:
    """A nested document as nested HTML tables (dict -> two columns, list -> rows)."""
    if isinstance(value, dict):
        if {"value", "ci95"} <= set(value):
            return html.escape(_estimate(value))
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td style='text-align:left'>{_html(v)}</td></tr>"
            for k, v in value.items()
        )
        return f"<table>{rows}</table>"
    if isinstance(value, list):
        if value and all(not isinstance(v, (dict, list)) for v in value):
            return html.escape(", ".join(_scalar(v) for v in value))
        return "".join(_html(v) for v in value)
    return html.escape(_scalar(value))


def _estimate(p: dict) -> str:
    if p.get("kind") in ("lower_bound", "upper_bound") and p.get("bound") is not None:
        from grpofit.render.tables import estimate_text  # the CLI's words for a bound

        return estimate_text(p)
    v, ci = p.get("value"), p.get("ci95")
    text = _scalar(v)
    if ci:
        text += f" [{_scalar(ci[0])}, {_scalar(ci[1])}]"
    return text


def _scalar(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
