"""Readers: every container and quirk of shared/docs/formats.md, bad input, round trips, the
real third-party logs (tests/data/real_logs)."""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
import types

import numpy as np
import pytest

from grpofit.core.errors import MetricNotFound, ReadError, UnknownFormat
from grpofit.readers import inspect_run, read_bytes, read_path, require_column, sniff
from grpofit.readers.config import detect_group_size, flatten, hyperparameters
from grpofit.testing import writers
from tests.reallogs import real_log


def one(path, **kw):
    runs = read_path(str(path), **kw)
    assert len(runs) == 1
    return runs[0]


def col(run, name):
    return run.metrics[name]


# ---------------------------------------------------------------- CSV / TSV / long


def test_csv_wide_with_empty_cells(tmp_path):
    p = tmp_path / "run.csv"
    p.write_text("step,reward,kl\n1,0.1,\n2,0.2,0.01\n3,,0.02\n")
    run = one(p)
    assert run.format == "csv" and run.step_column == "step"
    assert run.name == str(p) and run.source == str(p)
    np.testing.assert_array_equal(run.steps, [1, 2, 3])
    np.testing.assert_allclose(col(run, "reward"), [0.1, 0.2, np.nan])
    np.testing.assert_allclose(col(run, "kl"), [np.nan, 0.01, 0.02])
    assert run.stats["rows"] == 3


def test_tsv(tmp_path):
    p = tmp_path / "run.tsv"
    p.write_text("global_step\ttrain/reward\n10\t0.5\n20\t0.6\n")
    run = one(p)
    assert run.format == "tsv" and run.step_column == "global_step"
    np.testing.assert_allclose(col(run, "train/reward"), [0.5, 0.6])


def test_long_csv_pivots_and_keeps_last_repeat(tmp_path):
    p = tmp_path / "long.csv"
    p.write_text(
        "step,key,value\n1,reward,0.1\n1,kl,0.01\n2,reward,0.2\n2,reward,0.25\n3,kl,0.03\n"
        "2,val-core/openai/gsm8k/reward/mean@1,0.4\n"
    )
    run = one(p)
    assert run.format == "csv-long" and run.step_column == "step"
    assert run.columns == ["reward", "kl", "val-core/openai/gsm8k/reward/mean@1"]
    np.testing.assert_allclose(col(run, "reward"), [0.1, 0.25, np.nan])
    np.testing.assert_allclose(col(run, "kl"), [0.01, np.nan, 0.03])
    assert run.stats["duplicates"] == 1 and any("repeated" in w for w in run.warnings)


def test_non_numeric_cells_become_missing_with_warning(tmp_path):
    p = tmp_path / "run.csv"
    p.write_text("step,reward,note\n1,0.1,start\n2,oops,mid\n3,0.3,end\n")
    run = one(p)
    np.testing.assert_allclose(col(run, "reward"), [0.1, np.nan, 0.3])
    assert "note" not in run.metrics
    assert any("non-numeric" in w for w in run.warnings)
    assert any("text column" in w for w in run.warnings)


def test_reward_scale_beyond_unit_interval(tmp_path):
    p = tmp_path / "sum.csv"
    vals = [-1.15, -0.3, 0.7, 2.09, -1.0, 1.0]
    p.write_text("step,reward\n" + "".join(f"{i + 1},{v}\n" for i, v in enumerate(vals)))
    np.testing.assert_allclose(col(one(p), "reward"), vals)


@pytest.mark.parametrize("every,start", [(1, 1), (5, 5), (10, 10)])
def test_step_grids(tmp_path, every, start):
    p = tmp_path / "grid.csv"
    steps = list(range(start, start + every * 30, every))
    p.write_text("step,reward\n" + "".join(f"{s},{s / 1000}\n" for s in steps))
    run = one(p)
    info = inspect_run(run)
    assert info["first_step"] == start and info["n_steps"] == 30
    assert info["median_interval"] == every and info["gaps"] == []


def test_step_override_passes_through(tmp_path):
    p = tmp_path / "run.csv"
    p.write_text("step,my_iter,reward\n1,100,0.1\n2,200,0.2\n")
    run = one(p, step="my_iter")
    assert run.step_column == "my_iter"
    np.testing.assert_array_equal(run.steps, [100, 200])
    with pytest.raises(MetricNotFound) as exc:
        read_path(str(p), step="nope")
    assert "reward" in exc.value.columns


# ---------------------------------------------------------------- W&B


