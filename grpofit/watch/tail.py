"""Follow logs that are still being written: read only what was appended since the last poll.

One :class:`Tail` per run container. Each keeps the byte offset up to which it has consumed
complete records, and on :meth:`Tail.poll` reads the new bytes, cuts them at the last complete
record and hands that slice to the *existing* reader of the format (the parsing lives in
:mod:`grpofit.readers`; only the cutting is here):

- text logs (JSONL, verl JSONL, CSV/TSV and W&B panel exports, verl and TRL console logs):
  complete lines; a CSV slice gets the file's header line put back in front of it; a JSONL
  last line without its newline counts once it parses as a whole object;
- TensorBoard event files: complete length-prefixed records;
- ``.wandb`` files: complete LevelDB-log records, resumed at the record where the last poll
  stopped;
- ``trainer_state.json`` (checkpoints, HF output folders) and anything else: re-read whole
  when its size, mtime or inode change (the Trainer rewrites it whole).

A file whose inode changes or that shrinks below the consumed offset was rotated or replaced:
it is read again from the start. A torn last record simply waits for the next poll.
"""

from __future__ import annotations

import json
import os
import re
import struct
from typing import Any

import numpy as np

from grpofit.core.errors import GrpofitError, ReadError
from grpofit.core.runs import ROW_INDEX, Run, make_run
from grpofit.watch.grow import Grow

#: formats whose finished readers split runs appended one after another at a step reset
SPLIT_FORMATS = ("jsonl", "verl-jsonl", "wandb-history", "csv", "tsv")
#: text formats read as appended complete lines
TEXT_FORMATS = (
    "csv",
    "tsv",
    "csv-long",
    "wandb-export",
    "wandb-history",
    "jsonl",
    "verl-jsonl",
    "verl-console",
    "trl-console",
)
#: at most this many new bytes are parsed per poll (a huge backlog is caught up over several polls)
MAX_READ = 64 * 1024 * 1024
#: bytes of the consumed part of a followed file checked again before each read (see Tail.mark)
MARK = 64
_HEAD = 256 * 1024


def _stat(path: str):
    try:
        return os.stat(path)
    except OSError:
        return None


#: JSONL slices up to this size go through the JSONL reader's line-by-line parser: for the few
#: lines a poll brings, its per-block pandas fast path costs more than it saves
SMALL_JSONL = 64 * 1024


def _small_jsonl(fmt: str, name: str, data: bytes, step: str | None) -> list[Run]:
    from grpofit.readers.appended import RunIds, split_runs
    from grpofit.readers.jsonl import _slow_block

    ids = RunIds()
    cols, nrows = _slow_block(data, name, 0, ids=ids)
    if not nrows:
        return []
    parts, _ = split_runs(cols, step, ids, piece=True)
    return [make_run(name if sfx is None else f"{name}::{sfx}", name, fmt, part, step=step) for sfx, part in parts]


def _parse(fmt: str, name: str, path: str | None, data: bytes, step: str | None) -> list[Run]:
    """The runs in ``data`` read by the registered reader of ``fmt`` (``path`` gives the reader
    the folder where hyperparameters live)."""
    from grpofit import readers
    from grpofit.readers.source import Source

    if fmt in ("jsonl", "verl-jsonl") and len(data) <= SMALL_JSONL:
        runs = _small_jsonl(fmt, name, data, step)
    else:
        if not data.endswith((b"\n", b"\r")):
            # the tail has settled that this last line counts: the delimited reader drops an
            # unterminated last line of a stream as torn, so end it here
            data += b"\n"
        # in-memory only: readers prefer a path when they have one, and would read the whole file
        runs = readers._reader(fmt)(Source(name, data=data, piece=True), fmt, step=step)
    if path is not None and runs and not any(r.config for r in runs):
        from grpofit.readers.config import config_near

        config, config_source = config_near(path)
        if config:
            for r in runs:
                r.config, r.config_source = dict(config), config_source
    return runs


