"""No input file or folder is ever modified: every file's bytes, size, mode and mtime and every
folder's listing are the same after ``fit``, ``diagnose`` and ``inspect`` (all formats, torn and
broken files, run folders, the real third-party logs)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from grpofit.testing import writers
from tests.conftest import run_cli as _run_cli
from tests.reallogs import REAL_LOGS, real_log_names

REAL = REAL_LOGS


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (symlinks not followed): files by content hash, size, mode and
    mtime; folders by their sorted listing and mode; links by target."""
    out: dict[str, tuple] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        st = os.lstat(folder)
        out[folder] = ("dir", tuple(sorted(os.listdir(folder))), st.st_mode)
        for name in files + dirs:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if os.path.islink(path):
                out[path] = ("link", os.readlink(path))
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[path] = ("file", digest, st.st_size, st.st_mode, st.st_mtime_ns)
    return out


def curve_rows(n: int, start: int = 1) -> list[tuple[int, float]]:
    return [(s, float(0.7 - 0.6 * np.exp(-s / 30))) for s in range(start, start + n)]


@pytest.fixture
def tree(tmp_path) -> Path:
    """A log tree with every container, live and broken files included."""
    root = tmp_path / "logs"
    (root / "csv").mkdir(parents=True)
    rows = curve_rows(80)
    (root / "csv" / "run.csv").write_text("step,reward,kl\n" + "".join(f"{s},{r},{s / 1e4}\n" for s, r in rows))
    (root / "csv" / "live.csv").write_text("step,reward\n" + "".join(f"{s},{r}\n" for s, r in rows) + "81,0.6")
    (root / "jsonl").mkdir()
    (root / "jsonl" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "data": {"critic/score/mean": r}}) + "\n" for s, r in rows)
    )
    (root / "jsonl" / "live.jsonl").write_text(
        "".join(json.dumps({"step": s, "reward": r}) + "\n" for s, r in rows) + '{"step": 81, "rew'
    )
    (root / "jsonl" / "broken.jsonl").write_text('{"step": 1}\n{"step": 2, \n{"step": 3}\n')
    out = root / "outputs"
    for ck in (40, 80):
        d = out / f"checkpoint-{ck}"
        d.mkdir(parents=True)
        (d / "trainer_state.json").write_text(
            json.dumps({"log_history": [{"step": s, "reward": r} for s, r in rows[:ck]]})
        )
        (d / "training_args.bin").write_bytes(pickle.dumps({"learning_rate": 1e-6}))
    (out / "config.json").write_text('{"hidden_size": 8}')
    (root / "tb" / "train").mkdir(parents=True)
    writers.write_tfevents(
        str(root / "tb" / "train" / "events.out.tfevents.1.host"), [(s, {"reward": r}) for s, r in rows]
    )
    run_dir = root / "wandb" / "run-20250101_000000-abc"
    (run_dir / "files").mkdir(parents=True)
    writers.write_wandb_file(
        str(run_dir / "run-abc.wandb"), [{"train/global_step": s, "reward": r} for s, r in rows], config={"lr": 1e-6}
    )
    (run_dir / "files" / "config.yaml").write_text("num_generations:\n  value: 8\n")
    data = (run_dir / "run-abc.wandb").read_bytes()
    torn = root / "wandb" / "run-20250102_000000-def"
    torn.mkdir()
    (torn / "run-def.wandb").write_bytes(data[: len(data) - 11])
    (root / "console").mkdir()
    (root / "console" / "train.log").write_text(
        "".join(f"(TaskRunner pid=1) step:{s} - critic/score/mean:np.float64({r})\n" for s, r in rows)
    )
    (root / "empty.csv").write_text("")
    os.symlink(root, root / "csv" / "loop")
    (root / "README.md").write_text("# logs\n")
    return root


def run_cli(capsys, *args) -> int:
    return _run_cli(capsys, *args)[0]


def _every_input(root: Path) -> list[Path]:
    return [p for p in sorted(root.rglob("*")) if p.is_file() and "loop" not in p.parts] + [
        p for p in sorted(root.rglob("*")) if p.is_dir() and "loop" not in p.parts
    ]


@pytest.mark.slow
def test_commands_never_modify_inputs(capsys, tree, tmp_path):
    before = snapshot(tree)
    assert len(before) > 25
    plots = tmp_path / "plots"
    codes = [
        run_cli(capsys, "diagnose", tree, "--format", "json", "--plot-dir", plots, "--junit", tmp_path / "r.xml"),
        run_cli(capsys, "diagnose", tree, "--jobs", "2", "--format", "markdown"),
    ]
    for path in _every_input(tree):
        codes.append(run_cli(capsys, "inspect", path, "--format", "json"))
        if path.is_file():
            codes.append(run_cli(capsys, "fit", path, "--format", "json"))
    assert set(codes) <= {0, 1, 2} and 0 in codes and 2 in codes  # both good and bad inputs seen
    assert snapshot(tree) == before
    assert not list(tree.rglob("*.png")) and not list(tree.rglob("__pycache__"))


def test_stdin_input_leaves_no_temporary_file(capsys, tree, monkeypatch, tmp_path):
    """Binary logs from stdin go through a temporary file: it is removed, success or error."""
    import io
    import sys
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    data = (tree / "wandb" / "run-20250101_000000-abc" / "run-abc.wandb").read_bytes()
    for payload in (data, data[:20], (tree / "tb" / "train" / "events.out.tfevents.1.host").read_bytes()):
        monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(payload)})())
        run_cli(capsys, "inspect", "-", "--format", "json")
    assert list(scratch.iterdir()) == []


@pytest.mark.slow
@pytest.mark.real_logs
def test_real_logs_are_not_modified(capsys):
    before = snapshot(REAL)
    files = [REAL / n for n in real_log_names()]
    for path in files:
        for command in ("fit", "inspect"):
            run_cli(capsys, command, path, "--format", "json")
    run_cli(capsys, "diagnose", *files, "--format", "json")
    assert snapshot(REAL) == before