def _wandb_export(path, x="train/global_step"):
    runs = {"[paper]GRPO online": 4, "my run (v2) [seed 1]": 6, "GSPO[x]": 5}
    header = [x]
    for name in runs:
        for key in ("_step", "train/reward"):
            header += [f"{name} - {key}", f"{name} - {key}__MIN", f"{name} - {key}__MAX"]
    lines = [",".join(f'"{h}"' for h in header)]
    for i in range(6):
        row = [f'"{i + 1}"']
        for j, (name, n) in enumerate(runs.items()):
            for key in ("_step", "train/reward"):
                v = (100 + 29 * i if key == "_step" else round(0.1 * (i + 1) + j, 3)) if i < n else ""
                row += [f'"{v}"'] * 3
        lines.append(",".join(row))
    path.write_text("\n".join(lines) + "\n")
    return runs


def test_wandb_export_three_runs_unequal_lengths(tmp_path):
    p = tmp_path / "wandb_export.csv"
    spec = _wandb_export(p)
    runs = read_path(str(p))
    assert [r.name for r in runs] == [f"{p}::{n}" for n in spec]
    for r, (name, n) in zip(runs, spec.items()):
        assert r.format == "wandb-export" and r.step_column == "train/global_step"
        assert len(r.steps) == n and np.isfinite(col(r, "train/reward")).all()
        assert not any(k.endswith(("__MIN", "__MAX")) for k in r.metrics)
        assert set(r.metrics) == {"_step", "train/reward"}
    np.testing.assert_allclose(col(runs[1], "train/reward"), [1.1, 1.2, 1.3, 1.4, 1.5, 1.6])


def test_wandb_export_header_split_on_first_separator():
    from grpofit.readers.delimited import split_export_header

    assert split_export_header("[paper]GRPO online - eval/acc - gsm8k") == ("[paper]GRPO online", "eval/acc - gsm8k")
    assert split_export_header("run - train/reward__MIN") is None
    assert split_export_header("train/global_step") is None


@pytest.mark.parametrize("x", ["Step", "epoch"])
def test_wandb_export_x_axis_is_first_column(tmp_path, x):
    p = tmp_path / "export.csv"
    _wandb_export(p, x=x)
    runs = read_path(str(p))
    assert all(r.step_column == x for r in runs)
    np.testing.assert_array_equal(runs[0].steps, [1, 2, 3, 4])


def test_wandb_history_prefers_global_step_over_offset_step(tmp_path):
    p = tmp_path / "history.csv"
    rows = ["_step,_runtime,_timestamp,train/global_step,train/reward"]
    rows += [f"{179 + 29 * i},{10.0 * i},{1.7e9 + i},{i + 1},{0.1 * i}" for i in range(5)]
    p.write_text("\n".join(rows) + "\n")
    run = one(p)
    assert run.format == "wandb-history" and run.step_column == "train/global_step"
    np.testing.assert_array_equal(run.steps, [1, 2, 3, 4, 5])
    assert "_step" in run.metrics  # still there as a column


def test_wandb_history_jsonl(tmp_path):
    p = tmp_path / "history.jsonl"
    p.write_text("".join(json.dumps({"_step": i, "_runtime": i * 2.0, "reward": i / 10}) + "\n" for i in range(4)))
    run = one(p)
    assert run.format == "wandb-history" and run.step_column == "_step"


# ---------------------------------------------------------------- JSONL


def test_jsonl_flat_null_is_nan(tmp_path):
    p = tmp_path / "run.jsonl"
    p.write_text('{"step": 1, "reward": 0.1}\n{"step": 2, "reward": null}\n{"step": 3, "reward": NaN, "kl": 0.3}\n')
    run = one(p)
    assert run.format == "jsonl"
    np.testing.assert_allclose(col(run, "reward"), [0.1, np.nan, np.nan])
    np.testing.assert_allclose(col(run, "kl"), [np.nan, np.nan, 0.3])


def test_jsonl_torn_last_line_is_skipped_with_warning(tmp_path):
    p = tmp_path / "live.jsonl"
    p.write_text('{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n{"step": 3, "rew')
    run = one(p)
    np.testing.assert_array_equal(run.steps, [1, 2])
    assert run.stats["torn_lines"] == 1
    assert any("incomplete" in w for w in run.warnings)


def test_jsonl_broken_middle_line_names_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"step": 1, "reward": 0.1}\n{"step": 2, "reward": }\n{"step": 3, "reward": 0.3}\n')
    with pytest.raises(ReadError) as exc:
        read_path(str(p))
    assert "line 2" in exc.value.one_line() and str(p) in exc.value.one_line()


