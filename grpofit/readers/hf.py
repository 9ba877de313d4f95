"""Hugging Face ``trainer_state.json`` (TRL's GRPOTrainer writes one per ``checkpoint-N/``) and
bare ``log_history`` arrays.

Rows are sparse: a training row, an eval row and (with ``num_iterations=2``) rows without a
reward share or skip steps. Rows with the same ``step`` are merged, later keys winning; a key a
row lacks stays missing (NaN), never 0. The closing summary row (``train_runtime``,
``train_loss``) is dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from grpofit.core.errors import ReadError, UnknownFormat
from grpofit.core.runs import Run, _to_float
from grpofit.readers.common import RowColumns, build_run, check_columns
from grpofit.readers.jsonl import flatten_row
from grpofit.readers.jsonscan import JsonScanner
from grpofit.readers.source import SUPPORTED_HINT, Source

#: keys of the summary row the Trainer appends at the end of training
SUMMARY_KEYS = ("train_runtime", "train_loss", "train_samples_per_second", "total_flos")
#: trainer_state.json top-level scalars worth keeping as hyperparameters
STATE_CONFIG = (
    "logging_steps",
    "eval_steps",
    "save_steps",
    "train_batch_size",
    "num_train_epochs",
    "max_steps",
    "global_step",
)


def read_hf(src: Source, fmt: str, *, step: str | None = None) -> list[Run]:
    """Read a trainer_state.json (object with ``log_history``) or a bare log_history array.

    The document is scanned, not loaded: each log row is parsed on its own and goes straight
    into float columns, so memory stays a fraction of the file's size (a loaded document of
    dicts is several times it)."""
    merger = RowMerger(src.name)
    top: dict[str, Any] = {}
    failed = ""
    kind = _load_document(src.data, merger, top) if src.data is not None else None
    if kind is None:
        with src.open() as f:
            scan = JsonScanner(f)
            try:
                kind = _scan_document(scan, merger, top)
            except (ValueError, RecursionError) as exc:
                reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
                failed = reason
    if kind is None:
        from grpofit.readers.jsonl import read_json_stream

        runs = read_json_stream(src, step=step)  # JSON rows (one per line or pretty-printed) among text
        if runs:
            return runs
        if _ends_open(src):  # the document stops before it closes: a cut copy
            raise ReadError(
                f"is not valid JSON ({failed}); it ends before its last bracket closes",
                path=src.name,
                fix="the file is truncated; use the copy in the newest complete checkpoint-N/",
            )
        raise ReadError(
            f"is not valid JSON ({failed})",
            path=src.name,
            fix="repair the file where the parser stops, or point at the run's metrics log",
        )
    state_config: dict[str, Any] = {}
    if kind == "object":
        if not top.get("log_history"):
            raise UnknownFormat(
                "is a JSON object without log_history, not a training log",
                path=src.name,
                fix=f"point at trainer_state.json or a metrics log ({SUPPORTED_HINT})",
            )
        fmt = "trainer_state"
        state_config = {f"trainer_state.{k}": top[k] for k in STATE_CONFIG if isinstance(top.get(k), (int, float))}
    elif kind == "array":
        fmt = "log_history"
    else:
        raise UnknownFormat("is JSON but not a list of log rows", path=src.name, fix=f"grpofit reads {SUPPORTED_HINT}")
    if merger.not_rows:
        raise UnknownFormat(
            "is a JSON array whose items are not log rows (objects)",
            path=src.name,
            fix=f"grpofit reads {SUPPORTED_HINT}",
        )
    if not merger.rows:
        raise ReadError(
            "log_history is empty", path=src.name, fix="the run has not logged a step yet; point at a later checkpoint"
        )
    table, stats = merger.build()
    config, config_source = None, None
    if src.path is not None:
        from grpofit.readers.config import config_near

        config, config_source = config_near(src.path)
    if state_config:
        config = {**state_config, **(config or {})}
        config_source = config_source or src.name
    run = build_run(src, fmt, table, step=step, stats=stats, config=config or {}, config_source=config_source)
    return [run]


def _ends_open(src: Source) -> bool:
    """Whether the content stops inside its JSON document: its last character that is not white
    space closes no object or array (a complete document ends in ``}`` or ``]``)."""
    end = (src.tail(4096) or src.head()).rstrip()
    return not end.endswith((b"}", b"]"))


def _load_document(data: bytes, merger: RowMerger, top: dict[str, Any]) -> str | None:
    """What :func:`_scan_document` feeds and returns, for a small document already in memory:
    parsed at once by ``json.loads`` (the decoder the scanner runs on each value: the same rows,
    in the same order; a repeated key keeps its last value, as the scanner does). None, with
    nothing fed, when it does not parse: the scanner then says where."""
    import json

    from grpofit.readers.source import decode

    try:
        doc = json.loads(decode(data))
    except (ValueError, RecursionError):
        return None
    if isinstance(doc, list):
        rows, kind = doc, "array"
    elif isinstance(doc, dict):
        rows, kind = (), "object"
        for key, value in doc.items():
            if key == "log_history" and isinstance(value, list):
                rows, top[key] = value, True
            else:
                top[key] = False if key == "log_history" else (value if isinstance(value, (int, float)) else None)
    else:
        return "other"
    for row in rows:
        merger.feed(row)
    merger.flush()
    return kind


def _scan_document(scan: JsonScanner, merger: RowMerger, top: dict[str, Any]) -> str:
    """Feed the log rows to ``merger`` and the top-level scalars to ``top`` (``top["log_history"]``
    is True when that key holds an array); the document's kind: "object", "array" or "other"."""
    first = scan.peek()
    if first == "[":
        scan.array(merger.feed)
        merger.flush()
        kind = "array"
    elif first == "{":
        scan.advance()
        kind = "object"
        if scan.peek() == "}":
            scan.advance()
        else:
            while True:
                key = scan.value()
                if not isinstance(key, str):
                    raise ValueError("Expecting property name enclosed in double quotes")
                scan.expect(":")
                if key == "log_history" and scan.peek() == "[":
                    merger.reset()  # a repeated key: the last one wins, as with json.loads
                    scan.array(merger.feed)
                    merger.flush()
                    top[key] = True
                else:
                    value = scan.value()  # a large value (a callback's state) is not kept
                    top[key] = False if key == "log_history" else (value if isinstance(value, (int, float)) else None)
                c = scan.peek()
                scan.advance()
                if c == "}":
                    break
                if c != ",":
                    raise ValueError("Expecting ',' delimiter")
    else:
        scan.value()
        kind = "other"
    if scan.peek() != "":
        raise ValueError("Extra data")
    return kind


