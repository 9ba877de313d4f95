"""``grpofit watch``: lines without a terminal, --jsonl, --exit-on, --on-fail, --once, Ctrl-C,
bad input."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from grpofit.testing.planted import make_planted_run
from grpofit.watch.session import Session, WatchOptions
from tests.doc_pages import docs_text


def write_csv(path, table: dict, rows: slice = slice(None)) -> None:
    keys = list(table)
    n = len(table[keys[0]])
    idx = range(n)[rows]
    lines = [",".join(keys)] + [
        ",".join("" if not np.isfinite(table[k][i]) else repr(float(table[k][i])) for k in keys) for i in idx
    ]
    path.write_text("\n".join(lines) + "\n")


def append_csv(path, table: dict, rows: slice) -> None:
    keys = list(table)
    n = len(table[keys[0]])
    with open(path, "a") as f:
        for i in range(n)[rows]:
            f.write(",".join("" if not np.isfinite(table[k][i]) else repr(float(table[k][i])) for k in keys) + "\n")


def grpofit(*args, **kw):
    return subprocess.run([sys.executable, "-m", "grpofit", *args], capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture
def collapse_table():
    return make_planted_run("dynamical_instability", seed=3, n_steps=300)


@pytest.mark.slow
@pytest.mark.subprocess
def test_once_healthy_run_prints_state_and_writes_jsonl(tmp_path):
    write_csv(tmp_path / "run.csv", make_planted_run(None, seed=1, n_steps=200))
    out = tmp_path / "w.jsonl"
    p = grpofit("watch", str(tmp_path / "run.csv"), "--once", "--jsonl", str(out), "--exit-on", "fail")
    assert p.returncode == 0, p.stderr
    assert "UPDATE run=" in p.stdout and "step=200" in p.stdout
    assert "ALERT fail" not in p.stdout
    events = [json.loads(line) for line in out.read_text().splitlines()]
    assert events and all(e["schema"] == "grpofit.watch/1" for e in events)
    fc = [e for e in events if e["event"] == "forecast"]
    assert fc[-1]["step"] == 200 and fc[-1]["n_points"] == 200
    assert set(fc[-1]["verdicts"]) >= {"dynamical_instability", "policy_concentration"}
    # never a made-up number: either a forecast or a note saying why not
    assert fc[-1]["forecast_final"] is not None or fc[-1]["note"].startswith("cannot forecast")


def test_exit_on_fail_and_on_fail_hook_once_per_failure(tmp_path, collapse_table):
    run = tmp_path / "run.csv"
    write_csv(run, collapse_table, slice(0, 150))
    hook_log = tmp_path / "hook.txt"
    opts = WatchOptions(
        paths=[str(run)],
        interval=0.01,
        exit_on="fail",
        forecast=False,
        on_fail=f'echo "$GRPOFIT_RUN|$GRPOFIT_MODE|$GRPOFIT_STEP|$GRPOFIT_STATUS|$GRPOFIT_EVIDENCE" >> {hook_log}',
        jsonl=str(tmp_path / "w.jsonl"),
    )
    out = io.StringIO()
    s = Session(opts, out=out, err=io.StringIO())
    s.poll()
    assert s.exit_code == 0 and not hook_log.exists()  # healthy so far
    for stop in range(160, 301, 10):  # the run goes on and collapses at 65% (step 195)
        append_csv(run, collapse_table, slice(stop - 10, stop))
        s.poll()
        if s.exit_code:
            break
    assert s.exit_code == 1
    lines = hook_log.read_text().splitlines()
    assert len(lines) == 1  # once per failure, not once per poll
    name, mode, step, status, evidence = lines[0].split("|")
    assert name == str(run) and mode == "dynamical_instability" and status == "fail"
    assert 195 <= float(step) <= 300 and evidence
    alerts = [json.loads(x) for x in open(tmp_path / "w.jsonl") if '"alert"' in x]
    assert any(a["status"] == "fail" for a in alerts)


@pytest.mark.slow
@pytest.mark.subprocess
def test_once_exit_on_fail_on_a_collapsed_run(tmp_path, collapse_table):
    write_csv(tmp_path / "run.csv", collapse_table)
    p = grpofit("watch", str(tmp_path), "--once", "--exit-on", "fail", "--no-forecast")
    assert p.returncode == 1, p.stderr
    assert "ALERT fail dynamical_instability" in p.stdout


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize(
    "args, needle",
    [
        (["/no/such/dir"], "/no/such/dir"),
        (["{tmp}", "--interval", "0"], "--interval"),
        (["{tmp}", "--exit-on", "maybe"], "--exit-on"),
        (["{tmp}", "--max-polls", "0"], "--max-polls"),
        (["-"], "standard input"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    p = grpofit("watch", *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.slow
@pytest.mark.subprocess
def test_ctrl_c_exits_0_and_leaves_whole_lines(tmp_path):
    write_csv(tmp_path / "run.csv", make_planted_run(None, seed=2, n_steps=120))
    out = tmp_path / "w.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "grpofit",
            "watch",
            str(tmp_path),
            "--interval",
            "0.1",
            "--jsonl",
            str(out),
            "--no-forecast",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as from a terminal, even when the test runner is a background job
        # (which starts with SIGINT ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    while time.time() < deadline and not (out.exists() and out.stat().st_size):
        time.sleep(0.1)
    with open(tmp_path / "run.csv", "a") as f:
        f.write("121,0.5,,0.3,0.1,0.5,0.02,0.2,0.005\n")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    text = out.read_text()
    assert text.endswith("\n")
    assert all(json.loads(line)["schema"] == "grpofit.watch/1" for line in text.splitlines())


@pytest.mark.slow
@pytest.mark.subprocess
def test_max_polls_stops(tmp_path):
    write_csv(tmp_path / "run.csv", make_planted_run(None, seed=2, n_steps=60))
    t = time.time()
    p = grpofit("watch", str(tmp_path), "--interval", "0.05", "--max-polls", "3", "--no-forecast")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("UPDATE") == 1  # nothing changed after the first poll: one line
    assert time.time() - t < 60


@pytest.mark.slow
@pytest.mark.subprocess
def test_empty_folder_waits_without_error(tmp_path):
    p = grpofit("watch", str(tmp_path), "--interval", "0.05", "--max-polls", "2")
    assert p.returncode == 0 and p.stderr == ""


@pytest.mark.slow
def test_a_replaced_log_is_judged_afresh(tmp_path, collapse_table):
    """A file replaced by a new run (new inode, fewer rows) is a new run: its state and alerts
    start again, so a failure of the new run is reported too."""
    run = tmp_path / "run.csv"
    write_csv(run, collapse_table)
    hook_log = tmp_path / "hook.txt"
    s = Session(
        WatchOptions(paths=[str(run)], forecast=False, on_fail=f'echo "$GRPOFIT_STEP" >> {hook_log}'),
        out=io.StringIO(),
        err=io.StringIO(),
    )
    s.poll(final=True)
    st = s.monitor.runs[str(run)]
    assert ("dynamical_instability", "fail") in st.alerts and st.n == 300
    new = tmp_path / "new.csv"
    write_csv(new, make_planted_run(None, seed=4, n_steps=120))
    os.replace(new, run)
    s.poll(final=True)
    st = s.monitor.runs[str(run)]
    assert st.restarts == 1 and st.n == 120 and st.last_step == 120
    assert not [a for a in st.alerts.values() if a.status == "fail"]
    write_csv(new, collapse_table)  # and again a collapsing run: its failure is a new alert
    os.replace(new, run)
    s.poll(final=True)
    assert s.monitor.runs[str(run)].restarts == 2
    assert len(hook_log.read_text().splitlines()) == 2


def test_exit_on_warn_and_every_hook_variable(tmp_path, collapse_table):
    run = tmp_path / "run.csv"
    write_csv(run, collapse_table)
    hook_log = tmp_path / "hook.txt"
    names = ("RUN", "MODE", "STATUS", "STEP", "ONSET", "SOURCE", "EVIDENCE")
    hook = 'echo "' + "|".join(f"$GRPOFIT_{k}" for k in names) + f'" >> {hook_log}'
    s = Session(
        WatchOptions(paths=[str(run)], forecast=False, exit_on="warn", on_fail=hook),
        out=io.StringIO(),
        err=io.StringIO(),
    )
    events = s.poll(final=True)
    assert s.exit_code == 1
    assert any(e["event"] == "alert" and e["status"] == "warn" for e in events)
    fails = [e for e in events if e["event"] == "alert" and e["status"] == "fail"]
    got = [dict(zip(names, line.split("|", len(names) - 1))) for line in hook_log.read_text().splitlines()]
    assert len(got) == len(fails) >= 1
    for e, g in zip(fails, got):
        assert g["RUN"] == e["run"] and g["MODE"] == e["mode"] and g["STATUS"] == "fail"
        assert float(g["STEP"]) == e["step"] and g["SOURCE"] == e["source"] and g["EVIDENCE"] == e["evidence"]
        assert g["ONSET"] == ("" if e["onset"] is None else str(e["onset"]))


def test_readme_documents_every_jsonl_field(tmp_path, collapse_table):
    """The --jsonl schema in the README names exactly the fields watch writes."""
    import re

    readme = docs_text()
    section = readme[readme.index("`--jsonl FILE` appends one JSON object per line") :]
    section = section[: section.index("\n#")]
    documented = {}
    for kind in ("alert", "forecast"):
        line = next(x for x in section.split("\n- ") if x.startswith(f"`{kind}`:"))
        documented[kind] = set(re.findall(r"`(\w+)`", line)) - {kind, "warn", "fail", "diagnose"}
    write_csv(tmp_path / "run.csv", collapse_table)
    s = Session(WatchOptions(paths=[str(tmp_path / "run.csv")], forecast=False), out=io.StringIO(), err=io.StringIO())
    events = s.poll(final=True)
    common = {"schema", "event", "time", "run"}
    for kind in ("alert", "forecast"):
        keys = set().union(*(e.keys() for e in events if e["event"] == kind))
        assert keys - common == documented[kind], kind


def test_live_panel_on_a_terminal_shows_every_column(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    write_csv(tmp_path / "run.csv", make_planted_run(None, seed=1, n_steps=120))
    out = io.StringIO()
    s = Session(WatchOptions(paths=[str(tmp_path)], forecast=False, live=True, max_polls=1), out=out, err=io.StringIO())
    assert s.run() == 0
    text = out.getvalue()
    for column in ("run", "reward", "forecast final", "steps to 95%", "alerts (first step)"):
        assert column in text
    assert "UPDATE" not in text  # the live table, not the line mode
