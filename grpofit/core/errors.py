"""Domain exceptions and exit codes.

Every error a user can cause is a :class:`GrpofitError`: it names the file and the fix, and the
CLI turns it into one line on stderr and exit code 2. Nothing else should escape to the user.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes (see the contract)."""

    OK = 0  #: success; for ``diagnose``, the gate passed
    GATE_FAILED = 1  #: a run has a ``fail`` verdict or falls below ``--min-r2``
    BAD_INPUT = 2  #: bad usage or bad input


class GrpofitError(Exception):
    """An error caused by the input or the invocation; carries the file and the fix."""

    def __init__(self, message: str, *, path: str | None = None, fix: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.fix = fix

    def one_line(self) -> str:
        """The single line shown on stderr: ``path: message (fix)``."""
        text = self.message
        if self.path:
            text = f"{self.path}: {text}"
        if self.fix:
            text = f"{text}; {self.fix}"
        return " ".join(text.split())


class ReadError(GrpofitError):
    """A file or folder could not be read as a training log."""


class UnknownFormat(ReadError):
    """The content matches no supported log format."""


class MetricNotFound(GrpofitError):
    """A requested or auto-detected metric column is absent; carries the numeric columns."""

    def __init__(self, message: str, *, columns: list[str] | None = None, option: str | None = None, **kw):
        super().__init__(message, **kw)
        self.columns = list(columns or [])
        #: the option and value at fault (``"--eval-metric 'nope'"``) when the user named the column
        self.option = option


class TooFewPoints(GrpofitError):
    """A series has fewer points than a fit needs; carries the count and the minimum."""

    def __init__(self, message: str, *, n: int = 0, minimum: int = 0, **kw):
        super().__init__(message, **kw)
        self.n = n
        self.minimum = minimum


class UsageError(GrpofitError):
    """Options that do not fit together."""
