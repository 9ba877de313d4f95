"""SwanLab offline runs, read without the swanlab package. The synthetic backups here exercise
the JSON variants (one record per line, LevelDB framing; upper-case model types) and damage; the
folders in tests/data/swanlab/ were written by the genuine package (0.10.3: protobuf records,
0.6.13: JSON records) and are checked against the package's own decoding."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpofit.core.errors import GrpofitError
from grpofit.core.roles import choose_reward
from grpofit.readers import discover, read_bytes, read_path
from tests.conftest import assert_reads_or_fails_cleanly


def _records(n=30):
    out = [
        {
            "model_type": "Header",
            "data": {"backup_type": "DEFAULT", "version": "0.6.4", "create_time": "2025-06-10T08:00:00"},
        },
        {"model_type": "PROJECT", "data": {"name": "grpo", "public": False}},
        {"model_type": "EXPERIMENT", "data": {"name": "qwen-grpo-g8", "tags": []}},
        {"model_type": "COLUMN", "data": {"key": "train/reward", "kid": "0", "cls": "CUSTOM", "column_type": "FLOAT"}},
    ]
    for s in range(1, n + 1):
        for key, value in (("train/reward", 0.9 - 0.6 * np.exp(-s / 10)), ("train/kl", 0.001 * s)):
            metric = {"index": s, "data": float(value) if s != 7 or key != "train/kl" else "NaN", "create_time": "t"}
            out.append({"model_type": "SCALAR", "data": {"metric": metric, "key": key, "step": s, "epoch": s}})
        if s % 10 == 0:
            out.append(
                {"model_type": "LOG", "data": {"create_time": "t", "message": f"step {s}", "epoch": s, "level": "INFO"}}
            )
    return [json.dumps(r) for r in out]


def text_backup(n=30) -> bytes:
    return ("\n".join(_records(n)) + "\n").encode()


def framed_backup(n=30, block=32768) -> bytes:
    """LevelDB log framing with the ':SWL' header (0xE1D6, version 0)."""
    out = bytearray(struct.pack("<4sHB", b":SWL", 0xE1D6, 0))

    def chunk(data: bytes, kind: int):
        crc = zlib.crc32(data, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF
        out.extend(struct.pack("<IHB", crc, len(data), kind) + data)

    for text in _records(n):
        data = text.encode()
        left = block - len(out) % block
        if left < 7:
            out.extend(b"\x00" * left)
            left = block
        if len(data) + 7 <= left:
            chunk(data, 1)
            continue
        room = left - 7
        chunk(data[:room], 2)
        data = data[room:]
        while len(data) > block - 7:
            chunk(data[: block - 7], 3)
            data = data[block - 7 :]
        chunk(data, 4)
    return bytes(out)


@pytest.mark.parametrize("make", [text_backup, framed_backup], ids=["text", "framed"])
def test_backup_reads_the_scalars(tmp_path, make):
    run_dir = tmp_path / "swanlog" / "run-20250610_080000-abc"
    run_dir.mkdir(parents=True)
    (run_dir / "backup.swanlab").write_bytes(make(60))
    (run,) = read_path(str(run_dir))
    assert run.format == "swanlab" and run.step_column == "step"
    assert list(run.steps) == list(range(1, 61))
    assert choose_reward(run.numeric_columns())["column"] == "train/reward"
    assert run.metrics["train/reward"][-1] == pytest.approx(0.9 - 0.6 * np.exp(-6))
    assert np.isnan(run.metrics["train/kl"][6]) and run.metrics["train/kl"][7] == pytest.approx(0.008)
    assert [s.kind for s in discover([str(tmp_path)])] == ["swanlab-run"]
    (direct,) = read_path(str(run_dir / "backup.swanlab"))
    assert direct.steps.size == 60


def test_framed_backup_spanning_blocks():
    data = framed_backup(2000)
    assert len(data) > 3 * 32768
    (run,) = read_bytes(data, "-")
    assert run.steps.size == 2000


@settings(max_examples=60, deadline=None)
@given(which=st.sampled_from(["text", "framed"]), cut=st.floats(0, 1), junk=st.binary(max_size=64))
def test_truncated_and_arbitrary_bytes(which, cut, junk):
    good = text_backup(20) if which == "text" else framed_backup(20)
    assert_reads_or_fails_cleanly((good[: int(len(good) * cut)], good[: int(len(good) * cut)] + junk, b":SWL" + junk))


# ------------------------------------------------------------------ genuine SwanLab folders

from pathlib import Path  # noqa: E402

GENUINE = Path(__file__).resolve().parent / "data" / "swanlab"


def _genuine(version: str) -> tuple[Path, dict]:
    expected = json.loads((GENUINE / version / "expected.json").read_text())
    return GENUINE / version / expected["run"], expected


@pytest.mark.parametrize("version", ["0.10.3", "0.6.13"])
def test_genuine_swanlab_folder_reads_exactly(version):
    """Folders written by the real swanlab package, offline: every training scalar equals what
    the package's own reader decodes; SwanLab's system metrics are left out."""
    folder, expected = _genuine(version)
    assert expected["swanlab"] == version
    [found] = discover([str(folder.parent)])
    assert found.kind == "swanlab-run" and found.path == str(folder)
    (run,) = read_path(str(folder))
    assert run.format == "swanlab" and run.step_column == "step" and run.warnings == []
    scalars = {k: v for k, v in expected["scalars"].items() if not k.startswith("__swanlab__.")}
    assert len(scalars) < len(expected["scalars"])  # the fixture does hold system metrics
    assert (
        sorted(run.metrics)
        == sorted(scalars)
        == ["eval/reward", "train/completions", "train/kl", "train/loss", "train/reward"]
    )
    assert list(run.steps) == list(range(40))
    for key, points in scalars.items():
        col = run.metrics[key]
        assert np.isfinite(col).sum() == sum(v is not None for _, v in points), key
        for step, value in points:
            got = col[int(np.searchsorted(run.steps, step))]
            assert np.isnan(got) if value is None else got == value, (key, step, got, value)
    assert run.metrics["train/reward"][0] == 0.0  # proto3 leaves a zero step and value out
    assert np.isnan(run.metrics["train/loss"][7])
    assert choose_reward(run.numeric_columns())["column"] == "train/reward"
    assert run.config == {"beta": 0.04, "learning_rate": 1e-06, "num_generations": 8}


@pytest.mark.parametrize("version", ["0.10.3", "0.6.13"])
def test_genuine_swanlab_log_file_given_directly_and_cut(version, tmp_path):
    folder, _ = _genuine(version)
    [log] = [p for p in folder.iterdir() if p.suffix == ".swanlab"]
    (run,) = read_path(str(log))
    assert run.steps.size == 40 and "train/reward" in run.metrics
    data = log.read_bytes()
    cut = tmp_path / log.name
    warned = 0
    for end in range(len(data) // 3, len(data), len(data) // 25):  # a run still being written
        cut.write_bytes(data[:end])
        (part,) = read_path(str(cut))
        assert 0 < part.steps.size <= 40
        warned += any("incomplete" in w for w in part.warnings)
        for key, col in part.metrics.items():  # a prefix, never a wrong value
            full = run.metrics[key][: part.steps.size]
            assert np.array_equal(col[np.isfinite(col)], full[np.isfinite(col)]), (end, key)
    assert warned  # most cuts fall inside a record


def test_genuine_swanlab_folder_on_the_command_line(tmp_path, capsys):
    from grpofit.cli import main

    folder, _ = _genuine("0.10.3")
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(folder.parent), "--format", "json"])
    assert exc.value.code == 0
    [run] = json.loads(capsys.readouterr().out)["runs"]
    assert run["run"] == str(folder) and run["metric"] == "train/reward" and run["n_points"] == 40


def test_only_system_metrics_is_a_clear_error(tmp_path):
    from grpofit.testing.writers import field_bytes, field_double, field_varint

    def record(key, step, value):
        scalar = field_bytes(1, key) + field_varint(2, step) + field_bytes(5, field_double(1, value))
        return field_varint(1, step + 1) + field_bytes(13, scalar)

    out = bytearray(struct.pack("<4sHB", b":SWL", 0xE1D6, 2))
    for s in range(5):
        data = record("__swanlab__.cpu.pct", s, 12.5)
        out += struct.pack("<IHB", zlib.crc32(data, zlib.crc32(b"\x01")) & 0xFFFFFFFF, len(data), 1) + data
    path = tmp_path / "run-abc.swanlab"
    path.write_bytes(bytes(out))
    with pytest.raises(GrpofitError, match="only SwanLab's system metrics"):
        read_path(str(path))
