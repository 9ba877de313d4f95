"""The lmfit fallback of the bounded solve: imported plainly (no interference with which modules
lmfit loads), it converges, and its answer does not depend on what the process imported before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_FIT = (
    "import sys\n"
    "{pre}"
    "import numpy as np\n"
    "from grpofit.fitting.profile import log_bins\n"
    "from grpofit.fitting.solve import solve_lmfit\n"
    "from grpofit.laws.models import OSCILLATOR\n"
    "t = np.arange(0, 200.0)\n"
    "y = 0.1 + 0.002 * t + np.random.default_rng(3).normal(0, 0.02, t.size)\n"
    "b = log_bins(t, y)\n"
    "start = {{'plateau': 0.5, 'initial': 0.1, 'timescale': 100.0, 'inertia': 5.0}}\n"
    "sol = solve_lmfit(OSCILLATOR, b, start, OSCILLATOR.bounds(t, y))\n"
    "print(sol.method, sol.ok, *[repr(float(v)) for v in sol.x], repr(float(sol.ssr)))\n"
)


def _run(pre: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", _FIT.format(pre=pre)], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return out.stdout.split()


@pytest.mark.slow
@pytest.mark.subprocess
def test_lmfit_fallback_converges_and_answers_the_same_whatever_was_imported():
    pytest.importorskip("lmfit")
    lean = _run("")
    loaded = _run("import pandas\n")
    assert lean[0] == "lmfit" and lean[1] == "True"
    assert lean[:2] == loaded[:2]
    assert [float(x) for x in lean[2:]] == pytest.approx([float(x) for x in loaded[2:]], rel=1e-9)
    assert not any(
        "sys.modules" in line and "pandas" in line
        for line in (ROOT / "grpofit" / "fitting" / "solve.py").read_text().splitlines()
    )
