"""Measure the population prior leave-one-out (docs/prior.md, "Measurements").

Sweeps: the shared real logs (deepgrpo group-size and gamma sweeps, the HeteroRL trio, the rasbt
chapter-7 series) and generated ones (`grpofit simulate bandit` over grids: learning rate x
momentum, KL weight x group size), each run forecast from 0%, 10% and 25% of its steps with a
prior built from the sweep's other runs (`grpofit backtest --prior-from-others`), and without one
(grpofit's own forecast). Prints a markdown table; `--write` puts it into docs/prior.md between
the markers.

    python scripts/prior_measure.py [--write] [--no-without] [--only real|generated]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

REAL = os.path.join(ROOT, "tests", "data", "real_logs")  # the vendored real logs
REAL_SWEEPS = {
    "deepgrpo gamma sweep": ["deepgrpo_wandb_val_gsm8k_gamma_sweep_qwen2.5-0.5b.csv"],
    "deepgrpo group-size sweep": ["deepgrpo_wandb_val_gsm8k_groupsize_sweep_qwen2.5-0.5b.csv"],
    "HeteroRL trio": ["heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv"],
    "rasbt chapter 7": ["rasbt_grpo_qwen3-0.6b_7_*.csv"],
}
#: generated sweeps: (name, fixed settings, grid); rates chosen so that the timescale (1 - mu)/(lr K),
#: K ~ 0.29 on this bandit, spans about 2% to 40% of the run: still rising at the 10% cut
GENERATED = [
    (
        "bandit lr x momentum",
        {"group_size": 8, "beta": 1.0, "steps": 1000},
        {"lr": [0.01, 0.02, 0.04, 0.08], "momentum": [0.0, 0.5, 0.8]},
    ),
    (
        "bandit KL x group size",
        {"lr": 0.02, "momentum": 0.5, "steps": 800},
        {"beta": [0.8, 1.2, 2.0, 3.5], "group_size": [4, 8, 16]},
    ),
]
#: a sweep of settings drawn at random (seeded; nobody picked them): every covariate varies
RANDOM_SWEEP = ("bandit random settings", 30, 2026)
MARK_BEGIN = "<!-- prior-measure:begin -->"
MARK_END = "<!-- prior-measure:end -->"


def generate(folder: str) -> dict:
    from itertools import product

    from grpofit.dynamics.simulation import run_simulation

    out = {}
    for k, (name, fixed, grid) in enumerate(GENERATED):
        paths = []
        keys = list(grid)
        for j, combo in enumerate(product(*(grid[x] for x in keys))):
            params = {**fixed, **dict(zip(keys, combo))}
            path = os.path.join(folder, f"s{k}_{j}.csv")
            run_simulation(
                path,
                arms=8,
                correct=1,
                seed=1000 * k + j,
                lr=params["lr"],
                momentum=params["momentum"],
                group_size=params["group_size"],
                beta=params["beta"],
                steps=params["steps"],
            )
            paths.append(path)
        out[name] = paths
    import numpy as np

    name, n, seed = RANDOM_SWEEP
    rng = np.random.default_rng(seed)
    paths = []
    for j in range(n):
        path = os.path.join(folder, f"r_{j}.csv")
        run_simulation(
            path,
            arms=8,
            correct=1,
            seed=seed + j,
            lr=float(np.exp(rng.uniform(np.log(0.005), np.log(0.1)))),
            momentum=float(rng.choice([0.0, 0.5, 0.8, 0.9])),
            group_size=int(rng.choice([4, 8, 16])),
            beta=float(rng.uniform(0.8, 3.0)),
            steps=int(rng.integers(600, 1501)),
        )
        paths.append(path)
    out[name] = paths
    return out


def measure(sweeps: dict, without: bool) -> dict:
    from grpofit.forecasting.prior_backtest import loo_backtest, loo_items, loo_summary
    from grpofit.readers import read_path

    results = {}
    for name, paths in sweeps.items():
        files = sorted(p for pat in paths for p in glob.glob(pat))
        runs = [r for f in files for r in read_path(f)]
        t0 = time.time()
        res = loo_backtest(loo_items(runs), without=without)
        results[name] = {"runs": len(runs), "seconds": time.time() - t0, "summary": loo_summary(res), "entries": res}
        print(f"{name}: {len(runs)} runs, {time.time() - t0:.1f} s", file=sys.stderr)
    return results


def _f(x, nd=3):
    return "-" if x is None else f"{x:.{nd}g}"


def table(results: dict, stamp: str = "") -> str:
    lines = [
        "| sweep | runs | cut | pi95 coverage | z rms | median error | baseline's | ratio | noise floor | "
        "others' gain | pi95 width | sweep spread | prior weight | without: n, coverage, median error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in results.items():
        for cut, s in r["summary"].items():
            p, b, w = s["prior"], s["baseline"], s["without"]
            wo = "-" if not w["n"] else f"{w['n']}, {_f(w['coverage'], 2)}, {_f(w['median_error'])}"
            fl = (s.get("floor") or {}).get("ratio_to_baseline")
            hs = (s.get("others_gain") or {}).get("ratio_to_baseline")
            lines.append(
                f"| {name} | {r['runs']} | {cut} | {_f(p['coverage'], 2)} | {_f(s.get('z_rms'), 2)} | "
                f"{_f(p['median_error'])} | {_f(b['median_error'])} | {_f(p['ratio_to_baseline'], 2)} | "
                f"{_f(fl, 2)} | {_f(hs, 2)} | {_f(p['median_width'])} | "
                f"{_f(s['sweep_spread'])} | {_f(p['median_weight'], 2)} | {wo} |"
            )
    if stamp:
        lines.append("")
        lines.append(stamp)
    return "\n".join(lines) + "\n"


def stamp() -> str:
    """When and on which commit the table was measured ("+ local changes" when the code differs)."""
    import subprocess

    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = (
        " + local changes" if git("status", "--porcelain", "--untracked-files=no", "--", "grpofit", "scripts") else ""
    )
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return (
        f"Measured {when} on commit {git('rev-parse', '--short', 'HEAD')}{dirty} (`python scripts/prior_measure.py`)."
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--no-without", action="store_true")
    ap.add_argument("--only", choices=("real", "generated"))
    ap.add_argument("--json", help="also write the summaries to this file")
    ap.add_argument("--render", nargs="+", help="render (and --write) the table from --json files instead of measuring")
    a = ap.parse_args(argv)
    if a.render:
        results, stamps = {}, []
        for path in a.render:
            with open(path) as f:
                doc = json.load(f)
            stamps.append(doc.pop("_stamp", ""))
            results.update(doc)
        return _out(table(results, " ".join(dict.fromkeys(x for x in stamps if x))), a.write)
    sweeps = {}
    if a.only != "generated":
        sweeps.update({k: [os.path.join(REAL, p) for p in v] for k, v in REAL_SWEEPS.items()})
    with tempfile.TemporaryDirectory() as tmp:
        if a.only != "real":
            sweeps.update(generate(tmp))
        results = measure(sweeps, not a.no_without)
    st = stamp()
    if a.json:
        with open(a.json, "w") as f:
            doc = {k: {kk: vv for kk, vv in v.items() if kk != "entries"} for k, v in results.items()}
            json.dump({**doc, "_stamp": st}, f, indent=1)
    return _out(table(results, st), a.write)


def _out(text: str, write: bool) -> int:
    print(text)
    if write:
        path = os.path.join(ROOT, "docs", "prior.md")
        doc = open(path, encoding="utf-8").read()
        i, j = doc.index(MARK_BEGIN) + len(MARK_BEGIN), doc.index(MARK_END)
        with open(path, "w", encoding="utf-8") as f:
            f.write(doc[:i] + "\n" + text + doc[j:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
