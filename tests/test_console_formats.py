"""Console logs: "Key: value" progress lines, OpenRLHF stdout, TRL stdout with tqdm on the same
line, and stray control bytes. Each file is written the way the tool prints it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpofit.core.errors import GrpofitError
from grpofit.core.roles import choose_reward
from grpofit.readers import read_bytes, read_path, sniff
from tests.conftest import assert_reads_or_fails_cleanly


def _progress_log(epochs=1, n=40) -> str:
    """A hand-written logger: print(f"Epoch:[{e}/{E}]({i}/{N}), Reward: {r:.4f}, ...")."""
    lines = ["Loading checkpoint shards: 100%|##########| 2/2", "Start training"]
    for e in range(1, epochs + 1):
        for i in range(1, n + 1):
            r = -1.5 + 1.2 * (1 - np.exp(-((e - 1) * n + i) / 15))
            lines.append(
                f"Epoch:[{e}/{epochs}]({i}/{n}), Reward: {r:.4f}, KL_ref: 0.0409, Adv Std: 0.9257, "
                f"Actor Loss: 0.0065, Avg Response Len: 286.75, Learning Rate: 0.00000030"
            )
    return "\n".join(lines) + "\n"


def test_key_value_progress_lines(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(_progress_log())
    run = read_path(str(p))[0]
    assert run.format == "kv-console"
    assert run.step_column == "step" and list(run.steps) == list(range(1, 41))
    assert {"Reward", "KL_ref", "Adv Std", "Avg Response Len", "Learning Rate"} <= set(run.metrics)
    assert choose_reward(run.numeric_columns())["column"] == "Reward"
    assert run.metrics["Reward"][0] == pytest.approx(-1.5 + 1.2 * (1 - np.exp(-1 / 15)), abs=1e-4)
    assert run.metrics["Learning Rate"][0] == 3e-7


def test_progress_counter_continues_across_epochs(tmp_path):
    run = read_bytes(_progress_log(epochs=2, n=10).encode(), "-")[0]
    assert list(run.steps) == list(range(1, 21))
    assert any("continued across epochs" in w for w in run.warnings)


def test_progress_with_an_explicit_step_key():
    text = "".join(f"[INFO] step: {s} | loss: 0.1 | reward: {s / 10} | kl: 0.01\n" for s in range(0, 50, 5))
    run = read_bytes(text.encode(), "-")[0]
    assert run.format == "kv-console" and list(run.steps) == list(range(0, 50, 5))


def test_prose_and_configs_are_not_progress_lines():
    with pytest.raises(GrpofitError):
        read_bytes(b"lr: 0.001\nbatch_size: 8\nepochs: 3\nmodel: qwen\n", "-")


def _openrlhf_log(n=12) -> str:
    """OpenRLHF's PPO trainer: the tqdm postfix and the ``✨ Global step`` logger line."""
    out = []
    for s in range(1, n + 1):
        status = {"policy_loss": 0.01, "kl": 0.001 * s, "reward": round(0.2 + 0.05 * s, 3), "response_length": 300.5}
        out.append(f"Train epoch [1/1]:  {s * 8}%|#  | {s}/{n} [00:{s:02d}<00:30, {status}]")
        out.append(f"(PPOTrainer pid=1234) ✨ Global step {s}: {status}")
    return "\n".join(out) + "\n"


def test_openrlhf_global_step_lines():
    run = read_bytes(_openrlhf_log().encode(), "-")[0]
    assert run.format == "openrlhf-console"
    assert list(run.steps) == list(range(1, 13))  # the postfix copies are not read twice
    assert run.metrics["reward"][-1] == pytest.approx(0.8)


