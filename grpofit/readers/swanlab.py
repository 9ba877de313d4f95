"""SwanLab offline runs (``swanlog/run-*/backup.swanlab``), read without the ``swanlab`` package.

SwanLab backs every run up to ``backup.swanlab`` in the run folder. Each record is one JSON
object ``{"model_type": ..., "data": {...}}``; a scalar is ``{"model_type": "SCALAR", "data":
{"key": "train/reward", "step": 3, "epoch": 3, "metric": {"index": 3, "data": 0.5,
"create_time": ...}}}`` (``"data": "NaN"`` for a NaN); ``EXPERIMENT`` carries the run's name.
Two containers have been used:

- text: one record per line (SwanLab 0.6.x);
- LevelDB log framing, the same as W&B's ``.wandb``: a 7-byte header (``b":SWL"``, uint16
  0xE1D6, version 0), 32768-byte blocks, chunks ``<uint32 crc, uint16 length, uint8 type>`` with
  ``crc = zlib.crc32(data, zlib.crc32(type byte))`` and type FULL=1, FIRST=2, MIDDLE=3, LAST=4.

A torn tail (a run still writing) keeps every complete record; a chunk whose checksum fails is
skipped with the rest of its block. Media, logs and columns are ignored.
"""

from __future__ import annotations

import json
import os
import struct
import zlib

import numpy as np

from grpofit.errors import ReadError
from grpofit.readers.source import Source
from grpofit.runs import Run

IDENT = b":SWL"
MAGIC = 0xE1D6
HEADER = struct.Struct("<4sHB")
CHUNK = struct.Struct("<IHB")
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
BACKUP = "backup.swanlab"
FIX = "pass a SwanLab run folder (swanlog/run-*/) or its backup.swanlab"
_SEED = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}


def looks_like_swanlab(head: bytes) -> bool:
    """The framed backup's header, or the text backup's first record (a ``Header`` record)."""
    if head.startswith(IDENT):
        return True
    first = head.lstrip()[:200]
    return first.startswith(b'{"model_type": "Header"') or first.startswith(b'{"model_type":"Header"')


def is_run_folder(path: str, names: list[str]) -> bool:
    return BACKUP in names and os.path.isfile(os.path.join(path, BACKUP))


def records(data: bytes, warnings: list[str]) -> list[str]:
    """The JSON texts of a backup, framed or line by line."""
    if not data.startswith(IDENT):
        return [line for line in data.decode("utf-8", errors="replace").splitlines() if line.strip()]
    if len(data) < HEADER.size:
        return []
    ident, magic, version = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        warnings.append(f"unexpected header magic 0x{magic:04x} (expected 0x{MAGIC:04x}); read anyway")
    out: list[str] = []
    pos = HEADER.size
    pending: bytearray | None = None
    bad = 0
    while pos + CHUNK.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < CHUNK.size:  # zero padding at the end of a block
            pos += left
            continue
        crc, length, kind = CHUNK.unpack_from(data, pos)
        start, end = pos + CHUNK.size, pos + CHUNK.size + length
        if end > len(data):
            warnings.append("the last record is incomplete (a run still being written?); skipped it")
            break
        chunk = data[start:end]
        if kind not in _SEED or zlib.crc32(chunk, _SEED[kind]) & 0xFFFFFFFF != crc or end > pos + left:
            bad += 1
            pending = None
            pos += left  # resume at the next block
            continue
        pos = end
        if kind == FULL:
            out.append(chunk.decode("utf-8", errors="replace"))
            pending = None
        elif kind == FIRST:
            pending = bytearray(chunk)
        elif pending is not None:
            pending += chunk
            if kind == LAST:
                out.append(pending.decode("utf-8", errors="replace"))
                pending = None
    if bad:
        warnings.append(f"{bad} damaged chunk(s) skipped")
    return out


def parse_backup(data: bytes, name: str) -> tuple[dict[str, np.ndarray], list[str], str | None]:
    """``(table, warnings, experiment name)`` of a backup's scalars."""
    warnings: list[str] = []
    series: dict[str, dict[int, float]] = {}
    exp_name = None
    bad = 0
    texts = records(data, warnings)
    for i, text in enumerate(texts):
        try:
            rec = json.loads(text)
        except (ValueError, RecursionError):
            if i == len(texts) - 1:
                warnings.append("the last record is incomplete (a run still being written?); skipped it")
            else:
                bad += 1
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("data"), dict):
            continue
        body = rec["data"]
        if rec.get("model_type") == "EXPERIMENT" and isinstance(body.get("name"), str):
            exp_name = body["name"]
        if rec.get("model_type") != "SCALAR":
            continue
        key, step, metric = body.get("key"), body.get("step"), body.get("metric")
        value = metric.get("data") if isinstance(metric, dict) else None
        if not isinstance(key, str) or isinstance(step, bool) or not isinstance(step, (int, float)):
            bad += 1
            continue
        if isinstance(value, str) and value.lower() == "nan":
            value = float("nan")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            bad += 1
            continue
        series.setdefault(key, {})[int(step)] = float(value)
    if bad:
        warnings.append(f"{bad} record(s) that are not readable scalars skipped")
    if not series:
        raise ReadError("the SwanLab backup holds no scalar metrics", path=name, fix="the run may not have logged yet; " + FIX)
    steps = np.array(sorted({s for pts in series.values() for s in pts}), dtype=np.float64)
    index = {int(s): i for i, s in enumerate(steps)}
    table: dict[str, np.ndarray] = {"step": steps}
    for key, pts in series.items():
        col = np.full(steps.size, np.nan)
        for s, v in pts.items():
            col[index[s]] = v
        table[key if key != "step" else "metric/step"] = col
    return table, warnings, exp_name


def read_backup(src: Source, fmt: str = "swanlab", *, step: str | None = None) -> list[Run]:
    """One run from a ``backup.swanlab`` file."""
    from grpofit.readers.common import build_run

    table, warnings, _ = parse_backup(src.read_bytes(), src.name)
    return [build_run(src, "swanlab", table, step=step if step is not None else "step", warnings=warnings)]


def read_run_folder(path: str, step: str | None = None) -> list[Run]:
    """One run from ``swanlog/run-*/`` (its ``backup.swanlab``; the config from
    ``files/config.yaml`` when present)."""
    from grpofit.readers.config import load_config_file
    from grpofit.runs import make_run

    backup = os.path.join(path, BACKUP)
    try:
        with open(backup, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ReadError(f"cannot read {BACKUP} ({exc.strerror or exc})", path=path, fix=FIX) from None
    table, warnings, _ = parse_backup(data, backup)
    cfg_path = os.path.join(path, "files", "config.yaml")
    config = load_config_file(cfg_path) if os.path.isfile(cfg_path) else None
    return [
        make_run(
            name=path,
            source=path,
            fmt="swanlab",
            table=table,
            step=step if step is not None else "step",
            config=config or {},
            config_source=cfg_path if config else None,
            warnings=warnings,
        )
    ]
