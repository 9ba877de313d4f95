"""discover(): one RunSource per run container under the given paths."""

from __future__ import annotations

import json
import os
import time

import pytest

from grpofit.core.errors import ReadError
from grpofit.readers import RunSource, discover, read_path, read_source

STATE = json.dumps({"log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]})


def touch(path, text="step,reward\n1,0.1\n2,0.2\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "logs"
    touch(root / "a.csv")
    touch(root / "b.jsonl", '{"step": 1, "reward": 0.1}\n')
    touch(root / "verl_stdout.log", "(TaskRunner pid=1) step:1 - critic/score/mean:0.5\n")
    touch(root / "notes.txt", "Remember to rerun this, maybe tomorrow.\n")
    touch(root / "README.md", "# runs")
    touch(root / "config.yaml", "lr: 1\n")
    touch(root / "model" / "model.safetensors", b"\x00" * 16)
    touch(root / "model" / "tokenizer.json", '{"version": "1.0"}')
    touch(root / "model" / "config.json", '{"hidden_size": 8}')
    touch(root / "model" / "pytorch_model.bin", b"\x80\x04")
    touch(root / "plots" / "reward.png", b"\x89PNG")
    touch(root / "other.json", '{\n  "model": "qwen"\n}\n')
    for n in (10, 200, 30):
        touch(root / "out" / f"checkpoint-{n}" / "trainer_state.json", STATE)
        touch(root / "out" / f"checkpoint-{n}" / "training_args.bin", b"\x80\x04")
    run = root / "wandb" / "run-20250101_120000-abc123"
    touch(run / "run-abc123.wandb", b":W&B\xbe\xe1\x00\x01")
    touch(run / "files" / "config.yaml", "num_generations:\n  value: 8\n")
    touch(run / "files" / "output.log", "step:1 - a:1\n")
    touch(run / "files" / "wandb-summary.json", "{}")
    old = root / "wandb" / "offline-run-20240101_000000-old1"
    touch(old / "files" / "wandb-history.jsonl", '{"_step": 0, "_runtime": 1, "reward": 0.1}\n')
    touch(root / "wandb" / "debug.log", "wandb debug")
    os.symlink(run, root / "wandb" / "latest-run")
    touch(root / "tb" / "exp1" / "events.out.tfevents.1.host", b"\x00" * 20)
    touch(root / "tb" / "exp1" / "events.out.tfevents.2.host", b"\x00" * 20)
    touch(root / "tb" / "exp2" / "events.out.tfevents.3.host", b"\x00" * 20)
    touch(root / "real.tfevents", b"\x00" * 20)
    os.symlink(root, root / "loop")  # a symlink loop
    return root


def test_discover_tree(tree):
    found = discover([str(tree)])
    rel = [(os.path.relpath(s.path, tree), s.kind) for s in found]
    assert rel == [
        ("a.csv", "file"),
        ("b.jsonl", "file"),
        ("out/checkpoint-200", "checkpoint"),
        ("real.tfevents", "file"),
        ("tb/exp1", "tensorboard"),
        ("tb/exp2", "tensorboard"),
        ("verl_stdout.log", "file"),
        ("wandb/offline-run-20240101_000000-old1", "wandb-run"),
        ("wandb/run-20250101_120000-abc123", "wandb-run"),
    ]
    assert found == sorted(found) and all(isinstance(s, RunSource) for s in found)
    assert discover([str(tree)]) == found  # deterministic


def test_explicit_files_always_count_and_dedupe(tree):
    found = discover([str(tree / "notes.txt"), str(tree / "a.csv"), str(tree / "loop" / "a.csv")])
    assert [s.path for s in found] == [str(tree / "notes.txt"), str(tree / "a.csv")]


def test_run_folders_given_directly(tree):
    assert discover([str(tree / "out")]) == [RunSource(str(tree / "out" / "checkpoint-200"), "checkpoint")]
    ck = tree / "out" / "checkpoint-10"
    assert discover([str(ck)]) == [RunSource(str(ck), "checkpoint")]
    tb = tree / "tb" / "exp1"
    assert discover([str(tb)]) == [RunSource(str(tb), "tensorboard")]


def test_output_dir_with_final_trainer_state(tmp_path):
    out = tmp_path / "out"
    touch(out / "trainer_state.json", STATE)
    touch(out / "checkpoint-5" / "trainer_state.json", STATE)
    assert discover([str(out)]) == [RunSource(str(out / "trainer_state.json"), "file")]


def test_discovered_sources_read(tree):
    for src in discover([str(tree)]):
        if src.kind in ("file", "checkpoint") and not src.path.endswith(".tfevents"):
            runs = read_source(src)
            assert runs and all(len(r.steps) >= 1 for r in runs)


def test_errors(tmp_path):
    with pytest.raises(ReadError, match="no such file"):
        discover([str(tmp_path / "missing")])
    empty = tmp_path / "empty"
    touch(empty / "README.md", "# nothing")
    touch(empty / "weights" / "model.safetensors", b"\x00")
    with pytest.raises(ReadError) as info:
        discover([str(empty)])
    assert str(empty) in info.value.one_line() and info.value.fix
    with pytest.raises(ReadError):
        read_path(str(empty))


def test_stdin_source():
    assert discover(["-"]) == [RunSource("-", "stdin")]


def test_symlink_loop_terminates(tmp_path):
    a = tmp_path / "a"
    b = a / "b"
    b.mkdir(parents=True)
    os.symlink(a, b / "back")
    os.symlink(b, a / "fwd")
    touch(b / "run.csv")
    found = discover([str(a)])
    assert [s.path for s in found] == [str(b / "run.csv")]


@pytest.mark.slow
def test_ten_thousand_small_files(tmp_path):
    root = tmp_path / "many"
    for i in range(100):
        d = root / f"d{i:03d}"
        d.mkdir(parents=True)
        for j in range(100):
            (d / f"r{j:03d}.csv").write_text("step,reward\n1,0.1\n")
    t = time.perf_counter()
    found = discover([str(root)])
    elapsed = time.perf_counter() - t
    assert len(found) == 10_000 and found[0].path.endswith("d000/r000.csv")
    assert elapsed < 10.0, elapsed  # ~0.5 s here; generous for loaded CI machines
