"""JSON Lines logs: flat rows, verl's ``{"step": N, "data": {...}}`` rows, W&B history dumps.

Speed. ``json.loads`` per line runs at ~25 MB/s here, too slow for million-row logs, so blocks
of lines whose rows all share the first row's keys, in the same order, take a fast path: the
block is turned into CSV bytes by one ``bytes.translate`` (``:`` -> ``,``; braces and spaces
dropped) and parsed by pandas' C engine, key cells checked against the
expected keys (each key is the only NA token of its column), value cells forced to float64. Any block that fails a check (other keys, other
order, strings, nested values, ``true``) is parsed again line by line, so the fast path can
only be faster, never different. Memory stays at one block plus the output columns.
"""

from __future__ import annotations

import io
import json
import re

import numpy as np

from grpofit.core.errors import ReadError
from grpofit.core.runs import Run, to_float_array
from grpofit.readers.appended import RunIds, split_runs
from grpofit.readers.common import build_run
from grpofit.readers.source import Source
from grpofit.readers.typed import Kinds
from grpofit.readers.typed import finish as finish_typed

BLOCK = 4 * 1024 * 1024
_TRANSLATE = bytes.maketrans(b":", b",")
_DELETE = b"{} \t\r"
_DATA_KEY = (b'"data": ', b'"data":')
_UNSAFE_KEY = set(',:{} \t\r\n"\\')


class ColumnBuilder:
    """Columns assembled from row blocks; a key absent from a block is NaN there."""

    def __init__(self) -> None:
        self.n = 0
        self.parts: dict[str, list[tuple[int, np.ndarray]]] = {}

    def add(self, cols: dict[str, np.ndarray], nrows: int) -> None:
        for k, v in cols.items():
            self.parts.setdefault(k, []).append((self.n, v))
        self.n += nrows

    def build(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for k in list(self.parts):
            segs = self.parts.pop(k)
            if len(segs) == 1 and segs[0][0] == 0 and len(segs[0][1]) == self.n:
                out[k] = segs[0][1]
                continue
            if sum(len(v) for _, v in segs) == self.n:  # present in every block
                out[k] = np.concatenate([v for _, v in segs])
                continue
            col = np.full(self.n, np.nan)
            for off, v in segs:
                col[off : off + len(v)] = v
            out[k] = col
        return out


def flatten_row(obj: dict, prefix: str = "") -> dict:
    """Nested dicts joined with ``/``; verl's ``data`` wrapper and a ``logs`` wrapper (a Trainer
    callback writing ``{"step": N, "epoch": E, "logs": {...}}``, the ``logs`` its ``on_log``
    gets) are unwrapped without a prefix, the row's own fields winning a clash."""
    if not prefix and len(obj) == 2 and "step" in obj and isinstance(obj.get("data"), dict):
        return {"step": obj["step"], **flatten_row(obj["data"])}
    if not prefix and isinstance(obj.get("logs"), dict) and sum(isinstance(v, dict) for v in obj.values()) == 1:
        own = {k: v for k, v in obj.items() if k != "logs"}
        return {**flatten_row(obj["logs"]), **own}
    out = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_row(v, key + "/"))
        else:
            out[key] = v
    return out


