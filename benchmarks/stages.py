"""Where one run's time goes, for the benchmark's ``fit`` section: grpofit's read, fit and
contract entry (its JSON text) against the plain script's read and ``curve_fit``, each stage
timed over the same runs in this one warmed process (CPU time: both tools run on one thread).

The whole-process rows say how far apart the two tools are; these say why, and what a per-run
cost at the script's would leave for the fit once grpofit has read a run and written its entry.
"""

from __future__ import annotations

import time


def _plain_stages(paths: list[str]) -> dict[str, float]:
    """The plain script's two stages over ``paths``: CPU seconds per run."""
    from benchmarks import baseline

    t0 = time.process_time()
    data = [baseline.read(p) for p in paths]
    t1 = time.process_time()
    for steps, y in data:
        baseline.fit(steps, y)
    t2 = time.process_time()
    n = len(paths)
    return {"read": (t1 - t0) / n, "fit": (t2 - t1) / n}


def _grpofit_stages(paths: list[str]) -> dict[str, float]:
    """``grpofit fit --format json``'s three per-run stages over ``paths`` (the CLI's own calls:
    :func:`grpofit.readers.read_path`, :func:`grpofit.fitting.analysis.fit_run`,
    :func:`grpofit.commands.pipeline.fit_entry_json`): CPU seconds per run."""
    from grpofit.commands.pipeline import fit_entry_json
    from grpofit.fitting.analysis import fit_run
    from grpofit.readers import read_path

    t0 = time.process_time()
    runs = [r for p in paths for r in read_path(p)]
    t1 = time.process_time()
    fits = [fit_run(r) for r in runs]
    t2 = time.process_time()
    for f in fits:
        fit_entry_json(f)
    t3 = time.process_time()
    n = len(runs)
    return {"read": (t1 - t0) / n, "fit": (t2 - t1) / n, "entry": (t3 - t2) / n}


def stage_costs(paths: list[str], repeats: int) -> dict[str, dict[str, list[float]]]:
    """``{tool: {stage: [CPU seconds per run, one per repeat]}}``; the tools alternate which goes
    first (paired, interleaved), after one untimed pass of each (imports, first calls)."""
    tools = {"plain": _plain_stages, "grpofit": _grpofit_stages}
    for fn in tools.values():
        fn(paths[:3])
    out: dict[str, dict[str, list[float]]] = {t: {} for t in tools}
    for r in range(max(repeats, 3)):
        for t in list(tools) if r % 2 == 0 else list(tools)[::-1]:
            for stage, v in tools[t](paths).items():
                out[t].setdefault(stage, []).append(v)
    return out
