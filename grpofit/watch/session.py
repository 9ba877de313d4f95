"""The ``grpofit watch`` loop: poll, update, report, act on alerts, stop cleanly.

Ctrl-C (SIGINT) and SIGTERM only set a flag: the loop finishes the poll it is in (every JSON line
is written whole and flushed), closes its files and returns 0.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import IO, Any

from grpofit.core.errors import ReadError, UsageError
from grpofit.core.vocabulary import STATUS_RANK
from grpofit.watch.follow import Follower
from grpofit.watch.monitor import Monitor

#: a run due for re-judgement waits at most this many polls, even when reading and the rules
#: alone use up ``--cpu-budget`` (the budget is then exceeded by one re-judgement)
STARVED_POLLS = 30


@dataclass
class WatchOptions:
    paths: list[str]
    interval: float = 10.0
    once: bool = False
    max_polls: int | None = None
    on_fail: str | None = None
    exit_on: str | None = None
    jsonl: str | None = None
    metric: str | None = None
    step: str | None = None
    eval_metric: str | None = None
    group_size: int | None = None
    thresholds: dict = field(default_factory=dict)
    live: bool | None = None  #: None: a live panel when stdout is a terminal
    forecast: bool = True
    horizon: float | None = None
    cpu_budget: float = 0.03  #: share of one core watch may use once caught up (re-judgements wait for it)
    run_pattern: str | None = None  #: ``--run PATTERN``: follow only the runs it matches


def validate(opts: WatchOptions) -> None:
    if not opts.interval > 0:
        raise UsageError(f"--interval {opts.interval} must be a positive number of seconds", fix="e.g. --interval 10")
    if opts.max_polls is not None and opts.max_polls < 1:
        raise UsageError(f"--max-polls {opts.max_polls} must be at least 1", fix="e.g. --max-polls 3, or --once")
    if opts.horizon is not None and not opts.horizon > 0:
        raise UsageError(f"--horizon {opts.horizon} must be a positive step", fix="e.g. --horizon 1000")
    if opts.horizon is not None:
        from grpofit.core.limits import check_step

        check_step("--horizon", opts.horizon, example="1000", positive=True)
    if not 0 < opts.cpu_budget <= 1:
        raise UsageError(
            f"--cpu-budget {opts.cpu_budget} must be in (0, 1]", fix="e.g. --cpu-budget 0.03 (3% of a core)"
        )
    if opts.exit_on not in (None, "fail", "warn"):
        raise UsageError(f"--exit-on {opts.exit_on!r} is not fail or warn", fix="use --exit-on fail or --exit-on warn")
    if opts.jsonl:
        from grpofit.runtime.outpaths import check_not_input

        check_not_input(opts.jsonl, "--jsonl", opts.paths)


class RunSelection:
    """``FILE::RUN`` paths and ``--run PATTERN`` for watch: which of the runs read are followed.

    The files are followed whole (``bases``); a run of a ``FILE::RUN`` file is kept when its name
    is that run (or matches it as a glob), any run when the file was also given plainly. A
    selection that matches none of the runs its file holds is an error (exit 2) as soon as the
    file has been read; ``--run PATTERN`` that matched nothing is an error with ``--once``.
    """

    def __init__(self, paths: list[str], pattern: str | None = None) -> None:
        from grpofit.readers.selection import split_selector

        self.pattern = pattern
        self.bases: list[str] = []
        self.plain: set[str] = set()
        self.selectors: dict[str, list[str]] = {}  #: realpath of FILE -> the RUN parts asked for
        for p in paths:
            base, sel = split_selector(str(p))
            if base not in self.bases:
                self.bases.append(base)
            key = os.path.realpath(base) if base != "-" else base
            if sel is None:
                self.plain.add(key)
            else:
                self.selectors.setdefault(key, []).append(sel)
        self.seen: dict[str, set[str]] = {}  #: realpath of FILE -> its run names read so far
        self.matched: set[tuple[str, str]] = set()
        self.kept_any = False
        self.names_seen: list[str] = []

    def _selected(self, run) -> bool:
        from fnmatch import fnmatchcase

        from grpofit.readers.selection import matches, run_label

        if not matches(run, self.pattern):
            return False
        path, sep, _ = run.name.partition("::")
        key = os.path.realpath(path)
        if key in self.plain or key not in self.selectors:
            return True
        label = run_label(run)
        self.seen.setdefault(key, set()).add(label)
        hit = False
        for sel in self.selectors[key]:
            if label == sel or fnmatchcase(label, sel):
                self.matched.add((key, sel))
                hit = True
        return hit

    def keep(self, runs: list, *, final: bool = False) -> list:
        from grpofit.readers.selection import select_runs

        kept = [r for r in runs if self._selected(r)]
        self.kept_any |= bool(kept)
        self.names_seen += [r.name for r in runs if r.name not in self.names_seen]
        for key, sels in self.selectors.items():
            if key not in self.seen:
                continue  # not read yet
            for sel in sels:
                if (key, sel) not in self.matched:
                    base = next(b for b in self.bases if os.path.realpath(b) == key)
                    select_runs([_Named(f"{base}::{n}") for n in sorted(self.seen[key])], sel, base, option="::")
        if final and self.pattern and not self.kept_any and self.names_seen:
            select_runs(
                [_Named(n) for n in self.names_seen],
                self.pattern,
                ", ".join(self.bases[:3]) + (" ..." if len(self.bases) > 3 else ""),
            )
        return kept


@dataclass
class _Named:
    name: str


class Session:
    def __init__(self, opts: WatchOptions, out: IO[str] | None = None, err: IO[str] | None = None) -> None:
        from grpofit.diagnostics.thresholds import Thresholds

        validate(opts)
        self.opts = opts
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.selection = RunSelection(opts.paths, opts.run_pattern)
        self.follower = Follower(self.selection.bases, step=opts.step)
        if opts.jsonl:  # watch never follows a file it writes (watch DIR --jsonl DIR/watch.jsonl)
            self.follower.own_outputs.add(os.path.realpath(opts.jsonl))
        self.follower.check_paths(wait=not self.opts.once)
        th = Thresholds.from_overrides(opts.thresholds) if opts.thresholds else None
        self.monitor = Monitor(
            metric=opts.metric,
            eval_metric=opts.eval_metric,
            thresholds=th,
            group_size=opts.group_size,
            forecast=opts.forecast,
            horizon=opts.horizon,
        )
        self.stop = False
        self.exit_code = 0
        self.jsonl: IO[str] | None = None
        self.printed: dict[str, str] = {}
        self.problems_shown: dict = {}  #: path (or ("option", run)) -> the problem last shown
        self.polls = 0
        self.tokens = 0.0  #: seconds of re-judging allowed now (a token bucket)
        self.starved = 0  #: polls in a row that had re-judgements due and did none
        self.last_poll: float | None = None

    # ------------------------------------------------------------------ running
    def open(self) -> None:
        if self.opts.jsonl and self.jsonl is None:
            try:
                self.jsonl = open(self.opts.jsonl, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            except OSError as e:
                raise UsageError(
                    f"cannot append to {self.opts.jsonl}: {e.strerror}",
                    path=self.opts.jsonl,
                    fix="choose a writable --jsonl path",
                ) from None

    def close(self) -> None:
        if self.jsonl is not None:
            self.jsonl.close()
            self.jsonl = None

    def run(self) -> int:
        self.open()
        old = self._install_signals()
        live = self._live()
        try:
            if live is not None:
                with live:
                    self._loop(live)
            else:
                self._loop(None)
        finally:
            self._restore_signals(old)
            self.close()
        return self.exit_code

    def _loop(self, live) -> None:
        while not self.stop:
            final = self.opts.once
            events = self.poll(final=final)
            self._report(events, live)
            if self.exit_code or self.opts.once:
                break
            if self.opts.max_polls is not None and self.polls >= self.opts.max_polls:
                break
            if not self.monitor.catching_up:  # catching up: poll again at once
                self._sleep(self.opts.interval)

    def poll(self, *, final: bool = False) -> list[dict]:
        """One poll: read what was appended, update every changed run, act on new alerts."""
        self.open()
        self.polls += 1
        cpu0 = time.process_time()
        res = self.follower.poll(final=final)
        for name in res.gone:  # renamed: its file turned out to hold runs appended one after another
            self.monitor.forget(name)
        self._warn_problems(res.notes, prefix="note")
        events: list[dict] = []
        self._refill_tokens()
        for run in self.selection.keep(res.changed, final=final or self.opts.once):
            events += self.monitor.update(
                run, force_fit=final, defer=not final, replaced=run.name in res.replaced, final=self.opts.once
            )
        events += self._judge_pending(cpu0)
        if any(e["event"] == "forecast" for e in events):  # a run was re-judged this poll
            from grpofit.runtime.trim import release

            release()  # its temporaries, freed, go back to the OS (see trim.py)
        self._charge(cpu0)
        self._option_errors(final=final or self.opts.once)
        if (final or self.opts.once) and res.problems and not self.monitor.runs:
            _raise_unreadable(res.problems)
        if self.opts.once and self.monitor.runs and all(st.problem for st in self.monitor.runs.values()):
            # --once and no run has anything to judge (no reward column): exit 2 as diagnose does
            first, *more = [st.problem for st in self.monitor.runs.values()]
            raise ReadError(first + (f" (and {len(more)} more run(s) with nothing to judge)" if more else ""))
        self._warn_problems(res.problems)
        self._act_on(events)
        return events

    def _refill_tokens(self) -> None:
        """Credit the CPU budget for the wall time since the last poll (capped) and note this poll's time."""
        now = time.monotonic()
        if self.last_poll is not None:
            cap = max(5.0, 10 * self.opts.cpu_budget * self.opts.interval)
            self.tokens = min(cap, self.tokens + self.opts.cpu_budget * (now - self.last_poll))
        self.last_poll = now

    def _judge_pending(self, cpu0: float) -> list[dict]:
        """The events of re-judging pending runs with the CPU budget left after this poll's reading
        (``cpu0``: the process time at its start); after ``STARVED_POLLS`` starved polls, one all the same."""
        # once caught up, the budget pays for the whole poll: reading and the rules first, then
        # re-judgements with what is left (a poll that judged a run for the first time is free)
        budget = max(self.tokens - (time.process_time() - cpu0), 0.0)
        if self.monitor.pending or self.monitor.pending_fc:
            self.starved += 1
            if self.starved >= STARVED_POLLS:  # reading and the rules alone use up the budget:
                budget = max(budget, 1e-9)  # one re-judgement (the most grown run) all the same
        events = self.monitor.judge_pending(budget)
        if self.monitor.rejudge_spent or self.monitor.catchup_spent:
            self.starved = 0
        return events

    def _charge(self, cpu0: float) -> None:
        """Take this poll's CPU time (since ``cpu0``) off the budget; catching up empties it instead."""
        if self.monitor.catchup_spent:
            self.tokens = 0.0  # catching up is free, and earns no credit for the polls after it
        else:
            self.tokens -= time.process_time() - cpu0

    def _warn_problems(self, problems: dict, prefix: str = "warning") -> None:
        """A warning (or note) on stderr for each path's problem, once per distinct message."""
        for path, why in problems.items():
            if self.problems_shown.get((prefix, path)) != why:
                self.problems_shown[(prefix, path)] = why
                print(f"{prefix}: {why}" if path in why else f"{prefix}: {path}: {why}", file=self.err, flush=True)

    def _act_on(self, events: list[dict]) -> None:
        """Write the events to ``--jsonl``, run ``--on-fail`` for each failing alert and set the
        exit code for an alert at or above ``--exit-on``."""
        for e in events:
            self._write(e)
        for e in events:
            if e["event"] == "alert" and e["status"] == "fail" and self.opts.on_fail:
                self._hook(e)
        if self.opts.exit_on and any(
            e["event"] == "alert" and STATUS_RANK[e["status"]] >= STATUS_RANK[self.opts.exit_on] for e in events
        ):
            self.exit_code = max(self.exit_code, 1)

    def _option_errors(self, *, final: bool) -> None:
        """An option value no run has (``--metric nope``): with ``--once`` an error (exit 2, one
        line, nothing on stdout when no run could be judged); while following, a warning per run
        on stderr (the column may still appear, e.g. a first eval)."""
        from grpofit.commands.pipeline import raise_bad_option

        bad = [st.option_error for st in self.monitor.runs.values() if st.option_error is not None]
        if not bad:
            return
        if final:
            raise_bad_option(bad, len(self.monitor.runs) - len(bad))
            self.exit_code = 2
        for e in bad:
            if self.problems_shown.get(("option", e.run)) != e.error:
                self.problems_shown[("option", e.run)] = e.error
                print(f"error: {e.error}" if final else f"warning: {e.error}", file=self.err, flush=True)

    # ------------------------------------------------------------------ output
    def _write(self, event: dict) -> None:
        if self.jsonl is None:
            return
        line = _compact(event)
        try:
            self.jsonl.write(line + "\n")
            self.jsonl.flush()
        except OSError as e:  # a full disk: the --jsonl file named, not standard output
            jsonl, self.jsonl = self.jsonl, None
            try:
                jsonl.close()
            except OSError:
                pass
            raise UsageError(
                f"--jsonl: cannot append to it ({e.strerror or e})",
                path=self.opts.jsonl,
                fix="free space there or choose another --jsonl path",
            ) from None

    def _report(self, events: list[dict], live) -> None:
        from grpofit.watch import display

        if live is not None:
            for e in events:
                if e["event"] == "alert":
                    live.console.print(display.alert_line(e), markup=False, highlight=False)
            live.update(display.table(self.monitor, footer=self._footer()))
            return
        for e in events:
            if e["event"] == "alert":
                print(display.alert_line(e), file=self.out, flush=True)
        for st in self.monitor.runs.values():
            line = st.problem and f"WAITING run={st.name}: {st.problem}" or display.update_line(st)
            if self.printed.get(st.name) != line:
                self.printed[st.name] = line
                print(line, file=self.out, flush=True)

    def _footer(self) -> str:
        return f"{len(self.monitor.runs)} run(s), poll {self.polls} every {self.opts.interval:g}s; Ctrl-C stops"

    def _live(self):
        live = self.opts.live
        if live is None:
            live = bool(getattr(self.out, "isatty", lambda: False)()) and not self.opts.once
        if not live:
            return None
        from rich.console import Console
        from rich.live import Live

        return Live(console=Console(file=self.out), refresh_per_second=1, auto_refresh=False, transient=False)

    # ------------------------------------------------------------------ alerts
    def _hook(self, event: dict) -> None:
        from grpofit.watch.hooks import run_hook

        run_hook(
            self.opts.on_fail,
            {
                "GRPOFIT_RUN": event["run"],
                "GRPOFIT_MODE": event["mode"],
                "GRPOFIT_STATUS": event["status"],
                "GRPOFIT_EVIDENCE": event["evidence"],
                "GRPOFIT_STEP": "" if event["step"] is None else event["step"],
                "GRPOFIT_ONSET": "" if event.get("onset") is None else event["onset"],
                "GRPOFIT_SOURCE": event.get("source", ""),
            },
            self.err,
            stop=lambda: self.stop,
        )

    # ------------------------------------------------------------------ signals
    def _install_signals(self) -> dict:
        old: dict[int, Any] = {}

        def handler(signum, frame):
            self.stop = True

        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                old[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread (e.g. under a test runner thread)
            pass
        return old

    def _restore_signals(self, old: dict) -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stop:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.2))


def _compact(event: dict) -> str:
    """One JSON line, NaN/inf as null (the contract never lets them into JSON)."""
    import json

    from grpofit.core.jsonout import jsonable

    return json.dumps(jsonable(event), separators=(",", ":"), allow_nan=False)


def _raise_unreadable(problems: dict) -> None:
    """Raise the ``ReadError`` for ``--once`` when not one run could be read: bad input (exit 2,
    one line naming the first path's problem and how many more, nothing on stdout)."""
    (path, why), *more = problems.items()
    line = why if path in why else f"{path}: {why}"
    more_text = f" (and {len(more)} more path(s) that could not be read)" if more else ""
    fix = None if "; " in line else "nothing to judge with --once (without it, watch waits for the first records)"
    raise ReadError(line + more_text, fix=fix)