@pytest.mark.parametrize("compact", [False, True])
def test_verl_jsonl_rows_and_slash_keys(tmp_path, compact):
    sep = (",", ":") if compact else (", ", ": ")  # orjson writes compact JSON
    lines = []
    for s in range(1, 7):
        data = {"critic/score/mean": s / 10, "actor/lr(1e-4)": 1e-6, "actor/entropy": None if compact else 1.0}
        if s % 3 == 0:
            data["val-core/openai/gsm8k/reward/mean@1"] = s / 20
        lines.append(json.dumps({"step": s, "data": data}, separators=sep))
    p = tmp_path / "verl.jsonl"
    p.write_text("\n".join(lines) + "\n")
    run = one(p)
    assert run.format == "verl-jsonl" and run.step_column == "step"
    val = col(run, "val-core/openai/gsm8k/reward/mean@1")
    np.testing.assert_allclose(val, [np.nan, np.nan, 0.15, np.nan, np.nan, 0.3])
    assert "actor/lr(1e-4)" in run.metrics
    roles = inspect_run(run)["roles"]
    assert roles["reward"]["column"] == "critic/score/mean"
    assert roles["eval_reward"]["column"] == "val-core/openai/gsm8k/reward/mean@1"


def test_resume_at_101_with_duplicated_steps_keeps_last(tmp_path):
    p = tmp_path / "resumed.jsonl"
    first = [{"step": s, "reward": 0.1} for s in range(101, 121)]
    second = [{"step": s, "reward": 0.9} for s in range(111, 131)]
    p.write_text("".join(json.dumps(r) + "\n" for r in first + second))
    run = one(p)
    assert run.steps[0] == 101 and run.steps[-1] == 130 and len(run.steps) == 30
    np.testing.assert_allclose(col(run, "reward")[:10], 0.1)
    np.testing.assert_allclose(col(run, "reward")[10:], 0.9)
    info = inspect_run(run)
    assert info["duplicates"] == 10 and info["first_step"] == 101


def test_jsonl_fast_path_matches_slow_path(tmp_path, monkeypatch):
    """Blocks that break the fast path's assumptions are re-read line by line: same result."""
    import grpofit.readers.jsonl as jl

    rng = np.random.default_rng(7)
    rows = [{"step": i, "reward": float(rng.normal()), "kl": float(rng.random())} for i in range(300)]
    rows[50] = {"kl": 0.5, "step": 50, "reward": 1.0}  # other key order
    rows[120]["note"] = "a, b: {c}"  # a string with the separators in it
    rows[200]["flag"] = True
    rows[250] = {"step": 250, "reward": None, "kl": float("inf")}
    text = "".join(json.dumps(r) + "\n" for r in rows)
    p = tmp_path / "mixed.jsonl"
    p.write_text(text)
    monkeypatch.setattr(jl, "BLOCK", 1024)  # many small blocks
    fast = one(p)
    monkeypatch.setattr(jl._Plan, "fast", lambda self, body: None)  # slow path only
    slow = one(p)
    assert fast.columns == slow.columns
    np.testing.assert_array_equal(fast.steps, slow.steps)
    for k in fast.metrics:
        np.testing.assert_array_equal(fast.metrics[k], slow.metrics[k])
    assert fast.metrics["kl"][50] == 0.5 and fast.metrics["flag"][200] == 1.0
    assert np.isnan(fast.metrics["kl"][250])  # inf dropped by make_run, with a warning
    assert any("infinite" in w for w in fast.warnings)


# ---------------------------------------------------------------- HF trainer_state / log_history


def _log_history(n=10, num_iterations=2):
    rows = []
    for s in range(1, n + 1):
        row = {"step": s, "epoch": s / n, "loss": 0.01 * s, "grad_norm": 0.5}
        if s % num_iterations == 1 or num_iterations == 1:  # the reuse step logs no reward
            row.update({"reward": 0.1 * s, "reward_std": 0.2, "frac_reward_zero_std": 0.25})
        rows.append(row)
        if s % 5 == 0:
            rows.append({"step": s, "epoch": s / n, "eval_reward": 0.05 * s, "eval_loss": 1.0})
    rows.append({"step": n, "epoch": 1.0, "train_runtime": 123.4, "train_loss": 0.05, "total_flos": 0.0})
    return rows


