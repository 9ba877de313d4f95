"""Binary readers: protobuf wire format, TensorBoard event files, W&B ``.wandb`` files and run folders."""

from __future__ import annotations

import json
import math
import os
import struct
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

from grpofit.core.errors import ReadError
from grpofit.core.runs import make_run
from grpofit.readers import protobuf as pb
from grpofit.readers import tensorboard as tb
from grpofit.readers import wandb_binary as wb
from grpofit.testing import writers
from tests.reallogs import REAL_LOGS, real_log

REAL = REAL_LOGS
REAL_7B = REAL / "verl_grpo_qwen2_7b_fsdp_base.tfevents"
REAL_3B = REAL / "verl_grpo_qwen25_3b_fsdp_base.tfevents"


def _real(path: Path) -> str:
    return str(real_log(path.name))


# --- protobuf ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31, 2**63 - 1, -1, -(2**63)])
def test_varint_round_trip(value):
    data = writers.encode_varint(value)
    decoded, end = pb.decode_varint(data, 0)
    assert end == len(data) <= 10
    assert pb.to_signed64(decoded) == value


def test_fields_round_trip():
    msg = (
        writers.field_varint(1, 7)
        + writers.field_bytes(2, "héllo")
        + writers.field_double(3, 0.1)
        + writers.field_float(4, 0.5)
        + writers.field_varint(300, -5)
    )
    fields = pb.parse(msg)
    assert pb.as_int(*fields[1][0]) == 7
    assert pb.as_str(*fields[2][0]) == "héllo"
    assert pb.as_double(*fields[3][0]) == 0.1
    assert pb.as_float(*fields[4][0]) == 0.5
    assert pb.as_int(*fields[300][0]) == -5


@pytest.mark.parametrize(
    "data",
    [
        b"\x08",  # varint key without value
        b"\x12\x05ab",  # length beyond the buffer
        b"\x12\xff\xff\xff\xff\xff\xff\xff\x7f",  # a huge length must not allocate
        b"\x08" + b"\xff" * 11,  # varint longer than 10 bytes
        b"\x0b",  # group (wire type 3)
        b"\x00\x01",  # field number 0
        b"\x09\x00\x00",  # truncated 64-bit
        b"\x0d\x00",  # truncated 32-bit
    ],
)
def test_malformed_messages_raise_decode_error(data):
    with pytest.raises(pb.DecodeError):
        pb.parse(data)


def test_packed_helpers():
    assert pb.unpack_fixed(struct.pack("<3f", 1.0, 2.0, 0.5), "f") == [1.0, 2.0, 0.5]
    assert pb.unpack_varints(writers.encode_varint(3) + writers.encode_varint(-2)) == [3, -2]
    with pytest.raises(pb.DecodeError):
        pb.unpack_fixed(b"\0" * 5, "f")


# --- CRC-32C -------------------------------------------------------------------------------


def test_crc32c_known_vectors():
    assert tb.crc32c(b"123456789") == 0xE3069283
    assert tb.crc32c(b"") == 0
    assert tb.crc32c(b"\0" * 32) == 0x8A9136AA  # RFC 3720 B.4
    assert tb.crc32c(b"\xff" * 32) == 0x62A8AB43
    # incremental use continues the same CRC
    assert tb.crc32c(b"56789", tb.crc32c(b"1234")) == 0xE3069283


@pytest.mark.slow
def test_batched_crc_matches_scalar():
    rng = np.random.default_rng(1)
    buf = rng.integers(0, 256, 30_000, dtype=np.uint8).tobytes()
    starts = rng.integers(0, 20_000, 200)
    lengths = rng.integers(0, 6_000, 200)  # includes records above the batch limit
    lengths[:3] = 0
    got = tb._masked_crc32c_batch(buf, starts, lengths)
    want = [tb.masked_crc32c(buf[s : s + n]) for s, n in zip(starts, lengths)]
    assert got.tolist() == want


