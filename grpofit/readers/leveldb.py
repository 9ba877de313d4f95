"""LevelDB log framing: the container of W&B's ``.wandb`` and SwanLab's ``.swanlab`` files.

After a 7-byte header of the format's own (4 identifying bytes, a uint16 magic, a version
byte), the file is cut into 32768-byte blocks (the header counts towards the first). Each
chunk is ``<uint32 crc, uint16 length, uint8 type>`` + data, type FULL=1, or FIRST=2,
MIDDLE=3..., LAST=4 for a record split across blocks; a block's last < 7 bytes are zero
padding. The crc both writers use is ``zlib.crc32(type byte + data)``; LevelDB's own masked
CRC-32C is accepted too. Chunks never cross a block boundary, so a bad chunk is skipped by
resuming at the next block.

:func:`records` is the one reader of this framing (the ``.wandb`` and SwanLab readers; the
live tail of :mod:`grpofit.watch.tail` reads chunk by chunk with :func:`chunk_ok`): it yields
the complete records and counts what it skipped in a :class:`Framing`, which each reader turns
into its own warnings.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator

from grpofit.readers.tensorboard import masked_crc32c

__all__ = [
    "HEADER",
    "CHUNK",
    "BLOCK",
    "FULL",
    "FIRST",
    "MIDDLE",
    "LAST",
    "Framing",
    "chunk_ok",
    "records",
    "file_windows",
]

HEADER = struct.Struct("<4sHB")
CHUNK = struct.Struct("<IHB")
BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
# record types as zlib.crc32 seeds: crc32(type byte + data) == crc32(data, crc32(type byte))
TYPE_SEED = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}
#: blocks read at a time from a file
WINDOW_BLOCKS = 32


@dataclass
class Framing:
    """What :func:`records` found besides the records it yielded."""

    records: int = 0
    corrupt: int = 0  #: chunks with a bad checksum, type or length (the rest of their block skipped)
    orphans: int = 0  #: parts of split records whose other parts are missing
    oversized: int = 0  #: split records longer than the limit, dropped
    torn: bool = False  #: the data end inside a record (a run still being written)


def chunk_ok(crc: int, kind: int, data: bytes) -> bool:
    """Whether ``crc`` is the checksum of a chunk of type ``kind`` holding ``data``."""
    seed = TYPE_SEED.get(kind)
    if seed is None:
        return False
    if zlib.crc32(data, seed) == crc:
        return True
    return masked_crc32c(bytes([kind]) + data) == crc  # LevelDB's own checksum


def file_windows(f: BinaryIO, head: bytes) -> Iterator[bytes]:
    """The file in windows of whole blocks (the first one starting with ``head``, the bytes
    already read); a window shorter than a full one is the end of the file."""
    size = BLOCK * WINDOW_BLOCKS
    window = head + f.read(size - len(head))
    while window:
        yield window
        if len(window) < size:
            return
        window = f.read(size)


def records(windows: Iterable[bytes], found: Framing, *, max_record: int | None = None) -> Iterator[bytes]:
    """Every complete record payload of a framed log given as ``windows`` of whole blocks (the
    first starts with the 7-byte header, which is skipped; the last may be short), counting the
    rest in ``found``. A torn tail ends the scan; a chunk with a bad checksum, type or length is
    skipped up to the next block boundary; zero-filled (preallocated) space is passed over.
    Lengths are 16-bit and checked against the block, so nothing large is allocated from a
    corrupted field; a split record past ``max_record`` bytes is dropped."""
    pending: list[bytes] | None = None  # parts of a FIRST..LAST record
    size = 0
    pos = HEADER.size  # the first window starts with the header
    for buf in windows:
        n = len(buf)
        while pos < n:
            left_in_block = BLOCK - pos % BLOCK
            if left_in_block < CHUNK.size:  # trailer: zero padding
                pos += left_in_block
                continue
            if n - pos < CHUNK.size:
                found.torn = any(buf[pos:])
                break
            crc, length, kind = CHUNK.unpack_from(buf, pos)
            if crc == 0 and length == 0 and kind == 0:  # zero-filled (preallocated) space
                pos += left_in_block
                continue
            if length > left_in_block - CHUNK.size:
                found.corrupt += 1
                pending = None
                pos += left_in_block
                continue
            end = pos + CHUNK.size + length
            if end > n:
                found.torn = True
                break
            data = buf[pos + CHUNK.size : end]
            if not chunk_ok(crc, kind, data):
                found.corrupt += 1
                pending = None
                pos += left_in_block
                continue
            pos = end
            if kind == FULL:
                if pending is not None:
                    found.orphans += 1
                pending = None
                found.records += 1
                yield data
            elif kind == FIRST:
                if pending is not None:
                    found.orphans += 1
                pending, size = [data], len(data)
            elif pending is None:  # MIDDLE or LAST without its FIRST
                found.orphans += 1
            elif max_record is not None and size + len(data) > max_record:
                found.oversized += 1
                pending = None
            else:
                pending.append(data)
                size += len(data)
                if kind == LAST:
                    found.records += 1
                    yield b"".join(pending)
                    pending = None
        if found.torn:
            break
        pos -= n  # the next window starts where this one ended (a block boundary)
    if pending is not None:
        found.torn = True