class RowMerger:
    """Sparse rows merged by ``step`` (later keys win); the summary row dropped; rows without a
    step kept after the others. What :func:`merge_rows` does, one row at a time.

    Rows given to :meth:`feed` are taken in batches of :data:`BATCH`: while every row so far
    has a number for its step and the steps rise strictly, a batch goes into the columns
    column by column (one numpy conversion per key, as :func:`_merge_plain`), leaving exactly
    the state :meth:`add` would have left; the first batch that is not so plain, and every
    row after it, goes through :meth:`add`."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name  #: the log's name, for the error of a row with too many keys
        self.reset()

    def reset(self) -> None:
        self.merged = RowColumns(self.name)
        self.loose = RowColumns(self.name)  # rows without a step
        self.index: dict[Any, int] = {}
        #: where each key first appears in the merged table: (part, row, insertion number)
        self.first: dict[str, tuple[int, int, int]] = {}
        self.seq = 0
        self.rows = self.summary = self.not_rows = 0
        self.pending: list[Any] = []
        #: the last step while every row went in column-wise (None once one did not)
        self.plain_last: float | None = -np.inf

    def feed(self, raw: Any) -> None:
        """:meth:`add`, batched (call :meth:`flush` after the last row)."""
        self.pending.append(raw)
        if len(self.pending) >= BATCH:
            self.flush()

    def flush(self) -> None:
        rows, self.pending = self.pending, []
        if not rows:
            return
        if self.plain_last is not None and self._add_plain(rows):
            return
        self.plain_last = None
        for raw in rows:
            self.add(raw)

    def _add_plain(self, rows: list[Any]) -> bool:
        """Add ``rows`` column by column when they are plain (see :func:`_merge_plain`) and
        their steps rise above every earlier step; False (nothing added) otherwise."""
        if not all(type(r) is dict for r in rows):
            return False
        first, second = SUMMARY_KEYS[0], SUMMARY_KEYS[1]
        where = [i for i, r in enumerate(rows) if first not in r and second not in r]
        kept = [rows[i] for i in where]
        if kept:
            steps = [r.get("step") for r in kept]
            if not set(map(type, steps)) <= {int, float}:
                return False
            try:
                s = np.array(steps, dtype=np.float64)
            except OverflowError:  # an integer step beyond float range
                return False
            if not s[0] > self.plain_last or (s.size > 1 and not bool(np.all(s[1:] > s[:-1]))):
                return False
            keys: dict[str, int] = {}  # key -> the kept row it first appears in
            for i, r in enumerate(kept):
                if not r.keys() <= keys.keys():
                    for k in r:
                        keys.setdefault(k, i)
            self._check_keys(keys, lambda i: self.rows + where[i] + 1)
            columns = []
            for k in keys:
                try:
                    col = np.array([r.get(k) for r in kept], dtype=np.float64)
                except (TypeError, ValueError, OverflowError):
                    return False
                if col.shape != (len(kept),):
                    return False  # nested values
                columns.append(col)
            n0 = self.merged.n
            for (k, i), col in zip(keys.items(), columns):
                self.merged._column(k, n0).frombytes(col.tobytes())
                if k not in self.first:
                    self.seq += 1
                    self.first[k] = (0, n0 + i, self.seq)
            self.merged.n = n0 + len(kept)
            self.index.update(zip(steps, range(n0, n0 + len(kept))))
            self.plain_last = float(s[-1])
        self.rows += len(rows)
        self.summary += len(rows) - len(kept)
        return True

    def _check_keys(self, keys: dict[str, int], row_of) -> None:
        """Raise before a table of too many distinct keys is built: ``keys`` maps each key of
        the rows being added to the index of the row it first appears in (``row_of`` turns that
        index into the log row counted from 1)."""
        count = len(self.first)
        for k, i in keys.items():
            if k not in self.first:
                count += 1
                check_columns(count, self.name, f"log_history row {row_of(i)}")

    def _seen(self, key: str, where: tuple[int, int, int]) -> None:
        old = self.first.get(key)
        if old is None or where < old:
            self.first[key] = where

    def add(self, raw: Any) -> None:
        self.plain_last = None
        self.rows += 1
        if not isinstance(raw, dict):
            self.not_rows += 1
            return
        if any(k in raw for k in SUMMARY_KEYS[:2]):
            self.summary += 1
            return
        row = flatten_row(raw)
        self._check_keys(dict.fromkeys(row, 0), lambda _: self.rows)
        s = row.get("step")
        if not isinstance(s, (int, float)) or isinstance(s, bool):
            pos = self.loose.append({k: _cell(v) for k, v in row.items()})
            for k in row:
                self.seq += 1
                self._seen(k, (1, pos, self.seq))
            return
        # json gives every NaN as one object, which a dict finds by identity: rows with a NaN
        # step are not the same step (each is dropped, and counted, when the run is made)
        pos = self.index.get(s) if s == s else None
        if pos is None:
            pos = self.merged.append({k: _cell(v) for k, v in row.items()})
            if s == s:
                self.index[s] = pos
            for k in row:
                self.seq += 1
                self._seen(k, (0, pos, self.seq))
            return
        for k, v in row.items():
            if v is not None:
                self.merged.set(pos, k, _cell(v))
                self.seq += 1
                self._seen(k, (0, pos, self.seq))

    def build(self) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        order = sorted(self.first, key=self.first.__getitem__)
        a, b = self.merged.build(order), self.loose.build(order)
        table = {k: np.concatenate([a[k], b[k]]) if b[k].size else a[k] for k in order}
        n = self.merged.n + self.loose.n
        stats = {"log_rows": self.rows, "merged_rows": self.rows - self.summary - n, "summary_rows": self.summary}
        return table, stats


#: rows converted together by :meth:`RowMerger.feed` (a bound on the dicts held at once)
BATCH = 512


def merge_rows(rows: list[dict]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Sparse rows merged by ``step`` (later keys win); the summary row dropped.

    Returns the columns (NaN where a merged row lacks a key) and counts for ``Run.stats``.
    """
    quick = _merge_plain(rows)
    if quick is not None:
        return quick
    merger = RowMerger()
    for raw in rows:
        merger.add(raw)
    return merger.build()