def read_jsonl(src: Source, fmt: str, *, step: str | None = None) -> list[Run]:
    """Read JSONL rows (``fmt`` from the sniffer: jsonl, verl-jsonl or wandb-history)."""
    builder = ColumnBuilder()
    warnings: list[str] = []
    stats = {"lines": 0, "torn_lines": 0, "fast_rows": 0}
    plan: _Plan | None = None
    kinds = Kinds()
    ids = RunIds()
    text = TextLines()
    line_no = 0
    first_fmt = fmt
    with src.open() as f:
        carry = b""
        while True:
            block = f.read(BLOCK)
            final = not block
            data = carry + block
            if line_no == 0 and data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]  # a UTF-8 byte order mark
            if final:
                body, carry = data, b""
            else:
                cut = data.rfind(b"\n")
                if cut < 0:
                    carry = data
                    continue
                body, carry = data[: cut + 1], data[cut + 1 :]
            if final:
                body, torn = _split_torn_tail(body)
                if torn is not None:
                    stats["torn_lines"] += 1
                    warnings.append(
                        f"last line ({len(torn)} bytes) is incomplete, probably a run still being written; skipped it"
                    )
            if body and not body.isspace():
                if plan is None:
                    plan = _Plan.from_first_line(body, src.name)
                    if plan.wrapped:
                        first_fmt = "verl-jsonl"
                nlines = body.count(b"\n") + (0 if body.endswith(b"\n") else 1)
                cols, nrows = (plan.fast(body) if plan.ok else None) or (None, 0)
                if cols is None:
                    cols, nrows = _slow_block(body, src.name, line_no, kinds, ids, text)
                else:
                    stats["fast_rows"] += nrows
                builder.add(cols, nrows)
                _check_columns(builder, src.name, line_no + nlines)
                stats["lines"] += nlines
                line_no += nlines
            if final:
                break
    if builder.n == 0:
        raise ReadError("holds no JSON rows", path=src.name, fix="point at a JSONL log with one object per line")
    stats.pop("fast_rows")
    return _runs(
        src, first_fmt, builder.build(), step=step, kinds=kinds, ids=ids, text=text, warnings=warnings, stats=stats
    )


def read_json_stream(src: Source, *, step: str | None = None) -> list[Run] | None:
    """JSON objects written one after another among lines of text (a console log where a
    callback prints each step's metrics as JSON, pretty-printed or not, between warnings);
    None when it holds fewer than two. An object counts when its ``{`` starts a line (an
    indented one is inside another object)."""
    doc = src.read_text()
    decode = json.JSONDecoder().raw_decode
    kinds, ids, text = Kinds(), RunIds(), TextLines()
    rows: list[dict] = []
    cursor = 0
    for m in _LINE_BRACE.finditer(doc):
        start = m.start()
        if start < cursor:
            continue
        for line in doc[cursor:start].splitlines():
            if line.strip():
                text.add(line.encode())
        try:
            obj, end = decode(doc, start)
        except (ValueError, RecursionError):
            obj, end = None, start + 1
        if isinstance(obj, dict):
            rows.append(kinds.split(ids.mark(flatten_row(obj))))
            cursor = end
        else:
            cursor = start  # text: counted with the lines before the next object
    if len(rows) < 2:
        return None
    for line in doc[cursor:].splitlines():
        if line.strip():
            text.add(line.encode())
    table = {k: _float_column([r.get(k) for r in rows]) for k in _keys(rows)}
    return _runs(
        src, "jsonl", table, step=step, kinds=kinds, ids=ids, text=text, warnings=[], stats={"rows_read": len(rows)}
    )


_LINE_BRACE = re.compile(r"^\{", re.M)


def _runs(
    src: Source,
    fmt: str,
    table: dict[str, np.ndarray],
    *,
    step: str | None,
    kinds: Kinds,
    ids: RunIds,
    text: TextLines,
    warnings: list[str],
    stats: dict,
) -> list[Run]:
    """The runs of a table of JSON rows: appended runs split, typed records named, text noted."""
    first_fmt = fmt
    if text.count:
        warnings.append(text.note())
        stats["text_lines"] = text.count
    parts, split_warnings = split_runs(table, step, ids, piece=src.piece)
    warnings += split_warnings
    runs = []
    for i, (suffix, part) in enumerate(parts):
        part, typed_warnings, typed_stats, part_step = finish_typed(part, kinds, step)
        fmt = first_fmt
        if fmt == "jsonl" and "_step" in part and ("_runtime" in part or "_timestamp" in part):
            fmt = "wandb-history"
        name = None if suffix is None else f"{src.name}::{suffix}"
        # the file's own warnings are said once, with its first run
        runs.append(
            build_run(
                src,
                fmt,
                part,
                step=part_step,
                warnings=(warnings if i == 0 else []) + typed_warnings,
                stats={**stats, **typed_stats},
                name=name,
            )
        )
    return runs


