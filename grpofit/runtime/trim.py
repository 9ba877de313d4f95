"""Give freed heap memory back to the OS: after each poll of a long watch, before fitting a long run.

Each re-judgement of a run allocates temporaries in proportion to its length (about 1 kB per
point for ``diagnose``) and frees them again; glibc's allocator keeps freed memory in its heap,
so without this the process's RSS would track the largest temporaries it ever needed instead of
what it holds. :func:`release` calls glibc's ``malloc_trim(0)``; :func:`mmap_large` has glibc
give every large block its own mapping, returned to the OS as soon as it is freed (both no-ops
where there is no glibc: macOS, musl, Windows). :func:`mmap_large` changes a setting of the
whole process: only the CLI's entry point calls it (:mod:`grpofit.cli.entry`), never the library.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: ``M_MMAP_THRESHOLD`` of glibc's ``malloc.h`` (the ``mallopt`` parameter)
M_MMAP_THRESHOLD = -3

_FNS: dict = {}


def _glibc(name: str, argtypes: list):
    """glibc's function ``name`` (returning int), or None where there is none."""
    if name not in _FNS:
        try:
            try:
                libc = ctypes.CDLL("libc.so.6")
            except OSError:
                libc = ctypes.CDLL(ctypes.util.find_library("c"))
            fn = getattr(libc, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
        except (OSError, AttributeError, TypeError):
            fn = None
        _FNS[name] = fn
    return _FNS[name]


def release() -> bool:
    """Return freed heap memory to the OS; True when the allocator could (glibc)."""
    fn = _glibc("malloc_trim", [ctypes.c_size_t])
    if fn is None:
        return False
    fn(0)
    return True


def mmap_large(threshold: int = 1 << 20) -> bool:
    """Serve every allocation of ``threshold`` bytes or more (numpy arrays of more than 128k
    floats by default) from its own mapping, unmapped when it is freed; True when the allocator
    took it (glibc).

    glibc does so by default only above a threshold that it raises, up to 32 MB, to the size of
    each such block freed: after that, the temporaries of a long fit (a few MB each on a 10^6-point
    run) come from the heap, which keeps what they freed, and RSS grows by the heap's high-water
    mark. A fixed threshold stops that (the process keeps it: a long run's process)."""
    fn = _glibc("mallopt", [ctypes.c_int, ctypes.c_int])
    if fn is None:
        return False
    return bool(fn(M_MMAP_THRESHOLD, int(threshold)))