def test_trainer_state_sparse_rows_merged_missing_not_zero(tmp_path):
    p = tmp_path / "trainer_state.json"
    p.write_text(
        json.dumps({"global_step": 10, "logging_steps": 1, "log_history": _log_history()}, indent=2, sort_keys=True)
    )
    run = one(p)
    assert run.format == "trainer_state" and run.step_column == "step"
    np.testing.assert_array_equal(run.steps, np.arange(1, 11))
    reward = col(run, "reward")
    assert np.isnan(reward[1::2]).all() and np.isfinite(reward[0::2]).all()  # missing, not 0
    np.testing.assert_allclose(col(run, "eval_reward")[[4, 9]], [0.25, 0.5])
    assert "train_runtime" not in run.metrics and "train_loss" not in run.metrics
    assert run.stats["summary_rows"] == 1 and run.stats["merged_rows"] == 2
    assert run.config["trainer_state.logging_steps"] == 1
    assert not run.warnings  # merging eval rows is not a "duplicate after resume"


def test_bare_log_history_array(tmp_path):
    p = tmp_path / "history.json"
    p.write_text(json.dumps(_log_history(num_iterations=1)))
    run = one(p)
    assert run.format == "log_history"
    assert np.isfinite(col(run, "reward")).all()


def test_checkpoint_folder_and_output_dir(tmp_path):
    out = tmp_path / "out"
    for n in (10, 200, 30):
        d = out / f"checkpoint-{n}"
        d.mkdir(parents=True)
        (d / "trainer_state.json").write_text(json.dumps({"log_history": _log_history(n)}))
        (d / "training_args.bin").write_bytes(pickle.dumps({"x": 1}))
    run = one(out)
    assert run.name == str(out / "checkpoint-200") and run.steps[-1] == 200
    run = one(out / "checkpoint-30")
    assert run.steps[-1] == 30 and run.format == "trainer_state"


# ---------------------------------------------------------------- console logs


VERL_CONSOLE = (
    "\x1b[36m(TaskRunner pid=4242)\x1b[0m {'actor_rollout_ref': {'actor': {'optim': {'lr': 1e-06},\n"
    "\x1b[36m(TaskRunner pid=4242)\x1b[0m                                    'ppo_epochs': 1},\n"
    "\x1b[36m(TaskRunner pid=4242)\x1b[0m                        'rollout': {'n': 5, 'name': 'vllm'}},\n"
    "\x1b[36m(TaskRunner pid=4242)\x1b[0m  'trainer': {'total_epochs': 15}}\n"
    "INFO 07-25 10:00:00 some vllm banner\n"
)


def _verl_line(s, val=False):
    parts = [
        f"step:{s}",
        f"critic/score/mean:np.float64({s / 100})",
        "actor/lr(1e-4):1e-06",
        f"actor/entropy:{1 / s:.4f}",
        "actor/grad_norm:np.float64(0.25)",
    ]
    if val:
        parts.append(f"val-core/openai/gsm8k/reward/mean@1:np.float64({s / 200})")
    return "\x1b[36m(TaskRunner pid=4242)\x1b[0m " + " - ".join(parts)


def test_verl_console_quirks(tmp_path):
    lines = [_verl_line(s, val=s % 5 == 0) for s in range(101, 121)]
    lines += [_verl_line(s) for s in range(111, 116)]  # resumed again: duplicated steps
    p = tmp_path / "train.log"
    p.write_text(VERL_CONSOLE + "\n".join(lines) + "\n")
    run = one(p)
    assert run.format == "verl-console"
    assert run.steps[0] == 101 and len(run.steps) == 20 and run.stats["duplicates"] == 5
    np.testing.assert_allclose(col(run, "critic/score/mean")[:3], [1.01, 1.02, 1.03])
    assert "actor/lr(1e-4)" in run.metrics
    val = col(run, "val-core/openai/gsm8k/reward/mean@1")
    assert np.isfinite(val).sum() == 4 and val[4] == pytest.approx(105 / 200)
    assert detect_group_size(run.config) == (5, "actor_rollout_ref.rollout.n")
    assert run.config_source.endswith("(config dump)")


def test_trl_console_dicts_with_tqdm_and_quoted_values(tmp_path):
    bar = " 10%|#         | {i}/100 [00:0{i}<01:30,  1.00s/it]"
    chunks = []
    for i in range(1, 6):
        chunks.append(
            bar.format(i=i)
            + "\r"
            + "{'loss': '0.0', 'grad_norm': '0.5', 'reward': '"
            + str(0.125 * i)
            + "', 'reward_std': '0.3', 'epoch': '0."
            + str(i)
            + "'}\r"
        )
    chunks.append("{'eval_loss': '1.0', 'eval_reward': '0.7', 'epoch': '0.5'}\n")
    chunks.append("{'train_runtime': '100.0', 'train_loss': '0.01', 'epoch': '1.0'}\n")
    p = tmp_path / "stdout.txt"
    p.write_text("".join(chunks))
    run = one(p)
    assert run.format == "trl-console"
    np.testing.assert_allclose(col(run, "reward"), [0.125, 0.25, 0.375, 0.5, 0.625])
    assert col(run, "eval_reward")[-1] == 0.7 and np.isnan(col(run, "eval_reward")[0])
    assert "train_runtime" not in run.metrics
    assert any("no step" in w for w in run.warnings)


