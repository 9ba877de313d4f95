"""Standard streams the caller closed (``>&-``, ``2>&-``).

A closed standard output is not a place the results can go: the command still runs to its end
(a ``--junit`` report, ``--plot-dir`` figures and ``--out`` files are written), and when it had
something to print the command line says so in one line on stderr and exits 2, as for a full
disk (``> /dev/full``). A command that prints nothing is not affected. A closed standard error
swallows its lines: the exit code still tells. Either way the stream's descriptor is taken by
``/dev/null``, so that no file opened later gets descriptor 1 or 2 and receives stray output.
"""

from __future__ import annotations

import io
import os
import sys

#: the one line for a closed standard output that had results to show
CLOSED_STDOUT = "cannot write to standard output (it is closed); the results were not shown"


class _Sink(io.RawIOBase):
    def __init__(self, owner: ClosedOutput) -> None:
        self.owner = owner

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        n = len(b)
        if n:
            self.owner.written = True
        return n


class ClosedOutput(io.TextIOWrapper):
    """A text stream that accepts every write, keeps nothing and remembers that something was
    written (``written``). Its descriptor is ``/dev/null``'s."""

    def __init__(self, fd: int) -> None:
        self.written = False
        self._fd = _plug(fd)
        super().__init__(io.BufferedWriter(_Sink(self)), encoding="utf-8", errors="replace", write_through=True)

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("fileno")
        return self._fd

    def isatty(self) -> bool:
        return False


def _plug(fd: int) -> int | None:
    """Put ``/dev/null`` on descriptor ``fd`` (closed); ``fd``, or None when that failed."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return None
    if null == fd:
        return fd
    try:
        os.dup2(null, fd)
        return fd
    except OSError:
        return None
    finally:
        os.close(null)


def guard_closed() -> None:
    """Replace a closed ``sys.stdout``/``sys.stderr`` (None: the descriptor was closed when
    Python started) by a :class:`ClosedOutput`."""
    for name, fd in (("stdout", 1), ("stderr", 2)):
        if getattr(sys, name) is None:
            setattr(sys, name, ClosedOutput(fd))


def lost_output() -> bool:
    """Whether anything was written to a closed standard output."""
    out = sys.stdout
    if isinstance(out, ClosedOutput):
        try:
            out.flush()
        except (OSError, ValueError):
            pass
        return out.written
    return False
