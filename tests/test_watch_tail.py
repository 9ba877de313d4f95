"""Following logs being written: each poll reads only the appended bytes, and the run it builds
equals what a full read of the finished file gives, for every container format."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from grpofit.readers import read_path
from grpofit.readers import wandb_binary as wb
from grpofit.testing import writers
from grpofit.watch.follow import Follower
from grpofit.watch.tail import TextTail, open_tail
from tests.reallogs import REAL_LOGS
from tests.test_live_logs import csv_rows, jsonl_rows, reward, wandb_bytes

REAL = str(REAL_LOGS)


def same_run(a, b) -> bool:
    return (
        np.array_equal(a.steps, b.steps)
        and set(a.metrics) == set(b.metrics)
        and all(np.allclose(a.metrics[k], b.metrics[k], equal_nan=True) for k in b.metrics)
    )


def grow(path, full: bytes, cuts, tail_factory):
    """Write ``full`` in pieces (cut inside records); poll after each piece."""
    path.write_bytes(b"")
    tail = None
    done = 0
    for cut in list(cuts) + [len(full)]:
        with open(path, "ab") as f:
            f.write(full[done:cut])
        done = cut
        if tail is None:
            tail = tail_factory()
        if tail is not None:
            tail.poll()
    if tail is not None:
        tail.poll()  # a last line without a newline counts once the file stops growing
    return tail


def _cuts(full: bytes, k: int = 7):
    rng = np.random.default_rng(0)
    return sorted(int(c) for c in rng.integers(1, len(full) - 1, k))


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_text_log_read_in_torn_pieces_equals_full_read(tmp_path, fmt):
    full = jsonl_rows(range(1, 200)) if fmt == "jsonl" else csv_rows(range(1, 200))
    path = tmp_path / f"log.{fmt}"
    tail = grow(path, full, _cuts(full), lambda: open_tail(str(path), "file"))
    assert isinstance(tail, TextTail)
    (run,) = tail.runs()
    (ref,) = read_path(str(path))
    assert same_run(run, ref)
    assert run.steps[-1] == 199


def test_unterminated_last_csv_line_counts_once_the_file_stops_growing(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(csv_rows([1, 2]) + b"3,0.")
    tail = open_tail(str(path), "file")
    tail.poll()
    assert tail.runs()[0].steps.tolist() == [1, 2]
    with open(path, "ab") as f:
        f.write(b"25,0.003")
    tail.poll()  # grew since the last poll: still waiting
    assert tail.runs()[0].steps.tolist() == [1, 2]
    tail.poll()  # unchanged for a poll: the writer is done
    assert tail.runs()[0].steps.tolist() == [1, 2, 3]
    assert tail.runs()[0].metrics["reward"][-1] == 0.25


def test_torn_json_line_waits_for_its_end(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(jsonl_rows([1, 2, 3]) + b'{"step": 4, "reward": 0.')
    tail = open_tail(str(path), "file")
    assert tail.poll()
    assert tail.runs()[0].steps.tolist() == [1, 2, 3]
    with open(path, "ab") as f:
        f.write(b"5}\n")
    assert tail.poll()
    run = tail.runs()[0]
    assert run.steps.tolist() == [1, 2, 3, 4]
    assert run.metrics["reward"][-1] == 0.5
    # a complete object without its newline counts at once
    with open(path, "ab") as f:
        f.write(b'{"step": 5, "reward": 0.6}')
    assert tail.poll()
    assert tail.runs()[0].steps.tolist() == [1, 2, 3, 4, 5]


def test_only_appended_bytes_are_read(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    path.write_bytes(jsonl_rows(range(1, 101)))
    tail = open_tail(str(path), "file")
    tail.poll()
    seen = []
    import grpofit.watch.tail as tmod

    real = tmod._parse

    def spy(fmt, name, p, data, step):
        seen.append(data)
        return real(fmt, name, p, data, step)

    monkeypatch.setattr(tmod, "_parse", spy)
    with open(path, "ab") as f:
        f.write(jsonl_rows([101, 102]))
    assert tail.poll()
    assert seen == [jsonl_rows([101, 102])]
    assert not tail.poll()  # nothing new: nothing parsed
    assert len(seen) == 1


def test_replaced_or_truncated_file_is_read_again(tmp_path):
    path = tmp_path / "log.csv"
    path.write_bytes(csv_rows(range(1, 50)))
    tail = open_tail(str(path), "file")
    tail.poll()
    assert tail.runs()[0].steps[-1] == 49
    # rotated: a new file (new inode) under the same name, shorter
    tmp = tmp_path / "new.csv"
    tmp.write_bytes(csv_rows(range(100, 110)))
    os.replace(tmp, path)
    assert tail.poll()
    assert tail.runs()[0].steps.tolist() == list(range(100, 110))
    assert tail.resets == 1
    # truncated in place and rewritten
    with open(path, "wb") as f:
        f.write(csv_rows([7, 8]))
    assert tail.poll()
    assert tail.runs()[0].steps.tolist() == [7, 8]


def test_tensorboard_records_in_pieces(tmp_path):
    src = tmp_path / "src" / "events.out.tfevents.1"
    src.parent.mkdir()
    writers.write_tfevents(str(src), [(s, {"reward": reward(s), "kl": s / 1000}) for s in range(1, 150)])
    full = src.read_bytes()
    logdir = tmp_path / "logs"
    logdir.mkdir()
    path = logdir / "events.out.tfevents.1"
    tail = grow(path, full, _cuts(full, 9), lambda: open_tail(str(logdir), "tensorboard"))
    (run,) = tail.runs()
    (ref,) = read_path(str(src))
    assert same_run(run, ref)


@pytest.mark.slow
def test_wandb_binary_records_in_pieces_across_blocks(tmp_path):
    full = wandb_bytes(list(range(1, 3000)))  # several 32 KiB blocks
    assert len(full) > 3 * wb.BLOCK
    path = tmp_path / "run-abc.wandb"
    tail = grow(path, full, _cuts(full, 15), lambda: open_tail(str(path), "file"))
    (run,) = tail.runs()
    (ref,) = read_path(str(path))
    assert same_run(run, ref)
    assert run.steps.size == 2999


def test_trainer_state_is_reread_when_rewritten(tmp_path):
    ckpt = tmp_path / "out" / "checkpoint-10"
    ckpt.mkdir(parents=True)
    rows = [{"step": s, "reward": reward(s), "loss": 0.1} for s in range(1, 11)]
    (ckpt / "trainer_state.json").write_text(json.dumps({"log_history": rows, "global_step": 10}))
    fol = Follower([str(tmp_path / "out")])
    res = fol.poll()
    assert [r.steps[-1] for r in res.changed] == [10]
    assert not fol.poll().changed
    # a newer checkpoint appears: it stands for the run
    new = tmp_path / "out" / "checkpoint-20"
    new.mkdir()
    rows += [{"step": s, "reward": reward(s), "loss": 0.1} for s in range(11, 21)]
    (new / "trainer_state.json").write_text(json.dumps({"log_history": rows, "global_step": 20}))
    res = fol.poll()
    assert res.changed and res.changed[-1].steps[-1] == 20


def test_folder_where_runs_appear(tmp_path):
    fol = Follower([str(tmp_path)])
    assert not fol.poll().changed  # nothing yet: waits, no error
    (tmp_path / "a.jsonl").write_bytes(jsonl_rows(range(1, 30)))
    assert [r.steps.size for r in fol.poll().changed] == [29]
    sub = tmp_path / "run2"
    sub.mkdir()
    (sub / "metrics.csv").write_bytes(csv_rows(range(1, 40)))
    res = fol.poll()
    assert [r.name for r in res.changed] == [str(sub / "metrics.csv")]


@pytest.mark.slow
@pytest.mark.real_logs
@pytest.mark.parametrize(
    "name",
    [
        "verl_grpo_qwen25_3b_fsdp_base.tfevents",
        "countdown_grpo_custom_beibeizzz.jsonl",
        "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv",
    ],
)
def test_real_logs_followed_in_pieces_equal_a_full_read(tmp_path, name):
    full = open(os.path.join(REAL, name), "rb").read()
    path = tmp_path / name
    tail = grow(path, full, _cuts(full, 6), lambda: open_tail(str(path), "file"))
    live = {r.name: r for r in tail.runs()}
    refs = read_path(os.path.join(REAL, name))
    assert len(live) == len(refs)
    for ref in refs:
        assert same_run(live[ref.name.replace(os.path.join(REAL, name), str(path))], ref)


def test_verl_console_and_trl_console_in_pieces(tmp_path):
    verl = "".join(
        f"(TaskRunner pid=1) step:{s} - critic/score/mean:{reward(s)} - actor/kl:0.01\n" for s in range(1, 60)
    ).encode()
    path = tmp_path / "train.log"
    tail = grow(path, verl, _cuts(verl, 5), lambda: open_tail(str(path), "file"))
    (run,) = tail.runs()
    assert run.steps.tolist() == list(range(1, 60))
    trl = "".join("{'loss': 0.1, 'reward': %s, 'epoch': %s}\n" % (reward(s), s / 100) for s in range(1, 40)).encode()
    path2 = tmp_path / "trl.log"
    tail2 = grow(path2, trl, _cuts(trl, 5), lambda: open_tail(str(path2), "file"))
    (run2,) = tail2.runs()
    (ref2,) = read_path(str(path2))
    assert same_run(run2, ref2)  # row-index steps continue across pieces


def _appended(ids: bool, fmt: str) -> bytes:
    """Three runs of 120 steps written one after another into one file (a script rerun with
    the same output file), with or without a run id column."""
    rng = np.random.default_rng(0)
    rows = []
    for k, (p, T) in enumerate([(0.8, 30), (0.6, 20), (0.9, 40)]):
        for s in range(1, 121):
            rows.append({"step": s, "reward": float(p - 0.6 * np.exp(-s / T) + 0.02 * rng.standard_normal())})
            if ids:
                rows[-1]["run_id"] = f"r{k}"
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in rows).encode()
    keys = list(rows[0])
    return (",".join(keys) + "\n" + "".join(",".join(str(r[k]) for k in keys) + "\n" for r in rows)).encode()


@pytest.mark.parametrize("fmt,ids", [("jsonl", False), ("jsonl", True), ("csv", False)])
@pytest.mark.parametrize("k", [1, 9, 60])
def test_appended_runs_are_followed_as_the_readers_split_them(tmp_path, fmt, ids, k):
    """Runs appended one after another (a step reset, or a run id) were stitched by watch into
    one series (sorted, the steps merged as duplicates) where the readers read three runs."""
    full = _appended(ids, fmt)
    path = tmp_path / f"log.{fmt}"
    tail = grow(path, full, _cuts(full, k) if k > 1 else [], lambda: open_tail(str(path), "file"))
    live = {r.name: r for r in tail.runs()}
    refs = read_path(str(path))
    assert len(refs) == 3 and sorted(live) == sorted(r.name for r in refs)
    for ref in refs:
        assert same_run(live[ref.name], ref), ref.name


def test_watch_once_judges_appended_runs_separately_and_says_so(tmp_path, capsys):
    from tests.conftest import run_cli

    path = tmp_path / "log.jsonl"
    path.write_bytes(_appended(False, "jsonl"))
    events = tmp_path / "events.jsonl"
    code, out, err = run_cli(capsys, "watch", path, "--once", "--no-forecast", "--jsonl", events)
    runs = {json.loads(line)["run"] for line in events.read_text().splitlines()}
    assert runs == {f"{path}::run{k}" for k in (1, 2, 3)}
    assert "holds 3 runs appended one after another" in err and "following them as separate runs" in err


def test_a_live_watch_renames_the_first_run_when_the_second_begins(tmp_path):
    """Followed while written: the first run is the file's until the step falls back; then it is
    ``::run1`` and the watch no longer shows a run under the file's own name."""
    import io

    from grpofit.watch.session import Session, WatchOptions

    full = _appended(False, "jsonl")
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"")
    err = io.StringIO()
    s = Session(WatchOptions(paths=[str(path)], forecast=False), out=io.StringIO(), err=err)
    lines = full.splitlines(keepends=True)
    for a in range(0, len(lines), 60):
        with open(path, "ab") as f:
            f.write(b"".join(lines[a : a + 60]))
        s.poll()
        if a == 60:
            assert set(s.monitor.runs) == {str(path)}  # one run so far
    s.poll(final=True)
    assert set(s.monitor.runs) == {f"{path}::run{k}" for k in (1, 2, 3)}
    assert "following them as separate runs" in err.getvalue()