def test_trl_console_never_evaluates_code(tmp_path):
    marker = tmp_path / "pwned"
    p = tmp_path / "evil.log"
    p.write_text(
        "{'loss': '0.1', 'reward': '0.5'}\n"
        f"{{'loss': __import__('pathlib').Path({str(marker)!r}).touch(), 'reward': '0.2'}}\n"
        "{'loss': '0.2', 'reward': '0.6'}\n"
    )
    run = one(p)
    assert not marker.exists()
    np.testing.assert_allclose(col(run, "reward"), [0.5, 0.6])


# ---------------------------------------------------------------- stdin, sniffing, dispatch


def test_read_bytes_sniffs_content_not_name():
    data = b'{"step": 1, "reward": 0.5}\n{"step": 2, "reward": 0.6}\n'
    run = read_bytes(data, "-")[0]
    assert run.format == "jsonl" and run.name == "-"
    run = read_bytes(b"step,reward\n1,0.5\n", "log.jsonl")[0]  # the suffix lies; content wins
    assert run.format == "csv"


def test_stdin_dash(monkeypatch):
    import io

    fake = types.SimpleNamespace(buffer=io.BytesIO(b"step\treward\n1\t0.5\n2\t0.7\n"))
    monkeypatch.setattr(sys, "stdin", fake)
    run = read_path("-")[0]
    assert run.format == "tsv" and run.name == "-"


@pytest.mark.parametrize(
    "head,fmt",
    [
        (b"step,reward\n1,2\n", "csv"),
        (b"a\tb\n1\t2\n", "tsv"),
        (b"step,key,value\n1,reward,0.5\n", "csv-long"),
        (b'{"step": 1, "data": {"a": 1}}\n', "verl-jsonl"),
        (b'{\n  "log_history": []\n}', "trainer_state"),
        (b'[{"step": 1}]', "log_history"),
        (b'"Step","r - train/reward"\n"1","0.5"\n', "wandb-export"),
        (b"(TaskRunner pid=1) step:1 - a:0.5\n", "verl-console"),
        (b"{'loss': '0.1'}\n", "trl-console"),
        (b":W&B\xbe\xe1\x00\x01" + b"\x00" * 20, "wandb-binary"),
    ],
)
def test_sniff(head, fmt):
    assert sniff(head, "x") == fmt