class Columns:
    """One run's steps and metric columns, grown by appending parsed slices (in place)."""

    def __init__(self) -> None:
        self._steps = Grow()
        self._metrics: dict[str, Grow] = {}
        self.step_column = ROW_INDEX
        self.config: dict[str, Any] = {}
        self.config_source: str | None = None
        self.fmt = ""
        self.warnings: list[str] = []

    def __len__(self) -> int:
        return self._steps.n

    @property
    def steps(self) -> np.ndarray:
        return self._steps.view()

    @property
    def metrics(self) -> dict[str, np.ndarray]:
        return {k: g.view() for k, g in self._metrics.items()}

    def nbytes(self) -> int:
        return self._steps.nbytes + sum(g.nbytes for g in self._metrics.values())

    def append(self, run: Run, offset_rows: int = 0) -> None:
        n_old, n_new = self._steps.n, run.steps.size
        if n_new == 0:
            return
        steps = run.steps + offset_rows if run.step_column == ROW_INDEX else run.steps
        self._steps.extend(np.asarray(steps, dtype=float))
        for k in run.metrics:
            if k not in self._metrics:
                g = self._metrics[k] = Grow(self._steps.buf.size)
                g.fill(np.nan, n_old)
        for k, g in self._metrics.items():
            new = run.metrics.get(k)
            if new is None:
                g.fill(np.nan, n_new)
            else:
                g.extend(np.asarray(new, dtype=float))
        self.step_column = run.step_column
        self.fmt = run.format
        if run.config and not self.config:
            self.config, self.config_source = dict(run.config), run.config_source
        for w in run.warnings:
            if w not in self.warnings and len(self.warnings) < 20:
                self.warnings.append(w)

    def run(self, name: str, source: str) -> Run:
        """The accumulated run, normalised like every reader's (sorted, duplicates merged)."""
        s = self.steps
        metrics = self.metrics
        if s.size > 1 and not np.all(s[1:] > s[:-1]):
            key = "\x00step"
            r = make_run(
                name,
                source,
                self.fmt,
                {key: s, **metrics},
                step=key,
                config=self.config,
                config_source=self.config_source,
            )
            r.step_column = self.step_column
            r.warnings = [w for w in r.warnings if "duplicated" not in w] + list(self.warnings)
            return r
        return Run(
            name=name,
            source=source,
            format=self.fmt,
            steps=s,
            step_column=self.step_column,
            metrics=metrics,
            config=dict(self.config),
            config_source=self.config_source,
            warnings=list(self.warnings),
            stats={"rows": int(s.size)},
        )


class Tail:
    """Base: a container followed by polls. ``poll()`` -> True when new rows arrived."""

    kind = "file"

    def __init__(self, path: str, *, step: str | None = None, fmt: str | None = None) -> None:
        self.path = path
        self.step = step
        self.fmt = fmt
        self.ino: int | None = None
        self.offset = 0
        self.runs_: dict[str, Columns] = {}
        self.order: list[str] = []
        self.error: str | None = None  #: the last reading problem (shown, never fatal)
        self.resets = 0  #: times the file was found rotated or replaced
        self.version = 0  #: bumped whenever rows were added
        #: ``(position, bytes)``: the last bytes consumed, checked again before reading on (a
        #: file truncated and rewritten past the old size within one poll keeps its inode and
        #: grows: only its content tells)
        self.mark: tuple[int, bytes] | None = None

    # -- shared bookkeeping
    def _reset(self) -> None:
        self.offset = 0
        self.runs_ = {}
        self.order = []
        self.resets += 1
        self.mark = None

    def _consumed(self, end: int, data: bytes) -> None:
        """The file's bytes up to ``end`` were read; ``data`` ends with them (the mark)."""
        if data:
            tail = data[-MARK:]
            self.mark = (end - len(tail), tail)

    def _rewritten(self) -> bool:
        """Whether the bytes at the mark changed (the file was rewritten in place)."""
        if self.mark is None:
            return False
        pos, expected = self.mark
        try:
            with open(self.path, "rb") as f:
                f.seek(pos)
                return f.read(len(expected)) != expected
        except OSError:
            return False

    def _add(self, runs: list[Run]) -> None:
        for r in runs:
            cols = self.runs_.get(r.name)
            if cols is None:
                cols = self.runs_[r.name] = Columns()
                self.order.append(r.name)
            cols.append(r, offset_rows=len(cols))
        if runs:
            self.version += 1

    def runs(self) -> list[Run]:
        return [self.runs_[n].run(n, self.path) for n in self.order if len(self.runs_[n])]

    def n_rows(self) -> int:
        return sum(len(c) for c in self.runs_.values())

    def _rotated(self, st) -> bool:
        if self.ino is not None and (st.st_ino != self.ino or st.st_size < self.offset or self._rewritten()):
            self._reset()
            self.ino = st.st_ino
            return True
        self.ino = st.st_ino
        return False

    def poll(self, *, final: bool = False) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError


