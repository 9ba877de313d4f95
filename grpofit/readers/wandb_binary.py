"""W&B local run folders and their binary ``run-<id>.wandb`` files, read without ``wandb``.

A ``.wandb`` file is a 7-byte header (``b":W&B"``, uint16 0xBEE1 little-endian, version byte 0)
followed by LevelDB log framing (:mod:`grpofit.readers.leveldb`).

Each record is a protobuf ``wandb_internal.Record`` (field numbers from wandb's
``wandb_internal.proto``): ``history=2: HistoryRecord{item=1: HistoryItem{key=1, nested_key=2,
value_json=16}, step=2: HistoryStep{num=1}}``, ``config=5: ConfigRecord{update=1: ConfigItem{key=1,
nested_key=2, value_json=16}}``, ``run=17: RunRecord{config=4, display_name=8,
starting_step=14}``.
"""

from __future__ import annotations

import json
import math
import os
import struct
from typing import TYPE_CHECKING, Any, BinaryIO, Iterable, Iterator

import numpy as np

from grpofit.core.errors import ReadError
from grpofit.readers import protobuf as pb
from grpofit.readers.leveldb import (  # noqa: F401 - the framing's names, used by the tail and the writers
    BLOCK,
    CHUNK,
    FIRST,
    FULL,
    HEADER,
    LAST,
    MIDDLE,
    TYPE_SEED,
    Framing,
    chunk_ok,
    file_windows,
    records,
)

if TYPE_CHECKING:
    from grpofit.core.runs import Run

__all__ = [
    "looks_like_wandb",
    "iter_wandb_records",
    "parse_wandb",
    "read_wandb_file",
    "read_wandb_run_dir",
    "is_wandb_run_dir",
    "read_history_jsonl",
    "read_config_yaml",
]

IDENT = b":W&B"
MAGIC = 0xBEE1
VERSION = 0

FIX = "pass a run-<id>.wandb file or its wandb/run-YYYYMMDD_HHMMSS-<id>/ folder"


def looks_like_wandb(head: bytes) -> bool:
    """True when ``head`` starts with the ``.wandb`` header ``:W&B`` + 0xBEE1."""
    return len(head) >= 6 and head[:4] == IDENT and struct.unpack_from("<H", head, 4)[0] == MAGIC


# --- framing ------------------------------------------------------------------------------


def iter_wandb_records(
    buf: bytes | BinaryIO, name: str = "<stream>", warnings: list[str] | None = None
) -> Iterator[bytes]:
    """Yield every complete record payload of a ``.wandb`` byte string or binary file object
    (:func:`grpofit.readers.leveldb.records`).

    Raises ReadError when the header is not a ``.wandb`` header (checked before anything else
    is read: a file object is then streamed in windows of whole 32 KiB blocks, which chunks never
    cross). A torn tail (a run still writing) ends the scan with a warning; a chunk with a bad
    checksum, type or length is skipped up to the next block boundary, also with a warning.
    """
    warnings = warnings if warnings is not None else []
    if isinstance(buf, (bytes, bytearray, memoryview)):
        data = bytes(buf)
        head = data[: HEADER.size]
        windows: Iterable[bytes] = iter([data])
    else:
        head = buf.read(HEADER.size)
        windows = file_windows(buf, head)
    if not looks_like_wandb(head):
        raise ReadError("not a W&B .wandb file (no ':W&B' header)", path=name, fix=FIX)
    if len(head) < HEADER.size:
        raise ReadError("the .wandb file is shorter than its 7-byte header", path=name, fix=FIX)
    if head[6] != VERSION:
        warnings.append(f"{_base(name)}: unknown .wandb format version {head[6]}; read it as version 0")
    found = Framing()
    yield from records(windows, found)
    if found.corrupt:
        warnings.append(
            f"{_base(name)}: skipped {found.corrupt} corrupt chunk(s) (bad checksum, type or length), "
            "resuming at the next block"
        )
    if found.orphans:
        warnings.append(f"{_base(name)}: dropped {found.orphans} incomplete split record(s)")
    if found.torn:
        warnings.append(
            f"{_base(name)}: ends in a partial record (run still being written?); "
            f"kept {found.records} complete record(s)"
        )


# --- records -------------------------------------------------------------------------------


