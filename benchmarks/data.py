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
    "step",
    "epoch",
    "loss",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "entropy",
    "kl",
    "grad_norm",
    "clip_ratio",
    "completion_length",
    "learning_rate",
    "rewards/accuracy",
    "rewards/format",
    "num_tokens",
    "clip_ratio/high",
    "clip_ratio/low",
    "completions/mean_length",
    "completions/max_length",
    "timing/step",
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
    """``grpofit.testing.synthetic.recovery_set(n, seed)`` as ``run000.csv ...`` (columns step,reward).

    Returns ``[(path, truth), ...]``; the truths also go to ``truths.json``.
    """
    from grpofit.testing.synthetic import recovery_set

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
    """``n`` runs of ``grpofit.testing.planted.make_planted_run`` cycling healthy and the four modes."""
    from grpofit.testing.planted import MODES, make_planted_run

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
        rows = df.iloc[lo : lo + chunk].itertuples(index=False, name=None)
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
    from grpofit.testing.synthetic import make_run_table

    truth = {
        "plateau": 0.7,
        "initial": 0.1,
        "timescale": n / 8.0,
        "inertia": n / 40.0,
        "forcing_sd": 0.005,
        "forcing_time": n / 16.0,
        "batch": 256,
        "length": n - 1,
    }
    table = make_run_table(truth, seed=seed)
    return table["step"], table["reward"]


# --------------------------------------------------------------------------- held-out fit inputs

#: the formats the fit inputs are written in, cycled run by run
FIT_FORMATS = ("csv", "jsonl", "trainer_state", "wandb_csv")


