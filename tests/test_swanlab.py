"""SwanLab offline runs, read without the swanlab package. The backups here are written the way
SwanLab's backup handler writes them (its record models and, for the framed container, the
LevelDB log framing its DataStore documents): a Header, PROJECT and EXPERIMENT record, COLUMN
records, then one SCALAR record per logged value."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpofit.errors import GrpofitError
from grpofit.readers import discover, read_bytes, read_path
from grpofit.roles import choose_reward


def _records(n=30):
    out = [
        {"model_type": "Header", "data": {"backup_type": "DEFAULT", "version": "0.6.4", "create_time": "2025-06-10T08:00:00"}},
        {"model_type": "PROJECT", "data": {"name": "grpo", "public": False}},
        {"model_type": "EXPERIMENT", "data": {"name": "qwen-grpo-g8", "tags": []}},
        {"model_type": "COLUMN", "data": {"key": "train/reward", "kid": "0", "cls": "CUSTOM", "column_type": "FLOAT"}},
    ]
    for s in range(1, n + 1):
        for key, value in (("train/reward", 0.9 - 0.6 * np.exp(-s / 10)), ("train/kl", 0.001 * s)):
            metric = {"index": s, "data": float(value) if s != 7 or key != "train/kl" else "NaN", "create_time": "t"}
            out.append({"model_type": "SCALAR", "data": {"metric": metric, "key": key, "step": s, "epoch": s}})
        if s % 10 == 0:
            out.append({"model_type": "LOG", "data": {"create_time": "t", "message": f"step {s}", "epoch": s, "level": "INFO"}})
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
    for blob in (good[: int(len(good) * cut)], good[: int(len(good) * cut)] + junk, b":SWL" + junk):
        try:
            runs = read_bytes(blob, "-")
        except GrpofitError as e:
            assert "\n" not in e.one_line()
            continue
        for r in runs:
            assert np.all(np.diff(r.steps) > 0)