def _item_key(item: bytes) -> tuple[str, str | None]:
    """``(key, value_json)`` of a HistoryItem/ConfigItem; nested keys are joined with ``/``."""
    key = ""
    nested: list[str] = []
    value_json = None
    for number, wire, value in pb.iter_fields(item):
        if wire != pb.LENGTH:
            continue
        if number == 1:
            key = pb.as_str(wire, value)
        elif number == 2:
            nested.append(pb.as_str(wire, value))
        elif number == 16:
            value_json = pb.as_str(wire, value)
    return ("/".join(nested) if nested else key), value_json


def _history_row(record: bytes) -> dict[str, float] | None:
    """A HistoryRecord as ``{key: float}`` with ``_step`` from HistoryStep when present."""
    row: dict[str, float] = {}
    step = None
    for number, wire, value in pb.iter_fields(record):
        if number == 1 and wire == pb.LENGTH:
            key, value_json = _item_key(value)
            if key and value_json is not None:
                _put(row, key, _decode_json(value_json))
        elif number == 2 and wire == pb.LENGTH:
            step = 0  # proto3: an empty HistoryStep means step 0
            for n2, w2, v2 in pb.iter_fields(value):
                if n2 == 1 and w2 == pb.VARINT:
                    step = pb.to_signed64(v2)
    if step is not None:
        row["_step"] = float(step)
    return row


def _decode_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _put(row: dict[str, float], key: str, value: Any, depth: int = 0) -> None:
    """Store a history value as a float: numbers and bools as such, ``"NaN"``/``"Infinity"``
    strings parsed, plain nested dicts flattened to ``key.sub``; media (``_type``), lists and
    other strings are skipped."""
    if isinstance(value, bool):
        row[key] = float(value)
    elif isinstance(value, (int, float)):
        try:
            row[key] = float(value)
        except OverflowError:  # an int beyond float range
            row[key] = math.inf if value > 0 else -math.inf
    elif value is None:
        row[key] = math.nan
    elif isinstance(value, str):
        try:
            row[key] = float(value)
        except ValueError:
            pass
    elif isinstance(value, dict) and "_type" not in value and depth < 4:
        for sub, v in value.items():
            _put(row, f"{key}.{sub}", v, depth + 1)


def _config_items(message: bytes, config: dict[str, Any]) -> None:
    """ConfigRecord{update=1: ConfigItem} into ``config`` (values JSON-decoded)."""
    for number, wire, value in pb.iter_fields(message):
        if number == 1 and wire == pb.LENGTH:
            key, value_json = _item_key(value)
            if key and value_json is not None:
                config[key] = _decode_json(value_json)


def _decode_records(
    records: Iterable[bytes], name: str, warnings: list[str]
) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """History rows and raw config (``{key: {"value": ...}}``-style items) of a record stream."""
    rows: list[dict[str, float]] = []
    config: dict[str, Any] = {}
    bad = 0
    for record in records:
        try:
            for number, wire, value in pb.iter_fields(record):
                if wire != pb.LENGTH:
                    continue
                if number == 2:
                    row = _history_row(value)
                    if row:
                        rows.append(row)
                elif number == 5:
                    _config_items(value, config)
                elif number == 17:  # RunRecord{config=4}
                    for n2, w2, v2 in pb.iter_fields(value):
                        if n2 == 4 and w2 == pb.LENGTH:
                            _config_items(v2, config)
        except (pb.DecodeError, UnicodeDecodeError, struct.error):
            bad += 1
    if bad:
        warnings.append(f"{_base(name)}: skipped {bad} record(s) that are not valid W&B records")
    return rows, config


def _rows_to_table(rows: list[dict[str, float]], name: str | None = None) -> dict[str, np.ndarray]:
    """Equal-length float columns in first-seen key order, ``_step`` first (row index if absent).
    The table is dense: more than :data:`grpofit.core.limits.MAX_COLUMNS` keys is a ReadError."""
    from grpofit.readers.common import check_columns

    keys: dict[str, None] = {"_step": None}
    for i, row in enumerate(rows):
        keys.update(dict.fromkeys(row))
        check_columns(len(keys), name, f"history row {i + 1}")
    table = {k: np.full(len(rows), np.nan) for k in keys}
    for i, row in enumerate(rows):
        for k, v in row.items():
            table[k][i] = v
    steps = table["_step"]
    missing = np.isnan(steps)
    if missing.any():  # no HistoryStep and no _step item: number the rows
        steps[missing] = np.nonzero(missing)[0]
    return table