#: a run cut at a step reset, as a reader names it after the file's name
_RUN_SUFFIX = re.compile(r"::run(\d+)")
#: the key of the k-th run without an id of a followed file (named at :meth:`TextTail.runs`)
_SEGMENT = "\x00segment"


def _segment(k: int) -> str:
    return f"{_SEGMENT}{k}"


def _falls_back(current: Columns, run: Run) -> bool:
    """Whether ``run``'s rows start a new run after ``current``'s: its first step falls back to
    ``current``'s start (at most one median step interval above it), after at least
    :data:`~grpofit.readers.appended.MIN_ROWS` rows (the readers' rule at a step reset)."""
    from grpofit.readers.appended import MIN_ROWS

    s = current.steps
    if run.steps.size == 0 or s.size < MIN_ROWS or current.step_column == ROW_INDEX:
        return False
    gaps = np.diff(s)
    interval = float(np.median(gaps[gaps > 0])) if np.any(gaps > 0) else 1.0
    return bool(run.steps[0] < s[-1] and run.steps[0] <= s[0] + interval)


class TextTail(Tail):
    """Line-oriented logs: JSONL, CSV/TSV, panel exports, console logs."""

    def __init__(self, path: str, fmt: str, *, step: str | None = None) -> None:
        super().__init__(path, step=step, fmt=fmt)
        self.header = b""
        self.last_size = -1
        self.segments = 1  #: runs without an id cut at step resets so far

    def _reset(self) -> None:
        super()._reset()
        self.header = b""
        self.segments = 1

    def poll(self, *, final: bool = False) -> bool:
        st = _stat(self.path)
        if st is None:
            self.error = "file vanished; waiting for it to come back"
            return False
        self._rotated(st)
        if st.st_size == self.offset:
            return False
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(min(st.st_size - self.offset, MAX_READ))
        start = self.offset
        if start == 0 and data.startswith(b"\xef\xbb\xbf"):
            data, start = data[3:], 3
            self.offset = 3
        cut = data.rfind(b"\n") + 1
        body, rest = data[:cut], data[cut:]
        # a last line without its newline counts when it is a whole JSON object, or when the
        # file has not grown for a whole poll (the writer finished without a final newline)
        settled = st.st_size == self.last_size
        self.last_size = st.st_size
        if rest.strip() and (final or settled or self._complete_last(rest)):
            body, rest = data, b""
        if not body:
            return False
        delimited = self.fmt in ("csv", "tsv", "csv-long", "wandb-export", "wandb-history")
        if delimited and not self.header:
            nl = body.find(b"\n")
            self.header = body[: nl + 1] if nl >= 0 else body + b"\n"
            payload = body[len(self.header) :]
        else:
            payload = body
        if not payload.strip():
            self.offset = start + len(body)
            return False
        chunk = self.header + payload if delimited else payload
        try:
            runs = _parse(self.fmt, self.path, None if self.runs_ else self.path, chunk, self.step)
        except GrpofitError as e:
            if _no_rows(e):
                self.offset = start + len(body)
                return False
            # not consumed: read again (with whatever was appended) next poll
            self.error = e.one_line()
            if start == 0:
                self.header = b""
            return False
        self.offset = start + len(body)
        self._consumed(self.offset, body)
        self.error = None
        self._add(runs)
        return bool(runs)

    def _add(self, runs: list[Run]) -> None:
        """A piece's runs, in file order. In formats whose readers split runs appended one after
        another at a step reset (:mod:`grpofit.readers.appended`), the runs without an id are
        numbered across pieces: each of a piece's runs (cut wherever the step falls back, even
        after a few rows) continues the run being followed unless its steps fall back to that
        run's start after at least ``MIN_ROWS`` of its rows (:func:`~grpofit.readers.appended.reset_starts`'s
        rule on the whole run)."""
        if self.fmt not in SPLIT_FORMATS:
            return super()._add(runs)
        for r in runs:
            m = _RUN_SUFFIX.fullmatch(r.name[len(self.path) :]) if r.name.startswith(self.path) else None
            if r.name != self.path and m is None:
                super()._add([r])  # a run told apart by its id
                continue
            current = self.runs_.get(_segment(self.segments))
            if current is not None and _falls_back(current, r):
                self.segments += 1  # else a false start or a resume: merged as the readers merge it
            r.name = _segment(self.segments)
            super()._add([r])

    def runs(self) -> list[Run]:
        out = super().runs()
        for r in out:
            if r.name.startswith(_SEGMENT):
                k = int(r.name[len(_SEGMENT) :])
                r.name = self.path if self.segments == 1 else f"{self.path}::run{k}"
                r.warnings = [w for w in r.warnings if not w.startswith("holds ") or "appended" not in w]
                if k == 1 and self.segments > 1:
                    from grpofit.readers.appended import appended_note

                    r.warnings.insert(0, appended_note(self.segments, self.segments - 1))
        return out

    def _complete_last(self, rest: bytes) -> bool:
        """A JSON line written without its newline yet counts when it parses as one object."""
        if self.fmt not in ("jsonl", "verl-jsonl", "wandb-history") or not rest.strip().startswith(b"{"):
            return False
        try:
            return isinstance(json.loads(rest), dict)
        except ValueError:
            return False