class TextLines:
    """Lines of text between the JSON rows (warnings, progress bars), counted and skipped."""

    def __init__(self) -> None:
        self.count = 0
        self.first = b""

    def add(self, line: bytes) -> None:
        if not self.count:
            self.first = line.strip()[:60]
        self.count += 1

    def note(self) -> str:
        return (
            f"skipped {self.count} line(s) of text between the JSON rows "
            f"(e.g. {self.first.decode('utf-8', 'replace')!r})"
        )


def _is_text(line: bytes) -> bool:
    """A line that is prose (a warning, a progress bar), not a damaged JSON row: it starts with
    none of the characters a JSON row or a piece of one starts with."""
    head = line.lstrip()[:1]
    return bool(head) and head not in b'{}[]",:'


def _split_torn_tail(body: bytes) -> tuple[bytes, bytes | None]:
    """Drop a last line that does not parse (a live run's half-written row); a last line of
    text is left to the line-by-line path, which skips it."""
    stripped = body.rstrip()
    start = stripped.rfind(b"\n") + 1
    last = stripped[start:]
    if not last or _is_text(last):
        return body, None
    try:
        json.loads(last)
    except (ValueError, RecursionError):  # RecursionError: an unclosed deep nest
        return stripped[:start], last
    return body, None


def _slow_block(
    body: bytes,
    name: str,
    line_offset: int,
    kinds: Kinds | None = None,
    ids: RunIds | None = None,
    text: TextLines | None = None,
) -> tuple[dict[str, np.ndarray], int]:
    from grpofit.core.limits import MAX_COLUMNS

    rows = []
    keys: set = set()
    loads = json.loads
    for i, line in enumerate(body.split(b"\n")):
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except (ValueError, RecursionError) as exc:
            if _is_text(line):  # a warning or progress line printed between the rows
                if text is not None:
                    text.add(line)
                continue
            reason = getattr(exc, "msg", None) or ("nested too deeply" if isinstance(exc, RecursionError) else str(exc))
            raise ReadError(
                f"line {line_offset + i + 1} is not valid JSON ({reason})",
                path=name,
                fix="repair or remove that line; only a torn last line is skipped",
            ) from None
        if not isinstance(obj, dict):
            raise ReadError(
                f"line {line_offset + i + 1} is not a JSON object",
                path=name,
                fix='each line must be one object of metrics, e.g. {"step": 1, "reward": 0.5}',
            )
        row = flatten_row(obj) if dict in map(type, obj.values()) else obj  # flat: nothing to join
        row = ids.mark(row) if ids is not None else row
        row = kinds.split(row) if kinds is not None else row
        keys.update(row)
        if len(keys) > MAX_COLUMNS:  # the table is dense: rows x columns cells
            raise ReadError(
                f"line {line_offset + i + 1} brings the number of distinct keys above {MAX_COLUMNS}",
                path=name,
                fix=f"grpofit reads logs of at most {MAX_COLUMNS} metrics; log fewer keys or split the file",
            )
        rows.append(row)
    cols = {k: _float_column([r.get(k) for r in rows]) for k in _keys(rows)}
    return cols, len(rows)


def _check_columns(builder: ColumnBuilder, name: str, line: int) -> None:
    from grpofit.core.limits import MAX_COLUMNS

    if len(builder.parts) > MAX_COLUMNS:
        raise ReadError(
            f"has more than {MAX_COLUMNS} distinct keys by line {line}",
            path=name,
            fix=f"grpofit reads logs of at most {MAX_COLUMNS} metrics; log fewer keys or split the file",
        )


def _keys(rows: list[dict]) -> list[str]:
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return list(keys)


def _float_column(cells: list) -> np.ndarray:
    """One column as float64: numpy converts numbers, booleans and ``None`` (NaN) in one call;
    a column holding text or nested values is converted cell by cell (text numbers parsed,
    anything else NaN), as :func:`grpofit.core.runs.to_float_array` does."""
    try:
        out = np.array(cells, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        out = None
    if out is None or out.shape != (len(cells),):  # text, nested values, or lists of lists
        return to_float_array([_scalar(v) for v in cells])
    return out


def _scalar(v):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, str):
        return v
    return None


#: a space, tab or CR between two characters of one token (a key or a value)
_SPLIT_TOKEN = re.compile(rb"[^\s{}:,][ \t\r]+[^\s{}:,]")


