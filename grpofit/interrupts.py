"""SIGINT, SIGTERM and SIGHUP as one exception, so that ``finally`` blocks run (temporary files
removed, ``--jobs`` workers stopped) and the command line exits ``128 + signal`` with one line.

:func:`install` is called by :func:`grpofit.cli.main`; library users keep their own handlers.
"""

from __future__ import annotations

import signal


class Interrupted(BaseException):
    """The process got SIGINT, SIGTERM or SIGHUP; ``signum`` says which. Not an ``Exception``
    (nothing catches it by accident) and not a ``KeyboardInterrupt`` (which the command-line
    framework would turn into a silent exit 130)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise(signum, frame):  # noqa: ARG001 - signal handler signature
    # once is enough: a second signal while cleaning up must not interrupt the cleanup
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def install() -> dict:
    """Turn SIGINT, SIGTERM and SIGHUP into :class:`Interrupted`; a signal the caller ignores
    (``nohup``, a background job's SIGINT) stays ignored. Returns the previous handlers for
    :func:`restore`."""
    previous = {}
    for sig in SIGNALS:
        try:
            old = signal.getsignal(sig)
            if old is signal.SIG_IGN:
                continue
            signal.signal(sig, _raise)
            previous[sig] = old
        except (ValueError, OSError):  # pragma: no cover - not the main thread
            pass
    return previous


def restore(previous: dict) -> None:
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (ValueError, OSError, TypeError):  # pragma: no cover
            pass


def exit_code(exc: BaseException) -> int:
    """130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return getattr(exc, "exit_code", 128 + signal.SIGINT)


def describe(exc: BaseException) -> str:
    signum = getattr(exc, "signum", signal.SIGINT)
    return "interrupted" if signum == signal.SIGINT else f"terminated by {signal.Signals(signum).name}"
