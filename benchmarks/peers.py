"""The peers that give grpofit's answer (both laws, a 95% interval on each parameter), as scripts a
careful user would write. ``python benchmarks/peers.py bootstrap|lmfit FILE ...`` prints one
JSON document ``{"fits": [{"file", "laws": {law: {"aic", "params": {name: [value, lo, hi]}}},
"preferred"}]}``; the preferred law is the one with the lower AIC.

- ``bootstrap``: ``scipy.optimize.curve_fit`` of each law from the plain script's start
  (:mod:`benchmarks.baseline`), then a residual bootstrap of :data:`RESAMPLES` resamples
  (the fitted curve plus residuals drawn with replacement, refitted from the fit): percentile
  intervals.
- ``lmfit``: ``lmfit.Model`` of each law from the same start, then ``lmfit.conf_interval``
  (profile-likelihood intervals at 2 sigma, i.e. 95.4%, a shade wider than 95%) on every parameter.

The laws are :func:`grpofit.laws.models.exponential` and :func:`grpofit.laws.models.oscillator` (the only
things imported from grpofit; they need numpy alone). Seeded: the same files give the same
intervals.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from baseline import read, start

from grpofit.laws.models import exponential, oscillator

RESAMPLES = 200
LAWS = {
    "exponential": (exponential, ("plateau", "initial", "timescale")),
    "oscillator": (oscillator, ("plateau", "initial", "timescale", "inertia")),
}


def _p0(law: str, t: np.ndarray, y: np.ndarray) -> list[float]:
    p = start(t, y)
    return p[:3] if law == "exponential" else p


def _aic(resid: np.ndarray, k: int) -> float:
    n = resid.size
    return float(n * np.log(max(float(resid @ resid), 1e-300) / n) + 2 * k)


def bootstrap_law(law: str, t: np.ndarray, y: np.ndarray, rng) -> dict | None:
    from scipy.optimize import curve_fit

    f, names = LAWS[law]
    try:
        popt, _ = curve_fit(f, t, y, p0=_p0(law, t, y), maxfev=5000)
    except (RuntimeError, ValueError):
        return None
    curve = f(t, *popt)
    resid = y - curve
    draws = []
    for _ in range(RESAMPLES):
        y_star = curve + rng.choice(resid, resid.size, replace=True)
        try:
            p, _ = curve_fit(f, t, y_star, p0=popt, maxfev=2000)
            draws.append(p)
        except (RuntimeError, ValueError):
            continue
    params = {}
    d = np.asarray(draws) if draws else np.empty((0, len(names)))
    for i, name in enumerate(names):
        lo, hi = np.percentile(d[:, i], [2.5, 97.5]).tolist() if len(draws) >= 20 else (None, None)
        params[name] = [float(popt[i]), lo, hi]
    return {"aic": _aic(resid, len(names)), "params": params, "resamples": len(draws)}


def lmfit_law(law: str, t: np.ndarray, y: np.ndarray) -> dict | None:
    import lmfit

    f, names = LAWS[law]
    model = lmfit.Model(f, independent_vars=["t"])
    params = model.make_params(**dict(zip(names, _p0(law, t, y))))
    try:
        result = model.fit(y, params, t=t)
    except (ValueError, TypeError):
        return None
    out = {name: [float(result.params[name].value), None, None] for name in names}
    try:
        ci = lmfit.conf_interval(result, result, sigmas=[2], p_names=list(names))
        for name in names:
            levels = [v for p, v in ci[name] if p > 0.9]  # [(0.954, lo), (0, best), (0.954, hi)]
            if len(levels) >= 2:
                lo, hi = levels[0], levels[-1]
                out[name][1:] = [float(lo) if np.isfinite(lo) else None, float(hi) if np.isfinite(hi) else None]
    except Exception as e:  # conf_interval gives up on an unidentified parameter: no interval then
        return {"aic": float(result.aic), "params": out, "interval_error": type(e).__name__}
    return {"aic": float(result.aic), "params": out}


def fit_file(path: str, peer: str, rng) -> dict:
    steps, y = read(path)
    t = steps - steps[0]
    laws = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for law in LAWS:
            got = bootstrap_law(law, t, y, rng) if peer == "bootstrap" else lmfit_law(law, t, y)
            if got is not None:
                laws[law] = got
    preferred = min(laws, key=lambda k: laws[k]["aic"]) if laws else None
    return {"file": path, "laws": laws, "preferred": preferred}


def main(argv: list[str]) -> None:
    peer, files = argv[0], argv[1:]
    if peer not in ("bootstrap", "lmfit"):
        raise SystemExit("usage: peers.py bootstrap|lmfit FILE ...")
    rng = np.random.default_rng(0)
    print(json.dumps({"fits": [fit_file(p, peer, rng) for p in files]}))


if __name__ == "__main__":
    main(sys.argv[1:])
