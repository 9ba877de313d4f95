"""Hostile inputs, second file: one bad value, outputs over inputs, partly read stores,
quadratic time, internal errors, hooks and signals.

Each case builds its input here (small, generated) or copies a shared real log, runs the command
line and asserts the exit code, the one-line message and the numbers that must not move.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.reallogs import real_log

ROOT = Path(__file__).resolve().parents[1]
HETERO = real_log("heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv")
HANG_S = 60


def grpofit(*args, timeout: float = HANG_S, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.update(kw.pop("env", {}))
    return subprocess.run(
        [sys.executable, "-m", "grpofit", *map(str, args)], capture_output=True, timeout=timeout, env=env, **kw
    )


def write_csv(path: Path, steps, values, header=("step", "reward")) -> Path:
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for s, v in zip(steps, values):
            f.write(f"{s},{float(v)!r}\n" if isinstance(v, (float, np.floating)) else f"{s},{v}\n")
    return path


def collapse_series(n: int = 400, seed: int = 0):
    """A reward that rises to 0.8 and collapses to 0.1 at 70% of the run."""
    rng = np.random.default_rng(seed)
    s = np.arange(n)
    y = 0.8 * (1 - np.exp(-s / (n / 8))) + rng.normal(0, 0.02, n)
    y[int(0.7 * n) :] = 0.1 + rng.normal(0, 0.02, n - int(0.7 * n))
    return s, y


def healthy_series(n: int = 400, seed: int = 1):
    rng = np.random.default_rng(seed)
    s = np.arange(n)
    return s, 0.8 * (1 - np.exp(-s / (n / 6))) + rng.normal(0, 0.02, n)


# ------------------------------------------------------------------ 1. one bad value


@pytest.mark.parametrize("bad", ["40", "-1e9", "1e300"])
def test_one_corrupted_value_does_not_pass_the_real_collapsed_run(capsys, tmp_path, bad):
    rows = list(csv.reader(open(HETERO, newline="")))
    col = rows[0].index("[paper]GRPO_online - train/reward")
    filled = [i for i in range(1, len(rows)) if rows[i][col] != ""]
    rows[filled[int(len(filled) * 0.8)]][col] = bad
    glitch = tmp_path / "glitch.csv"
    with open(glitch, "w", newline="") as f:
        csv.writer(f, quoting=csv.QUOTE_ALL).writerows(rows)
    code, out, err = run_cli(capsys, "diagnose", glitch, "--run", "*GRPO_online", "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    (entry,) = doc["runs"]
    assert entry["verdict"] == "fail"
    assert entry["fit"]["outliers"]["count"] == 1
    assert "1 outlier value(s) of 'train/reward' excluded" in err


@pytest.mark.parametrize("bad", [20.0, 50.0, -1e9])
def test_one_value_after_a_collapse_keeps_the_gate_failing(capsys, tmp_path, bad):
    s, y = collapse_series()
    base = write_csv(tmp_path / "c.csv", s, y)
    code0, _, _ = run_cli(capsys, "diagnose", base)
    assert code0 == 1
    y = y.copy()
    y[350] = bad
    code, out, err = run_cli(capsys, "diagnose", write_csv(tmp_path / "g.csv", s, y), "--format", "json")
    assert code == 1, err
    assert json.loads(out)["runs"][0]["fit"]["outliers"]["count"] == 1


def test_a_sentinel_in_a_healthy_run_is_named_and_does_not_move_the_plateau(capsys, tmp_path):
    s, y = healthy_series()
    code0, out0, _ = run_cli(capsys, "fit", write_csv(tmp_path / "h.csv", s, y), "--format", "json")
    y = y.copy()
    y[200] = -1e9
    code, out, err = run_cli(capsys, "fit", write_csv(tmp_path / "g.csv", s, y), "--format", "json")
    assert code == code0 == 0
    clean, dirty = json.loads(out0)["runs"][0], json.loads(out)["runs"][0]
    p_clean = clean["models"][clean["preferred"]]["params"]["plateau"]["value"]
    p_dirty = dirty["models"][dirty["preferred"]]["params"]["plateau"]["value"]
    assert p_dirty == pytest.approx(p_clean, abs=0.02)
    assert dirty["outliers"]["count"] == 1 and dirty["outliers"]["values"] == [-1e9]
    assert "outlier" in err and "step 200" in err


def test_forecast_excludes_the_same_outlier(capsys, tmp_path):
    s, y = healthy_series()
    y = y.copy()
    y[300] = -1e9
    code, out, err = run_cli(capsys, "forecast", write_csv(tmp_path / "g.csv", s, y), "--format", "json")
    assert code == 0, err
    entry = json.loads(out)["runs"][0]
    assert entry["outliers"]["count"] == 1
    assert "outlier" in err


def test_genuine_collapses_and_lattice_rewards_are_not_outliers():
    from grpofit.fitting.outliers import find_outliers

    s, y = collapse_series()
    assert find_outliers(s, y) is None
    flat = np.full(300, 0.5)
    flat[-2:] = 0.0  # a collapse in the last two points of a noiseless run
    assert find_outliers(np.arange(300), flat) is None
    rng = np.random.default_rng(3)
    binary = rng.integers(0, 2, 500).astype(float)  # 0/1 rewards
    assert find_outliers(np.arange(500), binary) is None
    spiky = rng.normal(0.5, 0.05, 500)
    spiky[::40] = 5.0  # a dozen spikes: the run's own behaviour, not single bad values
    assert find_outliers(np.arange(500), spiky) is None


# ------------------------------------------------------------------ 2, 8. outputs never inputs


def _two_healthy(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for k in (1, 2):
        s = np.arange(300)
        write_csv(folder / f"run{k}.csv", s, [f"{1 - math.exp(-x / (40 + 10 * k)):.6f}" for x in s])


@pytest.mark.slow
def test_watch_never_follows_its_own_jsonl(tmp_path):
    _two_healthy(tmp_path / "w")
    marker = tmp_path / "hook-ran"
    r = grpofit(
        "watch",
        tmp_path / "w",
        "--jsonl",
        tmp_path / "w" / "watch.jsonl",
        "--interval",
        "0.3",
        "--max-polls",
        "4",
        "--on-fail",
        f"touch {marker}",
    )
    assert r.returncode == 0, r.stderr
    assert b"watch.jsonl" not in r.stdout and b"watch.jsonl" not in r.stderr
    assert not marker.exists()
    events = [json.loads(ln) for ln in (tmp_path / "w" / "watch.jsonl").read_text().splitlines()]
    assert events and all("watch.jsonl" not in json.dumps(e) for e in events)


@pytest.mark.parametrize("command, option", [("diagnose", "--junit"), ("watch", "--jsonl")])
def test_an_output_that_is_an_input_is_refused_and_nothing_is_written(tmp_path, command, option):
    _two_healthy(tmp_path / "w")
    log = tmp_path / "w" / "run1.csv"
    before = log.read_bytes()
    other_name = tmp_path / "w" / ".." / "w" / "run1.csv"  # the same file by another name
    extra = ["--once"] if command == "watch" else []
    r = grpofit(command, log, option, other_name, *extra)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.decode().splitlines() if ln.strip()]
    assert len(lines) == 1 and "is also an input" in lines[0] and option in lines[0]
    assert log.read_bytes() == before
    link = tmp_path / "link.csv"
    link.symlink_to(log)
    r = grpofit(command, log, option, link, *extra)
    assert r.returncode == 2 and log.read_bytes() == before


# ------------------------------------------------------------------ 6. typed records' train kind


@pytest.mark.parametrize("kind", ["metrics", "log", "step", "batch", "update", "grpo", "rl", "actor"])
def test_typed_train_records_under_another_kind_name_are_the_train_reward(capsys, tmp_path, kind):
    rng = np.random.default_rng(5)
    rows = []
    for s in range(300):
        rows.append({"event": kind, "step": s, "reward": 0.8 * (1 - math.exp(-s / 60)) + rng.normal(0, 0.02)})
        if s % 10 == 0:
            rows.append({"event": "eval", "step": s, "reward": 0.7 * (1 - math.exp(-s / 60))})
    path = tmp_path / "typed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run_cli(capsys, "diagnose", path, "--format", "json")
    assert code == 0, err
    entry = json.loads(out)["runs"][0]
    assert entry["fit"]["metric"] == "train/reward" and entry["fit"]["n_points"] == 300
    assert entry["fit"].get("role", "reward") == "reward"
    assert f"'{kind}' records are the train records" in err


# ------------------------------------------------------------------ 3, 4, 13, 14. MLflow stores


def _mlflow_schema():
    from tests.test_mlflow import SCHEMA

    return SCHEMA


def _wal_store(folder: Path, *, young: bool = False, n: int = 300) -> Path:
    """A WAL-mode MLflow store whose collapse (the last 30% of the steps) is only in its -wal,
    copied (store and -wal, no -shm) into ``folder``: what a copy of a live store looks like."""
    import shutil
    import sqlite3

    live = folder.parent / (folder.name + "-live")
    live.mkdir(parents=True)
    db = live / "mlruns.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    s, y = collapse_series(n)
    if not young:
        con.executescript(_mlflow_schema())
        con.execute("INSERT INTO runs (run_uuid, name, lifecycle_stage, start_time) VALUES ('r1', 'grpo', 'active', 0)")
        con.executemany(
            "INSERT INTO metrics VALUES ('critic/score/mean', ?, ?, 'r1', ?, 0)",
            [(float(y[i]), 1000 + i, int(s[i])) for i in range(int(0.7 * n))],
        )
        con.commit()
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rest = range(int(0.7 * n), n)
    else:
        con.commit()
        con.executescript(_mlflow_schema())
        con.execute("INSERT INTO runs (run_uuid, name, lifecycle_stage, start_time) VALUES ('r1', 'grpo', 'active', 0)")
        rest = range(n)
    con.executemany(
        "INSERT INTO metrics VALUES ('critic/score/mean', ?, ?, 'r1', ?, 0)",
        [(float(y[i]), 1000 + i, int(s[i])) for i in rest],
    )
    con.commit()
    folder.mkdir(parents=True)
    shutil.copyfile(db, folder / "mlruns.db")
    shutil.copyfile(str(db) + "-wal", folder / "mlruns.db-wal")
    con.close()
    return folder / "mlruns.db"


@pytest.mark.parametrize("young", [False, True], ids=["rows-in-wal", "schema-in-wal"])
def test_wal_store_is_read_whole_without_writing_beside_it(tmp_path, young):
    store = _wal_store(tmp_path / "copy", young=young)
    before = sorted(p.name for p in store.parent.iterdir())
    os.chmod(store.parent, 0o555)
    try:
        r = grpofit("diagnose", store, "--format", "json")
    finally:
        os.chmod(store.parent, 0o755)
    assert r.returncode == 1, r.stderr  # the collapse lives in the WAL
    (entry,) = json.loads(r.stdout)["runs"]
    assert entry["collapse"] is not None and entry["collapse"]["step"] > 200
    assert sorted(p.name for p in store.parent.iterdir()) == before  # no -shm made beside the input


def test_sqlite_text_and_blob_values_are_not_an_internal_error(tmp_path):
    import sqlite3

    db = tmp_path / "mlruns.db"
    con = sqlite3.connect(db)
    con.executescript(_mlflow_schema())
    con.execute("INSERT INTO runs (run_uuid, name, lifecycle_stage, start_time) VALUES ('r1', 'grpo', 'active', 0)")
    s, y = healthy_series(100)
    con.executemany(
        "INSERT INTO metrics VALUES ('critic/score/mean', ?, ?, 'r1', ?, 0)",
        [(float(y[i]), 1000 + i, int(s[i])) for i in range(100)],
    )
    con.execute("INSERT INTO metrics VALUES ('critic/score/mean', 'oops', 5000, 'r1', 200, 0)")
    con.execute("INSERT INTO metrics VALUES ('critic/score/mean', 0.5, x'00ff', 'r1', 201, 0)")
    con.execute("INSERT INTO metrics VALUES ('critic/score/mean', 0.5, 'late', 'r1', 'ten', 0)")
    con.execute("INSERT INTO metrics VALUES ('critic/score/mean', 0.5, 1, 'r1', x'0102', 0)")
    con.execute("INSERT INTO metrics VALUES ('critic/score/mean', 0.5, 99999999999999999999, 'r1', 202, 0)")
    con.execute("INSERT INTO params VALUES ('n', x'ff', 'r1')")
    con.commit()
    con.close()
    r = grpofit("fit", db, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert b"internal error" not in r.stderr
    assert json.loads(r.stdout)["runs"][0]["n_points"] >= 100


def test_mlflow_metric_file_over_256_mib_is_read_to_its_end(tmp_path, monkeypatch):
    from grpofit.readers import mlflow, read_path

    run = tmp_path / "mlruns" / "0" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_name: big\nlifecycle_stage: active\n")
    s, y = collapse_series(2000)
    (run / "metrics" / "reward").write_text("".join(f"{1000 + i} {float(y[i])!r} {i}\n" for i in range(2000)))
    monkeypatch.setattr(mlflow, "MAX_FILE", 4096, raising=False)  # any old cap far below the file
    (got,) = read_path(str(run))
    steps, values = got.series("reward")
    assert steps.size == 2000 and values[-1] == pytest.approx(y[-1])


# ------------------------------------------------------------------ 14, 16, 22. values in range


def test_swanlab_steps_above_2_53_stay_apart():
    from grpofit.core.runs import make_run
    from grpofit.readers.swanlab import parse_records

    base = 2**60
    recs = [
        json.dumps(
            {
                "model_type": "Scalar",
                "data": {"key": "train/reward", "step": base + s, "metric": {"data": 1 - math.exp(-s / 30)}},
            }
        ).encode()
        for s in range(100)
    ]
    table, _ = parse_records(iter(recs), "x.swanlab", [])
    run = make_run("x", "x", "swanlab", table, step="step")
    assert run.steps.size == 100 and run.steps[0] == 0 and run.steps[-1] == 99
    assert any("2^53" in w for w in run.warnings)


def test_int64_steps_above_2_53_through_the_api_stay_apart():
    import grpofit

    s = np.arange(300, dtype=np.int64) + 2**60
    fit = grpofit.fit((s, 1 - np.exp(-np.arange(300) / 50)))
    assert fit.summary()["n_points"] == 300


def test_float_steps_above_2_53_name_the_cause(capsys, tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("step,reward\n" + "".join(f"{2**60 + s},{1 - math.exp(-s / 50):.6f}\n" for s in range(300)))
    code, out, err = run_cli(capsys, "fit", path)
    assert code == 2 and "above 2^53" in err and len(err_lines(err)) == 1


def err_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.strip()]


@pytest.mark.parametrize("bad", [(np.arange(10), np.arange(12.0)), {"step": [1, 2, 3], "reward": [0.1, 0.2]}])
def test_api_fit_with_unequal_lengths_is_the_projects_error(bad):
    import grpofit
    from grpofit.core.errors import GrpofitError

    with pytest.raises(GrpofitError, match="different lengths"):
        grpofit.fit(bad)


@pytest.mark.parametrize("command", ["forecast", "backtest"])
def test_a_step_stride_of_1e_10_is_forecast_not_an_internal_error(capsys, tmp_path, command):
    path = tmp_path / "tiny.csv"
    path.write_text("step,reward\n" + "".join(f"{s * 1e-10!r},{1 - math.exp(-s / 50):.6f}\n" for s in range(300)))
    code, out, err = run_cli(capsys, command, path, "--format", "json")
    assert code == 0 and "internal error" not in err, err


@pytest.mark.parametrize("value", [".inf", "1e400", "-5", "1e300"])
def test_a_planned_last_step_out_of_range_is_no_plan(capsys, tmp_path, value):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "run.csv").write_text("step,reward\n" + "".join(f"{s},{1 - math.exp(-s / 50):.6f}\n" for s in range(300)))
    (folder / "config.yaml").write_text(f"trainer:\n  total_training_steps: {value}\n")
    code, out, err = run_cli(capsys, "forecast", folder, "--format", "json")
    assert code == 0 and "internal error" not in err, err
    assert json.loads(out)["runs"][0]["horizon"]["step"] is None


def test_steps_near_the_float_maximum_are_not_an_internal_error(capsys, tmp_path):
    path = tmp_path / "huge.csv"
    path.write_text(
        "step,reward\n" + "".join(f"{1.7e308 + s * 1e293!r},{1 - math.exp(-s / 50):.6f}\n" for s in range(300))
    )
    for command in ("fit", "diagnose", "forecast", "backtest"):
        code, out, err = run_cli(capsys, command, path)
        assert code in (0, 1, 2) and "internal error" not in err, (command, err)


# ------------------------------------------------------------------ 9, 10, 22. watch's hooks


def _collapse_csv(path: Path, name: str | None = None) -> Path:
    s, y = collapse_series()
    header = ("Step", f"{name} - train/reward") if name is not None else ("step", "reward")
    return write_csv(path, s, y, header=header)


def test_a_nul_byte_in_a_run_name_reaches_the_hook_escaped(tmp_path):
    log = _collapse_csv(tmp_path / "nul.csv", "bad\x00run")
    out = tmp_path / "hook.txt"
    r = grpofit("watch", log, "--once", "--on-fail", f'printf "%s\\n" "$GRPOFIT_RUN" >> {out}')
    assert b"internal error" not in r.stderr, r.stderr
    assert out.read_text().splitlines()[0].endswith("bad\\0run")


@pytest.mark.slow
def test_a_hook_that_leaves_a_background_job_does_not_block_watch(tmp_path):
    log = _collapse_csv(tmp_path / "c.csv")
    marker = tmp_path / "ran"
    r = grpofit("watch", log, "--once", "--on-fail", f"touch {marker}; sleep 25 & true", timeout=20)
    assert marker.exists()
    assert b"timed out" not in r.stderr


def test_sigterm_is_honoured_while_a_hook_runs(tmp_path):
    import signal
    import time

    log = _collapse_csv(tmp_path / "c.csv")
    marker = tmp_path / "started"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "grpofit",
            "watch",
            str(log),
            "--interval",
            "0.2",
            "--on-fail",
            f"touch {marker}; sleep 25",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + HANG_S
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)  # the hook sleeps 25 s: watch must not wait for it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_hook_output_is_bounded(tmp_path):
    log = _collapse_csv(tmp_path / "c.csv")
    r = grpofit("watch", log, "--once", "--on-fail", "head -c 30000000 /dev/zero | tr '\\0' a")
    assert len(r.stderr) < 1_000_000
    assert b"more byte(s) of output not shown" in r.stderr


# ------------------------------------------------------------------ 12. long names in figures


@pytest.mark.parametrize(
    "command, option, target",
    [
        ("diagnose", "--plot-dir", "plots"),
        ("fit", "--plot", "f.png"),
        ("forecast", "--plot", "fc.png"),
        ("backtest", "--plot-dir", "bt"),
    ],
)
@pytest.mark.slow
def test_a_20k_character_run_name_is_shortened_in_every_figure(tmp_path, command, option, target):
    from PIL import Image

    s, y = healthy_series(300)
    log = write_csv(tmp_path / "long.csv", s, y, header=("Step", "R" * 20_000 + " - train/reward"))
    r = grpofit(command, log, option, tmp_path / target)
    assert r.returncode in (0, 1), r.stderr
    pngs = list(tmp_path.rglob("*.png"))
    assert pngs
    for png in pngs:
        w, h = Image.open(png).size
        assert w <= 3000 and h <= 3000, (png.name, w, h)


# ------------------------------------------------------------------ 18-21. messages


def _full_disk_savefig(self, fname, *args, **kwargs):
    import errno

    with open(fname, "wb") as f:
        f.write(b"\x89PNG")
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("command", ["forecast", "compare"])
def test_a_figure_on_a_full_disk_leaves_no_partial_file(capsys, tmp_path, monkeypatch, command):
    from matplotlib.figure import Figure

    s, y = healthy_series(300)
    a = write_csv(tmp_path / "a.csv", s, y)
    b = write_csv(tmp_path / "b.csv", s, y * 0.9)
    monkeypatch.setattr(Figure, "savefig", _full_disk_savefig)
    target = tmp_path / "out" / "fig.png"
    args = [a, "--plot", target] if command == "forecast" else [a, b, "--plot", target]
    code, out, err = run_cli(capsys, command, *args)
    assert code == 2
    assert "No space left on device" in err and len(err_lines(err)) == 1
    assert not target.exists()
    assert not [p for p in target.parent.glob("*")] if target.parent.exists() else True


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_watch_jsonl_on_a_full_disk_names_the_file(tmp_path):
    log = _collapse_csv(tmp_path / "c.csv")
    r = grpofit("watch", log, "--once", "--jsonl", "/dev/full")
    assert r.returncode == 2
    lines = err_lines(r.stderr.decode())
    assert (
        lines[-1].startswith("error: /dev/full: --jsonl: cannot append") and "standard output" not in r.stderr.decode()
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["backtest", "forecast", "diagnose"])
def test_error_lines_escape_control_characters_in_every_command(tmp_path, command):
    folder = tmp_path / "runs"
    folder.mkdir()
    write_csv(folder / "good.csv", *healthy_series(300))
    (folder / "a\u0085\x1bb.csv").write_text("step,reward\n")
    r = grpofit(command, folder)
    assert r.returncode == 2
    assert b"\x1b" not in r.stderr and "\u0085".encode() not in r.stderr
    assert b"\\x1b" in r.stderr


def test_sigint_while_the_command_line_loads_prints_no_traceback(tmp_path):
    """Ctrl-C while grpofit.cli imports (before its own handlers are installed)."""
    code = (
        "import builtins, os, signal\n"
        "real = builtins.__import__\n"
        "def hooked(name, *a, **k):\n"
        "    if name == 'typer':\n"
        "        builtins.__import__ = real\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = hooked\n"
        "import runpy, sys\n"
        "sys.argv = ['grpofit', '--help']\n"
        "runpy.run_module('grpofit', run_name='__main__')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=HANG_S, env=env)
    assert b"Traceback" not in r.stderr, r.stderr[-500:]
    assert r.returncode == 130 and r.stderr.strip() == b"interrupted"


# ------------------------------------------------------------------ 5. watch after a rewrite in place


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_truncate_and_rewrite_past_the_old_size_is_read_afresh(tmp_path, fmt):
    from grpofit.watch.tail import open_tail

    path = tmp_path / f"run.{fmt}"

    def text(n, level):
        if fmt == "csv":
            return "step,reward\n" + "".join(f"{s},{level + 0.0001 * s:.4f}\n" for s in range(n))
        return "".join(json.dumps({"step": s, "reward": round(level + 0.0001 * s, 4)}) + "\n" for s in range(n))

    path.write_text(text(200, 0.5))
    tail = open_tail(str(path), "file")
    tail.poll()
    assert tail.runs()[0].steps.size == 200
    ino = path.stat().st_ino
    with open(path, "r+") as f:  # same inode, bigger than before, within one poll
        f.truncate(0)
        f.write(text(450, 0.1))
    assert path.stat().st_ino == ino
    tail.poll()
    (run,) = tail.runs()
    assert run.steps.size == 450 and list(run.steps[:3]) == [0, 1, 2] and run.steps[-1] == 449
    assert np.nanmax(run.metrics["reward"]) < 0.2  # no row of the old content
    assert tail.resets == 1


# ------------------------------------------------------------------ 1 (watch), 7, 11, 13: the rest


def test_watch_update_line_agrees_with_its_alert_on_a_glitched_collapse(tmp_path):
    s, y = collapse_series()
    y = y.copy()
    y[350] = 50.0
    r = grpofit("watch", write_csv(tmp_path / "g.csv", s, y), "--once")
    out = r.stdout.decode()
    assert "ALERT fail dynamical_instability" in out
    update = [ln for ln in out.splitlines() if ln.startswith("UPDATE")][-1]
    assert "dynamics=fail" in update


def test_forecast_intervals_of_a_reward_in_0_1_stay_in_0_1(capsys, tmp_path):
    rng = np.random.default_rng(7)
    s = np.arange(300)
    y = (rng.random(300) < 0.9 * (1 - np.exp(-s / 60))).astype(float)  # 0/1 rewards
    code, out, err = run_cli(
        capsys, "forecast", write_csv(tmp_path / "b.csv", s, y), "--horizon", str(10**15), "--format", "json"
    )
    assert code == 0, err
    doc = json.dumps(json.loads(out)["runs"][0])
    ends = [float(x) for x in __import__("re").findall(r'"pi95": \[([-0-9.e]+), ([-0-9.e]+)\]', doc) for x in x]
    assert ends and all(-1e-9 <= e <= 1 + 1e-9 for e in ends)


def test_late_slope_hac_sum_is_the_bartlett_sum():
    """The late slope's long-run variance is computed in O(n) (class 11); same value as the
    direct Bartlett sum over the lags."""
    from grpofit.fitting.drift import late_slope

    rng = np.random.default_rng(11)
    n = 1200
    steps = np.arange(n, dtype=float)
    values = 0.3 + 1e-4 * steps + np.cumsum(rng.normal(0, 0.01, n)) * 0.1
    d = late_slope(steps, values)
    k = n // 2
    x, yv = steps[-k:], values[-k:]
    xc = x - x.mean()
    sxx = float(xc @ xc)
    slope = float(xc @ (yv - yv.mean())) / sxx
    sc = xc * (yv - yv.mean() - slope * xc)
    bw = max(2, int(math.ceil(k / 5)))
    lrv = float(sc @ sc) + sum(2.0 * (1 - j / bw) * float(sc[j:] @ sc[:-j]) for j in range(1, bw))
    assert d.slope == pytest.approx(slope, rel=1e-12)
    assert d.stderr == pytest.approx(math.sqrt(lrv) / sxx, rel=1e-9)


@pytest.mark.slow
def test_sqlite_store_is_not_held_as_python_rows(tmp_path):
    """Class 13: metric rows are streamed into arrays (a tuple per row was ~15x the store)."""
    import sqlite3
    import tracemalloc

    from grpofit.readers import read_path

    db = tmp_path / "mlruns.db"
    con = sqlite3.connect(db)
    con.executescript(_mlflow_schema())
    n = 200_000
    con.execute("INSERT INTO runs (run_uuid, name, lifecycle_stage, start_time) VALUES ('r1', 'grpo', 'active', 0)")
    con.executemany(
        "INSERT INTO metrics VALUES ('critic/score/mean', ?, ?, 'r1', ?, 0)",
        ((0.5 + 1e-6 * i, 1000 + i, i) for i in range(n)),
    )
    con.commit()
    con.close()
    tracemalloc.start()
    try:
        (run,) = read_path(str(db))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.steps.size == n
    assert peak < 150 * n  # bytes: a dozen float arrays (~100 bytes a row), not Python objects per row


def test_a_kl_spike_fitted_with_metric_is_not_excluded(capsys, tmp_path):
    rng = np.random.default_rng(2)
    s = np.arange(300)
    kl = 0.05 * (1 - np.exp(-s / 80)) + rng.normal(0, 0.002, 300)
    kl[200] = 0.9  # a genuine KL spike: the signal of a rule, not a corrupted cell
    code, out, err = run_cli(
        capsys,
        "fit",
        write_csv(tmp_path / "kl.csv", s, kl, header=("step", "kl")),
        "--metric",
        "kl",
        "--format",
        "json",
    )
    assert "outlier" not in err and "outliers" not in json.loads(out)["runs"][0]
