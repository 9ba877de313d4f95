"""How often ``grpofit compare`` says "differs" when nothing differs, and when something does.

    python scripts/compare_calibration.py [N]

Ground truth from the exact bandit (``grpofit simulate bandit``: 8 arms, lr 0.1, momentum 0,
beta 1, G = 16, 600 steps). Pairs of runs with the *same* settings and different seeds (nothing
differs), and pairs with refresh interval 1 vs 32 (the same fixed point p*, so the plateau is
the same; the lag adds inertia and erodes damping). ``tests/test_compare.py`` runs it with a
small ``N`` and checks the README's numbers.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grpofit import simulation as sim  # noqa: E402
from grpofit.analysis import fit_run  # noqa: E402
from grpofit.compare import Side, compare_fits  # noqa: E402
from grpofit.runs import make_run  # noqa: E402


def bandit_fit(refresh_interval: int, seed: int, steps: int = 600):
    b = sim.simulate_bandit(lr=0.1, refresh_interval=refresh_interval, group_size=16, steps=steps, seed=seed,
                            measure=False)
    return fit_run(make_run(f"bandit_k{refresh_interval}_s{seed}.csv", "bandit.csv", "csv", dict(b.columns)))


def calibration(n: int = 12) -> dict:
    """``{"same": Counter((quantity, verdict)), "lagged": Counter(...), "pairs": n}``."""
    same, lagged = collections.Counter(), collections.Counter()
    for i in range(n):
        a = Side("A", [], [bandit_fit(1, i)])
        for counter, other in ((same, bandit_fit(1, 100 + i)), (lagged, bandit_fit(32, 200 + i))):
            doc = compare_fits(a, Side("B", [], [other]))
            for q, d in doc["differences"].items():
                counter[(q, d["verdict"])] += 1
    return {"same": same, "lagged": lagged, "pairs": n}


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 12
    r = calibration(n)
    for key, title in (("same", "same settings, different seeds"), ("lagged", "refresh interval 1 vs 32")):
        print(f"{title} ({n} pairs):")
        for (q, v), c in sorted(r[key].items()):
            print(f"  {q:14s} {v:12s} {c}")


if __name__ == "__main__":
    main(sys.argv[1:])