def _merge_plain(rows: list[dict]) -> tuple[dict[str, np.ndarray], dict[str, int]] | None:
    """:func:`merge_rows` for the usual log_history, column by column instead of row by row.

    Usual: every row but the summary has a number in ``step``, the steps rise strictly (nothing
    to merge) and every column converts to float64 in one numpy call (numbers, booleans, missing
    cells, and text numpy parses as ``float()`` does; no nested objects). None for anything else:
    the row-by-row path decides, so both paths give the same table (missing cells are NaN here,
    None there: the same to :func:`grpofit.core.runs.make_run`)."""
    first, second = SUMMARY_KEYS[0], SUMMARY_KEYS[1]
    kept = [r for r in rows if first not in r and second not in r]
    if not kept:
        return None
    steps = [r.get("step") for r in kept]
    if not set(map(type, steps)) <= {int, float}:
        return None  # a row without a step, a boolean, a string: the careful path
    s = np.array(steps, dtype=np.float64)
    if s.size > 1 and not bool(np.all(s[1:] > s[:-1])):
        return None  # repeated or unordered steps: rows are merged by the careful path
    keys: dict[str, None] = {}
    for r in kept:
        keys.update(dict.fromkeys(r))
    table: dict[str, np.ndarray] = {}
    for k in keys:
        cells = [r.get(k) for r in kept]
        try:
            col = np.array(cells, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            return None
        if col.shape != (len(kept),):
            return None  # nested values
        table[k] = col
    stats = {"log_rows": len(rows), "merged_rows": 0, "summary_rows": len(rows) - len(kept)}
    return table, stats


def _cell(v) -> float:
    """A log value as the table's float (a bool as 0/1, a numeric string parsed, else NaN)."""
    return _to_float(float(v) if isinstance(v, bool) else (v if isinstance(v, (int, float, str)) else None))
