"""Files written whole or not at all: a temporary file in the same folder, then a rename.

An interrupt (Ctrl-C, SIGTERM), a full disk or a crash mid-write leaves the previous file (or
none), never a truncated report or figure. A path that names a device, a named pipe or a socket
(``--junit /dev/stdout``, ``--plot-dir`` figures aside, ``/dev/null``) is written whole to a
temporary file, then copied to it (appended): renaming over it would replace ``/dev/null``
itself with a regular file (root can write in ``/dev``). A symbolic link
to a file is kept: its target is the file replaced.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from grpofit.core.errors import UsageError


@contextlib.contextmanager
def replacing(path: str | os.PathLike, *, create_parent: bool = True):
    """Yield a temporary path next to ``path``; on success it replaces ``path``, else it is removed.

    OS errors become :class:`UsageError` naming ``path`` (exit 2, one line).
    """
    path = Path(path)
    with _as_usage_error(path):  # the path as given, a link's name rather than its target
        if is_special(path):  # written whole, appended (a regular file behind /dev/stdout is not truncated)
            with _scratch(suffix=".tmp" + path.suffix) as tmp:
                yield tmp
                with open(tmp, "rb") as src, open(path, "ab") as dst:
                    shutil.copyfileobj(src, dst)
            return
        if path.is_symlink():  # the link is kept: its target is the file replaced
            path = Path(os.path.realpath(path))
        if create_parent:
            path.parent.mkdir(parents=True, exist_ok=True)
        with _scratch(prefix=f".{path.name[:60]}.", suffix=".tmp" + path.suffix, dir=path.parent) as tmp:
            os.chmod(tmp, 0o666 & ~_umask())  # what open() would have made, not mkstemp's 0600
            yield tmp
            os.replace(tmp, path)


@contextlib.contextmanager
def _as_usage_error(shown: Path):
    """An ``OSError`` inside becomes a :class:`UsageError` naming ``shown``."""
    try:
        yield
    except OSError as e:
        raise UsageError(
            f"cannot write {shown}: {e.strerror or e}", path=str(shown), fix="choose a writable path"
        ) from None


@contextlib.contextmanager
def _scratch(**where):
    """A new empty temporary file (``tempfile.mkstemp(**where)``), removed on the way out
    unless it was renamed away."""
    fd, tmp = tempfile.mkstemp(**where)
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    """``Path(path).write_text(text)`` (UTF-8), atomically."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def is_special(path: Path) -> bool:
    """Whether ``path`` exists (links followed) as something other than a file or a folder, or
    names one of this process's streams (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``,
    which may lead to the very file standard output is writing)."""
    import stat

    if str(path.absolute()).startswith(("/dev/", "/proc/")):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
