"""Hugging Face ``trainer_state.json`` (TRL's GRPOTrainer writes one per ``checkpoint-N/``) and
bare ``log_history`` arrays.

Rows are sparse: a training row, an eval row and (with ``num_iterations=2``) rows without a
reward share or skip steps. Rows with the same ``step`` are merged, later keys winning; a key a
row lacks stays missing (NaN), never 0. The closing summary row (``train_runtime``,
``train_loss``) is dropped.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from grpofit.errors import ReadError, UnknownFormat
from grpofit.readers.common import build_run, rows_to_columns
from grpofit.readers.jsonl import flatten_row
from grpofit.readers.source import SUPPORTED_HINT, Source
from grpofit.runs import Run

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
    """Read a trainer_state.json (object with ``log_history``) or a bare log_history array."""
    try:
        doc = json.loads(src.read_text())
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ReadError(
            f"is not valid JSON ({reason})",
            path=src.name,
            fix="the file may be truncated; use the copy in the newest complete checkpoint-N/",
        ) from None
    state_config: dict[str, Any] = {}
    if isinstance(doc, dict):
        if not isinstance(doc.get("log_history"), list):
            raise UnknownFormat(
                "is a JSON object without log_history, not a training log",
                path=src.name,
                fix=f"point at trainer_state.json or a metrics log ({SUPPORTED_HINT})",
            )
        rows, fmt = doc["log_history"], "trainer_state"
        state_config = {
            f"trainer_state.{k}": doc[k] for k in STATE_CONFIG if isinstance(doc.get(k), (int, float))
        }
    elif isinstance(doc, list):
        rows, fmt = doc, "log_history"
    else:
        raise UnknownFormat("is JSON but not a list of log rows", path=src.name, fix=f"grpofit reads {SUPPORTED_HINT}")
    if not rows:
        raise ReadError("log_history is empty", path=src.name, fix="the run has not logged a step yet; point at a later checkpoint")
    if not all(isinstance(r, dict) for r in rows):
        raise UnknownFormat("is a JSON array whose items are not log rows (objects)", path=src.name, fix=f"grpofit reads {SUPPORTED_HINT}")
    table, stats = merge_rows(rows)
    config, config_source = None, None
    if src.path is not None:
        from grpofit.readers.config import config_near

        config, config_source = config_near(src.path)
    if state_config:
        config = {**state_config, **(config or {})}
        config_source = config_source or src.name
    run = build_run(src, fmt, table, step=step, stats=stats, config=config or {}, config_source=config_source)
    return [run]


def merge_rows(rows: list[dict]) -> tuple[dict[str, list], dict[str, int]]:
    """Sparse rows merged by ``step`` (later keys win); the summary row dropped.

    Returns the columns (``None`` where a merged row lacks a key, or float64 arrays with NaN
    there) and counts for ``Run.stats``.
    """
    quick = _merge_plain(rows)
    if quick is not None:
        return quick
    merged: dict[Any, dict] = {}
    order: list[Any] = []
    no_step: list[dict] = []
    summary = 0
    for raw in rows:
        if any(k in raw for k in SUMMARY_KEYS[:2]):
            summary += 1
            continue
        row = flatten_row(raw)
        s = row.get("step")
        if not isinstance(s, (int, float)) or isinstance(s, bool):
            no_step.append(row)
            continue
        if s in merged:
            merged[s].update({k: v for k, v in row.items() if v is not None})
        else:
            merged[s] = dict(row)
            order.append(s)
    out_rows = [merged[s] for s in order] + no_step
    table = rows_to_columns(out_rows, _scalar)
    stats = {
        "log_rows": len(rows),
        "merged_rows": len(rows) - summary - len(out_rows),
        "summary_rows": summary,
    }
    return table, stats


def _merge_plain(rows: list[dict]) -> tuple[dict[str, np.ndarray], dict[str, int]] | None:
    """:func:`merge_rows` for the usual log_history, column by column instead of row by row.

    Usual: every row but the summary has a number in ``step``, the steps rise strictly (nothing
    to merge) and every column converts to float64 in one numpy call (numbers, booleans, missing
    cells, and text numpy parses as ``float()`` does; no nested objects). None for anything else:
    the row-by-row path decides, so both paths give the same table (missing cells are NaN here,
    None there: the same to :func:`grpofit.runs.make_run`)."""
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


def _scalar(v):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float, str)):
        return v
    return None
