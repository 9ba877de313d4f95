"""Replay a finished run as if it were live, to measure how early ``watch`` would have warned.

:func:`replay` feeds a :class:`~grpofit.watch.monitor.Monitor` the run's prefixes (every
``every`` points, as successive polls would see them) and records when each alert first fired.
:func:`detection` compares that with where the failure starts: the *detection delay* is the
first alert step minus the onset step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpofit.core.runs import Run
from grpofit.core.vocabulary import STATUS_RANK
from grpofit.watch.monitor import Alert, Monitor


def prefix(run: Run, k: int) -> Run:
    """The first ``k`` rows of ``run`` (what a watcher had seen after ``k`` logged steps)."""
    return Run(
        name=run.name,
        source=run.source,
        format=run.format,
        steps=run.steps[:k],
        step_column=run.step_column,
        metrics={c: v[:k] for c, v in run.metrics.items()},
        config=run.config,
        config_source=run.config_source,
    )


@dataclass
class Replay:
    run: str
    n: int
    last_step: float
    alerts: list[Alert] = field(default_factory=list)
    problem: str | None = None

    def first(self, status: str = "fail", mode: str | None = None) -> Alert | None:
        hits = [
            a for a in self.alerts if STATUS_RANK[a.status] >= STATUS_RANK[status] and (mode is None or a.mode == mode)
        ]
        return min(hits, key=lambda a: a.step) if hits else None


def replay(run: Run, *, every: int = 1, metric: str | None = None, start: int = 10, **monitor: Any) -> Replay:
    """Feed ``run`` to a fresh monitor ``every`` rows at a time (forecasts off unless asked)."""
    monitor.setdefault("forecast", False)
    mon = Monitor(metric=metric, **monitor)
    n = int(run.steps.size)
    ks = list(range(min(start, n), n, max(1, every))) + [n]
    for k in ks:
        mon.update(prefix(run, k))
    st = mon.runs.get(run.name)
    out = Replay(run.name, n, float(run.steps[-1]) if n else float("nan"))
    if st is not None:
        out.alerts = sorted(st.alerts.values(), key=lambda a: a.step)
        out.problem = st.problem
    return out


@dataclass
class Detection:
    """One replayed run against its label."""

    run: str
    label: str  #: ``healthy`` or the failure (mode or kind)
    onset: float | None
    end: float
    first_warn: float | None
    first_fail: float | None
    warn_source: str | None = None
    fail_source: str | None = None
    problem: str | None = None

    @property
    def healthy(self) -> bool:
        return self.label == "healthy"

    @property
    def first_alert(self) -> float | None:
        steps = [s for s in (self.first_warn, self.first_fail) if s is not None]
        return min(steps) if steps else None

    @property
    def delay(self) -> float | None:
        """First alert of any status minus the onset (None when healthy or never flagged)."""
        if self.healthy or self.onset is None or self.first_alert is None:
            return None
        return self.first_alert - self.onset

    @property
    def fail_delay(self) -> float | None:
        if self.healthy or self.onset is None or self.first_fail is None:
            return None
        return self.first_fail - self.onset

    def row(self) -> dict:
        return {
            "run": self.run,
            "label": self.label,
            "onset": self.onset,
            "end": self.end,
            "first_warn": self.first_warn,
            "first_fail": self.first_fail,
            "delay": self.delay,
            "fail_delay": self.fail_delay,
            "warn_source": self.warn_source,
            "fail_source": self.fail_source,
            "problem": self.problem,
        }


def detection(
    run: Run, label: str, onset: float | None, *, mode: str | None = None, every: int = 1, metric: str | None = None
) -> Detection:
    """Replay ``run`` and compare its first alerts with ``onset`` (``mode``: count only that
    mode's alerts for a failing run; a healthy run counts every alert as false)."""
    rep = replay(run, every=every, metric=metric)
    only = None if label == "healthy" else mode
    w = rep.first("warn", only)
    f = rep.first("fail", only)
    warn_only = [a for a in rep.alerts if a.status == "warn" and (only is None or a.mode == only)]
    fw = min(warn_only, key=lambda a: a.step) if warn_only else None
    return Detection(
        run=run.name,
        label=label,
        onset=onset,
        end=rep.last_step,
        first_warn=fw.step if fw else (w.step if w and w.status == "warn" else None),
        first_fail=f.step if f else None,
        warn_source=fw.source if fw else None,
        fail_source=f.source if f else None,
        problem=rep.problem,
    )


def fmt_table(rows: list[Detection]) -> str:
    """A plain-text table of detections (the benchmark prints it)."""
    head = f"{'run':60} {'label':34} {'onset':>7} {'end':>6} {'warn@':>7} {'fail@':>7} {'delay':>6} {'fail-delay':>10}"
    lines = [head, "-" * len(head)]

    def n(x):
        return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:g}"

    for d in rows:
        name = d.run if len(d.run) <= 60 else "..." + d.run[-57:]
        lines.append(
            f"{name:60} {d.label[:34]:34} {n(d.onset):>7} {n(d.end):>6} {n(d.first_warn):>7} "
            f"{n(d.first_fail):>7} {n(d.delay):>6} {n(d.fail_delay):>10}" + (f"  ({d.problem})" if d.problem else "")
        )
    return "\n".join(lines)