# --- TensorBoard: writer and reader --------------------------------------------------------

ROWS = [
    (0, {"reward": 0.25, "kl": 0.0}),
    (1, {"reward": 0.5}),
    (2, {"reward": 0.75, "kl": 0.125}),
    (5, {"reward": 1.0, "kl": 0.25}),
]


def _write_events(tmp_path, rows=ROWS, name="events.out.tfevents.1.host", **kw) -> Path:
    path = tmp_path / name
    writers.write_tfevents(str(path), rows, **kw)
    return path


@pytest.mark.parametrize("tensor", [False, True])
def test_tfevents_round_trip(tmp_path, tensor):
    path = _write_events(tmp_path, tensor=tensor)
    table, warnings = tb.read_tfevents(str(path))
    assert warnings == []
    assert table["step"].tolist() == [0, 1, 2, 5]
    assert table["reward"].tolist() == [0.25, 0.5, 0.75, 1.0]
    kl = table["kl"]
    assert kl[0] == 0.0 and math.isnan(kl[1]) and kl[2] == 0.125 and kl[3] == 0.25
    run = make_run(str(path), str(path), "tensorboard", table)
    assert run.step_column == "step"
    assert run.metrics["reward"].tolist() == [0.25, 0.5, 0.75, 1.0]


def test_tfevents_float32_values_and_first_record(tmp_path):
    path = _write_events(tmp_path, rows=[(3, {"x": 0.1})])
    with open(path, "rb") as fh:
        records = list(tb.iter_records(fh))
    assert len(records) == 2
    assert pb.as_str(*pb.parse(records[0])[3][0]) == "brain.Event:2"
    table, _ = tb.read_tfevents(str(path))
    assert table["x"][0] == pytest.approx(0.1, rel=1e-7)  # simple_value is float32


def test_tfevents_same_step_twice_keeps_last(tmp_path):
    path = _write_events(tmp_path, rows=[(1, {"r": 0.5}), (2, {"r": 0.25}), (1, {"r": 0.75})])
    table, warnings = tb.read_tfevents(str(path))
    assert table["step"].tolist() == [1, 2]
    assert table["r"].tolist() == [0.75, 0.25]
    assert any("kept the last" in w for w in warnings)


def _raw_event(step: int, value: bytes) -> bytes:
    """An Event holding one hand-made Summary.Value."""
    return writers.field_varint(2, step) + writers.field_bytes(5, writers.field_bytes(1, value))


def _tensor_value(tag: str, tensor: bytes, plugin: str = "scalars") -> bytes:
    meta = writers.field_bytes(1, writers.field_bytes(1, plugin))
    return writers.field_bytes(1, tag) + writers.field_bytes(9, meta) + writers.field_bytes(8, tensor)


def _shape(*dims: int) -> bytes:
    return writers.field_bytes(2, b"".join(writers.field_bytes(2, writers.field_varint(1, d)) for d in dims))


