"""Writers of the binary log formats, for tests and ``scripts/make_sample_logs.py``: TensorBoard
event files and W&B ``.wandb`` files, byte-exact to their formats (framing, CRCs, block
boundaries), so the readers in :mod:`grpofit.readers.tensorboard` and
:mod:`grpofit.readers.wandb_binary` (and in principle TensorBoard's and wandb's own) accept them.

Not part of the analysis: the readers never import this module.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any, Iterable

import numpy as np

from grpofit.readers import protobuf as pb
from grpofit.readers.tensorboard import _U32, masked_crc32c
from grpofit.readers.wandb_binary import (
    _TYPE_SEED, BLOCK, CHUNK, FIRST, FULL, HEADER, IDENT, LAST, MAGIC, MIDDLE, VERSION,
)

__all__ = [
    "frame_record",
    "encode_event",
    "write_tfevents",
    "frame_records",
    "encode_history",
    "encode_config",
    "write_wandb_file",
]


# --- TensorBoard ---------------------------------------------------------------------------


def frame_record(data: bytes) -> bytes:
    """One TFRecord: length, masked CRC of the length, data, masked CRC of the data."""
    head = struct.pack("<Q", len(data))
    return head + _U32.pack(masked_crc32c(head)) + data + _U32.pack(masked_crc32c(data))


def _scalar_value(tag: str, value: float, tensor: bool) -> bytes:
    if not tensor:
        return pb.field_bytes(1, tag) + pb.field_float(2, value)
    proto = (
        pb.field_varint(1, 1)  # DT_FLOAT
        + pb.field_bytes(2, b"")  # shape {} : a scalar
        + pb.field_bytes(5, struct.pack("<f", value))  # packed float_val
    )
    metadata = pb.field_bytes(1, pb.field_bytes(1, "scalars"))
    return pb.field_bytes(1, tag) + pb.field_bytes(9, metadata) + pb.field_bytes(8, proto)


def encode_event(step: int, scalars: dict[str, float], *, wall_time: float, tensor: bool = False) -> bytes:
    """One serialized Event holding ``scalars`` at ``step`` (simple_value, or scalar tensors)."""
    summary = b"".join(pb.field_bytes(1, _scalar_value(t, float(v), tensor)) for t, v in scalars.items())
    return pb.field_double(1, wall_time) + pb.field_varint(2, int(step)) + pb.field_bytes(5, summary)


def write_tfevents(
    path: str,
    rows: Iterable[tuple[int, dict[str, float]]],
    *,
    wall_time: float = 1_700_000_000.0,
    tensor: bool = False,
) -> None:
    """Write a valid event file: a ``file_version`` event, then one event per ``(step, scalars)``.

    Scalars go in ``simple_value`` (or, with ``tensor=True``, as TF2-style scalar tensors with
    ``float_val``). Wall times are ``wall_time + i`` so the output is deterministic.
    """
    chunks = [frame_record(pb.field_double(1, wall_time) + pb.field_bytes(3, "brain.Event:2"))]
    for i, (step, scalars) in enumerate(rows):
        chunks.append(frame_record(encode_event(step, scalars, wall_time=wall_time + i + 1, tensor=tensor)))
    with open(path, "wb") as fh:
        fh.write(b"".join(chunks))


# --- W&B -----------------------------------------------------------------------------------


def frame_records(payloads: Iterable[bytes], *, version: int = VERSION) -> bytes:
    """The ``.wandb`` bytes of ``payloads``: header, then LevelDB log chunks in 32 KiB blocks.

    A payload that does not fit in the current block is split into FIRST, MIDDLE..., LAST
    chunks; a block's last < 7 bytes are zero padding (a chunk header never straddles a block).
    """
    out = bytearray(HEADER.pack(IDENT, MAGIC, version))
    for data in payloads:
        data = bytes(data)
        left = BLOCK - len(out) % BLOCK
        if left < CHUNK.size:
            out += b"\0" * left
            left = BLOCK
        if len(data) + CHUNK.size <= left:
            _append_chunk(out, FULL, data)
            continue
        room = left - CHUNK.size
        _append_chunk(out, FIRST, data[:room])
        used = room
        while len(data) - used > BLOCK - CHUNK.size:
            _append_chunk(out, MIDDLE, data[used : used + BLOCK - CHUNK.size])
            used += BLOCK - CHUNK.size
        _append_chunk(out, LAST, data[used:])
    return bytes(out)


def _append_chunk(out: bytearray, kind: int, data: bytes) -> None:
    out += CHUNK.pack(zlib.crc32(data, _TYPE_SEED[kind]), len(data), kind)
    out += data


def _json(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    return json.dumps(value, allow_nan=True, default=str)


def encode_history(row: dict[str, Any], step: int) -> bytes:
    """A serialized ``Record{history=2}`` for one logged row (keys with ``/`` kept whole)."""
    items = b"".join(
        pb.field_bytes(1, pb.field_bytes(1, str(k)) + pb.field_bytes(16, _json(v)))
        for k, v in row.items()
    )
    history = items + pb.field_bytes(2, pb.field_varint(1, step))
    return pb.field_bytes(2, history)


def encode_config(config: dict[str, Any]) -> bytes:
    """A serialized ``Record{config=5}`` with one ConfigItem per key."""
    items = b"".join(
        pb.field_bytes(1, pb.field_bytes(1, str(k)) + pb.field_bytes(16, _json(v)))
        for k, v in config.items()
    )
    return pb.field_bytes(5, items)


def write_wandb_file(path: str, rows: list[dict[str, Any]], *, config: dict[str, Any] | None = None) -> None:
    """Write a ``.wandb`` file with one history record per row (and a config record if given).

    ``_step`` is taken from each row or numbered 0, 1, ...; it goes both in HistoryStep and as
    a ``_step`` item, as the W&B client does. Framing, block boundaries and CRCs follow the
    format, so the reader here (and in principle wandb's own) accepts the file.
    """
    payloads = []
    num = 1
    if config:
        payloads.append(pb.field_varint(1, num) + encode_config(config))
        num += 1
    for i, row in enumerate(rows):
        step = int(row.get("_step", i))
        full = dict(row)
        full["_step"] = step
        payloads.append(pb.field_varint(1, num) + encode_history(full, step))
        num += 1
    with open(path, "wb") as fh:
        fh.write(frame_records(payloads))
