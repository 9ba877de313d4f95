"""The plain script grpofit is compared with: one ``curve_fit`` of the oscillator per file.

``python benchmarks/baseline.py run1.csv run2.jsonl ...`` reads each log the way a careful
user would by hand, with the standard library and numpy (no pandas: its import alone costs
0.2 s): a CSV with ``csv`` (the reward column is ``reward``, or a W&B panel export's
``<run> - train/reward``), a JSONL with ``json.loads`` per line, a ``trainer_state.json`` with
``json.load`` of its ``log_history``. It then fits :func:`grpofit.laws.models.oscillator` (the only
thing imported from grpofit; it needs numpy alone) with ``scipy.optimize.curve_fit`` from one
data-driven start, and prints one JSON document: ``{"fits": [{"file", "popt", "error"}]}`` with
``popt = [plateau, initial, timescale, inertia]`` in step units.

Start: plateau = mean of the last 10% of points, initial = mean of the first 10%, timescale =
span / 3, inertia = timescale / 10 (damping ratio 1.6: overdamped, like most runs).
"""

from __future__ import annotations

import csv
import json
import sys
import warnings

import numpy as np
from scipy.optimize import curve_fit

from grpofit.laws.models import oscillator


def start(t: np.ndarray, y: np.ndarray) -> list[float]:
    """``[tail mean, head mean, span/3, span/30]`` (head and tail: 10% of points, at least 3)."""
    k = max(3, y.size // 10)
    ts = (t[-1] - t[0]) / 3.0
    return [float(np.mean(y[-k:])), float(np.mean(y[:k])), float(ts), float(ts / 10.0)]


def read(path: str) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, rewards)`` of one log in any of the four formats."""
    if path.endswith(".jsonl"):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        pairs = [(r["step"], r["reward"]) for r in rows if "reward" in r]
    elif path.endswith(".json"):
        with open(path) as f:
            rows = json.load(f)["log_history"]
        pairs = [(r["step"], r["reward"]) for r in rows if "reward" in r]
    else:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader)
            col = next((i for i, h in enumerate(header) if h == "reward" or h.endswith(" - train/reward")), None)
            pairs = [(float(r[0]), float(r[col])) for r in reader if r and r[col] != ""]
    data = np.asarray(pairs, dtype=float)
    return data[:, 0], data[:, 1]


def fit(steps: np.ndarray, y: np.ndarray) -> tuple[list[float] | None, str | None]:
    """``(popt, None)``, or ``(None, why)`` when curve_fit gives up."""
    t = steps - steps[0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            popt, _ = curve_fit(oscillator, t, y, p0=start(t, y))
    except (RuntimeError, ValueError) as e:
        return None, str(e)
    return [float(v) for v in popt], None


def fit_file(path: str) -> dict:
    """One fit; ``popt`` is ``None`` (and ``error`` says why) when curve_fit gives up."""
    popt, error = fit(*read(path))
    return {"file": path, "popt": popt, "error": error}


def main(argv: list[str]) -> None:
    print(json.dumps({"fits": [fit_file(p) for p in argv]}))


if __name__ == "__main__":
    main(sys.argv[1:])
