"""How often ``grpofit compare`` says "differs" when nothing differs, and when something does.

    python scripts/compare_calibration.py [N] [FIRST]

Ground truth from the exact bandit (``grpofit simulate bandit``: 8 arms, lr 0.1, momentum 0,
beta 1, G = 16, 600 steps). Pairs of runs with the *same* settings and different seeds (nothing
differs), and pairs with refresh interval 1 vs 32 (the same fixed point p*, so the plateau is
the same; the lag adds inertia and erodes damping). Pair ``i`` (``FIRST <= i < FIRST + N``) is
seed ``i`` against seed ``100 + i`` (same settings) and ``200 + i`` (refresh interval 32). The
single-run rule of ``grpofit compare`` was chosen on pairs 0-59; ``tests/test_compare.py`` runs
pairs from 1000 on (held out) and checks the README's numbers: the false "differs" rate per
quantity on the same-settings pairs (the test's size) and the inertia and damping "differs"
counts on the lagged ones (its power).
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grpofit.commands.compare import Side, compare_fits  # noqa: E402
from grpofit.core.runs import make_run  # noqa: E402
from grpofit.dynamics import simulation as sim  # noqa: E402
from grpofit.fitting.analysis import fit_run  # noqa: E402


def bandit_fit(refresh_interval: int, seed: int, steps: int = 600):
    b = sim.simulate_bandit(
        lr=0.1, refresh_interval=refresh_interval, group_size=16, steps=steps, seed=seed, measure=False
    )
    return fit_run(make_run(f"bandit_k{refresh_interval}_s{seed}.csv", "bandit.csv", "csv", dict(b.columns)))


def calibration(n: int = 12, first: int = 0) -> dict:
    """``{"same": Counter((quantity, verdict)), "lagged": Counter(...), "pairs": n}`` over pairs
    ``first .. first + n - 1``."""
    same, lagged = collections.Counter(), collections.Counter()
    for i in range(first, first + n):
        a = Side("A", [], [bandit_fit(1, i)])
        for counter, other in ((same, bandit_fit(1, 100 + i)), (lagged, bandit_fit(32, 200 + i))):
            doc = compare_fits(a, Side("B", [], [other]))
            for q, d in doc["differences"].items():
                counter[(q, d["verdict"])] += 1
                # the previous single-run rule: p < 0.05 and disjoint 95% intervals
                counter[(q, "disjoint")] += bool(
                    d["verdict"] == "differs" and _disjoint(d.get("a_ci95"), d.get("b_ci95"))
                )
    return {"same": same, "lagged": lagged, "pairs": n}


def _disjoint(a, b) -> bool:
    if not a or not b or None in (a[0], a[1], b[0], b[1]):
        return False
    return a[1] < b[0] or b[1] < a[0]


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 12
    first = int(argv[1]) if len(argv) > 1 else 0
    r = calibration(n, first)
    for key, title in (("same", "same settings, different seeds"), ("lagged", "refresh interval 1 vs 32")):
        print(f"{title} ({n} pairs):")
        for (q, v), c in sorted(r[key].items()):
            print(f"  {q:14s} {v:12s} {c}")
    false = max(
        sum(c for (q2, v), c in r["same"].items() if q2 == q and v == "differs")
        for q in ("plateau", "timescale", "inertia", "damping_ratio")
    )
    print(f"largest false 'differs' rate of one quantity: {false} of {n}")


if __name__ == "__main__":
    main(sys.argv[1:])