def _spaces_between_tokens_only(body: bytes) -> bool:
    """Whether every space, tab and CR of ``body`` (the bytes the fast path deletes) stands next
    to a brace, colon, comma, line break or other such space, where JSON allows it: deleted
    inside a token, ``1 2`` would read as ``12`` and ``"rew ard"`` as the key ``reward``, where
    the line-by-line path rejects the line or keeps the key. A numpy pass finds no space right
    after a token character in the usual log (``json.dumps`` puts them after ``:`` and ``,``
    only); only otherwise does a regular expression look further."""
    arr = np.frombuffer(body, dtype=np.uint8)
    space = (arr == 32) | (arr == 9) | (arr == 13)
    if arr.size < 2 or not space.any():
        return True
    token = ~(space | (arr == 123) | (arr == 125) | (arr == 58) | (arr == 44) | (arr == 10))
    if not np.any(token[:-1] & space[1:]):
        return True
    return _SPLIT_TOKEN.search(body) is None


def _lines_are_objects(body: bytes, depth: int, rows: int) -> bool:
    """Every non-blank line of ``body`` starts with ``{``, ends with ``}`` and holds exactly
    ``depth`` of each brace: what the line-by-line path would accept of a flat (or verl) row."""
    arr = np.frombuffer(body, dtype=np.uint8)
    if arr.size == 0:
        return rows == 0
    breaks = np.flatnonzero(arr == 10)
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [arr.size]))  # exclusive
    keep = starts < ends
    starts, ends = starts[keep], ends[keep]
    last = ends - 1
    last = np.where((arr[last] == 13) & (last > starts), last - 1, last)  # CRLF
    blank = (ends - starts == 1) & (arr[starts] == 13)
    starts, last = starts[~blank], last[~blank]
    if starts.size != rows or not (np.all(arr[starts] == 123) and np.all(arr[last] == 125)):
        return False
    line_of = np.cumsum(arr == 10)
    nlines = int(line_of[-1]) + 1
    for brace in (123, 125):
        per_line = np.bincount(line_of[arr == brace], minlength=nlines)
        if np.count_nonzero(per_line) != rows or per_line.max(initial=0) != depth:
            return False
    return True


