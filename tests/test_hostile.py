"""Issue 14: hostile and damaged inputs, extreme options, odd folders and streams.

Every case builds its input here (small, generated), runs the command line and asserts the exit
code, the one-line message and the bound (time: a subprocess timeout; memory: an address-space
limit set with ``resource`` in the child). Item numbers refer to issue 14.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from grpofit.cli import main

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
#: a hang fails the test after this many seconds (a normal run takes one or two)
HANG_S = 60


def run_cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def grpofit(*args, timeout: float = HANG_S, mem_mb: int | None = None, cwd=None, **kw) -> subprocess.CompletedProcess:
    """The CLI in a child process (optionally with its address space capped at ``mem_mb``)."""
    pre = None
    if mem_mb is not None:

        def pre():
            import resource

            limit = mem_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "grpofit", *map(str, args)],
        capture_output=True,
        timeout=timeout,
        preexec_fn=pre,
        cwd=cwd,
        env=env,
        **kw,
    )


def good_rows(n: int = 300, tau: float = 50.0) -> list[str]:
    return [f"{s},{1 - math.exp(-s / tau):.6f}" for s in range(n)]


def good_csv(path: Path, n: int = 300) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("step,reward\n" + "\n".join(good_rows(n)) + "\n")
    return path


def err_lines(err: str | bytes) -> list[str]:
    if isinstance(err, bytes):
        err = err.decode("utf-8", "replace")
    return [ln for ln in err.splitlines() if ln.strip()]


# ------------------------------------------------------------------ 6. thresholds and --min-r2


def test_every_threshold_rejects_nan_inf_and_out_of_range(capsys):
    from grpofit.diagnostics.thresholds import Thresholds
    from grpofit.limits import DEFAULT_RANGE, THRESHOLD_RANGES

    names = [d["name"] for d in Thresholds.documentation()]
    assert len(names) >= 11
    for name in names:
        lo, hi = THRESHOLD_RANGES.get(name, DEFAULT_RANGE)
        for bad in ("nan", "inf", "-inf", repr(hi * 2 + 1), repr(lo - 1)):
            code, out, err = run_cli(capsys, "diagnose", SAMPLES / "collapse_run", "--threshold", f"{name}={bad}")
            assert code == 2, (name, bad, err)
            lines = err_lines(err)
            assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err
            assert f"--threshold {name}=" in lines[0] and "out of range" in lines[0]
            assert f"[{lo:g}, {hi:g}]" in lines[0], lines[0]
            assert out == ""
    # the defaults themselves are inside their ranges
    for d in Thresholds.documentation():
        lo, hi = THRESHOLD_RANGES.get(d["name"], DEFAULT_RANGE)
        assert lo <= d["default"] <= hi, d


def test_late_fraction_bounds_named_in_issue(capsys):
    for bad in ("-1", "5"):
        code, _, err = run_cli(capsys, "diagnose", SAMPLES / "collapse_run", "--threshold", f"late_fraction={bad}")
        assert code == 2 and "late_fraction" in err and "[0.01, 1]" in err
    code, _, _ = run_cli(capsys, "diagnose", SAMPLES / "collapse_run", "--threshold", "late_fraction=0.3")
    assert code == 1  # a valid value still judges (and the planted collapse still fails)


def test_nan_thresholds_cannot_turn_planted_failures_into_a_pass(capsys):
    from grpofit.diagnostics.thresholds import Thresholds

    args = []
    for d in Thresholds.documentation():
        args += ["--threshold", f"{d['name']}=nan"]
    code, out, err = run_cli(capsys, "diagnose", SAMPLES, *args)
    assert code == 2 and out == "" and len(err_lines(err)) == 1


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "1.5", "-2"])
def test_min_r2_range(capsys, bad):
    code, out, err = run_cli(capsys, "diagnose", SAMPLES / "collapse_run", "--min-r2", bad)
    assert code == 2 and out == ""
    assert err_lines(err) == [f"error: --min-r2 {float(bad):g} is out of range; --min-r2 takes a finite R² bound in [-1, 1]"]


def test_min_r2_in_range_still_gates(capsys, tmp_path):
    good_csv(tmp_path / "run.csv")
    code, _, _ = run_cli(capsys, "diagnose", tmp_path / "run.csv", "--min-r2", "0.9")
    assert code == 0
    code, _, _ = run_cli(capsys, "diagnose", tmp_path / "run.csv", "--min-r2", "1")
    assert code == 1  # R² of a noisy fit is below 1: the gate still bites


# ------------------------------------------------------------------ 1 and 17. FIFOs and pipes


def test_fifo_in_folder_is_skipped_and_named(tmp_path):
    d = tmp_path / "d"
    good_csv(d / "good.csv")
    os.mkfifo(d / "pipe.csv")
    for cmd in ("diagnose", "fit"):
        r = grpofit(cmd, d, timeout=HANG_S)
        assert r.returncode == 0, r.stderr
        lines = err_lines(r.stderr)
        assert f"warning: {d / 'pipe.csv'}: is a named pipe (FIFO), not a log file; skipped" in lines
        assert b"good.csv" in r.stdout


def _feed_fifo(path: Path, data: bytes) -> threading.Thread:
    def write():
        with open(path, "wb") as f:
            f.write(data)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_fifo_given_directly_is_read_as_a_stream(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    data = ("step,reward\n" + "\n".join(good_rows(30_000, tau=5000)) + "\n").encode()
    assert len(data) > 3 * 256 * 1024 // 2  # longer than the sniffer's window: read from its start
    t = _feed_fifo(fifo, data)
    r = grpofit("fit", fifo, "--format", "json")
    t.join(5)
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)["runs"][0]
    assert run["n_points"] == 30_000 and run["steps"] == [0, 29999]


def test_process_substitution_pipe_over_256k(tmp_path):
    """item 17: ``grpofit fit <(cat mid.csv)`` of 0.5 MB and 3 MB read whole from the start."""
    for n in (30_000, 150_000):
        mid = tmp_path / f"mid{n}.csv"
        mid.write_text("step,reward\n" + "\n".join(good_rows(n, tau=n / 6)) + "\n")
        r = subprocess.run(
            ["bash", "-c", f'"$0" -m grpofit fit <(cat "{mid}") --format json', sys.executable],
            capture_output=True, timeout=HANG_S, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        assert r.returncode == 0, r.stderr
        run = json.loads(r.stdout)["runs"][0]
        assert run["n_points"] == n and run["step_column"] == "step"


def test_stream_size_limit(monkeypatch, capsys, tmp_path):
    import grpofit.limits

    monkeypatch.setattr(grpofit.limits, "MAX_STREAM_BYTES", 1000)
    fifo = tmp_path / "big.csv"
    os.mkfifo(fifo)
    t = _feed_fifo(fifo, ("step,reward\n" + "\n".join(good_rows(300)) + "\n").encode())
    code, out, err = run_cli(capsys, "fit", fifo)
    t.join(5)
    assert code == 2 and out == ""
    assert err_lines(err) == [
        f"error: {fifo}: is a stream longer than 0 MiB, the limit for pipes and standard input; save it to a file and pass the file"
    ]


# ------------------------------------------------------------------ 2. config bombs


def _alias_bomb() -> str:
    lines = ["a0: &a0 {" + ", ".join(f"k{i}: 1" for i in range(10)) + "}"]
    for j in range(1, 9):
        lines.append(f"a{j}: &a{j} {{" + ", ".join(f"k{i}: *a{j - 1}" for i in range(10)) + "}")
    return "\n".join(lines) + "\n"


def test_yaml_alias_bomb_next_to_a_csv_is_bounded(tmp_path):
    (tmp_path / "config.yaml").write_text(_alias_bomb())
    assert len(_alias_bomb()) < 1000
    good_csv(tmp_path / "run.csv")
    r = grpofit("fit", tmp_path / "run.csv", "--format", "json", mem_mb=1500, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["runs"][0]["n_points"] == 300


def test_yaml_alias_bomb_in_a_wandb_run_folder(tmp_path):
    from grpofit.readers.wandb_binary import read_wandb_run_dir

    run = tmp_path / "wandb" / "run-20260101_000000-bomb"
    (run / "files").mkdir(parents=True)
    (run / "files" / "config.yaml").write_text(_alias_bomb())
    rows = [json.dumps({"_step": s, "_runtime": s, "train/reward": 1 - math.exp(-s / 50)}) for s in range(300)]
    (run / "files" / "wandb-history.jsonl").write_text("\n".join(rows) + "\n")
    r = grpofit("diagnose", run, "--format", "json", mem_mb=1500, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    assert len(json.loads(r.stdout)["runs"]) == 1
    [parsed] = read_wandb_run_dir(str(run))
    assert any("more than" in w and "keys" in w for w in parsed.warnings)


def test_deep_config_is_not_a_recursion_error(tmp_path):
    from grpofit.readers.config import flatten, load_config_file

    good_csv(tmp_path / "run.csv")
    (tmp_path / "config.yaml").write_text("a: " + "[" * 50_000 + "1" + "]" * 50_000 + "\n")
    r = grpofit("fit", tmp_path / "run.csv", "--format", "json")
    assert r.returncode == 0 and b"RecursionError" not in r.stderr
    assert load_config_file(str(tmp_path / "config.yaml")) is None
    deep: dict = {"lr": 1}
    for _ in range(50_000):
        deep = {"x": deep}
    assert flatten({"top": 1, "deep": deep}) == {"top": 1}  # beyond the depth bound: dropped
    wandb = tmp_path / "wandb" / "run-x"
    (wandb / "files").mkdir(parents=True)
    (wandb / "files" / "config.yaml").write_text("a: " + "{b: " * 50_000 + "1" + "}" * 50_000 + "\n")
    from grpofit.errors import ReadError
    from grpofit.readers.wandb_binary import read_config_yaml

    with pytest.raises(ReadError, match="nested too deeply|cannot read config.yaml"):
        read_config_yaml(str(wandb / "files" / "config.yaml"))


# ------------------------------------------------------------------ 4. --jobs


def test_jobs_is_capped_by_cpus_and_runs():
    from grpofit.limits import cap_jobs

    cpus = len(os.sched_getaffinity(0))
    assert cap_jobs(2000, 3) == min(3, cpus)
    assert cap_jobs(2000, 10_000) == cpus
    assert cap_jobs(1, 0) == 1


def test_jobs_2000_starts_few_workers(tmp_path):
    for i in range(3):
        good_csv(tmp_path / f"r{i}.csv")
    code = (
        "import multiprocessing.process as mp, sys\n"
        "starts = []\n"
        "orig = mp.BaseProcess.start\n"
        "def start(self):\n"
        "    starts.append(1); return orig(self)\n"
        "mp.BaseProcess.start = start\n"
        "from grpofit.cli import main\n"
        "try:\n"
        f"    main(['diagnose', {str(tmp_path)!r}, '--jobs', '2000', '--format', 'json'])\n"
        "except SystemExit as e:\n"
        "    print('CODE', e.code, 'STARTS', len(starts), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("CODE 0 STARTS "), r.stderr
    assert int(last.split()[-1]) <= 3
    assert len(json.loads(r.stdout)["runs"]) == 3


def test_failed_fork_falls_back_to_one_process(tmp_path):
    for i in range(4):
        good_csv(tmp_path / f"r{i}.csv")
    code = (
        "import os, sys\n"
        "def fork():\n"
        "    raise BlockingIOError(11, 'Resource temporarily unavailable')\n"
        "os.fork = fork\n"
        "from grpofit.cli import main\n"
        f"main(['diagnose', {str(tmp_path)!r}, '--jobs', '4', '--format', 'json'])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["runs"]) == 4
    assert "cannot start worker processes" in r.stderr and "Traceback" not in r.stderr
