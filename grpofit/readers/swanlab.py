"""SwanLab offline runs (``swanlog/run-*/``), read without the ``swanlab`` package.

Checked against folders written by the genuine package (see ``tests/data/swanlab/README.md``):

- **recent swanlab** (checked: 0.9.8 and 0.10.3; when it changed is not known) writes ``run-<id>.swanlab``: LevelDB log
  framing (below) with header version 2, each record one protobuf ``swanlab.record.v1.Record``.
  Its fields used here: ``start`` (10) holds the run's ``name`` (4); ``scalar`` (13) holds
  ``key`` (1, string), ``step`` (2, int64) and ``value`` (5, a ``ScalarValue`` whose ``number``
  (1) is a double; NaN is stored as a NaN). Proto3 leaves zeros out: a missing step is step 0
  and an empty value is 0.0.
- **swanlab 0.6** (checked: 0.6.13) writes ``backup.swanlab``: the same framing with header
  version 1, each record one JSON object ``{"model_type": "Scalar", "data": {"key": ...,
  "step": 3, "epoch": 4, "metric": {"index": 3, "data": 0.5, ...}}}`` (``"data": "NaN"`` for a
  NaN); ``Experiment`` carries the run's name. A backup with one JSON record per line is read
  too.

The framing, the same as W&B's ``.wandb``: a 7-byte header (``b":SWL"``, uint16 0xE1D6, uint8
version), then LevelDB log framing (:mod:`grpofit.readers.leveldb`). A torn tail (a run still writing) keeps every complete record; a
chunk whose checksum fails is skipped with the rest of its block. SwanLab's own system metrics
(keys ``__swanlab__.*``: CPU, memory, disk, network), media, logs and columns are left out.
"""

from __future__ import annotations

import json
import os
from typing import BinaryIO, Iterator

import numpy as np

from grpofit.core.errors import ReadError
from grpofit.core.runs import Run
from grpofit.readers import protobuf as pb
from grpofit.readers.leveldb import HEADER, Framing, file_windows, records
from grpofit.readers.source import Source

IDENT = b":SWL"
MAGIC = 0xE1D6
#: the backup of swanlab 0.6; later versions write run-<id>.swanlab
BACKUP = "backup.swanlab"
#: SwanLab's own hardware metrics, not the training's
SYSTEM_PREFIX = "__swanlab__."
#: a record assembled from FIRST/MIDDLE chunks longer than this is skipped (damage, not data)
MAX_RECORD = 64 * 1024 * 1024
FIX = "pass a SwanLab run folder (swanlog/run-*/) or its run-<id>.swanlab / backup.swanlab"
_TORN = "the last record is incomplete (a run still being written?); skipped it"


def looks_like_swanlab(head: bytes) -> bool:
    """The framed backup's header, or the text backup's first record (a ``Header`` record)."""
    if head.startswith(IDENT):
        return True
    first = head.lstrip()[:200]
    return first.startswith(b'{"model_type": "Header"') or first.startswith(b'{"model_type":"Header"')


def run_file(path: str, names: list[str]) -> str | None:
    """The log of a run folder: ``run-<id>.swanlab`` (the newest when several), else
    ``backup.swanlab``; None when the folder holds neither."""
    logs = sorted(n for n in names if n.startswith("run-") and n.endswith(".swanlab"))
    for name in logs[::-1] + ([BACKUP] if BACKUP in names else []):
        if os.path.isfile(os.path.join(path, name)):
            return os.path.join(path, name)
    return None


def is_run_folder(path: str, names: list[str]) -> bool:
    return run_file(path, names) is not None


def _framed(head: bytes, f: BinaryIO, warnings: list[str]) -> Iterator[bytes]:
    """The payloads of a framed log (``head``: its first bytes, already read), read a few
    blocks at a time (:func:`grpofit.readers.leveldb.records`)."""
    head += f.read(HEADER.size - len(head))
    if len(head) < HEADER.size:
        return
    _, magic, _version = HEADER.unpack(head)
    if magic != MAGIC:
        warnings.append(f"unexpected header magic 0x{magic:04x} (expected 0x{MAGIC:04x}); read anyway")
    found = Framing()
    yield from records(file_windows(f, head), found, max_record=MAX_RECORD)
    if found.torn:
        warnings.append(_TORN)
    if found.corrupt or found.oversized:
        warnings.append(f"{found.corrupt + found.oversized} damaged chunk(s) skipped")


def _lines(head: bytes, f: BinaryIO) -> Iterator[bytes]:
    first = head + f.readline()
    if first.strip():
        yield first
    for line in f:
        if line.strip():
            yield line


def payloads(f: BinaryIO, warnings: list[str]) -> Iterator[bytes]:
    """The records of a SwanLab log (framed, or one JSON record per line), read as they are
    needed: the file is never held whole."""
    head = f.read(len(IDENT))
    return _framed(head, f, warnings) if head == IDENT else _lines(head, f)