def parse_wandb(data: bytes, name: str = "<stream>") -> tuple[dict[str, np.ndarray], list[str], dict[str, Any]]:
    """``(table, warnings, config)`` of ``.wandb`` bytes; see :func:`read_wandb_file`."""
    warnings: list[str] = []
    rows, config = _decode_records(iter_wandb_records(bytes(data), name, warnings), name, warnings)
    if not rows:
        raise ReadError(
            "the .wandb file holds no history rows",
            path=name,
            fix="the run may not have logged yet; wait for wandb.log() or pass another run",
        )
    return _rows_to_table(rows, name), warnings, config


def read_wandb_file(path: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """History of a ``run-<id>.wandb`` file as ``(table, warnings)``.

    The table has ``_step`` and one float64 column per history key (``train/global_step``
    included when logged), one row per ``wandb.log`` commit, NaN where a row lacks a key.
    Raises ReadError for a file that is not ``.wandb`` or holds no history.
    """
    table, warnings, _ = parse_wandb_file(path)
    return table, warnings


def parse_wandb_file(path: str) -> tuple[dict[str, np.ndarray], list[str], dict[str, Any]]:
    """:func:`parse_wandb` of a file, streamed (its header is checked before the rest is read)."""
    warnings: list[str] = []
    try:
        with open(path, "rb") as fh:
            rows, config = _decode_records(iter_wandb_records(fh, path, warnings), path, warnings)
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror or exc}", path=path, fix=FIX) from None
    if not rows:
        raise ReadError(
            "the .wandb file holds no history rows",
            path=path,
            fix="the run may not have logged yet; wait for wandb.log() or pass another run",
        )
    return _rows_to_table(rows, path), warnings, config


def _read_bytes(path: str, fix: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror or exc}", path=path, fix=fix) from None


def _base(name: str) -> str:
    return os.path.basename(str(name).rstrip("/\\")) or str(name)


# --- run folders ---------------------------------------------------------------------------


def is_wandb_run_dir(path: str) -> bool:
    """True for a W&B run folder: it holds a ``*.wandb`` file or ``files/wandb-history.jsonl``."""
    if not os.path.isdir(path):
        return False
    return bool(_wandb_files(path)) or os.path.isfile(os.path.join(path, "files", "wandb-history.jsonl"))


def _wandb_files(path: str) -> list[str]:
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    paths = [os.path.join(path, f) for f in names if f.endswith(".wandb")]
    return [p for p in paths if os.path.isfile(p)]


def read_history_jsonl(path: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """Old clients' ``files/wandb-history.jsonl``: one flat JSON row per line (with ``_step``).

    A torn last line (run still writing) is dropped with a warning; other bad lines are
    skipped and counted.
    """
    warnings: list[str] = []
    rows: list[dict[str, float]] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror or exc}", path=path, fix=FIX) from None
    bad = 0
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        value = _decode_json(line)
        if not isinstance(value, dict):
            if i == len(lines) - 1:
                warnings.append(f"{_base(path)}: dropped a torn last line (run still being written?)")
            else:
                bad += 1
            continue
        row: dict[str, float] = {}
        for k, v in value.items():
            _put(row, str(k), v)
        if row:
            rows.append(row)
    if bad:
        warnings.append(f"{_base(path)}: skipped {bad} line(s) that are not JSON objects")
    if not rows:
        raise ReadError("wandb-history.jsonl holds no history rows", path=path, fix=FIX)
    return _rows_to_table(rows, path), warnings


