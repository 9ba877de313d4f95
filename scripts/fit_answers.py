"""Check that a change to the fit's speed leaves its answers alone: ``grpofit fit --format json``
on every vendored real log (``tests/data/real_logs``) and on 240 generated held-out runs of 300
steps (:func:`benchmarks.data.heldout_fit_inputs`, seed 7), written to one JSON document, or
compared with one written before the change.

    python scripts/fit_answers.py save before.json [--workdir DIR]
    python scripts/fit_answers.py compare before.json [--workdir DIR] [--rtol 1e-6]

``compare`` re-runs the fits with the checkout's code and reports every number that moved by more
than ``rtol`` relative (absolute below 1e-12, for values at zero), every string or key that changed
and every null that appeared or went; it exits 1 if any did. The generated runs are written once
into ``--workdir`` (default: a folder under the system's temporary directory) and reused.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REAL = ROOT / "tests" / "data" / "real_logs"
N_RUNS = 240


def inputs(workdir: Path) -> list[Path]:
    from benchmarks import data

    # relative to the checkout (the fits run there): the same run names from any checkout
    real = sorted(p.relative_to(ROOT) for p in REAL.iterdir() if p.name != "NOTICE.md")
    generated = [p for p, _ in data.heldout_fit_inputs(workdir / "heldout", N_RUNS, n_steps=300)]
    return real + generated


def fit_all(paths: list[Path]) -> dict:
    """One ``grpofit fit --format json`` per file (a file's runs stay together), keyed by file name."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    out = {}
    chunk = 40  # a few processes, not one per file: the fits do not depend on each other
    for i in range(0, len(paths), chunk):
        part = paths[i : i + chunk]
        proc = subprocess.run(
            [sys.executable, "-m", "grpofit", "fit", "--format", "json", *map(str, part)],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )
        if proc.returncode not in (0, 2):
            raise SystemExit(f"grpofit fit failed ({proc.returncode}): {proc.stderr[-500:]}")
        doc = json.loads(proc.stdout)
        for run in doc["runs"]:
            out[run["run"]] = run
        out.setdefault("_errors", []).extend(ln for ln in proc.stderr.splitlines() if ln.startswith("error"))
    return out


def differences(a, b, rtol: float, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: only before" for k in a.keys() - b.keys()]
        out += [f"{where}/{k}: only after" for k in b.keys() - a.keys()]
        for k in a.keys() & b.keys():
            out += differences(a[k], b[k], rtol, f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} -> {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, rtol, f"{where}[{i}]")]
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        if math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b)):
            return []
        return [f"{where}: {a!r} -> {b!r}"]
    return [] if a == b else [f"{where}: {a!r} -> {b!r}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("save", "compare"))
    ap.add_argument("file", type=Path)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "grpofit-fit-answers")
    ap.add_argument("--rtol", type=float, default=1e-6)
    args = ap.parse_args(argv)
    got = fit_all(inputs(args.workdir))
    if args.action == "save":
        args.file.write_text(json.dumps(got, indent=1, sort_keys=True))
        print(f"{len(got) - 1} runs written to {args.file}")
        return 0
    diffs = differences(json.loads(args.file.read_text()), got, args.rtol)
    for d in sorted(diffs)[:200]:
        print(d)
    print(f"{len(got) - 1} runs compared at rtol {args.rtol:g}: {len(diffs)} difference(s)")
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
