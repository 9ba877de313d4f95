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

from grpofit.errors import UsageError


@contextlib.contextmanager
def replacing(path: str | os.PathLike, *, create_parent: bool = True):
    """Yield a temporary path next to ``path``; on success it replaces ``path``, else it is removed.

    OS errors become :class:`UsageError` naming ``path`` (exit 2, one line).
    """
    path = Path(path)
    if _special(path):  # written whole, appended (a regular file behind /dev/stdout is not truncated)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(suffix=".tmp" + path.suffix)
            os.close(fd)
            yield Path(tmp)
            with open(tmp, "rb") as src, open(path, "ab") as dst:
                shutil.copyfileobj(src, dst)
        except OSError as e:
            raise UsageError(f"cannot write {path}: {e.strerror or e}", path=str(path), fix="choose a writable path") from None
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        return
    shown, path = path, Path(os.path.realpath(path)) if path.is_symlink() else path
    tmp = None
    try:
        if create_parent:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:60]}.", suffix=".tmp" + path.suffix, dir=path.parent)
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # what open() would have made, not mkstemp's 0600
        yield Path(tmp)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise UsageError(f"cannot write {shown}: {e.strerror or e}", path=str(shown), fix="choose a writable path") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    """``Path(path).write_text(text)`` (UTF-8), atomically."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _special(path: Path) -> bool:
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
