"""The process entry point: one line and exit 2 for user errors, a traceback only with --debug,
interrupts and closed or full output streams handled, one BLAS thread by default, the
allocator's mmap threshold fixed."""

from __future__ import annotations

import sys

import typer

from grpofit.cli.app import app
from grpofit.cli.common import debugging, echo_err, reset_debug
from grpofit.core.errors import ExitCode, GrpofitError


def _process_settings() -> None:
    """The settings of the process the command runs in, made here and nowhere in the library
    (a program that imports grpofit keeps its own):

    - one BLAS thread unless the user chose otherwise: the fits multiply matrices of a few
      hundred by four, where BLAS threads cost more than they give, ``diagnose --jobs N`` runs
      one process per core, and ``watch`` is a sidecar that keeps to one core. These variables
      are read when numpy loads its BLAS: a caller that imported numpy before calling
      :func:`main` keeps the threads it has;
    - glibc's mmap threshold fixed at 1 MiB (:func:`grpofit.runtime.trim.mmap_large`: the temporaries
      of a long fit, and a large CSV's chunks, go back to the OS when freed)."""
    import os

    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    from grpofit.runtime.trim import mmap_large

    mmap_large()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one line and exit 2 for user errors, a traceback only with --debug."""
    _process_settings()
    from grpofit.runtime import interrupts

    previous = interrupts.install()
    _closed_streams_to_devnull()
    try:
        code = _run(argv)
        code = _flush_stdout(code)
        from grpofit.runtime.streams import CLOSED_STDOUT, lost_output

        if lost_output() and not _INTERRUPTED:
            echo_err(f"error: {CLOSED_STDOUT}")
            code = ExitCode.BAD_INPUT
    finally:
        interrupts.restore(previous)
    if _INTERRUPTED and argv is None:
        # the process is being stopped: skip the interpreter's exit hooks (they join the
        # stopped worker pool's threads, which can take seconds)
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(int(code))
    sys.exit(int(code or 0))


#: set when the command was stopped by SIGINT, SIGTERM or SIGHUP
_INTERRUPTED = False


def _closed_streams_to_devnull() -> None:
    """A stream closed by the caller (``>&-``, ``2>&-``) takes writes and keeps nothing; a
    closed standard output that had results is one error line and exit 2 (see
    :mod:`grpofit.runtime.streams`). A closed standard input is an error of ``-`` alone: see
    :func:`grpofit.readers.read_path`."""
    from grpofit.runtime.streams import guard_closed

    guard_closed()


def _flush_stdout(code):
    """Flush standard output now, so that a full disk or a closed pipe is one line and exit 2
    (or, for a reader that went away, exit as usual) instead of a message at interpreter exit."""

    try:
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        pass
    except OSError as e:
        echo_err(f"error: cannot write to standard output ({e.strerror or e})")
        code = ExitCode.BAD_INPUT
    except ValueError:  # closed
        return code
    _stdout_to_devnull()
    return code


def _stdout_to_devnull() -> None:
    """Nothing more can be written: let the interpreter's last flush go nowhere."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _run(argv: list[str] | None) -> int:
    """:func:`main` without the process plumbing: the exit code of one command."""
    usage_errors = _usage_errors()
    from grpofit.runtime import interrupts

    args = list(sys.argv[1:] if argv is None else argv)
    reset_debug()  # --debug is an option of the app: its callback sets it while parsing
    try:
        code = app(args=args, prog_name="grpofit", standalone_mode=False)
    except GrpofitError as e:
        if debugging():
            raise
        echo_err(f"error: {e.one_line()}")
        code = ExitCode.BAD_INPUT
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        typer.echo("aborted", err=True)
        code = ExitCode.BAD_INPUT
    except usage_errors as e:
        if debugging():
            raise
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `grpofit` / `grpofit simulate`
            e.show()
        else:
            echo_err(f"error: {_click_line(e)}")
        code = ExitCode.BAD_INPUT
    except (KeyboardInterrupt, interrupts.Interrupted) as e:
        global _INTERRUPTED
        _INTERRUPTED = True
        echo_err(interrupts.describe(e))
        code = interrupts.exit_code(e)
    except BrokenPipeError:
        code = ExitCode.OK
    except OSError as e:
        if debugging():
            raise
        if e.filename is not None:
            echo_err(f"error: {e.filename}: {e.strerror or e}")
        else:  # a write to standard output (a full disk: > /dev/full)
            echo_err(f"error: cannot write to standard output ({e.strerror or e})")
        _stdout_to_devnull()
        code = ExitCode.BAD_INPUT
    except Exception as e:  # a bug: still one line, never a traceback without --debug
        if debugging():
            raise
        echo_err(
            f"error: internal error ({type(e).__name__}: {' '.join(str(e).split())}); rerun with --debug and report it"
        )
        code = ExitCode.BAD_INPUT
    return code


def _usage_errors() -> tuple[type, ...]:
    """The exception classes of a bad command line: recent typer vendors its own click, whose
    exceptions derive from the public ``typer.TyperException``; a typer built on an installed
    click raises ``click.ClickException`` (click is then loaded already, by typer)."""
    found = [typer.TyperException] if hasattr(typer, "TyperException") else []
    click_exceptions = sys.modules.get("click.exceptions")
    if click_exceptions is not None:
        found.append(click_exceptions.ClickException)
    return tuple(found)


def _click_line(e) -> str:
    """A usage error as one line: what is wrong and where to look (``grpofit fit --help``)."""
    text = " ".join(e.format_message().split()).rstrip(".")
    ctx = getattr(e, "ctx", None)
    command = getattr(ctx, "command_path", None) or "grpofit"
    return f"{text}; see '{command} --help'"
