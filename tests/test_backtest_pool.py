"""``backtest --jobs``: the same pool guarantees as ``diagnose --jobs``.

Workers stopped within 2 s on SIGINT/SIGTERM/SIGHUP, exit 130/143/129 with one line and nothing
on stdout, no partial figure, no orphan (not even when the parent is SIGKILLed), and a pool
rebuilt after a worker dies. The slow or deadly backtest is planted by replacing the module's
work function in a child process (a process group of its own, polled for survivors).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_hostile import ROOT, _sweep, _wait_group_empty, _wait_workers, err_lines, good_csv, signal_sweep

SLOW_BACKTEST = (
    "import sys, time\n"
    "import grpofit.commands.backtest as b\n"
    "real = b._work\n"
    "def slow(task, extra=None):\n"
    "    time.sleep(30)\n"
    "    return real(task, extra)\n"
    "b._work = slow\n"
    "from grpofit.cli import main\n"
    "main()  # as the console script calls it\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_signal_stops_every_backtest_worker_within_2s(tmp_path, sig):
    import signal

    for i in range(4):
        good_csv(tmp_path / "runs" / f"r{i}.csv")
    plots = tmp_path / "plots"
    proc = _sweep(SLOW_BACKTEST, "backtest", tmp_path / "runs", "--jobs", "2", "--plot-dir", plots)
    out, err, stopped, orphans = signal_sweep(proc, sig)
    assert orphans == [], "orphaned backtest workers"
    assert stopped < 2.0 + 1.0, (stopped, err)  # the target is 2 s; a loaded CI machine gets a second more
    assert proc.returncode == 128 + getattr(signal, sig), err
    assert err_lines(err) == ["interrupted" if sig == "SIGINT" else f"terminated by {sig}"], err
    assert out == b""
    assert not plots.exists() or list(plots.iterdir()) == []  # no figure, whole or partial


@pytest.mark.slow
def test_backtest_workers_die_with_a_killed_parent(tmp_path):
    import signal

    for i in range(4):
        good_csv(tmp_path / "runs" / f"r{i}.csv")
    proc = _sweep(SLOW_BACKTEST, "backtest", tmp_path / "runs", "--jobs", "2")
    try:
        assert len(_wait_workers(proc, 2)) == 2, "the workers did not start"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        orphans = _wait_group_empty(proc.pid, timeout=10)
    assert orphans == [], "backtest workers outlived their killed parent"


#: a cheap backtest (the pool is under test, not the forecast) and a file that kills its worker
KILLER_BACKTEST = (
    "import os, sys\n"
    "import multiprocessing.process as mp\n"
    "starts = []\n"
    "orig = mp.BaseProcess.start\n"
    "def start(self):\n"
    "    starts.append(1); return orig(self)\n"
    "mp.BaseProcess.start = start\n"
    "import grpofit.commands.backtest as b\n"
    "def cheap(run, **kw):\n"
    "    return {'run': run.name, 'metric': 'reward', 'steps': None, 'cuts': []}\n"
    "b.backtest_run = cheap\n"
    "real = b._work\n"
    "def work(task, extra=None):\n"
    "    if 'poison' in task.path:\n"
    "        os._exit(9)\n"
    "    return real(task, extra)\n"
    "b._work = work\n"
    "from grpofit.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as e:\n"
    "    print('CODE', e.code, 'STARTS', len(starts), file=sys.stderr)\n"
)


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_dead_backtest_worker_rebuilds_the_pool(tmp_path):
    runs = tmp_path / "runs"
    for i in range(16):
        good_csv(runs / f"r{i:02d}.csv", n=40)
    good_csv(runs / "r03_poison.csv", n=40)
    r = subprocess.run(
        [sys.executable, "-c", KILLER_BACKTEST, "backtest", str(runs), "--jobs", "2", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("CODE 2 STARTS"), r.stderr
    doc = json.loads(r.stdout)
    assert sorted(e["run"] for e in doc["runs"]) == sorted(str(p) for p in runs.iterdir() if "poison" not in p.name)
    assert doc["errors"] == [
        {
            "run": str(runs / "r03_poison.csv"),
            "error": "the worker backtesting this file died (out of memory or killed)",
        }
    ]
    # one rebuilt pool (2) and a few files alone, not one process per unfinished file (16)
    assert int(last.split()[-1]) <= 8, last
