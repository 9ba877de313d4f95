"""The set of runs under the watched paths: new run containers are picked up as they appear.

:class:`Follower` walks the paths with :func:`grpofit.readers.discover` (every poll by default:
a folder where new runs appear gets them followed), opens one :class:`~grpofit.watch.tail.Tail`
per container and, on :meth:`Follower.poll`, returns the runs whose data changed. Runs of W&B
panel exports are joined across files by run name, as ``diagnose`` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from grpofit.core.errors import GrpofitError, ReadError
from grpofit.core.runs import Run
from grpofit.watch.tail import Tail, open_tail


@dataclass
class PollResult:
    changed: list[Run] = field(default_factory=list)  #: runs with new data, newest snapshot
    problems: dict[str, str] = field(default_factory=dict)  #: container -> current reading problem
    replaced: set[str] = field(default_factory=set)  #: runs whose file was replaced or rotated since
    gone: set[str] = field(default_factory=set)  #: runs no longer in their file (renamed when it was split)
    notes: dict[str, str] = field(default_factory=dict)  #: container -> what watch makes of it (runs split)


class Follower:
    """Follow every run container under ``paths``."""

    def __init__(self, paths: list[str], *, step: str | None = None, rescan_every: int = 1) -> None:
        self.paths = [str(p) for p in paths]
        self.step = step
        self.rescan_every = max(1, int(rescan_every))
        self.tails: dict[str, Tail] = {}
        self.polls = 0
        self.waiting: dict[str, str] = {}  #: containers not readable yet -> why
        self.resets: dict[str, int] = {}  #: container -> its tail's resets already reported
        self.names: dict[str, set[str]] = {}  #: container -> the names of its runs at the last change
        self.own_outputs: set[str] = set()  #: real paths watch writes (``--jsonl``): never followed
        self.explicit = {os.path.realpath(p) for p in self.paths}  #: the paths named on the command line

    def check_paths(self, *, wait: bool = False) -> None:
        """Raise :class:`ReadError` for a path that does not exist (bad input: exit 2); with
        ``wait`` (following, not ``--once``) a missing path whose parent folder exists is waited
        for: the trainer may not have created its output folder yet."""
        for p in self.paths:
            if p == "-":
                raise ReadError(
                    "watch cannot follow standard input", path="-", fix="write the log to a file and watch that file"
                )
            if not os.path.exists(p):
                if wait and os.path.isdir(os.path.dirname(os.path.abspath(p))):
                    self.waiting[p] = "does not exist yet: waiting for it to appear"
                    continue
                raise ReadError(
                    "no such file or directory", path=p, fix="check the path (a folder may be empty, but it must exist)"
                )

    def _scan(self) -> None:
        from grpofit.readers import discover
        from grpofit.readers.discover import dir_kind

        for p in self.paths:
            if os.path.exists(p) and self.waiting.get(p, "").startswith("does not exist yet"):
                self.waiting.pop(p)  # it appeared
            try:
                sources = discover([p])
            except ReadError:
                continue  # a folder without logs yet: runs may appear later
            for src in sources:
                if src.kind == "checkpoint" and dir_kind(os.path.dirname(os.path.abspath(src.path))) == "hf-output":
                    # the newest checkpoint-N/ of a trainer's output folder: follow the folder (one
                    # run, whichever checkpoint is newest), not each checkpoint as a new run
                    src = type(src)(os.path.dirname(src.path.rstrip(os.sep)) or ".", "hf-output")
                key = os.path.realpath(src.path)
                if key in self.tails or key in self.own_outputs:
                    continue
                try:
                    tail = open_tail(src.path, src.kind, step=self.step)
                except GrpofitError as e:
                    if os.path.isfile(src.path) and p != src.path:
                        continue  # a file in a folder that is not a log: not a run
                    self.waiting[src.path] = e.one_line()
                    continue
                if tail is None:
                    self.waiting[src.path] = "empty so far"
                    continue
                self.waiting.pop(src.path, None)
                self.tails[key] = tail

    def poll(self, *, final: bool = False) -> PollResult:
        if self.polls % self.rescan_every == 0:
            self._scan()
        self.polls += 1
        out = PollResult()
        exports: dict[str, list[Run]] = {}
        changed_exports = False
        for key, tail in self.tails.items():
            try:
                changed = tail.poll(final=final)
            except OSError as e:
                tail.error = f"cannot be read ({e.strerror or e})"
                changed = False
            if tail.error and key not in self.explicit and not tail.version:
                continue  # a file found in a folder that has never read as a log (the callback's events JSON)
            if tail.error:
                out.problems[tail.path] = tail.error
            if tail.fmt == "wandb-export":
                exports[key] = tail.runs() if tail.n_rows() else []
                changed_exports |= changed
                continue
            if changed:
                runs = tail.runs()
                out.changed.extend(runs)
                names = {r.name for r in runs}
                out.gone |= self.names.get(key, set()) - names
                self.names[key] = names
                split = [w for r in runs for w in r.warnings if w.startswith("holds ") and "read them as separate" in w]
                if split:
                    out.notes[tail.path] = split[0].replace(
                        "read them as separate runs", "following them as separate runs"
                    )
                if tail.resets != self.resets.get(key, 0):
                    self.resets[key] = tail.resets
                    out.replaced.update(r.name for r in runs)
        if changed_exports:
            from grpofit.readers.panels import join_by_run_name

            out.changed.extend(join_by_run_name([r for runs in exports.values() for r in runs]))
        for path, why in self.waiting.items():
            out.problems.setdefault(path, why)
        return out

    def rows(self) -> int:
        return sum(t.n_rows() for t in self.tails.values())
