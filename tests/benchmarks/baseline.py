"""The plain script grpofit is compared with: one ``curve_fit`` of the oscillator per file.

``python tests/benchmarks/baseline.py run1.csv run2.csv ...`` reads each CSV (columns
step,reward) with ``numpy.loadtxt``, fits :func:`grpofit.models.oscillator` (the only thing
imported from grpofit; it needs numpy alone) with ``scipy.optimize.curve_fit`` from one
data-driven start, and prints one JSON document: ``{"fits": [{"file", "popt", "error"}]}``
with ``popt = [plateau, initial, timescale, inertia]`` in step units.

Start: plateau = mean of the last 10% of points, initial = mean of the first 10%, timescale =
span / 3, inertia = timescale / 10 (damping ratio 1.6: overdamped, like most runs).
"""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
from scipy.optimize import curve_fit

from grpofit.models import oscillator


def start(t: np.ndarray, y: np.ndarray) -> list[float]:
    """``[tail mean, head mean, span/3, span/30]`` (head and tail: 10% of points, at least 3)."""
    k = max(3, y.size // 10)
    ts = (t[-1] - t[0]) / 3.0
    return [float(np.mean(y[-k:])), float(np.mean(y[:k])), float(ts), float(ts / 10.0)]


def fit_file(path: str) -> dict:
    """One fit; ``popt`` is ``None`` (and ``error`` says why) when curve_fit gives up."""
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    t = data[:, 0] - data[0, 0]
    y = data[:, 1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            popt, _ = curve_fit(oscillator, t, y, p0=start(t, y))
    except (RuntimeError, ValueError) as e:
        return {"file": path, "popt": None, "error": str(e)}
    return {"file": path, "popt": [float(v) for v in popt], "error": None}


def main(argv: list[str]) -> None:
    print(json.dumps({"fits": [fit_file(p) for p in argv]}))


if __name__ == "__main__":
    main(sys.argv[1:])
