"""One JSON document read piece by piece from a binary file: the values of a large array are
parsed one at a time (``json``'s own decoder on each), so a 100 MB ``trainer_state.json`` never
sits in memory as a string plus a tree of dicts.

The text is decoded as UTF-8 (a BOM dropped, bad bytes replaced, as :func:`source.decode`) in
chunks; a value that does not fit in what has been read makes the buffer grow (doubling, so a
long value costs linear time). A value counts as complete only when a character follows it or
the file has ended: a number cut at a chunk's edge is never taken for a shorter one.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any, BinaryIO, Callable

CHUNK = 1 << 18
_WS = re.compile(r"[ \t\n\r]*")
#: what may continue a number that a chunk's edge cut ("0." of "0.5", "1e" of "1e-3")
_NUMBER_TAIL = frozenset("0123456789.eE+-")
#: the comma between two array values, with the white space around it
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")


class JsonScanner:
    def __init__(self, f: BinaryIO, chunk: int | None = None) -> None:
        self.f = f
        self.chunk = chunk or CHUNK
        self.text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buf = ""
        self.i = 0
        self.eof = False
        self.started = False
        self.decoder = json.JSONDecoder()

    def _more(self) -> None:
        """Read more of the file (at least as much as is pending: the buffer doubles)."""
        raw = self.f.read(max(self.chunk, len(self.buf) - self.i))
        if not self.started:
            self.started = True
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        if not raw:
            self.eof = True
        text = self.text.decode(raw, final=self.eof)
        self.buf = self.buf[self.i :] + text
        self.i = 0

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            self.i = _WS.match(self.buf, self.i).end()
            if self.i < len(self.buf):
                return self.buf[self.i]
            if self.eof:
                return ""
            self._more()

    def advance(self) -> None:
        self.i += 1

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"Expecting {char!r} delimiter")
        self.i += 1

    def value(self) -> Any:
        """The next JSON value (``json.JSONDecodeError`` or ``RecursionError`` when invalid)."""
        self.peek()
        while True:
            try:
                obj, end = self.decoder.raw_decode(self.buf, self.i)
            except json.JSONDecodeError:
                if self.eof:
                    raise
                self._more()
                continue
            if self.eof or end < len(self.buf) and not (self.buf[end] in _NUMBER_TAIL and type(obj) in (int, float)):
                self.i = end
                return obj
            self._more()

    def array(self, each: Callable[[Any], None]) -> None:
        """Call ``each`` on every value of the array that starts here."""
        self.expect("[")
        if self.peek() == "]":
            self.i += 1
            return
        while True:
            self._run(each)
            each(self.value())
            c = self.peek()
            self.i += 1
            if c == "]":
                return
            if c != ",":
                raise ValueError("Expecting ',' delimiter")

    def _run(self, each: Callable[[Any], None]) -> None:
        """The values of an array from here on that lie wholly in the buffer, each followed by a
        comma and the start of the next value (what :meth:`array` does one value at a time,
        without its checks between values); stops before the first value that is not so."""
        scan_once, comma, buf = self.decoder.scan_once, _COMMA.match, self.buf
        i, n = _WS.match(buf, self.i).end(), len(buf)
        while True:
            try:
                obj, end = scan_once(buf, i)
            except (StopIteration, ValueError, RecursionError):
                break  # an invalid value, or one cut at the buffer's end: the careful path decides
            m = comma(buf, end)
            if m is None or m.end() >= n:
                break
            each(obj)
            i = m.end()
        self.i = i
