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

#: the process that installed the handlers (a forked child inherits them: see :func:`_raise`)
_owner: int | None = None
#: depth of :func:`deferred` sections, and the signal that arrived inside one
_depth = 0
_pending: int | None = None


def _raise(signum, frame):  # noqa: ARG001 - signal handler signature
    import os

    if _owner is not None and os.getpid() != _owner:
        # a forked child (a worker) that has not set its own handlers yet: stop now, quietly
        os._exit(128 + signum)
    # once is enough: a second signal while cleaning up must not interrupt the cleanup
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    global _pending
    if _depth:
        _pending = signum  # raised when the section ends
        return
    raise Interrupted(signum)


class deferred:
    """A section that a signal must not cut in two (forking a pool's workers: a pid that fork
    returned but the pool has not recorded yet would be a worker nobody stops). A signal that
    arrives inside is raised as :class:`Interrupted` when the outermost section ends."""

    def __enter__(self):
        global _depth
        _depth += 1
        return self

    def __exit__(self, *exc):
        global _depth, _pending
        _depth -= 1
        if _depth == 0 and _pending is not None:
            signum, _pending = _pending, None
            raise Interrupted(signum)
        return False


def install() -> dict:
    """Turn SIGINT, SIGTERM and SIGHUP into :class:`Interrupted`; a signal the caller ignores
    (``nohup``, a background job's SIGINT) stays ignored. Returns the previous handlers for
    :func:`restore`."""
    import os

    global _owner
    _owner = os.getpid()
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
