"""Recognise a log container from its content (the file name is only a hint).

``sniff(head, name, tail)`` looks at the first and last few hundred kilobytes and returns one
of :data:`FORMATS`. The order of the checks matters: binary signatures, then console logs
(their metric lines may only show up in the tail), then JSON shapes, then delimited text.
"""

from __future__ import annotations

import csv
import io
import json
import re

from grpofit.errors import ReadError, UnknownFormat
from grpofit.readers.source import SUPPORTED_HINT as SUPPORTED
from grpofit.readers.source import decode

FORMATS = (
    "csv",
    "tsv",
    "csv-long",
    "jsonl",
    "verl-jsonl",
    "trainer_state",
    "log_history",
    "wandb-export",
    "wandb-history",
    "wandb-run",
    "wandb-binary",
    "tensorboard",
    "verl-console",
    "trl-console",
    "parquet",  # W&B history saved as parquet; the reader reports wandb-history when it is one
)


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
VERL_LINE = re.compile(r"step:\s*\d+\s+-\s+\S+?:")
TRL_DICT = re.compile(r"\{'[^'\n]+': ['\"]?[-+]?(?:\d|nan|inf|np\.)")
WANDB_MAGIC = b":W&B"
PARQUET_MAGIC = b"PAR1"

_STEP_LIKE = {"step", "global_step", "train/global_step", "_step", "iteration", "iter", "steps"}
_KEY_LIKE = {"key", "metric", "tag", "name", "metric_name", "series"}
_VALUE_LIKE = {"value", "val", "metric_value", "y"}


def looks_like_tfevents(head: bytes) -> bool:
    """A TFRecord whose first record is an ``Event`` (field 1, ``wall_time``, a double)."""
    if len(head) < 13:
        return False
    length = int.from_bytes(head[:8], "little")
    return 0 < length < (1 << 24) and head[12] == 0x09


def sniff(head: bytes, name: str = "", tail: bytes = b"") -> str:
    """The container format of a log, from its first (and last) bytes.

    Raises :class:`ReadError` for empty content and :class:`UnknownFormat` for anything that
    is not a training log (binary garbage, prose, a JSON file without rows).
    """
    if not head.strip():
        raise ReadError("the file is empty", path=name, fix="point at a log that has rows")
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    if head.startswith(WANDB_MAGIC):
        return "wandb-binary"
    if base.lower().endswith(".wandb"):
        raise UnknownFormat(
            "is not a W&B .wandb file (it does not start with the ':W&B' header)",
            path=name,
            fix="pass the run's run-<id>.wandb as the W&B client wrote it, or its run folder",
        )
    if "tfevents" in base or (b"\x00" in head[:16] and looks_like_tfevents(head)):
        return "tensorboard"
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise UnknownFormat(
            "is a Python pickle (e.g. training_args.bin); grpofit never loads pickles",
            path=name,
            fix="point at trainer_state.json or the run's log instead",
        )
    if b"\x00" in head:
        raise UnknownFormat("binary content that is not a known log", path=name, fix=f"grpofit reads {SUPPORTED}")
    text = decode(head)
    if text.count("\ufffd") > max(8, len(text) // 100):
        raise UnknownFormat("binary content that is not a known log", path=name, fix=f"grpofit reads {SUPPORTED}")
    both = ANSI.sub("", text + "\n" + decode(tail)) if tail else ANSI.sub("", text)
    if VERL_LINE.search(both):
        return "verl-console"
    stripped = text.lstrip()
    if TRL_DICT.search(both) and not stripped.startswith(('{"', "[")):
        return "trl-console"
    if stripped.startswith("{"):
        return _sniff_json_object(stripped, name)
    if stripped.startswith("["):
        return "log_history"
    return _sniff_delimited(text, name)


def _sniff_json_object(text: str, name: str) -> str:
    first = text.split("\n", 1)[0].strip()
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        if "log_history" in obj:
            return "trainer_state"
        if set(obj) == {"step", "data"} and isinstance(obj["data"], dict):
            return "verl-jsonl"
        if "_step" in obj and ("_runtime" in obj or "_timestamp" in obj):
            return "wandb-history"
        return "jsonl"
    if '"log_history"' in text:
        return "trainer_state"
    if first in ("{", "{}") or first.endswith((",", "[", "{")) and "\n" in text:
        return "trainer_state"  # a pretty-printed JSON document: the JSON reader decides
    # a JSONL log whose first line is broken or longer than the head: the JSONL reader decides
    return "jsonl"


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
    size = 1024
    while True:
        lines = text[:size].splitlines()
        if size < len(text):
            lines.pop()  # may be cut at the end of the prefix
        lines = [ln for ln in lines if ln.strip()]
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


def _sniff_delimited(text: str, name: str) -> str:
    delim = sniff_delimiter(text)
    lines = _first_lines(text, 52)  # the header, 50 complete rows and one the head may cut
    if not lines:  # only characters that str treats as whitespace or line breaks (\x1c, \x85, ...)
        raise ReadError("holds no text but blanks and control characters", path=name, fix="point at a log that has rows")
    header = split_header(lines[0], delim)
    complete = lines[1:-1] if len(lines) > 2 else lines[1:]  # the head may cut the last line
    if not lines[1:]:
        raise ReadError(
            "has a header but no data rows",
            path=name,
            fix="wait until the run logs its first step, or check the export",
        )
    rows = list(csv.reader(io.StringIO("\n".join(complete[:50] or lines[1:2])), delimiter=delim))
    if not any(_is_number(c) for row in rows for c in row):
        raise UnknownFormat(
            "does not look like a training log (no numeric values under the header)",
            path=name,
            fix=f"grpofit reads {SUPPORTED}",
        )
    low = [h.lower() for h in header]
    if (
        2 <= len(header) <= 5
        and any(h in _STEP_LIKE for h in low)
        and any(h in _KEY_LIKE for h in low)
        and any(h in _VALUE_LIKE for h in low)
    ):
        return "csv-long"
    rest = header[1:]
    if rest and sum(" - " in h for h in rest) * 2 > len(rest):
        return "wandb-export"
    if "_step" in header and ("_runtime" in header or "_timestamp" in header):
        return "wandb-history"
    return "tsv" if delim == "\t" else "csv"
