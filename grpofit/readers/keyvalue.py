"""Hand-written "Key: value" progress lines, one of the commonest loggers of custom loops::

    Epoch:[1/1](3/9751), Reward: -1.4468, KL_ref: 0.0409, Adv Std: 0.9257, Actor Loss: 0.0065

A metric line is split on ``,``, ``|``, ``;`` or tabs (or runs of two spaces) into segments;
a segment ``Key: number`` (or ``Key=number``) is one metric; keys may hold spaces. At least
:data:`MIN_PAIRS` numeric segments make a metric line, so prose and config dumps are skipped.
The step is, in order: a ``step``/``global_step``/``iteration``/``iter`` key; the ``(i/N)``
counter (continued across ``Epoch:[e/E]`` when the counter restarts every epoch); else the line
number among metric lines.
"""

from __future__ import annotations

import re

from grpofit.core.errors import ReadError
from grpofit.core.runs import Run, parse_number
from grpofit.readers.common import RowColumns, build_run, text_lines
from grpofit.readers.sniff import ANSI
from grpofit.readers.source import Source

MIN_PAIRS = 3
#: longer lines and segments are not progress lines (and keep the key search linear)
MAX_LINE = 4096
MAX_SEGMENT = 160
_SPLIT = re.compile(r",\s*|\s*\|\s*|;\s*|\t+|\s{2,}")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?|[-+]?(?:nan|inf)"
_PAIR = re.compile(r"(?:^|(?<=[\s\]\)>]))([A-Za-z_][\w ./@\-]*?)\s*[:=]\s*(" + _NUMBER + r")\s*$", re.IGNORECASE)
_COUNTER = re.compile(r"\((\d+)\s*/\s*(\d+)\)")
_EPOCH = re.compile(r"\bepoch\s*[:=]?\s*\[?\s*(\d+)\s*/\s*(\d+)\s*\]?", re.IGNORECASE)
_STEP_KEYS = {
    "step": "step",
    "global step": "step",
    "global_step": "step",
    "iteration": "step",
    "iter": "step",
    "steps": "step",
}
#: how many lines of the head the sniffer looks at
SNIFF_LINES = 200


def parse_line(line: str) -> dict[str, float] | None:
    """The metrics of one progress line (``{key: value}``), or None when it has fewer than
    :data:`MIN_PAIRS` numeric segments."""
    row: dict[str, float] = {}
    if len(line) > MAX_LINE:
        return None
    for seg in _SPLIT.split(line):
        if len(seg) > MAX_SEGMENT:
            continue
        m = _PAIR.search(seg)  # a prefix such as "[INFO] " or a timestamp is not part of the key
        if m is None:
            continue
        value = parse_number(m.group(2).rstrip("%"))
        if value is None:
            continue
        row[m.group(1).strip()] = value
    return row if len(row) >= MIN_PAIRS else None


def looks_like_progress(text: str) -> bool:
    """Whether at least two of the first lines (or half of the non-blank ones) are metric lines."""
    if ":" not in text and "=" not in text:  # every metric segment has one (a CSV table has neither)
        return False
    lines = [ln for ln in text.splitlines()[:SNIFF_LINES] if ln.strip()]
    hits = sum(1 for ln in lines if parse_line(ANSI.sub("", ln).replace("\x00", "")) is not None)
    return hits >= 2 or (hits >= 1 and hits * 2 >= len(lines))


def read_progress(src: Source, fmt: str = "kv-console", *, step: str | None = None) -> list[Run]:
    """Every metric line of a "Key: value" progress log as one row (see the module docstring)."""
    from array import array

    rows = RowColumns(src.name)
    # the (e/E) epoch and (i/N) counter of each row; -1 where a row has none
    epochs, counts, totals = array("q"), array("q"), array("q")
    has_step = False
    for raw in text_lines(src, split=_lines):
        line = ANSI.sub("", raw).replace("\x00", "")
        row = parse_line(line)
        if row is None:
            continue
        for key in list(row):
            if key.lower() in _STEP_KEYS and "step" not in row:
                row["step"] = row.pop(key)
        has_step = has_step or "step" in row
        m = _COUNTER.search(line)
        e = _EPOCH.search(line)
        epochs.append(int(e.group(1)) if e else 1)
        counts.append(int(m.group(1)) if m else -1)
        totals.append(int(m.group(2)) if m else -1)
        rows.append(row)
    if not rows.n:
        raise ReadError(
            'has no "Key: value" metric lines',
            path=src.name,
            fix="point at the training log (lines like 'Step: 3, Reward: 0.5, KL: 0.01')",
        )
    warnings: list[str] = []
    table = rows.build()
    if step is None and not has_step and min(counts) >= 0:
        import numpy as np

        e, i, total = (np.frombuffer(a, dtype=np.int64) for a in (epochs, counts, totals))
        table["step"] = ((e - 1) * total + i).astype(np.float64)
        warnings.append("steps are the (i/N) progress counter" + (", continued across epochs" if (e > 1).any() else ""))
    elif step is None and not has_step:
        warnings.append("progress lines carry no step; steps are the metric line numbers")
    return [build_run(src, fmt, table, step=step, warnings=warnings, stats={"metric_lines": rows.n})]


def _lines(text: str) -> list[str]:
    return text.replace("\r", "\n").splitlines()
