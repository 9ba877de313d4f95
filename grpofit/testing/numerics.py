"""The reference numerics that the recorded figures were computed with, so that a record
reproduces on any x86-64 CPU with AVX2.

numpy and OpenBLAS choose their kernels when they load, from the CPU they find: on a CPU with
AVX-512 they take kernels whose exp, log and BLAS results differ from the AVX2 ones in the last
bits. Most outputs do not notice. Some recorded figures amplify them: a likelihood search on a
flat surface ends at another point (a bandit forecast's error moved from 0.109 to 0.092), and
the simulator's ``kl`` and ``grad_norm`` columns change in the 15th digit. The tests
(``tests/conftest.py``) and the scripts that write records (sample logs, the bandit sweep, the
forecast records) pin the AVX2 kernels before numpy is imported. A user's run is not pinned:
its figures may differ from a pinned run's by that much.
"""

from __future__ import annotations

import os
import sys

#: environment that selects the reference kernels (the dispatch names of numpy 2.x's x86 builds)
REFERENCE = {"OPENBLAS_CORETYPE": "Haswell", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}


def pin() -> None:
    """Select the reference kernels for this process and its children (a value already set in
    the environment wins). Must run before numpy is imported: raise if numpy was imported
    without it (a no-op when this process was pinned already, e.g. a script imported by a test)."""
    if "numpy" in sys.modules:
        if any(key not in os.environ for key in REFERENCE):
            raise RuntimeError("grpofit.testing.numerics.pin() must run before numpy is imported")
        return
    for key, value in REFERENCE.items():
        os.environ.setdefault(key, value)