def _proto_record(data: bytes) -> tuple[str, object] | None:
    """``("scalar", (key, step, value))``, ``("name", str)`` or None for other records."""
    for number, wire, value in pb.iter_fields(data):
        if number == 13:
            key, step, number_ = None, 0, None
            for n, w, v in pb.iter_fields(pb.as_bytes(wire, value)):
                if n == 1:
                    key = pb.as_str(w, v)
                elif n == 2:
                    step = pb.as_int(w, v)
                elif n == 5:
                    number_ = 0.0  # proto3 leaves a 0.0 out
                    for n2, w2, v2 in pb.iter_fields(pb.as_bytes(w, v)):
                        if n2 == 1:
                            number_ = pb.as_double(w2, v2)
            if key is None or number_ is None:
                raise pb.DecodeError("a scalar without key or value")
            return "scalar", (key, step, number_)
        if number == 10:
            for n, w, v in pb.iter_fields(pb.as_bytes(wire, value)):
                if n == 4:
                    return "name", pb.as_str(w, v)
            return None
    return None


def _json_record(text: bytes) -> tuple[str, object] | None:
    rec = json.loads(text)
    if not isinstance(rec, dict) or not isinstance(rec.get("data"), dict):
        return None
    kind, body = str(rec.get("model_type", "")).lower(), rec["data"]
    if kind == "experiment":
        return ("name", body["name"]) if isinstance(body.get("name"), str) else None
    if kind != "scalar":
        return None
    key, step, metric = body.get("key"), body.get("step"), body.get("metric")
    value = metric.get("data") if isinstance(metric, dict) else None
    if not isinstance(key, str) or isinstance(step, bool) or not isinstance(step, (int, float)):
        raise ValueError("a scalar without key or step")
    if isinstance(value, str) and value.lower() == "nan":
        value = float("nan")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("a scalar without a number")
    return "scalar", (key, int(step), float(value))


def parse_records(records: Iterator[bytes], name: str, warnings: list[str]) -> tuple[dict[str, np.ndarray], str | None]:
    """``(table, experiment name)`` of a log's scalars (each record JSON or protobuf)."""
    series: dict[str, dict[int, float]] = {}
    exp_name = None
    bad = 0
    failed_last = False
    system = 0
    for data in records:
        try:
            hit = _json_record(data) if data.lstrip()[:1] == b"{" else _proto_record(data)
        except (ValueError, OverflowError, RecursionError):  # pb.DecodeError is a ValueError
            bad += 1
            failed_last = True
            continue
        failed_last = False
        if hit is None:
            continue
        kind, body = hit
        if kind == "name":
            exp_name = body
            continue
        key, step, value = body
        if key.startswith(SYSTEM_PREFIX):
            system += 1
            continue
        series.setdefault(key, {})[step] = value
    if failed_last:  # the writer's last record, cut off
        bad -= 1
        if _TORN not in warnings:
            warnings.append(_TORN)
    if bad:
        warnings.append(f"{bad} record(s) that are not readable scalars skipped")
    if not series:
        why = "holds only SwanLab's system metrics" if system else "holds no scalar metrics"
        raise ReadError(f"the SwanLab log {why}", path=name, fix="the run may not have logged yet; " + FIX)
    uniq = sorted({s for pts in series.values() for s in pts})
    index = {s: i for i, s in enumerate(uniq)}  # by the logged integer: steps above 2^53 stay apart
    exact = -(2**63) <= uniq[0] and uniq[-1] < 2**63
    steps = np.array(uniq, dtype=np.int64 if exact and max(-uniq[0], uniq[-1]) > 2**53 else np.float64)
    table: dict[str, np.ndarray] = {"step": steps}
    for key, pts in series.items():
        col = np.full(steps.size, np.nan)
        for s, v in pts.items():
            col[index[s]] = v
        table[key if key != "step" else "metric/step"] = col
    return table, exp_name


def parse_backup(data: bytes, name: str) -> tuple[dict[str, np.ndarray], list[str], str | None]:
    """``(table, warnings, experiment name)`` of a log held in memory."""
    import io

    warnings: list[str] = []
    table, exp_name = parse_records(payloads(io.BytesIO(data), warnings), name, warnings)
    return table, warnings, exp_name


def read_backup(src: Source, fmt: str = "swanlab", *, step: str | None = None) -> list[Run]:
    """One run from a ``run-<id>.swanlab`` or ``backup.swanlab`` file."""
    from grpofit.readers.common import build_run

    warnings: list[str] = []
    with src.open() as f:
        table, _ = parse_records(payloads(f, warnings), src.name, warnings)
    return [build_run(src, "swanlab", table, step=step if step is not None else "step", warnings=warnings)]


def read_run_folder(path: str, step: str | None = None) -> list[Run]:
    """One run from ``swanlog/run-*/`` (its log; the config from ``files/config.yaml`` when
    present, SwanLab's ``{key: {value: ...}}`` wrapping removed)."""
    from grpofit.core.runs import make_run
    from grpofit.readers.config import load_config_file

    try:
        log = run_file(path, os.listdir(path))
    except OSError as exc:
        raise ReadError(f"cannot read the folder ({exc.strerror or exc})", path=path, fix=FIX) from None
    if log is None:
        raise ReadError("holds no run-<id>.swanlab or backup.swanlab", path=path, fix=FIX)
    warnings: list[str] = []
    try:
        with open(log, "rb") as f:
            table, _ = parse_records(payloads(f, warnings), log, warnings)
    except OSError as exc:
        raise ReadError(f"cannot read {os.path.basename(log)} ({exc.strerror or exc})", path=path, fix=FIX) from None
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
