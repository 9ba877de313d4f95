"""Seeded inputs for the benchmark, written as files the way users have them.

Every generator writes into a folder and leaves a marker holding its parameters beside it
(``<parent>/.markers/<name>.json``, never inside a folder that ``diagnose`` walks), so a
second call with the same parameters (``--workdir`` reused) skips the work.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

__all__ = [
    "write_csv",
    "fit_inputs",
    "planted_inputs",
    "big_log",
    "growth_series",
    "BIG_COLUMNS",
]

#: the 20 columns of the large log (TRL-like names; "step" first)
BIG_COLUMNS = (
    "step", "epoch", "loss", "reward", "reward_std", "frac_reward_zero_std", "entropy", "kl",
    "grad_norm", "clip_ratio", "completion_length", "learning_rate", "rewards/accuracy",
    "rewards/format", "num_tokens", "clip_ratio/high", "clip_ratio/low",
    "completions/mean_length", "completions/max_length", "timing/step",
)


def _marker(target: Path) -> Path:
    return target.parent / ".markers" / f"{target.name}.json"


def _cached(target: Path, params: dict) -> bool:
    try:
        return target.exists() and json.loads(_marker(target).read_text()) == params
    except (OSError, ValueError):
        return False


def _mark(target: Path, params: dict) -> None:
    marker = _marker(target)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(params))


def _fmt(x: float) -> str:
    return "" if not math.isfinite(x) else f"{x:.10g}"


def write_csv(path: Path, columns: dict[str, np.ndarray]) -> None:
    """One header line and one line per row; NaN is written as an empty field."""
    names = list(columns)
    cols = [np.asarray(columns[n], dtype=float).tolist() for n in names]
    lines = [",".join(names)]
    lines += [",".join(_fmt(v) for v in row) for row in zip(*cols)]
    path.write_text("\n".join(lines) + "\n")


def fit_inputs(folder: Path, n: int = 120, seed: int = 0) -> list[tuple[Path, dict]]:
    """``grpofit.synthetic.recovery_set(n, seed)`` as ``run000.csv ...`` (columns step,reward).

    Returns ``[(path, truth), ...]``; the truths also go to ``truths.json``.
    """
    from grpofit.synthetic import recovery_set

    folder.mkdir(parents=True, exist_ok=True)
    params = {"kind": "fit", "n": n, "seed": seed}
    paths = [folder / f"run{i:03d}.csv" for i in range(n)]
    if _cached(folder, params):
        truths = json.loads((folder / "truths.json").read_text())
        return list(zip(paths, truths))
    truths = []
    for path, (truth, table) in zip(paths, recovery_set(n, seed=seed)):
        write_csv(path, {"step": table["step"], "reward": table["reward"]})
        truths.append(truth)
    (folder / "truths.json").write_text(json.dumps(truths))
    _mark(folder, params)
    return list(zip(paths, truths))


def planted_inputs(folder: Path, n: int, n_steps: int = 1000, seed: int = 0) -> Path:
    """``n`` runs of ``grpofit.planted.make_planted_run`` cycling healthy and the four modes."""
    from grpofit.planted import MODES, make_planted_run

    folder.mkdir(parents=True, exist_ok=True)
    params = {"kind": "planted", "n": n, "n_steps": n_steps, "seed": seed}
    if _cached(folder, params):
        return folder
    for old in folder.glob("*.csv"):
        old.unlink()
    modes = (None, *MODES)
    for i in range(n):
        mode = modes[i % len(modes)]
        table = make_planted_run(mode, seed=seed + i, n_steps=n_steps)
        write_csv(folder / f"run{i:04d}_{mode or 'healthy'}.csv", table)
    _mark(folder, params)
    return folder


def _big_table(rows: int, seed: int):
    import pandas as pd

    rng = np.random.default_rng(seed)
    step = np.arange(1, rows + 1)
    t = step / rows
    reward = 0.7 - 0.55 * np.exp(-t / 0.15) + rng.normal(0, 0.03, rows)
    data = {"step": step, "epoch": t * 3.0}
    for name in BIG_COLUMNS[2:]:
        data[name] = rng.lognormal(0.0, 0.5, rows)
    data["reward"] = reward
    data["learning_rate"] = np.full(rows, 1e-6)
    data["num_tokens"] = np.cumsum(rng.integers(20_000, 40_000, rows))
    return pd.DataFrame({k: data[k] for k in BIG_COLUMNS})


def _big_lines(df, fmt: str, chunk: int = 100_000):
    """Lines of the large log, formatted with one ``%`` template per row (fast, no escaping)."""
    ints = {"step", "num_tokens"}
    specs = ["%d" if name in ints else "%.6g" for name in BIG_COLUMNS]
    if fmt == "csv":
        yield ",".join(BIG_COLUMNS) + "\n"
        template = ",".join(specs) + "\n"
    else:
        template = "{" + ",".join(f'"{n}":{s}' for n, s in zip(BIG_COLUMNS, specs)) + "}\n"
    for lo in range(0, len(df), chunk):
        rows = df.iloc[lo:lo + chunk].itertuples(index=False, name=None)
        yield "".join(template % row for row in rows)


def big_log(folder: Path, rows: int, fmt: str, seed: int = 0) -> Path:
    """A ``rows`` x 20 log as ``big_<rows>.csv`` or ``.jsonl`` (floats with 6 significant digits)."""
    if fmt not in ("csv", "jsonl"):
        raise ValueError(f"unknown format {fmt!r}: csv or jsonl")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"big_{rows}.{fmt}"
    params = {"kind": "big", "rows": rows, "fmt": fmt, "seed": seed}
    if _cached(path, params):
        return path
    df = _big_table(rows, seed)
    with open(path, "w") as fh:
        for block in _big_lines(df, fmt):
            fh.write(block)
    _mark(path, params)
    return path


def growth_series(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One underdamped-ish run of ``n`` logged steps (timescale n/8, inertia n/40, batch 256)."""
    from grpofit.synthetic import make_run_table

    truth = {
        "plateau": 0.7, "initial": 0.1, "timescale": n / 8.0, "inertia": n / 40.0,
        "forcing_sd": 0.005, "forcing_time": n / 16.0, "batch": 256, "length": n - 1,
    }
    table = make_run_table(truth, seed=seed)
    return table["step"], table["reward"]