def test_tfevents_scalar_tensor_variants(tmp_path):
    events = [
        # DT_FLOAT with tensor_content (torch >= 2 and TF2 writers)
        _raw_event(
            1,
            _tensor_value("a", writers.field_varint(1, 1) + _shape() + writers.field_bytes(4, struct.pack("<f", 0.5))),
        ),
        # DT_DOUBLE with tensor_content
        _raw_event(1, _tensor_value("b", writers.field_varint(1, 2) + writers.field_bytes(4, struct.pack("<d", 0.1)))),
        # DT_INT64 int64_val, DT_INT32 int_val (unpacked)
        _raw_event(1, _tensor_value("c", writers.field_varint(1, 9) + writers.field_varint(10, -7))),
        _raw_event(1, _tensor_value("d", writers.field_varint(1, 3) + writers.field_varint(7, 12))),
        # unpacked float_val, double_val
        _raw_event(1, _tensor_value("e", writers.field_varint(1, 1) + writers.field_float(5, 0.25))),
        _raw_event(1, _tensor_value("f", writers.field_varint(1, 2) + writers.field_double(6, 0.3))),
        # a shape of [1, 1] is still one element
        _raw_event(1, _tensor_value("g", writers.field_varint(1, 1) + _shape(1, 1) + writers.field_float(5, 2.0))),
        # skipped: a histogram-like [3] tensor, a string tensor, an image, a histogram plugin
        _raw_event(1, _tensor_value("h", writers.field_varint(1, 1) + _shape(3) + writers.field_bytes(4, b"\0" * 12))),
        _raw_event(1, _tensor_value("i", writers.field_varint(1, 7) + writers.field_bytes(8, b"text"), plugin="text")),
        _raw_event(1, writers.field_bytes(1, "j") + writers.field_bytes(4, writers.field_varint(1, 8))),
        _raw_event(
            1, _tensor_value("k", writers.field_varint(1, 1) + writers.field_float(5, 1.0), plugin="histograms")
        ),
    ]
    path = tmp_path / "events.out.tfevents.2"
    path.write_bytes(b"".join(writers.frame_record(e) for e in events))
    table, warnings = tb.read_tfevents(str(path))
    assert warnings == []
    assert sorted(table) == ["a", "b", "c", "d", "e", "f", "g", "step"]
    assert table["a"][0] == 0.5 and table["b"][0] == 0.1 and table["c"][0] == -7
    assert table["d"][0] == 12 and table["e"][0] == 0.25 and table["f"][0] == 0.3 and table["g"][0] == 2.0


def test_tfevents_directory_merges_subfolders(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "eval").mkdir()
    writers.write_tfevents(str(tmp_path / "events.out.tfevents.1.a"), [(0, {"lr": 1.0}), (10, {"lr": 0.5})])
    writers.write_tfevents(str(tmp_path / "train" / "events.out.tfevents.1.b"), [(0, {"loss": 2.0, "reward": 0.25})])
    writers.write_tfevents(str(tmp_path / "train" / "events.out.tfevents.2.b"), [(10, {"loss": 1.0, "reward": 0.5})])
    writers.write_tfevents(str(tmp_path / "eval" / "events.out.tfevents.1.c"), [(10, {"loss": 1.5, "accuracy": 0.75})])
    (tmp_path / "notes.txt").write_text("not an event file")
    table, warnings = tb.read_tfevents(str(tmp_path))
    assert warnings == []
    assert table["step"].tolist() == [0, 10]
    assert table["lr"].tolist() == [1.0, 0.5]
    assert table["reward"].tolist() == [0.25, 0.5]
    assert table["accuracy"][1] == 0.75 and math.isnan(table["accuracy"][0])
    # "loss" exists in two folders: both are prefixed, no bare "loss"
    assert "loss" not in table
    assert table["train/loss"].tolist() == [2.0, 1.0]
    assert table["eval/loss"][1] == 1.5


def test_tfevents_directory_without_events(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ReadError, match="no TensorBoard event files"):
        tb.read_tfevents(str(tmp_path))


def test_tfevents_without_scalars_is_a_read_error(tmp_path):
    path = tmp_path / "events.out.tfevents.3"
    writers.write_tfevents(str(path), [])
    with pytest.raises(ReadError, match="no scalar"):
        tb.read_tfevents(str(path))


def test_looks_like_tfevents(tmp_path):
    path = _write_events(tmp_path)
    assert tb.looks_like_tfevents(path.read_bytes()[:64])
    assert not tb.looks_like_tfevents(b"step,reward\n1,0.5\n")
    assert not tb.looks_like_tfevents(b":W&B\xe1\xbe\x00" + b"\0" * 20)
    assert not tb.looks_like_tfevents(b"\0" * 5)
    assert not tb.looks_like_tfevents(b"\0" * 16)  # zero length is implausible


def _record_ends(data: bytes) -> list[int]:
    ends, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        pos += 16 + length
        ends.append(pos)
    return ends


