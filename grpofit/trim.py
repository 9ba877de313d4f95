"""Give freed heap memory back to the OS: after each poll of a long watch, before fitting a long run.

Each re-judgement of a run allocates temporaries in proportion to its length (about 1 kB per
point for ``diagnose``) and frees them again; glibc's allocator keeps freed memory in its heap,
so without this the process's RSS would track the largest temporaries it ever needed instead of
what it holds. :func:`release` calls glibc's ``malloc_trim(0)`` (a no-op where there is no
glibc: macOS, musl, Windows).
"""

from __future__ import annotations

import ctypes
import ctypes.util

_TRIM = None
_LOOKED = False


def _malloc_trim():
    global _TRIM, _LOOKED
    if not _LOOKED:
        _LOOKED = True
        try:
            try:
                libc = ctypes.CDLL("libc.so.6")
            except OSError:
                libc = ctypes.CDLL(ctypes.util.find_library("c"))
            fn = libc.malloc_trim
            fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
            _TRIM = fn
        except (OSError, AttributeError, TypeError):
            _TRIM = None
    return _TRIM


def release() -> bool:
    """Return freed heap memory to the OS; True when the allocator could (glibc)."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