def test_binary_dispatch_uses_binary_helpers(tmp_path, monkeypatch):
    """tfevents / .wandb files and run folders go to the "binary" helper's readers."""
    tb = types.ModuleType("grpofit.readers.tensorboard")
    tb.read_tfevents = lambda path: ({"step": [1, 2, 3], "critic/score/mean": [0.1, 0.2, 0.3]}, ["tb ok"])
    wb = types.ModuleType("grpofit.readers.wandb_binary")
    wb.read_wandb_file = lambda path: ({"_step": [0, 1], "train/global_step": [5, 10], "train/reward": [0.1, 0.2]}, [])

    def read_run_dir(path):
        from grpofit.core.runs import make_run

        return [make_run(path, path, "wandb-run", {"_step": [0, 1], "train/reward": [0.1, 0.2]})]

    wb.read_wandb_run_dir = read_run_dir
    monkeypatch.setitem(sys.modules, "grpofit.readers.tensorboard", tb)
    monkeypatch.setitem(sys.modules, "grpofit.readers.wandb_binary", wb)
    import grpofit.readers as readers

    monkeypatch.setattr(readers, "tensorboard", tb, raising=False)
    monkeypatch.setattr(readers, "wandb_binary", wb, raising=False)

    ev = tmp_path / "events.out.tfevents.1.host"
    ev.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00abcd\x09" + b"\x00" * 30)
    run = one(ev)
    assert run.format == "tensorboard" and run.warnings == ["tb ok"]
    tbdir = tmp_path / "tb"
    tbdir.mkdir()
    (tbdir / "events.out.tfevents.2.host").write_bytes(b"x")
    assert one(tbdir).format == "tensorboard"
    # content sniffing without the name
    assert read_bytes(ev.read_bytes(), "-")[0].format == "tensorboard"

    wf = tmp_path / "run-abc.wandb"
    wf.write_bytes(b":W&B\xbe\xe1\x00\x01" + b"\x00" * 40)
    run = one(wf)
    assert run.format == "wandb-binary" and run.step_column == "train/global_step"
    rd = tmp_path / "wandb" / "run-20250101_000000-abc"
    rd.mkdir(parents=True)
    (rd / "run-abc.wandb").write_bytes(b":W&B")
    assert one(rd).format == "wandb-run"


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "name,content,exc,words",
    [
        ("empty.csv", b"", ReadError, "empty"),
        ("blank.jsonl", b"\n\n  \n", ReadError, "empty"),
        ("header.csv", b"step,reward\n", ReadError, "no data rows"),
        ("garbage.csv", bytes(range(256)) * 8, UnknownFormat, "binary"),
        ("broken.json", b'{"log_history": [{"step": 1, "reward": 0.1}', ReadError, "not valid JSON"),
        (
            "prose.csv",
            b"Dear reader, this is a letter\nIt has commas, but no numbers\n",
            UnknownFormat,
            "does not look like",
        ),
        ("text.csv", b"run,model\nalpha,qwen\nbeta,llama\n", UnknownFormat, "no numeric"),
        ("objects.json", b'{\n "model": "qwen",\n "layers": 28\n}\n', UnknownFormat, "without log_history"),
        ("args.bin", pickle.dumps({"lr": 1e-6}), UnknownFormat, "pickle"),
        ("ragged.csv", b"step,reward\n1,0.1\n2,0.2,9,9\n", ReadError, "well-formed"),
        ("scalars.jsonl", b'{"step": 1, "reward": 0.1}\n[1, 2]\n{"step": 3}\n', ReadError, "not a JSON object"),
        ("nosteps.log", b"INFO starting\nINFO nothing here, 3 things\n", UnknownFormat, ""),
    ],
)
def test_bad_input_is_one_clear_error(tmp_path, name, content, exc, words):
    p = tmp_path / name
    p.write_bytes(content)
    digest = hashlib.sha256(content).hexdigest()
    with pytest.raises(exc) as info:
        read_path(str(p))
    line = info.value.one_line()
    assert str(p) in line and words in line and "\n" not in line
    assert info.value.fix  # every error names the fix
    assert hashlib.sha256(p.read_bytes()).hexdigest() == digest  # input never modified


