"""False-collapse rate on strongly underdamped runs, and recall of planted collapses.

    python scripts/collapse_rates.py [N] [SEED]

Runs: ``N`` seeded synthetic reward logs (:func:`grpofit.testing.synthetic.make_run_table`: binomial
batch means of a damped-oscillator trajectory plus an Ornstein-Uhlenbeck forcing) with damping
ratio 0.08 .. 0.25 (log-uniform), timescale 2 .. 3000/(6 x settle factor) steps and a length of
one to many settling times (``2 x inertia``), logged every 1, 5 or 10 steps. None of them
collapses: every collapse reported is false. The same runs with a collapse planted at 75% of
the run (the expected reward falls to 40% of its gain above the start and stays there) measure
recall (and how many are located: the onset within 10% of the run of the planted step).
``tests/test_collapse_claims.py`` runs this with a small ``N`` and checks the README.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grpofit.core.runs import make_run  # noqa: E402
from grpofit.fitting.analysis import fit_run  # noqa: E402
from grpofit.fitting.collapse import find_collapse  # noqa: E402
from grpofit.testing.synthetic import make_run_table  # noqa: E402


def underdamped_truths(n: int, seed: int = 0, zeta=(0.08, 0.25)) -> list[dict]:
    """``n`` seeded truths with damping ratio in ``zeta`` (log-uniform)."""
    out = []
    for child in np.random.SeedSequence([seed, 0xC011]).spawn(n):
        rng = np.random.default_rng(child)
        z = float(np.exp(rng.uniform(np.log(zeta[0]), np.log(zeta[1]))))
        factor = 1.0 / (2.0 * z * z)
        ts = float(np.exp(rng.uniform(np.log(2.0), np.log(max(2.5, 3000.0 / (6.0 * factor))))))
        length = int(round(np.exp(rng.uniform(np.log(max(150.0, factor * ts)), np.log(3000.0)))))
        stride = int(rng.choice([s for s in (1, 5, 10) if length / s >= 40]))
        plateau = float(rng.uniform(0.3, 0.95))
        out.append(
            {
                "plateau": plateau,
                "initial": float(rng.uniform(0.0, min(0.4, plateau - 0.1))),
                "timescale": ts,
                "inertia": ts / (4.0 * z * z),
                "damping_ratio": z,
                "length": length,
                "stride": stride,
                "start": int(rng.choice([0, 1, 101])),
                "batch": int(round(np.exp(rng.uniform(np.log(64), np.log(512))))),
                "forcing_sd": float(np.exp(rng.uniform(np.log(0.002), np.log(0.01)))),
                "forcing_time": ts * float(rng.uniform(0.3, 1.0)),
                "seed": child.spawn(1)[0],
            }
        )
    return out


def _table(truth: dict, planted: bool) -> dict[str, np.ndarray]:
    tab = make_run_table(truth, seed=truth["seed"])
    if planted:
        rng = np.random.default_rng(truth["seed"].spawn(1)[0])
        cut = int(0.75 * tab["step"].size)
        low = truth["initial"] + 0.4 * (truth["plateau"] - truth["initial"])
        p = np.clip(np.full(tab["step"].size - cut, low), 0.0, 1.0)
        tab["reward"] = tab["reward"].copy()
        tab["reward"][cut:] = rng.binomial(truth["batch"], p) / truth["batch"]
    return tab


def rates(n: int = 200, seed: int = 0) -> dict:
    """False collapses on the clean runs; planted collapses found (all, and those planted after the
    run settled: 75% of the run is at least three settling times ``2 x inertia``)."""
    truths = underdamped_truths(n, seed)
    false, found, located, examples, candidates = 0, 0, 0, [], 0
    settled = settled_found = 0
    for truth in truths:
        # settled before the planted collapse: 75% of the run is >= 3 settling times (2 inertia)
        is_settled = 0.75 * truth["length"] >= 3 * 2 * truth["inertia"]
        settled += is_settled
        for planted in (False, True):
            tab = _table(truth, planted)
            run = make_run("synthetic", "synthetic.csv", "csv", {"step": tab["step"], "reward": tab["reward"]})
            c = fit_run(run).collapse
            if not planted:
                candidates += find_collapse(tab["step"], tab["reward"], level_noise=True) is not None
            if planted:
                found += c is not None
                # located: the onset within 10% of the run's span of the planted step
                cut = tab["step"][int(0.75 * tab["step"].size)]
                located += c is not None and abs(c.step - cut) <= 0.1 * (tab["step"][-1] - tab["step"][0])
                settled_found += is_settled and c is not None
            elif c is not None:
                false += 1
                examples.append((truth["damping_ratio"], truth["timescale"], truth["length"], c.describe()))
    return {
        "runs": n,
        "false_collapses": false,
        "candidates_without_law_check": candidates,
        "planted": n,
        "planted_found": found,
        "planted_located": located,
        "planted_settled": settled,
        "planted_settled_found": settled_found,
        "false_examples": examples,
    }


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 200
    seed = int(argv[1]) if len(argv) > 1 else 0
    r = rates(n, seed)
    print(
        f"strongly underdamped runs (zeta 0.08-0.25): {r['false_collapses']} false collapses in {r['runs']} "
        f"({r['candidates_without_law_check']} candidates before the law check)"
    )
    print(
        f"planted collapses found: {r['planted_found']} of {r['planted']}; "
        f"after the run settled (>= 3 settling times): {r['planted_settled_found']} of {r['planted_settled']}; "
        f"onset within 10% of the run of the planted step: {r['planted_located']} of {r['planted']}"
    )
    for ex in r["false_examples"]:
        print("  false:", ex)


if __name__ == "__main__":
    main(sys.argv[1:])