def read_config_yaml(path: str) -> dict[str, Any]:
    """``files/config.yaml`` (``{key: {value: ...}}``) flattened to dotted keys, ``_wandb`` dropped.

    Raises ReadError when the YAML cannot be parsed.
    """
    import yaml

    from grpofit.core.limits import MAX_CONFIG_BYTES

    try:
        if not os.path.isfile(path):
            raise OSError(0, "not a regular file")
        with open(path, "rb") as fh:
            raw = yaml.safe_load(fh.read(MAX_CONFIG_BYTES).decode("utf-8", errors="replace"))
    except RecursionError:
        raise ReadError("cannot read config.yaml: nested too deeply", path=path, fix="fix or remove the file") from None
    except (OSError, yaml.YAMLError) as exc:
        first = (
            (exc.strerror if isinstance(exc, OSError) else None) or str(exc).splitlines()[0]
            if str(exc)
            else type(exc).__name__
        )
        raise ReadError(f"cannot read config.yaml: {first}", path=path, fix="fix or remove the file") from None
    try:
        return _flatten_config(raw if isinstance(raw, dict) else {})
    except ReadError as exc:
        exc.path = path
        raise


def _flatten_config(raw: dict[str, Any]) -> dict[str, Any]:
    """``{key: {"value": v}}`` (or ``{key: v}``) -> ``{"key": v}``, nested dicts as ``a.b.c``
    (:func:`grpofit.readers.config.flatten`, the one W&B config flattener). Bounded: more than
    ``MAX_CONFIG_KEYS`` keys once flattened (a YAML alias bomb) raises ReadError."""
    from grpofit.core.limits import MAX_CONFIG_KEYS
    from grpofit.readers.config import ConfigTooLarge, flatten

    try:
        return flatten(raw, wandb=True)
    except ConfigTooLarge:
        raise ReadError(
            f"config has more than {MAX_CONFIG_KEYS} keys once flattened (nested aliases?); ignored it",
            fix="simplify the config",
        ) from None


def read_wandb_run_dir(path: str, *, step: str | None = None) -> list[Run]:
    """One :class:`~grpofit.core.runs.Run` for a ``wandb/run-*/`` (or ``offline-run-*``) folder.

    History comes from ``run-<id>.wandb`` (the largest when there are several), falling back to
    old clients' ``files/wandb-history.jsonl``; hyperparameters from ``files/config.yaml``
    (flattened, ``_wandb`` dropped), else from the config records inside the ``.wandb`` file.
    A ``wandb/`` folder holding several run folders gives one Run each.
    """
    from grpofit.core.runs import make_run

    path = os.fspath(path)
    if not os.path.isdir(path):
        raise ReadError("not a folder", path=path, fix=FIX)
    if not is_wandb_run_dir(path):
        subruns = [
            os.path.join(path, d)
            for d in sorted(_listdir(path))
            if (d.startswith("run-") or d.startswith("offline-run-")) and is_wandb_run_dir(os.path.join(path, d))
        ]
        if subruns:
            return [run for sub in subruns for run in read_wandb_run_dir(sub, step=step)]
        raise ReadError("no run-<id>.wandb file and no files/wandb-history.jsonl in this folder", path=path, fix=FIX)
    warnings: list[str] = []
    config: dict[str, Any] = {}
    config_source = None
    table = None
    binaries = _wandb_files(path)
    if binaries:
        binary = max(binaries, key=lambda f: (os.path.getsize(f), f))
        if len(binaries) > 1:
            warnings.append(f"{len(binaries)} .wandb files in the folder; read the largest, {_base(binary)}")
        try:
            table, file_warnings, raw_config = parse_wandb_file(binary)
            warnings += file_warnings
        except ReadError as exc:
            raw_config = None
            warnings.append(f"{_base(binary)}: {exc.message}")
        if raw_config:
            try:
                config, config_source = _flatten_config(raw_config), binary
            except ReadError as exc:
                warnings.append(f"{_base(binary)}: {exc.message}")
    history = os.path.join(path, "files", "wandb-history.jsonl")
    if table is None and os.path.isfile(history):
        table, file_warnings = read_history_jsonl(history)
        warnings += file_warnings
    if table is None:
        raise ReadError(
            "the run folder has no readable history",
            path=path,
            fix="the run may not have logged yet; " + FIX,
        )
    config_yaml = os.path.join(path, "files", "config.yaml")
    if os.path.isfile(config_yaml):
        try:
            config, config_source = read_config_yaml(config_yaml), config_yaml
        except ReadError as exc:
            warnings.append(exc.one_line())
    return [
        make_run(
            name=path,
            source=path,
            fmt="wandb-run",
            table=table,
            step=step,
            config=config,
            config_source=config_source,
            warnings=warnings,
        )
    ]


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
