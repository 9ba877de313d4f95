"""Read + fit with or without the state-space likelihood, for the benchmark's ``fitcost``
section (:func:`benchmarks.__main__.bench_fitcost`): in its process (CPU time) and as the
child it counts under callgrind, ``python -m benchmarks.fitcost MODE N PATH...`` (the
first three paths warm the process up, then ``N`` more are read and fitted)."""

from __future__ import annotations

import contextlib
import sys


@contextlib.contextmanager
def likelihood_off():
    """The fit without the state-space likelihood: no plateau/timescale intervals from it, no
    turn-over test, and not the points they share."""
    from grpofit.fitting import assemble, driver
    from grpofit.fitting.statespace_ci import Points

    real = driver.apply_to_models, assemble.turnover_test, Points.__dict__["of_fit"]
    driver.apply_to_models = assemble.turnover_test = lambda *a, **k: None
    Points.of_fit = staticmethod(lambda ctx: None)
    try:
        yield
    finally:
        driver.apply_to_models, assemble.turnover_test, Points.of_fit = real


def read_and_fit(paths: list[str], mode: str = "with") -> None:
    """Read every run of ``paths`` and fit it (``mode`` "without": :func:`likelihood_off`)."""
    import grpofit
    from grpofit.core.errors import MetricNotFound

    with likelihood_off() if mode == "without" else contextlib.nullcontext():
        for p in paths:
            for r in grpofit.read(p):
                try:
                    grpofit.fit(r)
                except MetricNotFound:  # a real log's run with no reward (a gradient-norm export)
                    pass


if __name__ == "__main__":
    mode, n, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    read_and_fit(paths[: 3 + n], mode)
