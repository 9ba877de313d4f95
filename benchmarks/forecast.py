"""``python -m benchmarks.forecast``: CPU of ``grpofit forecast`` and ``grpofit backtest``.

The speed targets: ``forecast`` on one file <= 1 s, ``backtest`` of 100 runs x 4 cuts
<= 60 s with ``--jobs 2``. Every figure is one whole child process: its CPU (user + system of
the process and its children, from ``os.wait4``, steady under load) and its wall time (what a
user waits for; noisy when the machine is shared). Runs are generated with the forcing inside
the dynamics (:func:`grpofit.testing.synthetic.forced_recovery_set`, seed 0), written as CSV.

Options: ``--runs N`` (default 100), ``--cuts`` (default 20,30,50,70), ``--jobs`` (default 2),
``--forecast-files N`` (default 5), ``--quick`` (8 runs, 2 forecast files).
Not collected by pytest; not a timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _grpofit() -> list[str]:
    return [sys.executable, "-m", "grpofit"]


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """``(cpu seconds, wall seconds, exit code)`` of one child process and its children."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, wall, proc.returncode


def write_runs(folder: Path, n: int, seed: int = 0) -> list[Path]:
    """``n`` forced runs (all strata in turn) as ``step,reward`` CSV files."""
    from grpofit.testing.synthetic import forced_recovery_set

    per = max(1, -(-n // 12))
    runs = forced_recovery_set(per, seed=seed)
    order = [runs[i + k * per] for i in range(per) for k in range(12)][:n]
    paths = []
    for i, (_, table) in enumerate(order):
        p = folder / f"run_{i:03d}.csv"
        np.savetxt(
            p,
            np.column_stack([table["step"], table["reward"]]),
            delimiter=",",
            header="step,reward",
            comments="",
            fmt=["%d", "%.6f"],
        )
        paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.forecast")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--cuts", default="20,30,50,70")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--forecast-files", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.runs, a.forecast_files = 8, 2
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = write_runs(folder, a.runs)
        n_cuts = len(a.cuts.split(","))
        cpu_f, wall_f = [], []
        for p in paths[: a.forecast_files]:  # forecast of one file, cut at 25% (a run in progress)
            n_steps = sum(1 for _ in open(p)) - 1
            cpu, wall, code = timed(
                _grpofit()
                + [
                    "forecast",
                    str(p),
                    "--until",
                    str(max(10, n_steps // 4)),
                    "--horizon",
                    str(n_steps),
                    "--format",
                    "json",
                ]
            )
            if code != 0:
                raise SystemExit(f"forecast {p.name} exited {code}")
            cpu_f.append(cpu)
            wall_f.append(wall)
        cpu_b, wall_b, code = timed(
            _grpofit() + ["backtest", str(folder), "--cuts", a.cuts, "--jobs", str(a.jobs), "--format", "json"]
        )
        if code != 0:
            raise SystemExit(f"backtest exited {code}")
        startup, _, _ = timed(_grpofit() + ["--help"])
    load = os.getloadavg()[0]
    print("| measure | CPU s | wall s | target |\n| --- | --- | --- | --- |")
    print(
        f"| `forecast` one file (median of {len(cpu_f)}, cut at 25%) | {statistics.median(cpu_f):.2f} | "
        f"{statistics.median(wall_f):.2f} | <= 1 s |"
    )
    print(f"| `backtest` {a.runs} runs x {n_cuts} cuts, --jobs {a.jobs} | {cpu_b:.1f} | {wall_b:.1f} | <= 60 s |")
    print(f"| `grpofit --help` (start-up) | {startup:.2f} | | |")
    print(
        f"\nload average at the end: {load:.1f} on {os.cpu_count()} cores (wall times are noise when "
        f"the load exceeds the cores; CPU seconds are not)"
    )


if __name__ == "__main__":
    main()
