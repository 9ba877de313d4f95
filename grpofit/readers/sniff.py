"""Recognise a log container from its content (the file name is only a hint).

``sniff(head, name, tail)`` looks at the first and last few hundred kilobytes and returns the
name of the first row of the format table (:mod:`grpofit.readers.registry`) whose predicate
holds. The predicates live here; they look at a :class:`Probe`, which decodes the text, parses
the first JSON object and splits the delimited header at most once.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from functools import cached_property

from grpofit.core.errors import ReadError, UnknownFormat
from grpofit.readers.source import SUPPORTED_HINT as SUPPORTED
from grpofit.readers.source import decode

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
VERL_LINE = re.compile(r"step:\s*\d+\s+-\s+\S+?:")
_JSON_START = re.compile(r"\{|\[\s*(?:[\{\]]|\Z)")
OPENRLHF_LINE = re.compile(r"Global step \d+\s*:\s*\{'")
TRL_DICT = re.compile(r"\{'[^'\n]+': ['\"]?[-+]?(?:\d|nan|inf|np\.)")
WANDB_MAGIC = b":W&B"
PARQUET_MAGIC = b"PAR1"

_STEP_LIKE = {"step", "global_step", "train/global_step", "_step", "iteration", "iter", "steps"}
_KEY_LIKE = {"key", "metric", "tag", "name", "metric_name", "series"}
_VALUE_LIKE = {"value", "val", "metric_value", "y"}


def _has_all_bytes(literal: bytes, data: bytes) -> bool:
    """Whether every distinct byte of ``literal`` occurs in ``data``: one ``memchr`` scan per
    byte, many times quicker than the substring search it lets a sniffer skip (a log of
    numbers holds no ``:`` or ``'``)."""
    return all(bytes((c,)) in data for c in set(literal))


def looks_like_tfevents(head: bytes) -> bool:
    """A TFRecord whose first record is an ``Event``: a plausible length (1 byte .. 16 MB) and
    the record's first byte the tag of field 1, ``wall_time`` (a double), which every writer sets
    first. The one tfevents check: the TensorBoard reader uses it too."""
    if len(head) < 13:
        return False
    length = int.from_bytes(head[:8], "little")
    return 0 < length <= _TFRECORD_MAX_LEN and head[12] == 0x09


_TFRECORD_MAX_LEN = 16 << 20


class Probe:
    """What the format predicates look at: the first (and last) bytes of a log and its name,
    with the decoded text, the first JSON object and the delimited header worked out once."""

    def __init__(self, head: bytes, name: str = "", tail: bytes = b""):
        self.head = head
        self.tail = tail
        self.name = name
        self.base = name.replace("\\", "/").rsplit("/", 1)[-1]

    @cached_property
    def text(self) -> str:
        return decode(self.head)

    @cached_property
    def both(self) -> str:
        """Head and tail as text, ANSI colour codes removed."""
        text = self.text + "\n" + decode(self.tail) if self.tail else self.text
        return ANSI.sub("", text) if "\x1b" in text else text

    def may_contain(self, literal: str) -> bool:
        """Whether ``literal`` (ASCII) may be in :attr:`both`; False only when it is certainly
        not, found from the bytes without decoding them: UTF-8 decoding (bad bytes replaced)
        keeps every ASCII byte as it is, and only an ANSI code removed from between its
        characters could make it appear."""
        if self._has_escape:
            return True
        raw = literal.encode("ascii")
        return any(_has_all_bytes(raw, b) and raw in b for b in (self.head, self.tail))

    @cached_property
    def _has_escape(self) -> bool:
        return b"\x1b" in self.head or b"\x1b" in self.tail

    @cached_property
    def stripped(self) -> str:
        return self.text.lstrip()

    @property
    def is_json_text(self) -> bool:
        return self.stripped.startswith(("{", "[")) or self.json_rows_in_text

    @cached_property
    def json_rows_in_text(self) -> bool:
        """Text whose first line is not JSON but whose lines hold JSON objects: warnings or
        progress lines printed between the JSON rows of a log (at least two rows among the
        first 200 lines)."""
        if self.stripped.startswith(("{", "[")) or not self.may_contain('{"'):
            return False
        rows = 0
        for line in self.text.splitlines()[:200]:
            line = line.strip()
            if line.startswith('{"') and line.endswith("}"):
                try:
                    rows += isinstance(json.loads(line), dict)
                except (ValueError, RecursionError):
                    pass
                if rows >= 2:
                    return True
        return False

    @cached_property
    def first_line(self) -> str:
        return self.stripped.split("\n", 1)[0].strip()

    @cached_property
    def json_object(self) -> dict | None:
        """The first line parsed as a JSON object (None when it is not one)."""
        if not self.stripped.startswith("{"):
            return None
        try:
            obj = json.loads(self.first_line)
        except (ValueError, RecursionError):
            return None
        return obj if isinstance(obj, dict) else None

    @cached_property
    def table(self) -> "Delimited | None":
        """The header and first rows of delimited text (None for JSON text); raises for text
        that is not a table of numbers."""
        if self.is_json_text:
            return None
        return _delimited(self.text, self.name)


# --- the predicates of the format table (grpofit.readers.registry) ----------------------------


def is_wandb_binary(p: Probe) -> bool:
    return p.head.startswith(WANDB_MAGIC)


def is_tensorboard(p: Probe) -> bool:
    return "tfevents" in p.base or (b"\x00" in p.head[:16] and looks_like_tfevents(p.head))


def is_mlflow_sqlite(p: Probe) -> bool:
    from grpofit.readers.mlflow import looks_like_sqlite_store, young_wal_store

    return looks_like_sqlite_store(p.head) or young_wal_store(p.head, p.name)


def is_swanlab(p: Probe) -> bool:
    from grpofit.readers.swanlab import looks_like_swanlab

    return looks_like_swanlab(p.head)


def is_parquet(p: Probe) -> bool:
    return p.head.startswith(PARQUET_MAGIC)


# Each console pattern holds a literal that a fast substring test looks for first: a JSON or
# CSV log (most files) is then never scanned by the regular expression at all.


def is_verl_console(p: Probe) -> bool:
    return p.may_contain("step:") and "step:" in p.both and bool(VERL_LINE.search(p.both))


def is_openrlhf_console(p: Probe) -> bool:
    return p.may_contain("Global step ") and "Global step " in p.both and bool(OPENRLHF_LINE.search(p.both))


def is_progress_console(p: Probe) -> bool:
    if _JSON_START.match(p.stripped):  # "[INFO] step: 3, ..." is a log line, "[{" a JSON list
        return False
    from grpofit.readers.keyvalue import looks_like_progress

    return looks_like_progress(p.text)


def is_trl_console(p: Probe) -> bool:
    if p.stripped.startswith(('{"', "[")) or not (p.may_contain("{'") and p.may_contain("': ")):
        return False
    both = p.both
    return "{'" in both and "': " in both and bool(TRL_DICT.search(both))


def is_trainer_state(p: Probe) -> bool:
    if not p.stripped.startswith("{"):
        return False
    obj = p.json_object
    if obj is not None:
        return "log_history" in obj
    if '"log_history"' in p.stripped:
        return True
    first = p.first_line
    # a pretty-printed JSON document: the JSON reader decides
    return first in ("{", "{}") or first.endswith((",", "[", "{")) and "\n" in p.stripped


def is_verl_jsonl(p: Probe) -> bool:
    obj = p.json_object
    return obj is not None and set(obj) == {"step", "data"} and isinstance(obj["data"], dict)


def _wandb_history_keys(keys) -> bool:
    return "_step" in keys and ("_runtime" in keys or "_timestamp" in keys)


def is_wandb_history(p: Probe) -> bool:
    if p.json_object is not None:
        return _wandb_history_keys(p.json_object)
    return p.table is not None and _wandb_history_keys(p.table.header)


def is_jsonl(p: Probe) -> bool:
    # a JSONL log whose first line is broken or longer than the head: the JSONL reader decides;
    # JSON rows with text lines before them: the JSONL reader skips the text
    return p.stripped.startswith("{") or p.json_rows_in_text


def is_log_history(p: Probe) -> bool:
    return p.stripped.startswith("[")


def is_csv_long(p: Probe) -> bool:
    t = p.table
    if t is None:
        return False
    low = [h.lower() for h in t.header]
    return (
        2 <= len(t.header) <= 5
        and any(h in _STEP_LIKE for h in low)
        and any(h in _KEY_LIKE for h in low)
        and any(h in _VALUE_LIKE for h in low)
    )


def is_wandb_export(p: Probe) -> bool:
    t = p.table
    if t is None:
        return False
    rest = t.header[1:]
    return bool(rest) and sum(" - " in h for h in rest) * 2 > len(rest)


def is_tsv(p: Probe) -> bool:
    return p.table is not None and p.table.delimiter == "\t"


def is_csv(p: Probe) -> bool:
    return p.table is not None


# --- sniffing ----------------------------------------------------------------------------------


def sniff(head: bytes, name: str = "", tail: bytes = b"") -> str:
    """The container format of a log, from its first (and last) bytes: the first row of the
    format table (:mod:`grpofit.readers.registry`) whose predicate holds.

    Raises :class:`ReadError` for empty content and :class:`UnknownFormat` for anything that
    is not a training log (binary garbage, prose, a JSON file without rows).
    """
    from grpofit.readers.registry import sniff_order

    if not head or head.isspace():  # what bytes.strip() removes, without copying the head
        raise ReadError("the file is empty", path=name, fix="point at a log that has rows")
    p = Probe(head, name, tail)
    binary, text = sniff_order()
    for fmt in binary:
        if fmt.sniff(p):
            return fmt.name
        if fmt.claims_suffix and p.base.lower().endswith(fmt.suffixes):
            message, _, fix = fmt.claims_suffix.partition("|")
            raise UnknownFormat(message, path=name, fix=fix)
    _reject_binary(p)
    for fmt in text:
        if fmt.sniff(p):
            return fmt.name
    raise UnknownFormat("does not look like a training log", path=name, fix=f"grpofit reads {SUPPORTED}")


def _reject_binary(p: Probe) -> None:
    """Raise for content that is known not to be a log, or is not text."""
    head, name = p.head, p.name
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise UnknownFormat(
            "is a Python pickle (e.g. training_args.bin); grpofit never loads pickles",
            path=name,
            fix="point at trainer_state.json or the run's log instead",
        )
    if head.startswith(b"SQLite format 3\x00"):
        raise UnknownFormat(
            "is an SQLite database that is not an MLflow tracking store (no metrics/runs tables)",
            path=name,
            fix="point at MLflow's mlruns.db, or export the metrics as CSV",
        )
    if b"\x00" in head and head.count(b"\x00") > max(
        4, len(head) // 10_000
    ):  # a few stray NULs (NCCL prints one) are still text
        raise UnknownFormat("binary content that is not a known log", path=name, fix=f"grpofit reads {SUPPORTED}")
    text = p.text
    if text.count("\ufffd") > max(8, len(text) // 100):
        raise UnknownFormat("binary content that is not a known log", path=name, fix=f"grpofit reads {SUPPORTED}")


def split_header(line: str, delimiter: str) -> list[str]:
    """Header cells, honouring quotes (W&B quotes every cell)."""
    return [c.strip() for c in next(csv.reader([line], delimiter=delimiter))]


def sniff_delimiter(text: str) -> str:
    header = _first_line(text)
    tabs, commas = header.count("\t"), header.count(",")
    if tabs and tabs >= commas:
        return "\t"
    if not commas and header.count(";") > 0:
        return ";"
    return ","


def _first_line(text: str) -> str:
    lines = _first_lines(text, 1)
    return lines[0] if lines else ""


def _first_lines(text: str, n: int) -> list[str]:
    """The first ``n`` non-blank lines of ``text`` (all of them when it has fewer), exactly as
    ``text.splitlines()`` gives them; only as much of a long text is split as they need."""
    size = end = 0
    for _ in range(n + 1):  # a first guess past n "\n": the usual table is then split once
        end = text.find("\n", end) + 1
        if not end:
            break
        size = end
    size = max(size, 1024)
    while True:
        lines = text[:size].splitlines()
        if size < len(text):
            lines.pop()  # may be cut at the end of the prefix
        lines = list(filter(str.strip, lines))
        if len(lines) >= n or size >= len(text):
            return lines[:n]
        size *= 4


def _is_number(cell: str) -> bool:
    s = cell.strip().strip('"').strip("'").strip()
    if not s:
        return False
    try:
        float(s)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Delimited:
    delimiter: str
    header: list[str]


def _delimited(text: str, name: str) -> Delimited:
    delim = sniff_delimiter(text)
    lines = _first_lines(text, 52)  # the header, 50 complete rows and one the head may cut
    if not lines:  # only characters that str treats as whitespace or line breaks (\x1c, \x85, ...)
        raise ReadError(
            "holds no text but blanks and control characters", path=name, fix="point at a log that has rows"
        )
    header = split_header(lines[0], delim)
    complete = lines[1:-1] if len(lines) > 2 else lines[1:]  # the head may cut the last line
    if not lines[1:]:
        raise ReadError(
            "has a header but no data rows",
            path=name,
            fix="wait until the run logs its first step, or check the export",
        )
    body = complete[:50] or lines[1:2]
    rows = csv.reader(io.StringIO("\n".join(body)), delimiter=delim)
    if max(map(len, body)) > csv.field_size_limit():
        rows = list(rows)  # a cell too long for the csv module: its error is raised here, whole
    if not any(_is_number(c) for row in rows for c in row):  # else: read up to the first number
        raise UnknownFormat(
            "does not look like a training log (no numeric values under the header)",
            path=name,
            fix=f"grpofit reads {SUPPORTED}",
        )
    return Delimited(delim, header)
