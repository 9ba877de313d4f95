"""Peak memory and time of ``grpofit fit`` on very long CSVs.

    python scripts/memory_check.py [--rows 1000000 10000000] [--work DIR] [--record]

Writes a ``step,reward`` CSV of each ``--rows`` count (a noisy saturating curve, about 17 bytes a
row), runs ``python -m grpofit fit FILE --format json`` in a child process and prints the file's
size, the child's peak RSS (its ``VmHWM``; Linux), wall time, and the issues' target of 3x the file
plus 100 MB. Not run by the tests (10^7 rows take minutes): a measurement to quote.

``--record`` writes the measurement to ``docs/memory.json`` and rewrites the README's memory
table (between the ``memory_check`` markers) from that file; ``tests/test_memory_record.py``
checks that the two agree and that every "met" follows from its numbers, so the README's memory
figures are always the last recorded run's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "memory.json"
README = ROOT / "docs" / "reliability.md"
README_START = "<!-- memory_check:start (python scripts/memory_check.py --record writes this table) -->"
README_END = "<!-- memory_check:end -->"
MB = 1e6


def write_csv(path: Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    block = 1_000_000
    with open(path, "w") as f:
        f.write("step,reward\n")
        for start in range(0, rows, block):
            s = np.arange(start, min(rows, start + block))
            r = 0.85 - 0.6 * np.exp(-s / (rows / 6)) + rng.normal(0, 0.02, s.size)
            f.write("".join(f"{a},{b:.6f}\n" for a, b in zip(s.tolist(), r.tolist())))


def target_mb(file_mb: float) -> float:
    """The issues' bound: 3x the file plus 100 MB."""
    return 3.0 * file_mb + 100.0


def measure(rows: int, work: str | None) -> dict:
    """One child ``grpofit fit`` on a fresh ``rows``-row CSV: its file size, peak RSS and wall."""
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        path = Path(tmp) / "long.csv"
        t = time.perf_counter()
        write_csv(path, rows)
        file_mb = path.stat().st_size / MB
        print(f"wrote {rows:,} rows, {file_mb:.0f} MB in {time.perf_counter() - t:.0f} s", flush=True)
        # the child's own high-water mark (VmHWM): ``ru_maxrss`` also counts the parent's RSS
        # at fork time (Linux keeps it across exec), here the CSV writer's strings
        code = (
            "import sys, runpy\n"
            "sys.argv = ['grpofit', 'fit', sys.argv[1], '--format', 'json']\n"
            "try:\n"
            "    runpy.run_module('grpofit', run_name='__main__')\n"
            "finally:\n"
            "    with open('/proc/self/status') as f:\n"
            "        hwm = [ln.split()[1] for ln in f if ln.startswith('VmHWM')]\n"
            "    print('PEAK_KB', hwm[0], file=sys.stderr)\n"
        )
        t = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        wall = time.perf_counter() - t
    peak_lines = [ln for ln in p.stderr.splitlines() if ln.startswith("PEAK_KB")]
    if p.returncode != 0 or not peak_lines:
        raise SystemExit(f"grpofit fit exited {p.returncode}: {p.stderr.strip()[-500:]}")
    peak_mb = int(peak_lines[-1].split()[1]) * 1024 / MB
    n_points = json.loads(p.stdout)["runs"][0]["n_points"]
    row = {
        "rows": rows,
        "n_points": n_points,
        "file_mb": round(file_mb, 1),
        "peak_rss_mb": round(peak_mb, 1),
        "target_mb": round(target_mb(round(file_mb, 1)), 1),
        "wall_s": round(wall, 1),
    }
    row["met"] = row["peak_rss_mb"] <= row["target_mb"]
    print(
        f"file {file_mb:.0f} MB | peak RSS {peak_mb:.0f} MB ({peak_mb / file_mb:.1f}x the file) | "
        f"wall {wall:.0f} s | target 3x file + 100 MB = {row['target_mb']:.0f} MB: "
        f"{'met' if row['met'] else 'NOT met'}",
        flush=True,
    )
    return row


def readme_block(doc: dict) -> str:
    """The README's memory table, rendered from a record."""
    lines = [
        README_START,
        "",
        "| rows | CSV file | peak RSS of `grpofit fit` | target: 3x file + 100 MB | met |",
        "|---:|---:|---:|---:|:--|",
    ]
    for r in doc["runs"]:
        lines.append(
            f"| {r['rows']:,} | {r['file_mb']:.1f} MB | {r['peak_rss_mb']:.0f} MB | "
            f"{r['target_mb']:.0f} MB | {'yes' if r['met'] else 'NO'} |"
        )
    m = doc["machine"]
    lines += [
        "",
        f"Recorded {doc['recorded']} by `python scripts/memory_check.py --record` "
        f"(Python {m['python']}, numpy {m['numpy']}, load average {m['load_average_at_start']:.1f} at the start; "
        "figures in `docs/memory.json`).",
        "",
        README_END,
    ]
    return "\n".join(lines)


def record(doc: dict, path: Path = RECORD, readme: Path = README) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n")
    text = readme.read_text()
    if text.count(README_START) != 1 or text.count(README_END) != 1:
        raise SystemExit(f"{readme}: the memory_check markers are missing or repeated")
    head, rest = text.split(README_START)
    _, tail = rest.split(README_END)
    readme.write_text(head + readme_block(doc) + tail)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--work", default=None)
    ap.add_argument("--record", action="store_true", help="write docs/memory.json and the README table")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    runs = [measure(rows, args.work) for rows in args.rows]
    if args.record:
        doc = {
            "schema": "grpofit.memory_check/1",
            "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": {
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "load_average_at_start": round(load, 1),
            },
            "target": "peak RSS <= 3x the file + 100 MB",
            "runs": runs,
        }
        record(doc)
        print(f"recorded {RECORD.relative_to(ROOT)} and the README table")


if __name__ == "__main__":
    main()
