"""``python -m benchmarks.prior``: CPU and wall time of the population prior.

Targets: ``forecast`` with a prior of 50 runs <= 1.5 s; building a prior from 1,000 runs <= 30 s
on 2 cores. Runs are generated from the damped oscillator with noise (seed 0), their timescales
following the learning rate written in each run's folder config, written as CSV. Each figure is
one whole child process (``grpofit forecast ...``): CPU from ``os.wait4`` and wall time.

Options: ``--runs N`` (default 1000), ``--quick`` (100 runs). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _write_runs(folder: Path, n: int, seed: int = 0) -> list[Path]:
    from grpofit.laws.models import oscillator

    rng = np.random.default_rng(seed)
    out = []
    t = np.arange(500, dtype=float)
    for i in range(n):
        lr = float(np.exp(rng.uniform(np.log(1e-6), np.log(1e-5))))
        y = oscillator(t, rng.normal(0.7, 0.03), 0.2, 2e-4 / lr, 5.0) + 0.02 * rng.standard_normal(t.size)
        d = folder / f"run{i:04d}"
        d.mkdir()
        (d / "config.yaml").write_text(f"learning_rate: {lr:.6g}\n")
        p = d / "log.csv"
        p.write_text("step,reward\n" + "".join(f"{k + 1},{v:.5f}\n" for k, v in enumerate(y)))
        out.append(p)
    return out


def _run(args: list[str]) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "grpofit", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return usage.ru_utime + usage.ru_stime, wall, os.waitstatus_to_exitcode(status)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    n = 100 if a.quick else a.runs
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        big, small = root / "big", root / "small"
        big.mkdir()
        small.mkdir()
        _write_runs(big, n)
        runs50 = _write_runs(small, 51, seed=1)
        target = runs50[0]
        saved50 = root / "p50.json"
        others = [a for p in runs50[1:] for a in ("--prior", str(p.parent))]
        rows = []
        cpu, wall, code = _run(
            [
                "forecast",
                str(target),
                "--until",
                "50",
                "--horizon",
                "500",
                *others,
                "--save-prior",
                str(saved50),
                "--format",
                "json",
            ]
        )
        rows.append(("forecast, prior built from 50 runs", cpu, wall, code))
        cpu, wall, code = _run(
            ["forecast", str(target), "--until", "50", "--horizon", "500", "--prior", str(saved50), "--format", "json"]
        )
        rows.append(("forecast, saved prior of 50 runs (target <= 1.5 s)", cpu, wall, code))
        cpu, wall, code = _run(["forecast", str(target), "--until", "50", "--horizon", "500", "--format", "json"])
        rows.append(("forecast, no prior (reference)", cpu, wall, code))
        saved = root / "pbig.json"
        cpu, wall, code = _run(
            [
                "forecast",
                str(target),
                "--until",
                "50",
                "--horizon",
                "500",
                "--prior",
                str(big),
                "--save-prior",
                str(saved),
                "--format",
                "json",
            ]
        )
        rows.append((f"forecast, prior built from {n} runs (target <= 30 s at 1,000)", cpu, wall, code))
    print("| what | CPU s | wall s | exit |\n| --- | --- | --- | --- |")
    for name, cpu, wall, code in rows:
        print(f"| {name} | {cpu:.2f} | {wall:.2f} | {code} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