def _no_rows(e: GrpofitError) -> bool:
    text = e.message
    return any(k in text for k in ("holds no", "has no", "no row", "is empty", "holds no numeric"))


_TF_HEADER = struct.Struct("<QI")


class EventsTail(Tail):
    """A TensorBoard event file: complete length-prefixed records."""

    kind = "tensorboard"

    def poll(self, *, final: bool = False) -> bool:
        from grpofit.readers.tensorboard import masked_crc32c, parse_tfevents

        st = _stat(self.path)
        if st is None:
            return False
        self._rotated(st)
        if st.st_size == self.offset:
            return False
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(min(st.st_size - self.offset, MAX_READ))
        pos, n = 0, len(data)
        while n - pos >= _TF_HEADER.size:
            length, crc = _TF_HEADER.unpack_from(data, pos)
            if masked_crc32c(data[pos : pos + 8]) != crc:
                self.error = f"corrupt record header at byte {self.offset + pos}; stopped following this file"
                break
            end = pos + _TF_HEADER.size + length + 4
            if end > n:
                break
            pos = end
        if pos == 0:
            return False
        body = data[:pos]
        self.offset += pos
        self._consumed(self.offset, body)
        try:
            table, warnings = parse_tfevents(body, self.path)
        except ReadError:
            return False  # records without scalars (the file version, graphs)
        run = make_run(self.path, self.path, "tensorboard", table, step="step", warnings=[])
        self._add([run])
        return True


