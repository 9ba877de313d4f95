"""SIGINT, SIGTERM and SIGHUP as one exception, so that ``finally`` blocks run (temporary files
removed, ``--jobs`` workers stopped) and the command line exits ``128 + signal`` with one line.

:func:`install` is called by :func:`grpofit.cli.main`; library users keep their own handlers.
"""

from __future__ import annotations

import signal


class Interrupted(KeyboardInterrupt):
    """The process got SIGINT, SIGTERM or SIGHUP; ``signum`` says which."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _raise(signum, frame):  # noqa: ARG001 - signal handler signature
    # once is enough: a second signal while cleaning up must not interrupt the cleanup
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


def install() -> None:
    """Turn SIGTERM and SIGHUP into :class:`Interrupted` (SIGINT is KeyboardInterrupt already)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # nohup: the user asked to ignore it
            signal.signal(sig, _raise)
        except (ValueError, OSError):  # pragma: no cover - not the main thread
            pass


def exit_code(exc: KeyboardInterrupt) -> int:
    """130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return getattr(exc, "exit_code", 128 + signal.SIGINT)


def describe(exc: KeyboardInterrupt) -> str:
    signum = getattr(exc, "signum", signal.SIGINT)
    return "interrupted" if signum == signal.SIGINT else f"terminated by {signal.Signals(signum).name}"
