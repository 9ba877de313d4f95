"""A tiny, bounded decoder for the protobuf wire format.

Enough to read TensorBoard ``Event`` records and W&B ``Record`` messages without the
``protobuf`` package. A message is a sequence of fields ``key = (number << 3) | wire_type``
followed by a payload:

======  ================  ==========================================
 type    name              payload
======  ================  ==========================================
 0       varint            base-128 integer, at most 10 bytes
 1       64-bit            8 bytes little-endian (double, fixed64)
 2       length-delimited  varint length, then that many bytes
 5       32-bit            4 bytes little-endian (float, fixed32)
======  ================  ==========================================

The decoder never trusts a length beyond the buffer: a truncated or oversized field raises
:class:`DecodeError` (a ``ValueError``), and nothing is allocated from a length before it has
been checked against the bytes actually present. Groups (types 3 and 4) are obsolete and
rejected. Readers only decode: the encoders (for tests and sample logs) are in
:mod:`grpofit.testing.writers`.
"""

from __future__ import annotations

import struct
from typing import Iterator

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5

_MAX_VARINT_BYTES = 10
_U64 = 1 << 64


class DecodeError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def decode_varint(buf: bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    """Decode one varint at ``buf[pos]``; return ``(value, next_pos)``.

    value = sum_k (b_k & 0x7f) << 7k over the bytes up to the first one without bit 0x80.
    """
    if end is None or end > len(buf):
        end = len(buf)
    if pos < end and buf[pos] < 0x80:  # fast path: one byte
        return buf[pos], pos + 1
    result = 0
    shift = 0
    stop = pos + _MAX_VARINT_BYTES
    if stop > end:
        stop = end
    for i in range(pos, stop):
        b = buf[i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & (_U64 - 1), i + 1
        shift += 7
    if stop - pos >= _MAX_VARINT_BYTES:
        raise DecodeError("varint longer than 10 bytes")
    raise DecodeError("truncated varint")


def to_signed64(value: int) -> int:
    """Two's-complement reinterpretation of an unsigned 64-bit varint (int64 fields)."""
    return value - _U64 if value >= 1 << 63 else value


def iter_fields(buf: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, object]]:
    """Yield ``(field_number, wire_type, value)`` for each field of one message.

    ``value`` is an ``int`` for varints and ``bytes`` (8, 4 or n long) for the other types.
    Raises :class:`DecodeError` on a malformed or truncated field.
    """
    end = len(buf) if end is None else min(end, len(buf))
    pos = start
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = decode_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        if wire == LENGTH:
            n = buf[pos] if pos < end else 0x80
            if n < 0x80:
                pos += 1
            else:
                n, pos = decode_varint(buf, pos, end)
            if n > end - pos:
                raise DecodeError(f"field {number} claims {n} bytes, {end - pos} left")
            value = buf[pos : pos + n]
            pos += n
        elif wire == VARINT:
            value, pos = decode_varint(buf, pos, end)
        elif wire == FIXED64:
            if pos + 8 > end:
                raise DecodeError("truncated 64-bit field")
            value = buf[pos : pos + 8]
            pos += 8
        elif wire == FIXED32:
            if pos + 4 > end:
                raise DecodeError("truncated 32-bit field")
            value = buf[pos : pos + 4]
            pos += 4
        else:
            raise DecodeError(f"unsupported wire type {wire}")
        yield number, wire, value


def parse(buf: bytes) -> dict[int, list[tuple[int, object]]]:
    """All fields of one message: ``{number: [(wire_type, value), ...]}`` in file order."""
    out: dict[int, list[tuple[int, object]]] = {}
    for number, wire, value in iter_fields(buf):
        out.setdefault(number, []).append((wire, value))
    return out


def as_double(wire: int, value: object) -> float:
    """A ``double`` field (64-bit wire type)."""
    if wire != FIXED64:
        raise DecodeError("expected a 64-bit field")
    return struct.unpack("<d", value)[0]


def as_float(wire: int, value: object) -> float:
    """A ``float`` field (32-bit wire type)."""
    if wire != FIXED32:
        raise DecodeError("expected a 32-bit field")
    return struct.unpack("<f", value)[0]


def as_int(wire: int, value: object) -> int:
    """An ``int64``/``int32``/enum field (varint wire type), sign restored."""
    if wire != VARINT:
        raise DecodeError("expected a varint field")
    return to_signed64(value)  # type: ignore[arg-type]


def as_bytes(wire: int, value: object) -> bytes:
    """A ``bytes``/``string``/sub-message field (length-delimited wire type)."""
    if wire != LENGTH:
        raise DecodeError("expected a length-delimited field")
    return bytes(value)  # type: ignore[arg-type]


def as_str(wire: int, value: object) -> str:
    """A ``string`` field, decoded as UTF-8 (invalid bytes replaced)."""
    return as_bytes(wire, value).decode("utf-8", errors="replace")


def unpack_varints(data: bytes) -> list[int]:
    """The values of a packed repeated varint field, sign restored."""
    out = []
    pos = 0
    while pos < len(data):
        v, pos = decode_varint(data, pos)
        out.append(to_signed64(v))
    return out


def unpack_fixed(data: bytes, fmt: str) -> list[float]:
    """The values of a packed repeated fixed-width field (``fmt`` is ``"f"`` or ``"d"``)."""
    size = struct.calcsize("<" + fmt)
    if len(data) % size:
        raise DecodeError("packed field length is not a multiple of its element size")
    return [v[0] for v in struct.iter_unpack("<" + fmt, data)]
