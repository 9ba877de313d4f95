"""The ``grpofit`` command line: parse, call the library, render, pick an exit code.

No fitting maths here. One module per command (:mod:`.fit`, :mod:`.diagnose`, :mod:`.inspect`,
:mod:`.predict`, :mod:`.simulate`, :mod:`.forecast`, :mod:`.backtest`, :mod:`.compare`,
:mod:`.watch`) declares its options, reads inputs through :mod:`grpofit.readers` or calls one
library function, and hands plain dicts to :mod:`grpofit.render.tables`. :mod:`.app` builds the typer
app from them, :mod:`.common` holds the shared options and output helpers, and :mod:`.entry`
is the process entry point: errors a user can cause are :class:`~grpofit.core.errors.GrpofitError`;
:func:`main` turns them into one line and exit code 2.

Every module imports only typer at the top, so ``grpofit --help`` stays instant.
"""

from __future__ import annotations

from grpofit.cli._early import quiet_interrupts

with quiet_interrupts():  # a Ctrl-C while the command line loads: one line, no traceback
    from grpofit.cli.app import app
    from grpofit.cli.entry import main

__all__ = ["app", "main"]