def test_missing_path_and_empty_dir(tmp_path):
    with pytest.raises(ReadError, match="no such file"):
        read_path(str(tmp_path / "nope.csv"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("# hi")
    with pytest.raises(ReadError) as info:
        read_path(str(tmp_path / "empty"))
    assert "no training logs" in info.value.one_line() and info.value.fix


def test_only_text_values_is_an_error(tmp_path):
    p = tmp_path / "run.jsonl"
    p.write_text('{"step": 1, "name": "a"}\n{"step": 2, "name": "b"}\n')
    with pytest.raises(ReadError, match="no numeric"):
        read_path(str(p))


def test_require_column(tmp_path):
    p = tmp_path / "run.csv"
    p.write_text("step,loss,kl\n1,0.5,0.1\n2,0.4,0.2\n")
    run = one(p)
    assert require_column(run, "kl") == "kl"  # a role
    assert require_column(run, "loss") == "loss"  # a column name
    with pytest.raises(MetricNotFound) as info:
        require_column(run, "reward")
    assert info.value.columns == ["loss", "kl"] and "--metric" in info.value.one_line()
    with pytest.raises(MetricNotFound, match="no column 'acc'"):
        require_column(run, "acc")
    with pytest.raises(MetricNotFound, match="no column 'acc'"):
        require_column(run, "reward", overrides={"reward": "acc"})


# ---------------------------------------------------------------- inspect


def test_inspect_reports_gaps_roles_and_is_json_safe(tmp_path):
    steps = list(range(10, 200, 10)) + list(range(400, 500, 10))
    p = tmp_path / "gappy.csv"
    p.write_text("step,reward,grad_norm,frac_reward_zero_std\n" + "".join(f"{s},{s / 500},,0.5\n" for s in steps))
    info = inspect_run(one(p))
    json.dumps(info, allow_nan=False)
    assert info["format"] == "csv" and info["step_column"] == "step"
    assert info["median_interval"] == 10 and info["gaps"] == [[190, 400]] and info["n_gaps"] == 1
    assert info["roles"]["reward"] == {"column": "reward", "points": len(steps)}
    assert info["roles"]["zero_std_frac"]["column"] == "frac_reward_zero_std"
    assert info["roles"]["grad_norm"] is None  # an all-empty column fills no role
    assert info["numeric_columns"] == ["reward", "frac_reward_zero_std"]


# ---------------------------------------------------------------- config


def test_config_wandb_yaml_group_size(tmp_path):
    d = tmp_path / "files"
    d.mkdir()
    (d / "config.yaml").write_text(
        "wandb_version: 1\n_wandb:\n  value: {cli_version: 0.19.1}\n"
        "num_generations:\n  desc: null\n  value: 8\nlearning_rate:\n  value: 1.0e-06\n"
        "adam_beta1:\n  value: 0.9\nbeta:\n  value: 0.04\n"
    )
    (d / "wandb-history.jsonl").write_text(
        '{"_step": 0, "_runtime": 1, "train/reward": 0.1}\n{"_step": 1, "_runtime": 2, "train/reward": 0.2}\n'
    )
    run = one(d / "wandb-history.jsonl")
    assert run.config_source == str(d / "config.yaml")
    assert detect_group_size(run.config) == (8, "num_generations")
    hp = hyperparameters(run.config)
    assert hp["learning_rate"] == {"value": 1e-6, "key": "learning_rate"}
    assert hp["momentum"]["value"] == 0.9 and hp["kl_beta"]["value"] == 0.04
    assert "_wandb.cli_version" not in run.config


def test_config_verl_and_openrlhf():
    verl = flatten(
        {
            "actor_rollout_ref": {
                "rollout": {"n": 16},
                "actor": {"optim": {"lr": 1e-6, "betas": [0.9, 0.999]}, "ppo_epochs": 1},
            }
        }
    )
    assert detect_group_size(verl) == (16, "actor_rollout_ref.rollout.n")
    assert hyperparameters(verl)["momentum"] == {"value": 0.9, "key": "actor_rollout_ref.actor.optim.betas"}
    assert detect_group_size({"n_samples_per_prompt": 4, "actor_learning_rate": 5e-7}) == (4, "n_samples_per_prompt")
    assert detect_group_size({"rollout.n_samples_per_prompt": 4}) == (4, "rollout.n_samples_per_prompt")
    assert detect_group_size({"lr": 1e-6}) is None


def test_config_yaml_is_safe(tmp_path):
    (tmp_path / "config.yaml").write_text("lr: !!python/object/apply:os.system ['touch pwned']\n")
    (tmp_path / "run.csv").write_text("step,reward\n1,0.1\n2,0.2\n")
    run = one(tmp_path / "run.csv")
    assert run.config == {} and not (tmp_path / "pwned").exists()


# ---------------------------------------------------------------- round trips


def _table(n=40, seed=3):
    rng = np.random.default_rng(seed)
    t = {
        "step": np.arange(1, n + 1, dtype=float) * 5,
        "reward": np.round(rng.normal(size=n), 6),
        "kl": np.round(rng.random(n), 6),
        "val-core/openai/gsm8k/reward/mean@1": np.where(np.arange(n) % 4 == 0, np.round(rng.random(n), 6), np.nan),
    }
    return t


def _write(fmt, table, path):
    keys = list(table)
    n = len(table["step"])
    cell = lambda v: "" if np.isnan(v) else repr(float(v))  # noqa: E731
    if fmt in ("csv", "tsv"):
        d = "," if fmt == "csv" else "\t"
        path.write_text(d.join(keys) + "\n" + "".join(d.join(cell(table[k][i]) for k in keys) + "\n" for i in range(n)))
    elif fmt == "jsonl":
        path.write_text(
            "".join(
                json.dumps({k: (None if np.isnan(table[k][i]) else float(table[k][i])) for k in keys}) + "\n"
                for i in range(n)
            )
        )
    elif fmt == "csv-long":
        rows = ["step,key,value"] + [
            f"{float(table['step'][i])!r},{k},{float(table[k][i])!r}"
            for i in range(n)
            for k in keys[1:]
            if not np.isnan(table[k][i])
        ]
        path.write_text("\n".join(rows) + "\n")
    elif fmt == "trainer_state":
        hist = [{k: float(table[k][i]) for k in keys if not np.isnan(table[k][i])} for i in range(n)]
        path.write_text(json.dumps({"log_history": hist}, indent=2))


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "csv-long", "trainer_state"])
def test_round_trip(tmp_path, fmt):
    table = _table()
    p = tmp_path / f"rt.{ {'csv-long': 'csv', 'trainer_state': 'json'}.get(fmt, fmt) }"
    _write(fmt, table, p)
    run = one(p)
    assert run.format == fmt
    np.testing.assert_array_equal(run.steps, table["step"])
    assert set(run.metrics) == set(table) - {"step"}
    for k in run.metrics:
        np.testing.assert_array_equal(run.metrics[k], table[k])


