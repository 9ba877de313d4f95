"""Compiled code: grpofit's own kernel, and one compiled module of scipy loaded without
importing the package around it.

grpofit's kernel (:func:`compiled_filter`) is built from ``grpofit/_filter.c`` when the package
is installed with a C compiler at hand, and is optional: without it the same numpy code runs.

``import scipy.optimize`` takes about a third of a second (it imports scipy.linalg, sparse,
special, fft and the linear-programming and global-optimisation code), a third of one
``grpofit forecast``; ``import scipy.linalg`` alone about a fifth. The forecast needs two
compiled routines from them: L-BFGS-B's ``setulb`` (``scipy.optimize._lbfgsb``) and LAPACK's
``dtrtrs`` (``scipy.linalg._flapack``). :func:`scipy_extension` loads such an extension module
from scipy's folder by itself (a few milliseconds): the same shared library, so the same
results. Where that fails (another layout, an unusual build) it is imported as usual.
"""

from __future__ import annotations

import functools
import importlib
import sys

__all__ = ["scipy_extension", "scipy_version", "compiled_filter", "PURE_ENV"]

#: set (to anything but "" or "0") to run the numpy code instead of grpofit's own compiled kernels
PURE_ENV = "GRPOFIT_PURE_PYTHON"


@functools.cache
def compiled_filter():
    """grpofit's compiled state-space arithmetic (``grpofit/_filter.c``: columns, transitions,
    Kalman filter, levels, mixture quantiles; used by
    :mod:`grpofit.fitting.statespace_ci`), or ``None`` where it was not built (no C compiler at
    install time: the numpy code gives the same results, more slowly) or :data:`PURE_ENV` is set."""
    import os

    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return None
    try:
        from grpofit import _filter
    except ImportError:
        return None
    return _filter


@functools.cache
def scipy_extension(name: str):
    """The compiled module ``name`` (``"scipy.linalg._flapack"``), without its package's
    ``__init__`` when it can be found in scipy's folder; else imported as usual."""
    if name in sys.modules:
        return sys.modules[name]
    try:
        return _load_alone(name)
    except Exception:  # noqa: BLE001 - any failure: the ordinary import
        return importlib.import_module(name)


@functools.cache
def scipy_version() -> tuple[int, ...] | None:
    """The installed scipy's ``(major, minor)``, read from its ``version.py`` without importing
    it (``None`` when it cannot be read): code that repeats what a scipy function does around a
    compiled routine holds only for the versions it was written against."""
    import importlib.util
    import os
    import re

    try:
        spec = importlib.util.find_spec("scipy")
        folder = list(spec.submodule_search_locations)[0]
        with open(os.path.join(folder, "version.py"), encoding="utf-8") as fh:
            found = re.search(r"^version\s*=\s*['\"](\d+)\.(\d+)", fh.read(), re.M)
    except (OSError, AttributeError, TypeError, IndexError, ValueError, ImportError):
        return None
    return (int(found.group(1)), int(found.group(2))) if found else None


def _load_alone(name: str):
    import importlib.machinery
    import importlib.util
    import os

    top, *inner = name.split(".")
    spec = importlib.util.find_spec(top)  # a top-level name: found, not imported
    if spec is None or not spec.submodule_search_locations or not inner:
        raise ImportError(name)
    folder = os.path.join(list(spec.submodule_search_locations)[0], *inner[:-1])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, inner[-1] + suffix)
        if os.path.isfile(path):
            loader = importlib.machinery.ExtensionFileLoader(name, path)
            module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path, loader=loader))
            loader.exec_module(module)
            return module
    raise ImportError(name)