class EventsDirTail(Tail):
    """A TensorBoard log folder: every event file in it and its immediate subfolders."""

    kind = "tensorboard"

    def __init__(self, path: str, *, step: str | None = None) -> None:
        super().__init__(path, step=step, fmt="tensorboard")
        self.files: dict[str, tuple[str, EventsTail]] = {}
        self.config: dict = {}
        self.config_source: str | None = None

    def poll(self, *, final: bool = False) -> bool:
        from grpofit.readers.tensorboard import event_files

        changed = False
        for sub, file in event_files(self.path):
            if file not in self.files:
                self.files[file] = (sub, EventsTail(file))
                if not self.config:
                    from grpofit.readers.config import config_in_dir

                    self.config, self.config_source = config_in_dir(self.path)
        for sub, tail in self.files.values():
            changed |= tail.poll(final=final)
        if changed:
            self.version += 1
        return changed

    def n_rows(self) -> int:
        return sum(t.n_rows() for _, t in self.files.values())

    def runs(self) -> list[Run]:
        owners: dict[str, set[str]] = {}
        parts = []
        for sub, tail in self.files.values():
            for r in tail.runs():
                parts.append((sub, r))
                for k in r.metrics:
                    owners.setdefault(k, set()).add(sub)
        if not parts:
            return []
        steps = np.unique(np.concatenate([r.steps for _, r in parts]))
        metrics: dict[str, np.ndarray] = {}
        for sub, r in parts:
            idx = np.searchsorted(steps, r.steps)
            for k, v in r.metrics.items():
                key = f"{sub}/{k}" if sub and len(owners[k]) > 1 else k
                col = metrics.setdefault(key, np.full(steps.size, np.nan))
                ok = np.isfinite(v)
                col[idx[ok]] = v[ok]
        return [
            Run(
                name=self.path,
                source=self.path,
                format="tensorboard",
                steps=steps,
                step_column="step",
                metrics=metrics,
                config=dict(self.config),
                config_source=self.config_source,
            )
        ]


class WandbTail(Tail):
    """A ``run-<id>.wandb`` file (or a run folder holding one): complete LevelDB-log records."""

    kind = "wandb-run"

    def __init__(self, path: str, file: str, *, step: str | None = None) -> None:
        super().__init__(path, step=step, fmt="wandb-run")
        self.file = file
        self.pending = b""  #: parts of a record split across blocks, kept between polls
        self.config: dict = {}
        self.config_source: str | None = None

    def _reset(self) -> None:
        super()._reset()
        self.pending = b""

    def poll(self, *, final: bool = False) -> bool:
        from grpofit.readers import wandb_binary as wb

        st = _stat(self.file)
        if st is None:
            return False
        if self.ino is not None and (st.st_ino != self.ino or st.st_size < self.offset):
            self._reset()
        self.ino = st.st_ino
        if st.st_size == self.offset:
            return False
        with open(self.file, "rb") as f:
            f.seek(self.offset)
            data = f.read(min(st.st_size - self.offset, MAX_READ))
        base = self.offset
        pos = 0
        if base == 0:
            if len(data) < wb.HEADER.size:
                return False
            if not wb.looks_like_wandb(data):
                self.error = "not a W&B .wandb file (no ':W&B' header)"
                return False
            pos = wb.HEADER.size
        records: list[bytes] = []
        consumed = pos
        pending = self.pending
        n = len(data)
        while pos < n:
            left = wb.BLOCK - (base + pos) % wb.BLOCK
            if left < wb.CHUNK.size:
                if n - pos < left:
                    break
                pos += left
                consumed = pos if not pending else consumed
                continue
            if n - pos < wb.CHUNK.size:
                break
            crc, length, kind = wb.CHUNK.unpack_from(data, pos)
            if crc == 0 and length == 0 and kind == 0:
                if n - pos < left:
                    break  # zero-filled (preallocated) space: wait for it to be written
                pos += left
                consumed = pos if not pending else consumed
                continue
            end = pos + wb.CHUNK.size + length
            if length > left - wb.CHUNK.size or end > n:
                break
            payload = data[pos + wb.CHUNK.size : end]
            if not wb.chunk_ok(crc, kind, payload):
                break  # torn (being written) or corrupt: retry from here next poll
            pos = end
            if kind == wb.FULL:
                records.append(payload)
                pending = b""
                consumed = pos
            elif kind == wb.FIRST:
                pending = payload
            elif kind == wb.MIDDLE:
                pending += payload
            elif kind == wb.LAST:
                records.append(pending + payload)
                pending = b""
                consumed = pos
        # resume at the first byte not part of a complete record; a split record in progress
        # is re-read from its FIRST chunk next time
        self.offset = base + consumed
        self.pending = b""
        if not records:
            return False
        warnings: list[str] = []
        rows, raw_config = wb._decode_records(records, self.file, warnings)
        if raw_config and not self.config:
            self.config, self.config_source = wb._flatten_config(raw_config), self.file
        if not rows:
            return False
        table = wb._rows_to_table(rows)
        run = make_run(
            self.path,
            self.path,
            "wandb-run",
            table,
            step=self.step,
            config=self.config,
            config_source=self.config_source,
        )
        self._add([run])
        return True


