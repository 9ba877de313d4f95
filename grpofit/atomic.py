"""Files written whole or not at all: a temporary file in the same folder, then a rename.

An interrupt (Ctrl-C, SIGTERM), a full disk or a crash mid-write leaves the previous file (or
none), never a truncated report or figure.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from grpofit.errors import UsageError


@contextlib.contextmanager
def replacing(path: str | os.PathLike, *, create_parent: bool = True):
    """Yield a temporary path next to ``path``; on success it replaces ``path``, else it is removed.

    OS errors become :class:`UsageError` naming ``path`` (exit 2, one line).
    """
    path = Path(path)
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
        raise UsageError(f"cannot write {path}: {e.strerror or e}", path=str(path), fix="choose a writable path") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_text(path: str | os.PathLike, text: str) -> None:
    """``Path(path).write_text(text)`` (UTF-8), atomically."""
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
