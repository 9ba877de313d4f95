"""The catalogue of bad inputs through the command line.

Every bad input ends in exit code 2 and exactly one line on stderr that names the file and the
fix, with no traceback (``--debug`` shows one). A handful of cases run the real process
(``python -m grpofit``) to prove the exit code and stderr of the process itself; the rest call
``grpofit.cli.main`` in-process to stay fast. Fits that cannot converge give a verdict, not a
crash, and ``diagnose --jobs 2`` survives a worker that dies.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def run_process(*args, stdin: bytes | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grpofit", *map(str, args)],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=120,
    )


def assert_one_error_line(err: str, *words: str) -> str:
    """stderr is one ``error: <file>: <what>; <fix>`` line holding ``words``, no traceback."""
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("error: ") and "Traceback" not in err, line
    assert "internal error" not in line, line
    assert "; " in line, f"no fix in {line!r}"
    for w in words:
        assert w in line, (w, line)
    return line


def write_rows(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "".join(r + "\n" for r in rows))
    return path


def curve(n: int, start: int = 1) -> list[str]:
    return [f"{s},{0.7 - 0.6 * np.exp(-s / 30):.6f}" for s in range(start, start + n)]


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00" + bytes(range(256))


def _garbage() -> bytes:
    return np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()


# name, content, words in the message (the file name is always checked too)
CATALOGUE = [
    ("empty.csv", b"", ["empty"]),
    ("blank.jsonl", b"\n \n\t\n", ["empty"]),
    ("header.csv", b"step,reward,kl\n", ["no data rows"]),
    ("garbage.csv", _garbage(), ["binary"]),
    ("garbage.jsonl", _garbage(), ["binary"]),
    (
        "broken_state.json",
        b'{"log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "rew',
        ["not valid JSON", "checkpoint"],
    ),
    (
        "broken.jsonl",
        b'{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.\n{"step": 3, "reward": 0.3}\n',
        ["line 2", "not valid JSON"],
    ),
    ("deep.json", b"[" * 50_000 + b"]" * 50_000, ["nested too deeply"]),
    ("text.csv", b"step,reward\n1,abc\n2,def\n3,ghi\n", ["no numeric"]),
    ("nostep.csv", b"step,reward\nnan,0.1\n,0.2\n", ["step column 'step'"]),
    # non-log files wearing a log's suffix
    ("picture.csv", PNG, ["binary"]),
    ("trainer_state.json", pickle.dumps({"learning_rate": 1e-6}), ["pickle", "never loads"]),
    ("notes.jsonl", b"Meeting notes, Monday\nWe discussed rewards, and KL\n", ["does not look like a training log"]),
    ("run-abc.wandb", b"step,reward\n1,0.5\n2,0.6\n", [".wandb", ":W&B"]),
    ("events.out.tfevents.123.host", b"hello, I am not an event file\n", ["TensorBoard"]),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,content,words", CATALOGUE, ids=[c[0] for c in CATALOGUE])
@pytest.mark.parametrize("command", ["fit", "diagnose", "inspect"])
def test_catalogue_of_unreadable_files(capsys, tmp_path, command, name, content, words):
    path = tmp_path / name
    path.write_bytes(content)
    code, out, err = run_cli(capsys, command, path, "--format", "json")
    assert code == 2
    assert_one_error_line(err, str(path), *words)
    if command == "diagnose" and out:  # a document may list the unreadable run
        doc = json.loads(out)
        assert doc["runs"] == [] and [e["run"] for e in doc["errors"]] == [str(path)]
        assert doc["gate"]["passed"] is False
    else:
        assert out == "", "nothing readable: no document on stdout"
    assert path.read_bytes() == content


@pytest.mark.slow
@pytest.mark.parametrize("command", ["fit", "diagnose"])
def test_one_row_states_the_minimum(capsys, tmp_path, command):
    from grpofit.fitting import MIN_POINTS

    for n in (1, MIN_POINTS - 1):
        path = write_rows(tmp_path / f"rows{n}.csv", "step,reward", curve(n))
        code, out, err = run_cli(capsys, command, path, "--format", "json")
        assert code == 2
        assert_one_error_line(err, str(path), f"has {n} finite point", f"at least {MIN_POINTS}")
    path = write_rows(tmp_path / "enough.csv", "step,reward", curve(MIN_POINTS))
    code, out, err = run_cli(capsys, command, path, "--format", "json")
    assert code in (0, 1), err  # exactly the minimum is fitted
    entry = json.loads(out)["runs"][0]
    assert (entry["fit"] if command == "diagnose" else entry)["n_points"] == MIN_POINTS


@pytest.mark.parametrize("command", ["fit", "diagnose"])
def test_all_nan_reward_and_no_reward_column_list_the_numeric_columns(capsys, tmp_path, command):
    nan = write_rows(tmp_path / "nan.csv", "step,reward,loss", [f"{i},nan,{1 / i}" for i in range(1, 30)])
    code, out, err = run_cli(capsys, command, nan, "--format", "json")
    assert code == 2
    assert_one_error_line(err, str(nan), "'reward'", "no finite values", "--metric", "loss")
    none = write_rows(tmp_path / "noreward.csv", "step,loss,grad_norm", [f"{i},{1 / i},{i}" for i in range(1, 30)])
    code, out, err = run_cli(capsys, command, none, "--format", "json")
    assert code == 2
    line = assert_one_error_line(err, str(none), "no reward column", "--metric")
    assert "loss, grad_norm" in line
    if command == "diagnose":  # the run was read: the document lists it as an error
        doc = json.loads(out)
        assert doc["runs"] == [] and doc["errors"][0]["run"].endswith("noreward.csv")
        assert doc["gate"]["passed"] is False
    # inspect still shows what was found
    code, out, err = run_cli(capsys, "inspect", none, "--format", "json")
    assert code == 0 and json.loads(out)["runs"][0]["numeric_columns"] == ["loss", "grad_norm"]


def test_missing_path_and_directory_without_logs(capsys, tmp_path):
    missing = tmp_path / "nope" / "run.csv"
    for command in ("fit", "diagnose", "inspect"):
        code, out, err = run_cli(capsys, command, missing)
        assert code == 2
        assert_one_error_line(err, str(missing), "no such file", "check the path")
    empty = tmp_path / "outputs"
    (empty / "checkpoint-10").mkdir(parents=True)  # no trainer_state.json in it
    (empty / "README.md").write_text("# a model card\n")
    (empty / "config.json").write_text('{"hidden_size": 8}')
    (empty / "model.safetensors").write_bytes(b"\x00" * 64)
    for command in ("fit", "diagnose", "inspect"):
        code, out, err = run_cli(capsys, command, empty)
        assert code == 2
        assert_one_error_line(err, str(empty), "no training logs", ".csv")


@pytest.mark.slow
def test_usage_errors_are_one_line(capsys, tmp_path):
    good = write_rows(tmp_path / "good.csv", "step,reward", curve(40))
    cases = [
        (["diagnose", good, "--jobs", "0"], "--jobs"),
        (["diagnose", good, "--format", "xml"], "--format"),
        (["fit", good, "--jobs", "0"], "--jobs"),  # fit takes --jobs N >= 1 (like diagnose)
        (["fit"], "Missing argument"),
        (["frobnicate"], "No such command"),
        (["diagnose", good, "--fail-on", "nonsense"], "nonsense"),
        (["diagnose", good, "--threshold", "oops"], "NAME=NUMBER"),
        (["fit", good, "--metric", "nope"], "nope"),
        (["fit", good, "--step", "nope"], "nope"),
    ]
    for argv, word in cases:
        code, out, err = run_cli(capsys, *argv)
        assert code == 2, argv
        line = assert_one_error_line(err, word)
        if argv[-1] in ("0", "xml", "2") or argv == ["fit"] or argv == ["frobnicate"]:
            assert "--help" in line  # click's own usage errors point at the help


def test_several_paths_bad_ones_are_listed_good_ones_judged(capsys, tmp_path):
    good = write_rows(tmp_path / "good.csv", "step,reward", curve(60))
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    short = write_rows(tmp_path / "short.csv", "step,reward", curve(2))
    code, out, err = run_cli(capsys, "diagnose", good, empty, tmp_path / "missing.csv", short, "--format", "json")
    assert code == 2
    doc = json.loads(out)
    assert [r["run"] for r in doc["runs"]] == [str(good)]
    assert sorted(e["run"] for e in doc["errors"]) == sorted([str(empty), str(tmp_path / "missing.csv"), str(short)])
    assert doc["gate"]["passed"] is False
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 3 and "Traceback" not in err
    code, out, err = run_cli(capsys, "fit", good, empty, short, "--format", "json")
    assert code == 2
    doc = json.loads(out)
    assert [r["run"] for r in doc["runs"]] == [str(good)] and len(doc["errors"]) == 2


# ------------------------------------------------------------------------------ real processes


@pytest.mark.slow
@pytest.mark.subprocess
def test_real_process_exit_code_and_single_stderr_line(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(_garbage())
    for args, words in [
        (["fit", empty], ["empty"]),
        (["diagnose", garbage, "--format", "json"], ["binary"]),
        (["inspect", tmp_path / "missing.csv"], ["no such file"]),
        (["diagnose", empty, "--jobs", "0"], ["--jobs"]),
    ]:
        proc = run_process(*args)
        assert proc.returncode == 2, proc
        if args[0] != "diagnose" or "--jobs" in args:
            assert proc.stdout == b""
        assert_one_error_line(proc.stderr.decode(), *words)


@pytest.mark.slow
@pytest.mark.subprocess
def test_real_process_stdin_garbage_names_stdin(tmp_path):
    proc = run_process("fit", "-", stdin=_garbage())
    assert proc.returncode == 2
    assert_one_error_line(proc.stderr.decode(), "-: ", "binary")
    # a binary log format from stdin: the message names stdin, never a temporary file
    proc = run_process("inspect", "-", stdin=b":W&B\xe1\xbe\x00" + b"\x00" * 3)
    assert proc.returncode == 2
    line = assert_one_error_line(proc.stderr.decode(), "-: ")
    assert "grpofit-" not in line and "/tmp" not in line


@pytest.mark.slow
@pytest.mark.subprocess
def test_debug_shows_a_traceback(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    for args in (["fit", empty, "--debug"], ["--debug", "fit", empty]):
        proc = run_process(*args)
        assert proc.returncode != 0
        err = proc.stderr.decode()
        assert "Traceback (most recent call last)" in err and "ReadError" in err and "empty" in err


@pytest.mark.slow
@pytest.mark.subprocess
def test_extreme_values_warn_nothing_on_stderr(tmp_path):
    """1e300 rewards or steps: a result, and no numpy RuntimeWarning noise on stderr."""
    huge = write_rows(tmp_path / "huge.csv", "step,reward", [f"{i},{1e300 * (i % 3)}" for i in range(1, 30)])
    steps = write_rows(tmp_path / "steps.csv", "step,reward", [f"{1e300 * i},{i / 30}" for i in range(1, 30)])
    for path in (huge, steps):
        proc = run_process("fit", path, "--format", "json")
        assert proc.returncode == 0, proc.stderr
        json.loads(proc.stdout)
        assert b"RuntimeWarning" not in proc.stderr and b"Traceback" not in proc.stderr


# ------------------------------------------------------------------------------ fits that cannot converge


def _hard_runs(tmp_path) -> dict[str, Path]:
    rng = np.random.default_rng(3)
    cases = {
        "constant": [f"{i},0.5" for i in range(1, 60)],
        "alternating": [f"{i},{i % 2}" for i in range(1, 60)],
        "noise": [f"{i},{rng.random():.6f}" for i in range(1, 60)],
        "step_function": [f"{i},{float(i > 30)}" for i in range(1, 60)],
        "tiny": [f"{i},{1e-300 * i}" for i in range(1, 60)],
        "negative_steps": [f"{i - 1000},{0.7 - 0.6 * np.exp(-i / 10):.6f}" for i in range(1, 60)],
        "huge_gap": [f"{i if i < 30 else i * 10**9},{i / 60}" for i in range(1, 60)],
        "minimum_points": curve(8),
    }
    return {k: write_rows(tmp_path / f"{k}.csv", "step,reward", v) for k, v in cases.items()}


@pytest.mark.slow
def test_fits_that_cannot_converge_give_a_verdict(capsys, tmp_path):
    runs = _hard_runs(tmp_path)
    for name, path in runs.items():
        code, out, err = run_cli(capsys, "fit", path, "--format", "json")
        assert code == 0, (name, err)
        entry = json.loads(out)["runs"][0]
        assert entry["n_points"] >= 8
        for model in entry["models"].values():
            assert set(model) >= {"r2", "aic", "bic", "params"}
        assert "internal error" not in err
    code, out, err = run_cli(capsys, "diagnose", *runs.values(), "--format", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    assert len(doc["runs"]) == len(runs) and "errors" not in doc
    assert all(r["verdict"] in ("pass", "warn", "fail", "unknown") for r in doc["runs"])


# ------------------------------------------------------------------------------ dying workers


def _killer_judge(original):
    def judge(run, **options):
        if "killer" in run.name:
            os._exit(13)  # the worker process dies: no exception, no result
        if "buggy" in run.name:
            raise ZeroDivisionError("a bug hit by this run only")
        return original(run, **options)

    return judge


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="relies on fork inheriting the monkeypatch")
def test_diagnose_jobs_survives_a_worker_that_dies(capsys, tmp_path, monkeypatch):
    import multiprocessing

    import grpofit.diagnostics as diagnostics

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("workers do not inherit the monkeypatch without fork")
    # the pipeline looks diagnose_run up at call time; forked workers inherit the patch
    monkeypatch.setattr(diagnostics, "diagnose_run", _killer_judge(diagnostics.diagnose_run))
    folder = tmp_path / "runs"
    folder.mkdir()
    names = ["a.csv", "killer.csv", "b.csv", "buggy.csv", "c.csv"]
    for n in names:
        write_rows(folder / n, "step,reward", curve(60))
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, "diagnose", folder, "--jobs", "2", "--format", "json")
    assert time.perf_counter() - t0 < 60
    assert code == 2
    doc = json.loads(out)
    judged = [Path(r["run"]).name for r in doc["runs"]]
    assert judged == ["a.csv", "b.csv", "c.csv"]  # the others, in input order
    errors = {Path(e["run"]).name: e["error"] for e in doc["errors"]}
    assert set(errors) == {"killer.csv", "buggy.csv"}
    assert "died" in errors["killer.csv"]
    assert "internal error" in errors["buggy.csv"] and "ZeroDivisionError" in errors["buggy.csv"]
    assert "Traceback" not in err
    # serial judging reports the bug the same way (no killer: it would end this process)
    (folder / "killer.csv").unlink()
    code, out, err = run_cli(capsys, "diagnose", folder, "--jobs", "1", "--format", "json")
    doc = json.loads(out)
    assert code == 2 and [Path(r["run"]).name for r in doc["runs"]] == ["a.csv", "b.csv", "c.csv"]
    assert [Path(e["run"]).name for e in doc["errors"]] == ["buggy.csv"]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="relies on fork inheriting the monkeypatch")
def test_diagnose_jobs_loses_only_the_killer_from_a_chunk(capsys, tmp_path, monkeypatch):
    """Workers take several runs per call: when one kills its worker, its chunk partners are
    retried and judged; only the killer is reported."""
    import multiprocessing

    import grpofit.diagnostics as diagnostics
    from grpofit.commands.pipeline import _chunk_size

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("workers do not inherit the monkeypatch without fork")
    monkeypatch.setattr(diagnostics, "diagnose_run", _killer_judge(diagnostics.diagnose_run))
    folder = tmp_path / "runs"
    folder.mkdir()
    names = [f"r{i:02d}.csv" for i in range(40)]
    names[9] = "r09_killer.csv"
    assert _chunk_size(len(names), 2) > 1
    for n in names:
        write_rows(folder / n, "step,reward", curve(60))
    code, out, err = run_cli(capsys, "diagnose", folder, "--jobs", "2", "--format", "json")
    doc = json.loads(out)
    assert code == 2
    assert [Path(r["run"]).name for r in doc["runs"]] == [n for n in names if "killer" not in n]
    assert [Path(e["run"]).name for e in doc["errors"]] == ["r09_killer.csv"]
    assert "Traceback" not in err


# ------------------------------------------------------------------------------ many files, loops


def test_symlink_loop_in_a_log_directory(capsys, tmp_path):
    root = tmp_path / "logs"
    run_dir = root / "exp" / "run1"
    run_dir.mkdir(parents=True)
    write_rows(run_dir / "metrics.csv", "step,reward", curve(60))
    os.symlink(root, run_dir / "loop")  # run1/loop -> logs
    os.symlink(run_dir, root / "latest")  # a "latest-run" style link
    os.symlink(root / "nowhere", root / "dangling")
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, "diagnose", root, "--format", "json")
    assert time.perf_counter() - t0 < 10
    assert code in (0, 1), err
    doc = json.loads(out)
    assert [Path(r["run"]).name for r in doc["runs"]] == ["metrics.csv"]


@pytest.mark.slow
def test_ten_thousand_small_files_in_a_log_directory(capsys, tmp_path):
    """An output folder with 10,000 small files (notes, configs, and a few runs) is walked,
    sniffed and judged in seconds, and no file descriptor is leaked."""
    root = tmp_path / "big"
    for i in range(100):
        d = root / f"d{i:03d}"
        d.mkdir(parents=True)
        for j in range(100):
            if j == 0 and i % 20 == 0:
                write_rows(d / "metrics.csv", "step,reward", curve(40))
            elif j % 2:
                (d / f"note{j:03d}.txt").write_text(f"note {i} {j}: nothing to see\n")
            else:
                (d / f"cfg{j:03d}.json").write_text('{"hidden_size": 8, "layers": 2}')
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, "diagnose", root, "--format", "json")
    elapsed = time.perf_counter() - t0
    assert code in (0, 1), err
    doc = json.loads(out)
    assert len(doc["runs"]) == 5 and "errors" not in doc
    assert elapsed < 15, elapsed  # ~2 s here
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds + 2


@pytest.mark.slow
def test_thousand_small_runs_each_reported(capsys, tmp_path):
    """1,000 one-row logs: every one is listed with its reason, none is lost, one line each."""
    root = tmp_path / "many"
    for i in range(10):
        d = root / f"d{i}"
        d.mkdir(parents=True)
        for j in range(100):
            (d / f"r{j:03d}.csv").write_text("step,reward\n1,0.1\n")
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, "diagnose", root, "--format", "json")
    elapsed = time.perf_counter() - t0
    assert code == 2
    doc = json.loads(out)
    assert len(doc["errors"]) == 1000 and doc["runs"] == []
    assert all("at least" in e["error"] for e in doc["errors"])
    assert len([ln for ln in err.splitlines() if ln.startswith("error: ")]) == 1000
    assert elapsed < 20, elapsed  # ~1.5 ms per file


# ------------------------------------------------------------------ --debug is an option of the app


def test_debug_is_parsed_by_the_app_not_read_from_argv(tmp_path, monkeypatch, capsys):
    import sys

    from grpofit.cli.entry import _run
    from grpofit.core.errors import GrpofitError

    missing = str(tmp_path / "missing.csv")
    assert _run(["fit", missing]) == 2  # one line, no traceback
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(GrpofitError):  # on the command
        _run(["fit", missing, "--debug"])
    with pytest.raises(GrpofitError):  # at the root
        _run(["--debug", "fit", missing])
    with pytest.raises(GrpofitError):  # anywhere among the command's arguments
        _run(["fit", "--debug", missing])
    # a word "--debug" that the parser does not take as the option is not the option (the old
    # check of the raw argument list took both as --debug and showed a traceback)
    assert _run(["fit", missing, "--metric", "--debug"]) == 2  # the value of --metric
    assert _run(["fit", missing, "--", "--debug"]) == 2  # a path after --
    assert "--debug: no such file" in capsys.readouterr().err
    # the flag does not outlive its invocation, and the process's own argv is not read
    monkeypatch.setattr(sys, "argv", ["grpofit", "fit", missing, "--debug"])
    assert _run(["fit", missing]) == 2
    capsys.readouterr()


def test_debug_shows_a_bad_option_value_as_a_traceback(capsys):
    from grpofit.cli.entry import _run

    assert _run(["fit", "--format", "bogus", "x.csv"]) == 2
    assert "--format" in capsys.readouterr().err
    with pytest.raises(Exception, match="bogus"):  # --debug after the bad value: seen first (eager)
        _run(["fit", "--format", "bogus", "x.csv", "--debug"])