def test_trl_stdout_with_tqdm_on_the_same_line():
    """HF's tqdm.write: the bar at step N, a clearing \\r, the dict, then the next bars."""
    out = ""
    for i in range(1, 101):
        out += f"\r {i}%|#   | {i}/100 [00:{i % 60:02d}<01:30,  1.00s/it]"
        if i % 10 == 0:
            out += "\r" + " " * 60 + "\r" + "{'loss': '0.0', 'grad_norm': '0.25', 'learning_rate': '1e-06', "
            out += f"'reward': '{i / 100}', 'reward_std': '0.3', 'epoch': '{i / 100}'" + "}\n"
    run = read_bytes(out.encode(), "-")[0]
    assert run.format == "trl-console"
    assert list(run.steps) == list(range(10, 101, 10))
    assert run.metrics["reward"][-1] == 1.0


def test_a_stray_nul_byte_does_not_make_a_log_binary():
    lines = [f"(TaskRunner pid=1) step:{s} - critic/score/mean:{s / 100} - actor/entropy:0.5" for s in range(1, 30)]
    lines.insert(3, "NCCL INFO Channel 00 : dev\x00ice mlx5_0")
    data = ("\n".join(lines) + "\n").encode()
    assert sniff(data, "verl.log") == "verl-console"
    run = read_bytes(data, "-")[0]
    assert run.steps.size == 29
    with pytest.raises(GrpofitError, match="binary"):
        read_bytes(b"\x00\x01\x02\x00" * 200, "-")


SAMPLES = {
    "kv": _progress_log(n=15).encode(),
    "openrlhf": _openrlhf_log().encode(),
}


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(which=st.sampled_from(sorted(SAMPLES)), cut=st.floats(0, 1), junk=st.binary(max_size=64))
def test_truncated_and_arbitrary_bytes(which, cut, junk):
    good = SAMPLES[which]
    assert_reads_or_fails_cleanly((good[: int(len(good) * cut)], good[: int(len(good) * cut)] + junk, junk))


def test_slurm_out_files_are_discovered_by_content(tmp_path):
    from grpofit.readers import discover

    (tmp_path / "slurm-1.out").write_text(_progress_log(n=10))
    (tmp_path / "slurm-2.out").write_text("srun: job 2 queued\nsrun: job 2 allocated\n")
    assert [s.path for s in discover([str(tmp_path)])] == [str(tmp_path / "slurm-1.out")]


def _trl_stdout(n: int = 201, *, bar: bool = False) -> str:
    """The HF Trainer's stdout with logging_steps=1: one metric dict per step (the tqdm bar,
    when ``bar``, drawn on the same line before each, as ``tqdm.write`` leaves it in a file)."""
    out = []
    for i in range(1, n + 1):
        head = f"\r  {100 * i // n}%|#    | {i}/{n} [00:0{i % 10}<01:30,  1.00s/it]\r" if bar else ""
        out.append(head + "{'loss': '0.0', 'reward': '%.4f', 'epoch': '%.3f'}" % (0.8 - 0.6 * np.exp(-i / 40), i / n))
    out.append("{'train_runtime': '100.0', 'train_loss': '0.01', 'epoch': '1.0'}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("bar", [False, True])
def test_trl_console_steps_are_the_trainers(tmp_path, capsys, bar):
    """A Trainer logging every step logs steps 1..201; its console dicts were numbered 0..200
    (row numbers from 0) by fit and watch alike. Read whole, followed in pieces, or watched
    --once, the steps are the Trainer's."""
    import json

    from grpofit.watch.tail import open_tail
    from tests.conftest import run_cli
    from tests.test_watch_tail import _cuts, grow

    text = _trl_stdout(bar=bar)
    p = tmp_path / "stdout.log"
    p.write_text(text)
    run = read_path(str(p))[0]
    assert run.format == "trl-console" and run.steps[0] == 1 and run.steps[-1] == 201 and run.steps.size == 201
    live = tmp_path / "live.log"
    (tailed,) = grow(live, text.encode(), _cuts(text.encode(), 5), lambda: open_tail(str(live), "file")).runs()
    np.testing.assert_array_equal(tailed.steps, run.steps)
    events = tmp_path / "events.jsonl"
    run_cli(capsys, "watch", p, "--once", "--no-forecast", "--jsonl", events)
    last = [json.loads(line) for line in events.read_text().splitlines() if '"forecast"' in line][-1]
    assert last["step"] == 201 and last["n_points"] == 201