def test_tfevents_torn_tail_at_every_offset(tmp_path):
    data = _write_events(tmp_path).read_bytes()
    ends = _record_ends(data)
    steps_after = [None, [], [0], [0, 1], [0, 1, 2], [0, 1, 2, 5]]  # by complete records
    for cut in range(len(data) + 1):
        complete = sum(e <= cut for e in ends)
        try:
            table, warnings = tb.parse_tfevents(data[:cut], "cut")
        except ReadError as exc:
            assert complete <= 1, cut  # nothing or only the file_version event survived
            assert "cut" in exc.one_line()
            continue
        assert table["step"].tolist() == steps_after[complete], cut
        assert bool(warnings) == (cut not in ends), cut


def test_tfevents_corrupt_length_does_not_allocate(tmp_path):
    data = bytearray(_write_events(tmp_path).read_bytes())
    third = _record_ends(bytes(data))[1]  # start of the third record (step 1)
    data[third : third + 8] = struct.pack("<Q", 2**40)
    tracemalloc.start()
    table, warnings = tb.parse_tfevents(bytes(data), "bad")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5_000_000
    assert table["step"].tolist() == [0]
    assert any("corrupt record header" in w for w in warnings)
    # even with a length CRC that matches, a length beyond the file is a torn record
    head = struct.pack("<Q", 2**40)
    data[third : third + 12] = head + struct.pack("<I", tb.masked_crc32c(head))
    table, warnings = tb.parse_tfevents(bytes(data), "bad")
    assert table["step"].tolist() == [0]
    assert any("incomplete" in w for w in warnings)


def test_tfevents_bad_data_crc_skips_the_record(tmp_path):
    data = bytearray(_write_events(tmp_path).read_bytes())
    second = _record_ends(bytes(data))[1]
    data[second + 14] ^= 0x01  # inside the step-1 event's payload
    table, warnings = tb.parse_tfevents(bytes(data), "x")
    assert table["step"].tolist() == [0, 2, 5]
    assert any("bad data checksum" in w for w in warnings)


def test_tfevents_first_record_garbage_is_a_read_error():
    with pytest.raises(ReadError, match="not a TensorBoard event file") as err:
        tb.parse_tfevents(b"step,reward\n1,0.5\n2,0.6\n", "log.csv")
    assert err.value.one_line().startswith("log.csv: ")
    assert err.value.fix


def test_tfevents_arbitrary_bytes_only_raise_read_error(tmp_path):
    rng = np.random.default_rng(42)
    valid = _write_events(tmp_path).read_bytes()
    for case in range(400):
        if case % 2:
            data = rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8).tobytes()
        else:  # a valid file with a few random bytes changed (headers stay mostly intact)
            buf = bytearray(valid)
            for pos in rng.integers(0, len(buf), int(rng.integers(1, 4))):
                buf[pos] = int(rng.integers(0, 256))
            data = bytes(buf)
        try:
            table, warnings = tb.parse_tfevents(data, f"case{case}")
        except ReadError:
            continue
        assert "step" in table and all(len(v) == len(table["step"]) for v in table.values())


@pytest.mark.real_logs
def test_real_verl_7b_tfevents():
    path = _real(REAL_7B)
    assert not os.path.basename(path).startswith("events.out.tfevents")
    with open(path, "rb") as fh:
        assert tb.looks_like_tfevents(fh.read(64))
    table, warnings = tb.read_tfevents(path)
    assert warnings == []
    assert len(table) - 1 == 63  # tags besides "step"
    for tag in ("critic/score/mean", "actor/entropy", "actor/grad_norm", "val-core/openai/gsm8k/reward/mean@1"):
        assert tag in table
    run = make_run(path, path, "tensorboard", table)
    steps, reward = run.series("critic/score/mean")
    assert len(steps) == 105 and steps[0] == 1 and steps[-1] == 105
    assert reward[0] == pytest.approx(0.2537, abs=1e-3)
    assert reward[-1] == pytest.approx(0.9924, abs=1e-3)
    val_steps, _ = run.series("val-core/openai/gsm8k/reward/mean@1")
    assert len(val_steps) == 22 and val_steps[0] == 0 and val_steps[-1] == 105