class WholeTail(Tail):
    """A container re-read whole when it changes (trainer_state.json, checkpoints, parquet)."""

    kind = "whole"

    def __init__(self, path: str, *, step: str | None = None) -> None:
        super().__init__(path, step=step)
        self.sig: tuple | None = None
        self.snapshot: list[Run] = []

    def _signature(self):
        from grpofit.readers.discover import dir_kind, newest_checkpoint

        target = self.path
        if os.path.isdir(target):
            kind = dir_kind(target)
            if kind == "hf-output" and not os.path.isfile(os.path.join(target, "trainer_state.json")):
                target = newest_checkpoint(target) or target
            state = os.path.join(target, "trainer_state.json")
            if os.path.isfile(state):
                target = state
        st = _stat(target)
        return None if st is None else (target, st.st_ino, st.st_size, st.st_mtime_ns)

    def poll(self, *, final: bool = False) -> bool:
        from grpofit.readers import read_path

        sig = self._signature()
        if sig is None or sig == self.sig:
            return False
        try:
            runs = read_path(self.path, step=self.step)
        except GrpofitError as e:
            # a checkpoint being written: keep the last good snapshot and retry next poll
            self.error = e.one_line()
            return False
        self.error = None
        self.sig = sig
        self.snapshot = runs
        self.version += 1
        return True

    def runs(self) -> list[Run]:
        if not (os.path.isdir(self.path) and self.snapshot):
            return list(self.snapshot)
        from dataclasses import replace

        from grpofit.readers.discover import dir_kind

        if dir_kind(self.path) != "hf-output":
            return list(self.snapshot)
        # a trainer's output folder is one run: its checkpoint-N/ folders are views of it, so the
        # run is named by the folder (the same name from one save to the next), not the checkpoint
        return [
            replace(r, name=self.path if len(self.snapshot) == 1 else f"{self.path}::{r.name.rsplit('::', 1)[-1]}")
            for r in self.snapshot
        ]

    def n_rows(self) -> int:
        return sum(r.steps.size for r in self.snapshot)


def open_tail(path: str, kind: str, *, step: str | None = None) -> Tail | None:
    """The tail for one :class:`~grpofit.readers.RunSource`; None while a file is still empty.

    Raises :class:`ReadError` for a file whose content is not a supported log.
    """
    from grpofit.readers import sniff

    if kind == "tensorboard":
        return EventsDirTail(path, step=step)
    if kind == "wandb-run":
        from grpofit.readers.wandb_binary import _wandb_files

        files = _wandb_files(path)
        if files:
            tail = WandbTail(path, max(files, key=lambda f: (os.path.getsize(f), f)), step=step)
            cfg = os.path.join(path, "files", "config.yaml")
            if os.path.isfile(cfg):
                from grpofit.readers.wandb_binary import read_config_yaml

                try:
                    tail.config, tail.config_source = read_config_yaml(cfg), cfg
                except ReadError:
                    pass
            return tail
        history = os.path.join(path, "files", "wandb-history.jsonl")
        tail = TextTail(history, "jsonl", step=step)
        return tail
    if kind in ("checkpoint", "hf-output") or os.path.isdir(path):
        return WholeTail(path, step=step)
    st = _stat(path)
    if st is None or st.st_size == 0:
        return None
    with open(path, "rb") as f:
        head = f.read(_HEAD)
    if not head.strip():
        return None
    if (
        b"\n" not in head
        and len(head) < _HEAD
        and not head.startswith((b":W&B", b"PAR1"))
        and head[:1] not in (b"{", b"[")
    ):
        return None  # not even one complete line yet: wait
    fmt = sniff(head, path)
    if fmt == "wandb-history" and head.lstrip()[:1] == b"{":
        fmt = "jsonl"
    if fmt in TEXT_FORMATS:
        return TextTail(path, fmt, step=step)
    if fmt == "tensorboard":
        tail = EventsTail(path, step=step)
        return tail
    if fmt == "wandb-binary":
        return WandbTail(path, path, step=step)
    return WholeTail(path, step=step)