def forced_oscillator_runs(n: int, n_steps: int = 300, seed: int = 0) -> list[dict]:
    """``n`` runs of the forced oscillator ``tau e'' + e' + e/T = sqrt(D) xi`` (docs/theory.md §6),
    observed as binomial batch means. This generator shares no code with the one the fit was
    tuned on (``grpofit.testing.synthetic``): it integrates the SDE itself (semi-implicit Euler-Maruyama,
    20 sub-steps per logged step, every run at once), so the process noise enters the dynamics
    and moves a run off its curve for the whole relaxation.

    Each run: plateau U(0.4, 0.9), start U(0.0, 0.3), timescale U(n/30, n/5), damping ratio
    log-uniform on [0.3, 2.5] (inertia = timescale / (4 zeta^2)), stationary sd of the expected
    reward 0, 0.01 or 0.03 (cycled), batch 64, 256 or 1024 (cycled).
    """
    rng = np.random.default_rng(seed)
    plateau = rng.uniform(0.4, 0.9, n)
    initial = rng.uniform(0.0, 0.3, n)
    timescale = rng.uniform(n_steps / 30, n_steps / 5, n)
    zeta = np.exp(rng.uniform(np.log(0.3), np.log(2.5), n))
    inertia = timescale / (4 * zeta**2)
    sd = np.array([0.0, 0.01, 0.03])[np.arange(n) % 3]
    batch = np.array([64, 256, 1024])[(np.arange(n) // 3) % 3]
    strength = np.sqrt(2 * sd**2 / timescale)  # sqrt(D): Var(e) = D T / 2 in the overdamped limit
    sub = 20
    dt = 1.0 / sub
    e, v = initial - plateau, np.zeros(n)
    p = np.empty((n_steps, n))
    for k in range(n_steps):
        p[k] = plateau + e
        for _ in range(sub):
            kick = strength * np.sqrt(dt) * rng.standard_normal(n)
            v = v + (-(v + e / timescale) * dt + kick) / inertia
            e = e + v * dt
    probs = np.clip(p, 0.0, 1.0)
    reward = rng.binomial(batch[None, :], probs) / batch[None, :]
    kl = 0.002 * np.arange(n_steps)[:, None] * (1 + 0.1 * rng.standard_normal((n_steps, n)))
    runs = []
    for i in range(n):
        truth = {
            "plateau": float(plateau[i]),
            "initial": float(initial[i]),
            "timescale": float(timescale[i]),
            "inertia": float(inertia[i]),
            "damping_ratio": float(zeta[i]),
            "process_sd": float(sd[i]),
            "batch": int(batch[i]),
            "format": FIT_FORMATS[i % len(FIT_FORMATS)],
        }
        runs.append(
            {
                "truth": truth,
                "step": np.arange(1, n_steps + 1),
                "reward": reward[:, i],
                "kl": kl[:, i],
                "loss": 0.1 * rng.standard_normal(n_steps),
            }
        )
    return runs


def _write_run(path: Path, fmt: str, run: dict) -> None:
    steps, reward, kl, loss = run["step"], run["reward"], run["kl"], run["loss"]
    if fmt == "csv":
        write_csv(path, {"step": steps, "reward": reward, "kl": kl, "loss": loss})
    elif fmt == "jsonl":
        path.write_text(
            "".join(
                json.dumps({"step": int(s), "reward": float(r), "kl": float(k), "loss": float(lo)}) + "\n"
                for s, r, k, lo in zip(steps, reward, kl, loss)
            )
        )
    elif fmt == "trainer_state":  # as transformers writes it: indent 2, log_history of dicts
        history = [
            {
                "epoch": round(float(s) / len(steps), 4),
                "kl": float(k),
                "learning_rate": 1e-6,
                "loss": float(lo),
                "reward": float(r),
                "step": int(s),
            }
            for s, r, k, lo in zip(steps, reward, kl, loss)
        ]
        doc = {
            "best_metric": None,
            "epoch": 1.0,
            "global_step": int(steps[-1]),
            "log_history": history,
            "logging_steps": 1,
            "max_steps": int(steps[-1]),
        }
        path.write_text(json.dumps(doc, indent=2))
    elif fmt == "wandb_csv":  # a W&B panel export: quoted header, one run, __MIN/__MAX columns
        name = path.stem
        head = ['"Step"', f'"{name} - train/reward"', f'"{name} - train/reward__MIN"', f'"{name} - train/reward__MAX"']
        rows = [f"{int(s)},{_fmt(r)},{_fmt(r)},{_fmt(r)}" for s, r in zip(steps, reward)]
        path.write_text(",".join(head) + "\n" + "\n".join(rows) + "\n")
    else:
        raise ValueError(f"unknown format {fmt!r}")


SUFFIX = {"csv": ".csv", "jsonl": ".jsonl", "trainer_state": ".json", "wandb_csv": ".csv"}


def heldout_fit_inputs(folder: Path, n: int, n_steps: int = 300, seed: int = 7) -> list[tuple[Path, dict]]:
    """:func:`forced_oscillator_runs` written in the four formats, cycled (``run0000.csv``,
    ``run0001.jsonl``, ``run0002_trainer_state.json``, ``run0003_wandb.csv``, ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    params = {"kind": "heldout", "n": n, "n_steps": n_steps, "seed": seed}
    runs = None if _cached(folder, params) else forced_oscillator_runs(n, n_steps, seed)
    out = []
    for i in range(n):
        fmt = FIT_FORMATS[i % len(FIT_FORMATS)]
        tag = {"trainer_state": "_trainer_state", "wandb_csv": "_wandb"}.get(fmt, "")
        path = folder / f"run{i:04d}{tag}{SUFFIX[fmt]}"
        if runs is not None:
            _write_run(path, fmt, runs[i])
        out.append(path)
    if runs is not None:
        (folder / "truths.json").write_text(json.dumps([r["truth"] for r in runs]))
        _mark(folder, params)
    truths = json.loads((folder / "truths.json").read_text())
    return list(zip(out, truths))


# --------------------------------------------------------------------------- reader content

READER_FORMATS = ("csv", "jsonl", "trainer_state", "wandb_csv", "tfevents", "typed_jsonl")


def reader_inputs(folder: Path, rows: int, seed: int = 0) -> dict[str, Path]:
    """The same ``rows`` x 20 table (TRL-like names) written in every reader's format."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "csv": folder / f"wide_{rows}.csv",
        "jsonl": folder / f"wide_{rows}.jsonl",
        "trainer_state": folder / f"wide_{rows}_trainer_state.json",
        "wandb_csv": folder / f"wide_{rows}_wandb.csv",
        "tfevents": folder / f"events.out.tfevents.{rows}.bench",
        "typed_jsonl": folder / f"typed_{rows}.jsonl",
    }
    params = {"kind": "readers", "rows": rows, "seed": seed, "typed": 1}
    if _cached(paths["csv"], params):
        return paths
    df = _big_table(rows, seed)
    with open(paths["csv"], "w") as fh:
        fh.writelines(_big_lines(df, "csv"))
    with open(paths["jsonl"], "w") as fh:
        fh.writelines(_big_lines(df, "jsonl"))
    records = df.to_dict("records")
    for r in records:
        r["step"] = int(r["step"])
        r["num_tokens"] = int(r["num_tokens"])
    paths["trainer_state"].write_text(json.dumps({"global_step": rows, "log_history": records}, indent=2))
    keys = [c for c in df.columns if c != "step"]
    head = ['"Step"'] + [f'"bench - train/{k}"' for k in keys]
    body = df[["step", *keys]].to_csv(header=False, index=False, float_format="%.6g")
    paths["wandb_csv"].write_text(",".join(head) + "\n" + body)
    # typed-record JSONL: each row as a "rollout" and a "train" record keyed by grpo_step
    half = len(keys) // 2
    with open(paths["typed_jsonl"], "w") as fh:
        for r in records:
            fh.write(json.dumps({"type": "rollout", "grpo_step": r["step"], **{k: r[k] for k in keys[:half]}}) + "\n")
            fh.write(json.dumps({"type": "train", "grpo_step": r["step"], **{k: r[k] for k in keys[half:]}}) + "\n")
    from grpofit.testing.writers import write_tfevents

    cols = {k: df[k].to_numpy(float) for k in keys}
    write_tfevents(
        str(paths["tfevents"]), ((int(s), {f"train/{k}": cols[k][i] for k in keys}) for i, s in enumerate(df["step"]))
    )
    _mark(paths["csv"], params)
    return paths
