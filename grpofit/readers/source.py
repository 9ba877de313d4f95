"""Where a log's bytes come from: a file on disk or bytes already in memory (stdin).

Readers take a :class:`Source` so that one code path serves ``read_path`` and ``read_bytes``;
large files are streamed from disk and never read twice into memory, and a small file is
read once.
"""

from __future__ import annotations

import csv
import io
import os
import sys
from dataclasses import dataclass
from typing import BinaryIO

#: how much of a file the sniffer looks at, from each end
PEEK = 256 * 1024
#: a first line longer than PEEK (a header of many thousand columns) is read up to this size
MAX_HEADER = 16 * 1024 * 1024

# a cell of a log may be long (a 200 KB text sample): the csv module's 128 KB default limit would
# raise "field larger than field limit" in the sniffer and the readers
csv.field_size_limit(min(sys.maxsize, 2**31 - 1))


@dataclass(frozen=True)
class Source:
    """A log container: ``path`` on disk, ``data`` in memory (then ``path`` is None), or both:
    a small file read once (see :meth:`small_in_memory`)."""

    name: str  #: what the user called it (the path as given, or ``-``)
    path: str | None = None
    data: bytes | None = None
    #: read the file only up to this many bytes (a log still being written: its complete lines)
    limit: int | None = None
    #: with ``limit``: a byte range ``[start, end)`` of the file left out (a line that opens a
    #: quote never closed, which would swallow every later row)
    skip: tuple[int, int] | None = None
    #: a piece of a log being followed (``watch``): its rows continue the runs read before, so
    #: they are never split into appended runs (:mod:`grpofit.readers.appended`)
    piece: bool = False

    def small_in_memory(self, limit: int = PEEK) -> Source:
        """This source with the file's content in ``data`` when it holds at most ``limit`` bytes,
        so that the sniffer and the reader share one read of a small file; else unchanged."""
        if self.data is not None or self.size() > limit:
            return self
        with open(self.path, "rb") as f:
            data = f.read(limit + 1)
        return self if len(data) > limit else Source(self.name, self.path, data)

    def open(self) -> BinaryIO:
        """A binary file object positioned at the start."""
        if self.data is not None:
            return io.BytesIO(self.data)
        if self.limit is not None:
            return io.BufferedReader(_Limited(open(self.path, "rb"), self.limit, self.skip))  # noqa: SIM115
        return open(self.path, "rb")  # noqa: SIM115 - the caller closes it

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        if self.limit is not None:
            return self.limit - (0 if self.skip is None else max(0, min(self.skip[1], self.limit) - self.skip[0]))
        return os.path.getsize(self.path)

    def head(self, n: int = PEEK) -> bytes:
        if self.data is not None:
            return self.data[:n]
        if self.skip is not None:
            with self.open() as f:
                return f.read(n)
        with open(self.path, "rb") as f:
            return f.read(n if self.limit is None else min(n, self.limit))

    def tail(self, n: int = PEEK) -> bytes:
        """The last ``n`` bytes (empty when the head already covers the whole content)."""
        size = self.size()
        if size <= n:
            return b""
        if self.data is not None:
            return self.data[-n:]
        if self.skip is not None:
            return self.read_bytes()[-n:]
        with open(self.path, "rb") as f:
            f.seek(size - n)
            return f.read(n)

    def read_bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.skip is not None:
            with self.open() as f:
                return f.read()
        with open(self.path, "rb") as f:
            return f.read() if self.limit is None else f.read(self.limit)

    def read_text(self) -> str:
        """The whole content as text (UTF-8, a BOM dropped, bad bytes replaced)."""
        return decode(self.read_bytes())

    @property
    def folder(self) -> str | None:
        """The folder holding the file, where hyperparameters may live next to it."""
        return os.path.dirname(os.path.abspath(self.path)) if self.path else None


class _Limited(io.RawIOBase):
    """The first ``limit`` bytes of a binary file (what a reader of a growing log may see),
    without the byte range ``skip`` (``[start, end)``) when given."""

    def __init__(self, raw: BinaryIO, limit: int, skip: tuple[int, int] | None = None):
        self.raw, self.left, self.skip, self.pos = raw, limit, skip, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        if self.skip is not None and self.skip[0] <= self.pos < self.skip[1]:
            jump = self.skip[1] - self.pos
            self.raw.seek(self.skip[1])
            self.pos += jump
            self.left -= jump
        if self.left <= 0:
            return 0
        size = min(len(buf), self.left)
        if self.skip is not None and self.pos < self.skip[0]:
            size = min(size, self.skip[0] - self.pos)
        n = self.raw.readinto(memoryview(buf)[:size]) or 0
        self.left -= n
        self.pos += n
        return n

    def close(self) -> None:
        self.raw.close()
        super().close()


def read_stream(stream: BinaryIO, name: str, limit: int | None = None) -> bytes:
    """All of a pipe, FIFO or standard input, read once from its start in chunks; more than
    ``limit`` bytes (default :data:`grpofit.core.limits.MAX_STREAM_BYTES`) is a :class:`ReadError`.

    Its first :data:`PEEK` bytes are checked before the rest is read: binary content that no
    reader knows (``fit - < sparse.bin``: gigabytes of zeros) is rejected at once instead of
    after 2 GiB read into memory. Running out of memory is a :class:`ReadError` too."""
    from grpofit.core.errors import ReadError
    from grpofit.core.limits import MAX_STREAM_BYTES

    limit = MAX_STREAM_BYTES if limit is None else limit
    parts: list[bytes] = []
    total = 0
    checked = False
    try:
        while True:
            chunk = stream.read(min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            if not checked and total >= PEEK:
                checked = True
                _check_binary_head(b"".join(parts)[:PEEK], name)
            if total > limit:
                raise ReadError(
                    f"is a stream longer than {limit // 1024**2} MiB, the limit for pipes and standard input",
                    path=name,
                    fix="save it to a file and pass the file",
                )
        return b"".join(parts)
    except MemoryError:
        parts.clear()
        raise ReadError(
            "is a stream too large to hold in memory", path=name, fix="save it to a file and pass the file"
        ) from None


def _check_binary_head(head: bytes, name: str) -> None:
    """An :class:`~grpofit.core.errors.UnknownFormat` when ``head`` is binary (holds a NUL byte) and
    the sniffer knows no format for it; text is left to the reader (a CSV header may be wider
    than the head)."""
    if b"\0" in head:
        from grpofit.readers.sniff import sniff

        sniff(head, name, b"")


def decode(raw: bytes) -> str:
    """UTF-8 text without a BOM; undecodable bytes become U+FFFD."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return raw.decode("utf-8", errors="replace")


#: short list of what grpofit reads, for error messages
SUPPORTED_HINT = (
    "CSV/TSV, JSONL, trainer_state.json, W&B exports or run folders, "
    "events.out.tfevents.*, MLflow stores, verl/TRL/OpenRLHF/'Key: value' console logs"
)
