"""``python -m benchmarks.rank_seeds``: how much ``grpofit rank``'s answers move with ``--seed``.

The runs: the 5 real sweeps of :mod:`benchmarks.sweeps` cut at 20, 40 and 60% of their horizon
(each cut ranked as one sweep: 57 runs) and generated sweeps of 10 bandit runs of 300 steps cut at
40% (:func:`benchmarks.sweeps.generated_sweeps`; generator seed 11, the rank-cost benchmark's
runs, by default: 10 sweeps, 100 runs). Each sweep is ranked (:func:`grpofit.commands.rank.rank_series`,
the command's own path) once per ``--seeds`` value; per run the spread (largest minus smallest
over the seeds) of ``p_best`` and ``p_within_margin`` and whether its recommendation is the same
under every seed. ``--keep DIR`` keeps the documents (JSON per sweep and seed)."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np


def sweeps(generated_seed: int = 11, generated: int = 10, real: bool = True) -> list[tuple]:
    """``(name, items, horizon)`` per sweep to rank (real ones once per cut)."""
    from benchmarks.sweeps import generated_sweeps, real_sweeps
    from grpofit.commands.rank import RankItem

    out = []

    def items_of(sw, cut):
        items = []
        for name, s, v in zip(sw.names, sw.steps, sw.values):
            s, v = np.asarray(s, float), np.asarray(v, float)
            keep = s <= cut
            items.append(RankItem(name, "reward", s[keep], v[keep], None, None, None, None, float(s[-1])))
        return items

    if real:
        for sw in real_sweeps():
            for frac in (0.2, 0.4, 0.6):
                out.append((f"{sw.name} @{int(100 * frac)}%", items_of(sw, frac * sw.horizon), sw.horizon))
    if generated:
        for sw in generated_sweeps(generated, runs=10, steps=300, seed=generated_seed):
            out.append((sw.name + f" (gen {generated_seed}) @40%", items_of(sw, 0.4 * 300), 300.0))
    return out


def rank_one(args) -> dict:
    name, items, horizon, seed, margin, confidence = args
    from grpofit.commands.rank import RankOptions, rank_series

    opts = RankOptions(seed=seed, fans=False, margin=margin, confidence=confidence)
    c0 = time.process_time()
    done = rank_series(items, horizon=horizon, source="--horizon", opts=opts)
    cpu = time.process_time() - c0
    runs = [
        {k: r[k] for k in ("run", "p_best", "p_within_margin", "recommendation", "basis")} for r in done.doc["runs"]
    ]
    extra = [
        {k: r.get(k) for k in ("p_best_error", "p_within_error", "borderline")} for r in done.doc["runs"]
    ]  # the Monte-Carlo errors, where the document gives them
    return {"sweep": name, "seed": seed, "cpu_s": cpu, "runs": runs, "errors": extra}


def spread(results: list[dict]) -> dict:
    """Per run across seeds: the spread of the probabilities and whether the recommendation flips."""
    by = {}
    for r in results:
        for run, e in zip(r["runs"], r["errors"]):
            by.setdefault((r["sweep"], run["run"]), []).append((run, e))
    pb, pw, flips, rows = [], [], 0, []
    for key, rs in by.items():
        b = [x["p_best"] for x, _ in rs if x["p_best"] is not None]
        w = [x["p_within_margin"] for x, _ in rs if x["p_within_margin"] is not None]
        recs = {x["recommendation"] for x, _ in rs}
        if len(b) == len(rs) and b:
            pb.append(max(b) - min(b))
            pw.append(max(w) - min(w))
        flip = len(recs) > 1
        flips += flip
        rows.append(
            {
                "sweep": key[0],
                "run": key[1],
                "p_best": b,
                "p_within": w,
                "recs": [x["recommendation"] for x, _ in rs],
                "flip": flip,
            }
        )
    pb, pw = np.array(pb), np.array(pw)
    return {
        "runs": len(by),
        "p_best_spread_median": float(np.median(pb)) if pb.size else None,
        "p_best_spread_p90": float(np.percentile(pb, 90)) if pb.size else None,
        "p_best_spread_max": float(pb.max()) if pb.size else None,
        "p_within_spread_median": float(np.median(pw)) if pw.size else None,
        "p_within_spread_p90": float(np.percentile(pw, 90)) if pw.size else None,
        "p_within_spread_max": float(pw.max()) if pw.size else None,
        "flips": int(flips),
        "recommendations": {
            rec: sum(x["recs"].count(rec) for x in rows) for rec in ("keep", "stop", "cannot tell yet")
        },
        "cpu_s": float(sum(r["cpu_s"] for r in results)),
        "flipped": [x for x in rows if x["flip"]],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    ap.add_argument("--generated-seed", type=int, default=11)
    ap.add_argument("--generated", type=int, default=10)
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--margin", type=float, default=0.01)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the results (JSON) here")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    groups = sweeps(args.generated_seed, args.generated, not args.no_real)
    tasks = [(n, it, h, s, args.margin, args.confidence) for n, it, h in groups for s in args.seeds]
    if args.jobs > 1:
        from multiprocessing import get_context

        with get_context("fork").Pool(args.jobs) as pool:
            results = pool.map(rank_one, tasks, chunksize=1)
    else:
        results = [rank_one(t) for t in tasks]
    summary = spread(results)
    shown = {k: v for k, v in summary.items() if k != "flipped"}
    print(json.dumps(shown, indent=1))
    for x in summary["flipped"]:
        print(
            f"flip: {x['sweep']} / {x['run']}: {x['recs']} p_within {[round(p, 3) for p in x['p_within']]}"
            f" p_best {[round(p, 3) for p in x['p_best']]}"
        )
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "summary": summary, "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
