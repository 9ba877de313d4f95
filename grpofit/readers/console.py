"""Console logs: verl's ``step:N - key:value - ...`` lines and TRL's printed metric dicts.

Nothing from a log is ever executed: values are parsed with ``float`` and dict lines with
``ast.literal_eval`` (literals only).
"""

from __future__ import annotations

import ast
import re

from grpofit.core.errors import ReadError
from grpofit.core.runs import ROW_INDEX, Run, parse_number
from grpofit.readers.common import RowColumns, build_run, text_lines
from grpofit.readers.sniff import ANSI
from grpofit.readers.source import Source

_VERL_STEP = re.compile(r"(?:^|[\s)>\]|])step:\s*(\d+)\s+-\s+(.*)$")
_PREFIX = re.compile(r"^\s*\([^()]*pid=\d+[^()]*\)\s*")
_WRAPPED = re.compile(r"^[A-Za-z_][\w.]*\((.*)\)$")
_TRL_DICT = re.compile(r"\{'[^{}\n]*\}")
_MAX_DUMP = 2_000_000
#: a tqdm bar's ``n/total [`` counter
_TQDM_COUNTER = re.compile(r"\|\s*(\d+)/\d+\s*\[")
#: OpenRLHF's ``✨ Global step N: {...}``
_GLOBAL_STEP = re.compile(r"Global step (\d+)\s*:?\s*$")
_COUNTER = "\x1ftqdm"


def parse_value(text: str) -> float | None:
    """``0.1``, ``np.float64(0.1)``, ``tensor(0.1, device='cuda:0')``, ``nan``, ``True`` -> float."""
    s = text.strip().strip("'\"")
    m = _WRAPPED.match(s)
    if m:
        s = m.group(1).split(",", 1)[0].strip().strip("'\"")
    if s.startswith("[") and s.endswith("]") and "," not in s:
        s = s[1:-1]  # a one-element list, e.g. actor/lr:[1e-06]
    return parse_number(s)


def parse_verl_line(line: str) -> dict[str, float | None] | None:
    """One metric line as ``{"step": N, key: value, ...}``, or None if it is not one."""
    m = _VERL_STEP.search(line)
    if not m:
        return None
    row: dict[str, float | None] = {"step": float(m.group(1))}
    for part in m.group(2).split(" - "):
        key, sep, value = part.partition(":")
        key = key.strip()
        if sep and key:
            row[key] = parse_value(value)
    return row


def read_verl_console(src: Source, fmt: str = "verl-console", *, step: str | None = None) -> list[Run]:
    """Metric lines of a verl console log (ANSI codes and Ray ``(TaskRunner pid=...)`` prefixes
    stripped); the config dump printed before training becomes the run's config."""
    rows = RowColumns(src.name)
    dump: list[str] = []
    depth = size = 0
    dump_done = False
    config: dict | None = None
    for raw in text_lines(src):
        line = _PREFIX.sub("", ANSI.sub("", raw)).rstrip("\r")
        row = parse_verl_line(line)
        if row is not None:
            rows.append(row)
            continue
        if not dump_done and (depth or line.startswith("{'")):
            dump.append(line)
            size += len(line)
            depth += line.count("{") - line.count("}")
            if depth <= 0 or size > _MAX_DUMP:
                config = _literal_config("\n".join(dump)) if size <= _MAX_DUMP else None
                dump_done = config is not None
                dump, depth, size = [], 0, 0
    if not rows.n:
        raise ReadError(
            "has no verl metric lines (step:N - key:value)", path=src.name, fix="point at the training stdout log"
        )
    table = rows.build()
    cfg, cfg_src = None, None
    if config:
        from grpofit.readers.config import flatten

        cfg, cfg_src = flatten(config), f"{src.name} (config dump)"
    return [
        build_run(
            src, "verl-console", table, step=step, config=cfg, config_source=cfg_src, stats={"metric_lines": rows.n}
        )
    ]


def _literal_config(text: str) -> dict | None:
    try:
        obj = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def read_trl_console(src: Source, fmt: str = "trl-console", *, step: str | None = None) -> list[Run]:
    """Metric dicts printed by the HF Trainer (values often quoted strings; tqdm ``\\r``
    redraws on the same line). Eval dicts merge into the preceding training row; the final
    summary dict (``train_runtime``) is dropped. The step of a dict is the tqdm counter
    (``| 10/100 [``) drawn just before it on the same line, when every training dict has one
    and they increase; OpenRLHF's ``Global step N: {...}`` lines give theirs (``fmt``
    ``openrlhf-console``: only those lines are read, the tqdm postfix copies are not)."""
    rows = RowColumns(src.name)
    bad = 0
    openrlhf = fmt == "openrlhf-console"
    counted = 0
    for text in text_lines(src, split=_newline_only):
        if "{" not in text:
            continue
        text = ANSI.sub("", text)
        for m in _TRL_DICT.finditer(text):
            before = text[: m.start()]
            if openrlhf:
                g = _GLOBAL_STEP.search(before)
                if g is None:
                    continue
            try:
                obj = ast.literal_eval(m.group(0))
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                bad += 1
                continue
            if not isinstance(obj, dict) or "train_runtime" in obj:
                continue
            row = {str(k): parse_value(str(v)) for k, v in obj.items() if not isinstance(v, (dict, list))}
            if not any(v is not None for v in row.values()):
                continue
            if rows.n and all(k.startswith("eval_") or k in ("epoch", "step") for k in row):
                for k, v in row.items():
                    if k != "epoch":
                        rows.set(rows.n - 1, k, v)
                continue
            if openrlhf:
                row.setdefault("step", float(g.group(1)))
            else:
                counters = _TQDM_COUNTER.findall(before)
                if counters:
                    row[_COUNTER] = float(counters[-1])
                    counted += 1
            rows.append(row)
    if not rows.n:
        raise ReadError(
            "has no metric dict lines ({'loss': ...})", path=src.name, fix="point at the training stdout log"
        )
    table = rows.build()
    warnings = _trainer_steps(table, step, counted == rows.n)
    if bad:
        warnings.append(f"{bad} dict-like line(s) could not be parsed and were skipped")
    run = build_run(src, fmt, table, step=step, warnings=warnings, stats={"metric_lines": rows.n})
    if run.step_column == ROW_INDEX:
        # the Trainer logs its first dict at global step logging_steps (>= 1), never at 0: the
        # row numbers count from 1 (a live tail adds the rows it has already read to each piece's)
        run.steps = run.steps + 1.0
    return [run]


def _trainer_steps(table: dict, step: str | None, all_counted: bool) -> list[str]:
    """Give ``table`` the Trainer's steps when its dicts carry none: the tqdm counter drawn
    before each (when every dict has one and they increase); else the warning that the rows
    are numbered (from 1, :func:`read_trl_console`)."""
    counter = table.pop(_COUNTER, None)
    if "step" in table or step is not None:
        return []
    if counter is not None:
        import numpy as np

        values = np.asarray(counter, dtype=float)
        if all_counted and np.all(np.diff(values) > 0):
            table["step"] = values
            return ["console dicts carry no step; steps are the tqdm progress counter drawn before each"]
    return [
        "console dicts carry no step; steps are the log row numbers from 1 (the Trainer's global "
        "steps when logging_steps is 1; multiply by logging_steps otherwise)"
    ]


def _newline_only(text: str) -> list[str]:
    """A piece of text split at ``\\n`` only (tqdm's ``\\r`` redraws stay on their line)."""
    return [text[:-1] if text.endswith("\n") else text]
