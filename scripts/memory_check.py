"""Peak memory and time of ``grpofit fit`` on one very long CSV (issue 14, item 5).

    python scripts/memory_check.py [--rows 10000000] [--work DIR]

Writes a ``step,reward`` CSV of ``--rows`` rows (a noisy saturating curve, ~26 bytes a row),
runs ``python -m grpofit fit FILE --format json`` in a child process and prints the file's
size, the child's peak RSS (``ru_maxrss``), wall time, and the issue's target of 3x the file
plus 100 MB. Not run by the tests (10^7 rows take minutes and GBs): a measurement to quote.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_csv(path: Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    block = 1_000_000
    with open(path, "w") as f:
        f.write("step,reward\n")
        for start in range(0, rows, block):
            s = np.arange(start, min(rows, start + block))
            r = 0.85 - 0.6 * np.exp(-s / (rows / 6)) + rng.normal(0, 0.02, s.size)
            f.write("".join(f"{a},{b:.6f}\n" for a, b in zip(s.tolist(), r.tolist())))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        path = Path(work) / "long.csv"
        t = time.perf_counter()
        write_csv(path, args.rows)
        mb = path.stat().st_size / 1e6
        print(f"wrote {args.rows:,} rows, {mb:.0f} MB in {time.perf_counter() - t:.0f} s", flush=True)
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "grpofit", "fit", str(path), "--format", "json"],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        wall = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if p.returncode != 0:
            print(f"grpofit fit exited {p.returncode}: {p.stderr.strip()[-500:]}")
        else:
            run = json.loads(p.stdout)["runs"][0]
            print(f"fit: {run['n_points']:,} points, metric {run['metric']}")
        print(f"file {mb:.0f} MB | peak RSS {peak:.0f} MB ({peak / mb:.1f}x the file, "
              f"{(peak * 1e6) / args.rows:.0f} bytes a row) | wall {wall:.0f} s | "
              f"target 3x file + 100 MB = {3 * mb + 100:.0f} MB: {'met' if peak <= 3 * mb + 100 else 'NOT met'}")


if __name__ == "__main__":
    main()