class _Plan:
    """The fast path for blocks whose rows repeat the first row's flat numeric shape."""

    def __init__(self, keys: list[str], wrapper: bytes | None, ok: bool):
        self.keys = keys
        self.wrapper = wrapper  #: verl's ``"data":`` bytes to drop, or None for flat rows
        self.ok = ok

    @property
    def wrapped(self) -> bool:
        return self.wrapper is not None

    @classmethod
    def from_first_line(cls, body: bytes, name: str) -> "_Plan":
        first, pos = b"", 0
        for _ in range(64):  # the first JSON row (text lines may come before it)
            end = body.find(b"\n", pos)
            line = body[pos : end if end >= 0 else len(body)]
            if line.strip()[:1] == b"{":
                first = line
                break
            if end < 0:
                break
            pos = end + 1
        try:
            obj = json.loads(first)
        except (ValueError, RecursionError):
            return cls([], None, False)  # the slow path reports the line
        if not isinstance(obj, dict):
            return cls([], None, False)
        if len(obj) == 2 and "step" in obj and isinstance(obj.get("data"), dict):
            # verl writes {"step": N, "data": {...}}; only that key order is fast
            wrapper = next((w for w in _DATA_KEY if w in first), None)
            if list(obj) != ["step", "data"] or wrapper is None:
                return cls([], b"", False)
            flat = {"step": obj["step"], **obj["data"]}
        else:
            wrapper, flat = None, obj
        numeric = all((isinstance(v, (int, float)) and not isinstance(v, bool)) or v is None for v in flat.values())
        plain = all(k and k.isascii() and k.isprintable() and not (_UNSAFE_KEY & set(k)) for k in flat)
        from grpofit.core.limits import MAX_COLUMNS

        small = len(flat) <= MAX_COLUMNS  # else the line-by-line path names the line
        return cls(list(flat), wrapper, numeric and plain and bool(flat) and small)

    def fast(self, body: bytes):
        """``(columns, rows)`` or None when any line of the block breaks the plan.

        Every key cell must be exactly its expected key (declared the only NA token of its
        column, so it parses as NaN and anything else fails); every value cell must parse as
        a float (``null``/``NaN`` -> NaN, ``Infinity`` -> inf).
        """
        if self.wrapper:
            body = body.replace(self.wrapper, b"")
        if not _spaces_between_tokens_only(body):
            return None  # '"reward": 1 2' or '"rew ard"' would read as 12 and as 'reward'
        text = body.translate(_TRANSLATE, _DELETE)
        k = len(self.keys)
        if len(text) <= SMALL_BLOCK:  # a small log: no pandas import (a quarter second)
            return self._small(body, text)
        import pandas as pd

        na: dict[int, list[str]] = {2 * i: [key] for i, key in enumerate(self.keys)}
        na.update({2 * i + 1: ["null", "NaN"] for i in range(k)})
        try:
            df = pd.read_csv(
                io.BytesIO(text),
                header=None,
                names=list(range(2 * k)),
                dtype=np.float64,
                engine="c",
                skip_blank_lines=True,
                na_values=na,
                keep_default_na=False,
            )
        except (ValueError, pd.errors.ParserError):
            return None
        # braces are dropped before parsing, so check them here: a row cut short in the middle
        # of the file ('{"step": 2, "reward": 0.' then a new row) must not read as reward 0.0
        depth = 2 if self.wrapper else 1
        if body.count(b"{") != depth * len(df) or body.count(b"}") != depth * len(df):
            return None
        if not _lines_are_objects(body, depth, len(df)):
            return None  # e.g. '"step": 1, "reward": 0.5}{' : the line-by-line path names the line
        arrays = [df[j].to_numpy(dtype=np.float64) for j in range(2 * k)]
        if not all(np.isnan(a).all() for a in arrays[0::2]):
            return None
        cols = {key: np.ascontiguousarray(arrays[2 * i + 1]) for i, key in enumerate(self.keys)}
        return cols, len(df)

    def _small(self, body: bytes, text: bytes):
        """:meth:`fast` without pandas, for a small block: the cells split by ``bytes.split`` and
        converted by one ``np.array`` call. Each key cell must be exactly its quoted key, each
        value cell a JSON number, ``null``, ``NaN`` or ``(-)Infinity`` (checked by one regular
        expression, so nothing ``float()`` alone would accept, such as ``1_0``, gets through),
        and every line must hold all the keys. Anything else: None, the line-by-line path."""
        lines = [ln for ln in text.split(b"\n") if ln]
        k = len(self.keys)
        cells = b",".join(lines).split(b",")
        if not lines or len(cells) != 2 * k * len(lines):
            return None
        depth = 2 if self.wrapper else 1
        if body.count(b"{") != depth * len(lines) or body.count(b"}") != depth * len(lines):
            return None
        if not _lines_are_objects(body, depth, len(lines)):
            return None  # a brace out of place: the line-by-line path names the line
        quoted = [b'"' + key.encode() + b'"' for key in self.keys]
        if cells[0::2] != quoted * len(lines):
            return None
        values = b",".join(cells[1::2])
        if _JSON_VALUES.fullmatch(values) is None:
            return None
        grid = np.array(values.replace(b"null", b"nan").split(b","), dtype=np.float64).reshape(len(lines), k)
        return {key: grid[:, i].copy() for i, key in enumerate(self.keys)}, len(lines)


#: blocks up to this size (after the braces are dropped) are read without pandas
SMALL_BLOCK = 2 * 1024 * 1024
#: (possessive quantifiers: a value never ends inside a run of digits, nor the list inside a
#: value, so nothing is given back; the same strings match, without the backtracking state)
_JSON_NUMBER = rb"-?(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][+-]?[0-9]++)?+"
_JSON_VALUE = rb"(?:" + _JSON_NUMBER + rb"|null|NaN|-?Infinity)"
_JSON_VALUES = re.compile(_JSON_VALUE + rb"(?:," + _JSON_VALUE + rb")*+")