@pytest.mark.slow
def test_round_trip_property():
    """Any finite table survives CSV and JSONL unchanged (hypothesis)."""
    hypothesis = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")
    floats = st.floats(allow_nan=False, allow_infinity=False, width=64)

    @hypothesis.settings(max_examples=40, deadline=None, derandomize=True)
    @hypothesis.given(st.lists(st.tuples(floats, floats), min_size=1, max_size=30))
    def check(values):
        steps = [float(i) for i in range(len(values))]
        a = np.array([v[0] for v in values])
        b = np.array([v[1] for v in values])
        csv = "step,a,b\n" + "".join(f"{s!r},{float(x)!r},{float(y)!r}\n" for s, x, y in zip(steps, a, b))
        jsonl = "".join(json.dumps({"step": s, "a": float(x), "b": float(y)}) + "\n" for s, x, y in zip(steps, a, b))
        for data in (csv, jsonl):
            run = read_bytes(data.encode(), "-")[0]
            np.testing.assert_array_equal(run.metrics["a"], a)
            np.testing.assert_array_equal(run.metrics["b"], b)

    check()


# ---------------------------------------------------------------- real third-party logs


def _real(name):
    return real_log(name)


@pytest.mark.real_logs
def test_real_wandb_train_reward_export():
    p = _real("heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv")
    runs = read_path(str(p))
    assert [r.name.split("::")[1] for r in runs] == ["[paper]GRPO_online", "[paper]GEPO_online", "[paper]GSPO_online"]
    for r in runs:
        assert r.format == "wandb-export" and r.step_column == "train/global_step"
        assert 1250 <= len(r.steps) <= 1300 and r.steps[0] == 1
        assert inspect_run(r)["roles"]["reward"]["column"] == "train/reward"
        reward = r.metrics["train/reward"]
        assert np.isfinite(reward).all() and 0 <= reward.min() and reward.max() <= 1
    grpo = runs[0].metrics["train/reward"]
    assert np.nanmean(grpo[950:1100]) < 0.7 * np.nanmean(grpo[500:850])  # the collapse is there


@pytest.mark.real_logs
def test_real_wandb_grad_norm_export():
    p = _real("heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_GradNorm.csv")
    grpo = read_path(str(p))[0]
    steps, g = grpo.series("train/grad_norm")
    assert steps[np.argmax(g > 0.5)] == 749


@pytest.mark.real_logs
def test_real_verl_ppo_csv():
    p = _real("verlpr3389_ppo_qwen25_05b_dp2_run1.parsed.csv")
    run = one(p)
    assert run.format == "csv" and run.step_column == "step" and len(run.steps) == 116
    assert inspect_run(run)["roles"]["reward"]["column"] == "critic/rewards/mean"
    assert np.isnan(run.metrics["timing_s/testing"]).sum() > 100  # empty cells stay missing


# ---------------------------------------------------------------- binary containers (integration)


@pytest.mark.real_logs
def test_real_tfevents_dispatch_by_name_and_by_content():
    pytest.importorskip("grpofit.readers.tensorboard")
    p = _real("verl_grpo_qwen2_7b_fsdp_base.tfevents")
    run = one(p)
    assert run.format == "tensorboard"
    assert inspect_run(run)["roles"]["reward"]["column"] == "critic/score/mean"
    piped = read_bytes(p.read_bytes(), "-")[0]  # stdin: sniffed from the content
    np.testing.assert_array_equal(piped.steps, run.steps)


def test_wandb_run_folder_is_discovered_and_read(tmp_path):
    from grpofit.readers import discover, read_source

    folder = tmp_path / "wandb" / "run-20250101_000000-abc"
    folder.mkdir(parents=True)
    rows = [{"_step": i, "train/global_step": 10 * (i + 1), "train/reward": 0.1 * i} for i in range(5)]
    writers.write_wandb_file(str(folder / "run-abc.wandb"), rows)
    (folder / "files").mkdir()
    (folder / "files" / "config.yaml").write_text("num_generations:\n  value: 4\n")
    sources = discover([str(tmp_path)])
    assert [(s.path, s.kind) for s in sources] == [(str(folder), "wandb-run")]
    run = read_source(sources[0])[0]
    assert run.step_column == "train/global_step" and run.steps[-1] == 50
    assert detect_group_size(run.config) == (4, "num_generations")


def test_inspect_path_lists_every_run(tmp_path):
    from grpofit.readers.inspect import inspect_path

    p = tmp_path / "export.csv"
    _wandb_export(p)
    info = inspect_path(str(p))
    json.dumps(info, allow_nan=False)
    assert info["format"] == "wandb-export" and info["n_runs"] == 3
    assert [r["n_steps"] for r in info["runs"]] == [4, 6, 5]