@pytest.mark.real_logs
def test_real_verl_3b_tfevents():
    path = _real(REAL_3B)
    table, warnings = tb.read_tfevents(path)
    assert warnings == [] and len(table) - 1 == 63
    reward = table["critic/score/mean"]
    finite = reward[np.isfinite(reward)]
    assert len(finite) == 105
    assert finite[0] == pytest.approx(0.565, abs=1e-3) and finite[-1] == pytest.approx(0.965, abs=1e-3)


@pytest.mark.real_logs
def test_real_tfevents_in_a_log_dir_sniffed_by_content(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "q7b_base.bin").symlink_to(_real(REAL_7B))  # found by content
    (tmp_path / "README.md").write_text("# notes\n")
    assert [sub for sub, _ in tb.event_files(str(tmp_path))] == ["train"]
    table, warnings = tb.read_tfevents(str(tmp_path))
    assert warnings == [] and "critic/score/mean" in table and len(table["step"]) == 106


@pytest.mark.real_logs
def test_real_tfevents_torn_copy(tmp_path):
    data = Path(_real(REAL_7B)).read_bytes()
    table, warnings = tb.parse_tfevents(data[: len(data) // 2 + 3], "half")
    assert 40 < len(table["step"]) < 80
    assert any("incomplete" in w or "partial" in w for w in warnings)


# --- W&B .wandb ----------------------------------------------------------------------------


def _history_rows(n: int = 6) -> list[dict]:
    return [{"train/global_step": 10 * (i + 1), "train/reward": i / 8, "train/kl": 0.001 * i} for i in range(n)]


def test_wandb_round_trip(tmp_path):
    path = tmp_path / "run-abc.wandb"
    rows = _history_rows()
    rows[2]["odd"] = float("nan")
    rows[3]["odd"] = "Infinity"
    rows[4]["odd"] = True
    rows[1]["nested"] = {"a": 1.5, "b": {"c": 2}}
    rows[1]["media"] = {"_type": "image-file", "path": "x.png"}
    rows[1]["list"] = [1, 2]
    rows[1]["text"] = "hello"
    writers.write_wandb_file(str(path), rows)
    assert path.read_bytes()[:7] == b":W&B\xe1\xbe\x00"
    table, warnings = wb.read_wandb_file(str(path))
    assert warnings == []
    assert table["_step"].tolist() == [0, 1, 2, 3, 4, 5]
    assert table["train/global_step"].tolist() == [10, 20, 30, 40, 50, 60]
    assert table["train/reward"].tolist() == [r["train/reward"] for r in rows]
    assert table["train/kl"].tolist() == [r["train/kl"] for r in rows]
    odd = table["odd"]
    assert math.isnan(odd[2]) and odd[3] == math.inf and odd[4] == 1.0 and math.isnan(odd[0])
    assert table["nested.a"][1] == 1.5 and table["nested.b.c"][1] == 2
    assert "media" not in table and "list" not in table and "text" not in table
    run = make_run(str(path), str(path), "wandb-binary", table)
    assert run.step_column == "train/global_step"
    assert run.metrics["train/reward"].tolist() == [r["train/reward"] for r in rows]
    assert any("infinite" in w for w in run.warnings)


def test_wandb_nested_key_and_step_from_history_step(tmp_path):
    item = writers.field_bytes(2, "eval") + writers.field_bytes(2, "reward") + writers.field_bytes(16, "0.75")
    history = writers.field_bytes(1, item) + writers.field_bytes(2, writers.field_varint(1, 42))
    path = tmp_path / "run-x.wandb"
    path.write_bytes(writers.frame_records([writers.field_bytes(2, history)]))
    table, _ = wb.read_wandb_file(str(path))
    assert table["eval/reward"].tolist() == [0.75]
    assert table["_step"].tolist() == [42]


def _chunks(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, length, type) of every chunk, walking the framing independently of the reader."""
    out, pos = [], 7
    while pos < len(data):
        left = 32768 - pos % 32768
        if left < 7:
            assert data[pos : pos + left] == b"\0" * left
            pos += left
            continue
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        assert length + 7 <= left  # a chunk never crosses a block boundary
        assert crc == zlib.crc32(bytes([kind]) + data[pos + 7 : pos + 7 + length])
        out.append((pos, length, kind))
        pos += 7 + length
    return out


def test_wandb_records_spanning_blocks(tmp_path):
    rng = np.random.default_rng(3)
    rows = [{"_step": i, "v": float(i), "pad": "x" * int(rng.integers(0, 3000))} for i in range(60)]
    rows[7]["big"] = "y" * 100_000  # FIRST, MIDDLE, MIDDLE, LAST
    path = tmp_path / "run-span.wandb"
    writers.write_wandb_file(str(path), rows)
    data = path.read_bytes()
    kinds = [k for _, _, k in _chunks(data)]
    assert kinds.count(wb.MIDDLE) >= 2 and kinds.count(wb.FIRST) >= 3 and kinds.count(wb.LAST) == kinds.count(wb.FIRST)
    table, warnings = wb.read_wandb_file(str(path))
    assert warnings == []
    assert table["v"].tolist() == [float(i) for i in range(60)]


@pytest.mark.parametrize("left", [0, 3, 6, 7, 8, 20])
def test_wandb_block_tail_cases(left):
    """A block ending with 0..6 bytes (padding), exactly 7 (empty FIRST) or more free."""
    first = 32768 - 7 - 7 - left  # payload size that leaves `left` bytes in block 0
    payloads = [b"a" * first, b"b" * 50, b"c" * 40000]
    data = writers.frame_records(payloads)
    chunks = _chunks(data)
    if left == 7:
        assert chunks[1][1:] == (0, wb.FIRST)  # the empty FIRST fills the block
    warnings: list[str] = []
    assert list(wb.iter_wandb_records(data, "t", warnings)) == payloads
    assert warnings == []


def _small_wandb(tmp_path) -> tuple[bytes, list[int]]:
    path = tmp_path / "run-small.wandb"
    writers.write_wandb_file(str(path), [{"r": i / 4} for i in range(4)])
    data = path.read_bytes()
    return data, [pos + 7 + n for pos, n, _ in _chunks(data)]


def test_wandb_torn_tail_at_every_offset(tmp_path):
    data, ends = _small_wandb(tmp_path)
    for cut in range(len(data) + 1):
        complete = sum(e <= cut for e in ends)
        try:
            table, warnings = wb.parse_wandb(data[:cut], "cut")[:2]
        except ReadError as exc:
            assert complete == 0, cut
            assert exc.one_line().startswith("cut: ")
            continue
        assert table["r"].tolist() == [i / 4 for i in range(complete)], cut
        assert bool(warnings) == (cut not in ends), cut


def test_wandb_torn_tail_inside_a_split_record(tmp_path):
    path = tmp_path / "run-big.wandb"
    writers.write_wandb_file(str(path), [{"r": 0.5}, {"r": 0.75, "blob": "z" * 70_000}, {"r": 1.0}])
    data = path.read_bytes()
    last_end = next(pos + 7 + n for pos, n, kind in _chunks(data) if kind == wb.LAST)
    for cut in (32768 - 3, 32768 + 100, 65536 + 7, last_end - 1):
        table, warnings, _ = wb.parse_wandb(data[:cut], "cut")
        assert table["r"].tolist() == [0.5]
        assert warnings and "partial record" in warnings[-1]


def test_wandb_corrupt_length_and_crc_resume_at_next_block(tmp_path):
    rows = [{"_step": i, "v": float(i), "pad": "p" * 2000} for i in range(40)]
    path = tmp_path / "run-c.wandb"
    writers.write_wandb_file(str(path), rows)
    data = bytearray(path.read_bytes())
    chunks = _chunks(bytes(data))
    pos = chunks[3][0]
    data[pos + 4 : pos + 6] = struct.pack("<H", 0xFFFF)  # a length beyond the block
    crc_pos = next(p for p, _, k in chunks if p > 40000 and k == wb.FULL)
    data[crc_pos] ^= 0xFF  # a bad checksum in the second block
    tracemalloc.start()
    table, warnings, _ = wb.parse_wandb(bytes(data), "c")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 5_000_000
    got = table["v"].tolist()
    assert got[:3] == [0.0, 1.0, 2.0] and 3.0 not in got
    assert got[-1] == 39.0 and len(got) < 40
    assert any("corrupt chunk" in w for w in warnings)


def test_wandb_garbage_is_a_read_error(tmp_path):
    rng = np.random.default_rng(7)
    for case in range(300):
        data = rng.integers(0, 256, int(rng.integers(0, 400)), dtype=np.uint8).tobytes()
        with pytest.raises(ReadError):
            wb.parse_wandb(data, f"case{case}")
    with pytest.raises(ReadError, match="no history"):
        wb.parse_wandb(b":W&B\xe1\xbe\x00", "empty")


def test_wandb_mutated_files_never_crash(tmp_path):
    data, _ = _small_wandb(tmp_path)
    rng = np.random.default_rng(11)
    for case in range(300):
        buf = bytearray(data)
        if case % 3 == 0:  # random body behind a valid header
            buf[7:] = rng.integers(0, 256, int(rng.integers(0, 500)), dtype=np.uint8).tobytes()
        else:
            for pos in rng.integers(7, len(buf), int(rng.integers(1, 5))):
                buf[pos] = int(rng.integers(0, 256))
        try:
            table, _, _ = wb.parse_wandb(bytes(buf), f"case{case}")
        except ReadError:
            continue
        assert all(len(v) == len(table["_step"]) for v in table.values())


def test_wandb_accepts_leveldb_crc32c_chunks():
    payload = writers.field_bytes(
        2, writers.field_bytes(1, writers.field_bytes(1, "r") + writers.field_bytes(16, "0.5"))
    )
    chunk = struct.pack("<IHB", tb.masked_crc32c(b"\x01" + payload), len(payload), 1) + payload
    table, warnings, _ = wb.parse_wandb(b":W&B\xe1\xbe\x00" + chunk, "leveldb")
    assert table["r"].tolist() == [0.5] and warnings == []


def test_looks_like_wandb(tmp_path):
    data, _ = _small_wandb(tmp_path)
    assert wb.looks_like_wandb(data[:16])
    assert not wb.looks_like_wandb(b":W&B")
    assert not wb.looks_like_wandb(b"step,reward\n")
    assert not wb.looks_like_wandb(_write_events(tmp_path).read_bytes()[:16])


# --- W&B run folders -----------------------------------------------------------------------

CONFIG_YAML = """\
_wandb:
  value:
    cli_version: 0.19.1
    t: {1: [1, 11]}
learning_rate:
  desc: null
  value: 1.0e-06
num_generations:
  value: 8
actor_rollout_ref:
  value:
    rollout:
      n: 16
    actor:
      optim:
        lr: 2.0e-06
beta:
  value: 0.04
"""


def test_wandb_run_folder_with_config(tmp_path):
    run_dir = tmp_path / "wandb" / "run-20250101_120000-abc123"
    (run_dir / "files").mkdir(parents=True)
    rows = [{"train/global_step": 5 * (i + 1), "train/reward": 0.1 * i} for i in range(8)]
    writers.write_wandb_file(str(run_dir / "run-abc123.wandb"), rows)
    (run_dir / "files" / "config.yaml").write_text(CONFIG_YAML)
    run = wb.read_wandb_run_dir(str(run_dir))[0]
    assert run.name == str(run_dir) and run.source == str(run_dir) and run.format == "wandb-run"
    assert run.step_column == "train/global_step"
    assert run.steps.tolist() == [5, 10, 15, 20, 25, 30, 35, 40]
    assert run.metrics["train/reward"] == pytest.approx([0.1 * i for i in range(8)])
    assert run.config["learning_rate"] == 1e-6
    assert run.config["num_generations"] == 8
    assert run.config["actor_rollout_ref.rollout.n"] == 16
    assert run.config["actor_rollout_ref.actor.optim.lr"] == 2e-6
    assert not any(k.startswith("_wandb") for k in run.config)
    assert run.config_source == str(run_dir / "files" / "config.yaml")
    # --step overrides the preference
    run = wb.read_wandb_run_dir(str(run_dir), step="_step")[0]
    assert run.step_column == "_step" and run.steps.tolist() == list(range(8))
    # the parent wandb/ folder gives every run in it
    assert [r.name for r in wb.read_wandb_run_dir(str(tmp_path / "wandb"))] == [str(run_dir)]


def test_offline_run_without_files_uses_binary_config(tmp_path):
    run_dir = tmp_path / "offline-run-20250101_120000-zz9"
    run_dir.mkdir()
    writers.write_wandb_file(
        str(run_dir / "run-zz9.wandb"),
        [{"reward": 0.5}, {"reward": 0.75}],
        config={"learning_rate": 3e-6, "_wandb": {"x": 1}, "model": {"name": "qwen"}},
    )
    assert wb.is_wandb_run_dir(str(run_dir))
    run = wb.read_wandb_run_dir(str(run_dir))[0]
    assert run.step_column == "_step" and run.steps.tolist() == [0, 1]
    assert run.config == {"learning_rate": 3e-6, "model.name": "qwen"}
    assert run.config_source == str(run_dir / "run-zz9.wandb")


def test_old_client_folder_with_history_jsonl(tmp_path):
    run_dir = tmp_path / "run-20200101_000000-old1"
    (run_dir / "files").mkdir(parents=True)
    lines = [json.dumps({"_step": i, "_runtime": 3.0 * i, "reward": i / 10, "loss": None}) for i in range(5)]
    lines.append('{"_step": 5, "rew')  # torn last line
    (run_dir / "files" / "wandb-history.jsonl").write_text("\n".join(lines))
    (run_dir / "files" / "config.yaml").write_text("lr:\n  value: 0.001\n")
    run = wb.read_wandb_run_dir(str(run_dir))[0]
    assert run.steps.tolist() == [0, 1, 2, 3, 4]
    assert run.metrics["reward"].tolist() == [i / 10 for i in range(5)]
    assert np.isnan(run.metrics["loss"]).all()
    assert run.config == {"lr": 0.001}
    assert any("torn last line" in w for w in run.warnings)


def test_run_folder_with_broken_binary_falls_back_and_bad_yaml_warns(tmp_path):
    run_dir = tmp_path / "run-20200101_000000-b"
    (run_dir / "files").mkdir(parents=True)
    (run_dir / "run-b.wandb").write_bytes(b":W&B\xe1\xbe\x00")  # header only: no history yet
    (run_dir / "files" / "wandb-history.jsonl").write_text('{"_step": 1, "r": 0.5}\n')
    (run_dir / "files" / "config.yaml").write_text("a: [unclosed\n")
    run = wb.read_wandb_run_dir(str(run_dir))[0]
    assert run.metrics["r"].tolist() == [0.5]
    assert any("no history" in w for w in run.warnings)
    assert any("config.yaml" in w for w in run.warnings)
    assert run.config == {}


def test_not_a_run_folder(tmp_path):
    with pytest.raises(ReadError, match="no run-<id>.wandb"):
        wb.read_wandb_run_dir(str(tmp_path))
    assert not wb.is_wandb_run_dir(str(tmp_path))
