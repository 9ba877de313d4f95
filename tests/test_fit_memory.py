"""Memory of a fit on a long series.

A series longer than :data:`grpofit.fitting.hac.BLOCK` is summed block by block (Jacobians,
HAC window sums, the residual autocorrelation): the results must be those of the one-piece sums
up to rounding. Shorter series take the one-piece formulas unchanged (byte-identical output).
"""

from __future__ import annotations

import numpy as np
import pytest


def _series(n: int, tau: float, ring: bool, seed: int = 1):
    rng = np.random.default_rng(seed)
    s = np.arange(n, dtype=float)
    shape = np.exp(-s / tau) * (np.cos(2 * s / tau) if ring else 1.0)
    noise = np.convolve(rng.normal(0, 0.02, n + 20), np.ones(20) / 5, "valid")[:n]  # autocorrelated
    return s, 0.85 - 0.6 * shape + noise


def _numbers(doc, path=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _numbers(v, f"{path}/{k}")
    elif isinstance(doc, (list, tuple)):
        for i, v in enumerate(doc):
            yield from _numbers(v, f"{path}/{i}")
    else:
        yield path, doc


@pytest.mark.slow
@pytest.mark.parametrize("n,tau,ring", [(5000, 800.0, False), (6001, 500.0, True)])
def test_blocked_sums_match_the_one_piece_fit(monkeypatch, n, tau, ring):
    from grpofit.core.jsonout import jsonable
    from grpofit.fitting import fit_series, hac
    from grpofit.fitting.analysis import fit_summary

    steps, values = _series(n, tau, ring)
    whole = dict(_numbers(jsonable(fit_summary(fit_series(steps, values)))))
    monkeypatch.setattr(hac, "BLOCK", 997)  # every long-series path, with ragged last blocks
    blocked = dict(_numbers(jsonable(fit_summary(fit_series(steps, values)))))
    assert whole.keys() == blocked.keys()
    floats = 0
    for key, a in whole.items():
        b = blocked[key]
        if isinstance(a, float) and isinstance(b, float):
            floats += 1
            # 1e-6: the summation order differs, and the state-space interval's grid search
            # amplifies that by up to ~1e5 on some CPUs' kernels (6e-8 with AVX-512 here)
            assert b == pytest.approx(a, rel=1e-6, abs=1e-12), key
        else:
            assert a == b, key
    assert floats > 20


def test_blocked_parts_are_the_plain_bread_and_meat():
    from grpofit.fitting import hac

    rng = np.random.default_rng(3)
    jac = rng.normal(size=(2500, 3))
    r = rng.normal(size=2500)
    for bw in (1, 7, 250, 1249):
        parts = hac.blocked_parts(lambda lo, hi: jac[lo:hi].copy(), r, bw, block=300)
        np.testing.assert_allclose(parts.bread, jac.T @ jac, rtol=1e-12)
        np.testing.assert_allclose(parts.meat, hac.hac_meat(jac * r[:, None], bw), rtol=1e-10, atol=1e-12)


def test_blocked_autocorrelation_is_the_fft_one(monkeypatch):
    from grpofit.fitting import hac

    r = np.random.default_rng(4).normal(size=3000).cumsum() * 0.01 + np.random.default_rng(5).normal(size=3000)
    whole = hac._acf(r, 401)
    monkeypatch.setattr(hac, "BLOCK", 512)
    np.testing.assert_allclose(hac._acf(r, 401), whole, rtol=1e-9, atol=1e-12)
    blocked_bw = hac.bandwidth(r)
    monkeypatch.undo()
    assert blocked_bw == hac.bandwidth(r)


#: the fit in a child that reports its peak address space (VmPeak); pandas is imported first in
#: every child, so the small and the long run pay for the same libraries
_CHILD = (
    "import sys\n"
    "import pandas  # noqa: F401\n"
    "from grpofit.cli import main\n"
    "try:\n"
    "    main(['fit', sys.argv[1], '--format', 'json'])\n"
    "except SystemExit as e:\n"
    "    with open('/proc/self/status') as f:\n"
    "        peak = [l.split()[1] for l in f if l.startswith('VmPeak')][0]\n"
    "    print('CODE', e.code, 'VMPEAK_KB', peak, file=sys.stderr)\n"
)


def _write_csv(path, n: int) -> int:
    rng = np.random.default_rng(0)
    s = np.arange(n)
    r = 0.85 - 0.6 * np.exp(-s / (n / 6)) + rng.normal(0, 0.02, n)
    with open(path, "w") as f:
        f.write("step,reward\n")
        f.write("".join(f"{a},{b:.6f}\n" for a, b in zip(s.tolist(), r.tolist())))
    return path.stat().st_size


def _fit_child(path, limit: int | None = None):
    import os
    import subprocess
    import sys
    from pathlib import Path

    def cap():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    root = Path(__file__).resolve().parents[1]
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=cap if limit else None,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's")
def test_a_million_point_fit_within_3x_the_file_plus_100mb(tmp_path):
    """The long-run target as a hard cap: a 10^6-row CSV fits with its address space
    limited to that of a 300-row fit plus 3x the file plus 100 MB (``RLIMIT_AS``; beyond it an
    allocation fails). Before the blocked sums the fit needed about +240 MB over the small one
    (full Jacobians, HAC window sums, a 2^21-point FFT, copies of the series); now about +60 MB."""
    import json

    _write_csv(tmp_path / "small.csv", 300)
    size = _write_csv(tmp_path / "long.csv", 1_000_000)
    small = _fit_child(tmp_path / "small.csv")
    assert "CODE 0 " in small.stderr, small.stderr
    base = int(small.stderr.split("VMPEAK_KB")[1].split()[0]) * 1024
    limit = base + 3 * size + 100 * 2**20
    r = _fit_child(tmp_path / "long.csv", limit)
    assert "CODE 0 " in r.stderr, (limit >> 20, r.stderr[-2000:])
    [run] = json.loads(r.stdout)["runs"]
    assert run["n_points"] == 1_000_000 and run["models"]["exponential"]["params"]["plateau"]["ci95"][0] is not None


@pytest.mark.slow
def test_a_long_fit_holds_few_point_long_arrays():
    """``fit_run`` on 10^6 points (the collapse search, the guesses, the blocked sums, the
    intervals, the overshoot and ceiling checks) allocates at most 6 arrays of ``n`` floats on
    top of the run at any moment (tracemalloc counts numpy's buffers: deterministic, unlike RSS).
    Before the smoothing's and the collapse search's index arrays went (and the in-place scores,
    medians and time axis) it peaked at 7.0; now about 4.9 (a 2^18-row block is 0.26 of them)."""
    import tracemalloc

    from grpofit.core.runs import make_run
    from grpofit.fitting.analysis import fit_run

    def run_of(n):
        rng = np.random.default_rng(0)
        s = np.arange(n, dtype=float)
        r = 0.85 - 0.6 * np.exp(-s / (n / 6)) + rng.normal(0, 0.02, n)
        return make_run("long", "long", "csv", {"step": s, "reward": r})

    fit_run(run_of(2000))  # imports and caches first: they are not the fit's arrays
    n = 1_000_000
    run = run_of(n)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        result = fit_run(run)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.n_points == n
    assert (peak - start) / (8 * n) <= 6.0, f"{(peak - start) / (8 * n):.2f} arrays of n floats"


def test_mmap_large_and_release_where_glibc():
    """:func:`grpofit.runtime.trim.mmap_large` sets glibc's mmap threshold (a long fit's temporaries go
    back to the OS when freed); a no-op returning False without glibc."""
    import platform

    from grpofit.runtime import trim

    took = trim.mmap_large()
    if platform.libc_ver()[0] == "glibc":
        assert took and trim.release()
    else:
        assert took in (True, False)
