"""The tests run with the reference numerics the records were computed with
(grpofit/testing/numerics.py): AVX2 kernels in numpy and OpenBLAS, whatever the CPU."""

import os
import subprocess
import sys

import pytest

from grpofit.testing.numerics import REFERENCE


def test_this_session_is_pinned():
    for key, value in REFERENCE.items():
        assert os.environ.get(key) == value
    from numpy._core._multiarray_umath import __cpu_features__ as features

    assert not features.get("X86_V4") and not features.get("AVX512_ICL")  # AVX-512 kernels off


def _child(code):
    env = {k: v for k, v in os.environ.items() if k not in REFERENCE}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


@pytest.mark.slow
@pytest.mark.subprocess
def test_pin_selects_the_kernels_and_refuses_to_come_too_late():
    p = _child("from grpofit.testing.numerics import pin; pin()\n"
               "from numpy._core._multiarray_umath import __cpu_features__ as f\n"
               "import os; print(os.environ['OPENBLAS_CORETYPE'], bool(f.get('X86_V4')))")
    assert p.returncode == 0 and p.stdout.split() == ["Haswell", "False"], p.stderr
    p = _child("import numpy\nfrom grpofit.testing.numerics import pin; pin()")
    assert p.returncode != 0 and "before numpy is imported" in p.stderr
