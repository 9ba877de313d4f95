"""Writers of the binary log formats, for tests and ``scripts/make_sample_logs.py``: the protobuf
wire format's encoders (:func:`encode_varint`, ``field_*``; :mod:`grpofit.readers.protobuf` only
decodes), TensorBoard event files and W&B ``.wandb`` files, byte-exact to their formats (framing, CRCs, block
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
from grpofit.readers.leveldb import BLOCK, CHUNK, FIRST, FULL, HEADER, LAST, MIDDLE, TYPE_SEED
from grpofit.readers.tensorboard import _U32, masked_crc32c
from grpofit.readers.wandb_binary import IDENT, MAGIC, VERSION

__all__ = [
    "encode_varint",
    "field_varint",
    "field_bytes",
    "field_double",
    "field_float",
    "frame_record",
    "encode_event",
    "write_tfevents",
    "frame_records",
    "encode_history",
    "encode_config",
    "write_wandb_file",
]


# --- protobuf wire format (the encoders of what grpofit.readers.protobuf decodes) ---------


def encode_varint(value: int) -> bytes:
    """Base-128 encoding of a non-negative int (negative ints as 64-bit two's complement)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return encode_varint((number << 3) | wire)


def field_varint(number: int, value: int) -> bytes:
    """An int64/int32/enum/bool field."""
    return _key(number, pb.VARINT) + encode_varint(int(value))


def field_bytes(number: int, value: bytes | str) -> bytes:
    """A bytes/string/sub-message field."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    return _key(number, pb.LENGTH) + encode_varint(len(value)) + value


def field_double(number: int, value: float) -> bytes:
    """A double field."""
    return _key(number, pb.FIXED64) + struct.pack("<d", value)


def field_float(number: int, value: float) -> bytes:
    """A float field."""
    return _key(number, pb.FIXED32) + struct.pack("<f", value)


# --- TensorBoard ---------------------------------------------------------------------------


def frame_record(data: bytes) -> bytes:
    """One TFRecord: length, masked CRC of the length, data, masked CRC of the data."""
    head = struct.pack("<Q", len(data))
    return head + _U32.pack(masked_crc32c(head)) + data + _U32.pack(masked_crc32c(data))


def _scalar_value(tag: str, value: float, tensor: bool) -> bytes:
    if not tensor:
        return field_bytes(1, tag) + field_float(2, value)
    proto = (
        field_varint(1, 1)  # DT_FLOAT
        + field_bytes(2, b"")  # shape {} : a scalar
        + field_bytes(5, struct.pack("<f", value))  # packed float_val
    )
    metadata = field_bytes(1, field_bytes(1, "scalars"))
    return field_bytes(1, tag) + field_bytes(9, metadata) + field_bytes(8, proto)


def encode_event(step: int, scalars: dict[str, float], *, wall_time: float, tensor: bool = False) -> bytes:
    """One serialized Event holding ``scalars`` at ``step`` (simple_value, or scalar tensors)."""
    summary = b"".join(field_bytes(1, _scalar_value(t, float(v), tensor)) for t, v in scalars.items())
    return field_double(1, wall_time) + field_varint(2, int(step)) + field_bytes(5, summary)


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
    chunks = [frame_record(field_double(1, wall_time) + field_bytes(3, "brain.Event:2"))]
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
    out += CHUNK.pack(zlib.crc32(data, TYPE_SEED[kind]), len(data), kind)
    out += data


def _json(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    return json.dumps(value, allow_nan=True, default=str)


def encode_history(row: dict[str, Any], step: int) -> bytes:
    """A serialized ``Record{history=2}`` for one logged row (keys with ``/`` kept whole)."""
    items = b"".join(field_bytes(1, field_bytes(1, str(k)) + field_bytes(16, _json(v))) for k, v in row.items())
    history = items + field_bytes(2, field_varint(1, step))
    return field_bytes(2, history)


def encode_config(config: dict[str, Any]) -> bytes:
    """A serialized ``Record{config=5}`` with one ConfigItem per key."""
    items = b"".join(field_bytes(1, field_bytes(1, str(k)) + field_bytes(16, _json(v))) for k, v in config.items())
    return field_bytes(5, items)


def write_wandb_file(path: str, rows: list[dict[str, Any]], *, config: dict[str, Any] | None = None) -> None:
    """Write a ``.wandb`` file with one history record per row (and a config record if given).

    ``_step`` is taken from each row or numbered 0, 1, ...; it goes both in HistoryStep and as
    a ``_step`` item, as the W&B client does. Framing, block boundaries and CRCs follow the
    format, so the reader here (and in principle wandb's own) accepts the file.
    """
    payloads = []
    num = 1
    if config:
        payloads.append(field_varint(1, num) + encode_config(config))
        num += 1
    for i, row in enumerate(rows):
        step = int(row.get("_step", i))
        full = dict(row)
        full["_step"] = step
        payloads.append(field_varint(1, num) + encode_history(full, step))
        num += 1
    with open(path, "wb") as fh:
        fh.write(frame_records(payloads))
