"""Ctrl-C in the first tens of milliseconds, while the command line's modules load (before
:func:`grpofit.runtime.interrupts.install` runs): ``interrupted`` and exit 130, not a traceback of
whatever import it cut. Only for that window: the handler before it is restored after."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading


def _stop(signum, frame):  # noqa: ARG001 - signal handler signature
    try:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    os._exit(128 + signum)


@contextlib.contextmanager
def quiet_interrupts():
    """SIGINT quits quietly inside (when Python's default handler is in place, in the main
    thread: a program that set its own keeps it)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    signal.signal(signal.SIGINT, _stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
