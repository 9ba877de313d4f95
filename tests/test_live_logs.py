"""Logs of runs that are still being written, crashed or were resumed.

A file being appended while it is read (torn last record) gives every complete record and a
warning; a resumed run's duplicated steps keep the last value and warn; unsorted steps are
sorted and warn; inf/NaN points are dropped and counted. Each format is written in part, read,
appended to, and read again.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from grpofit.core.errors import ReadError
from grpofit.readers import inspect_run, read_bytes, read_path
from grpofit.testing import writers


def reward(step: float) -> float:
    return round(float(0.7 - 0.6 * np.exp(-step / 30.0)), 6)


def jsonl_rows(steps) -> bytes:
    return b"".join(json.dumps({"step": s, "reward": reward(s), "kl": s / 1000}).encode() + b"\n" for s in steps)


def csv_rows(steps, header: bool = True) -> bytes:
    head = b"step,reward,kl\n" if header else b""
    return head + b"".join(f"{s},{reward(s)},{s / 1000}\n".encode() for s in steps)


def tf_bytes(steps, tmp_path, name="ev") -> bytes:
    path = tmp_path / f"events.out.tfevents.{name}"
    writers.write_tfevents(str(path), [(s, {"reward": reward(s)}) for s in steps])
    return path.read_bytes()


def wandb_bytes(steps) -> bytes:
    payloads = [
        writers.field_varint(1, i + 1)
        + writers.encode_history({"train/global_step": s, "reward": reward(s), "_step": i}, i)
        for i, s in enumerate(steps)
    ]
    return writers.frame_records(payloads)


def live_file(tmp_path, name: str, full: bytes, cuts: list[int]):
    """Write ``full`` in pieces ending at ``cuts``; yield the path after each piece."""
    path = tmp_path / name
    path.write_bytes(b"")
    done = 0
    for cut in cuts:
        with open(path, "ab") as f:
            f.write(full[done:cut])
        done = cut
        yield path


# ------------------------------------------------------------------------------ torn tails


def _cuts_inside_records(full: bytes, sep: bytes = b"\n") -> list[int]:
    """Offsets in the middle of the 5th, 12th and last record, then the end."""
    ends = [i + 1 for i in range(len(full)) if full[i : i + 1] == sep]
    return [ends[4] + 7, ends[11] + 3, len(full) - 5, len(full)]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_text_log_appended_while_read(tmp_path, fmt):
    steps = list(range(1, 21))
    full = jsonl_rows(steps) if fmt == "jsonl" else csv_rows(steps)
    header = 0 if fmt == "jsonl" else 1
    seen = []
    for path, expected in zip(
        live_file(tmp_path, f"live.{fmt}", full, _cuts_inside_records(full)), [5 - header, 12 - header, 19, 20]
    ):
        run = read_path(str(path))[0]
        assert run.steps.tolist() == steps[:expected], fmt
        np.testing.assert_array_equal(run.metrics["reward"], [reward(s) for s in steps[:expected]])
        torn = [w for w in run.warnings if "incomplete" in w]
        assert bool(torn) == (expected < 20), (expected, run.warnings)
        seen.append(len(run.steps))
    assert seen == sorted(seen)


def test_tensorboard_appended_while_read(tmp_path):
    steps = list(range(0, 40, 2))
    full = tf_bytes(steps, tmp_path)
    ends = []
    pos = 0
    while pos < len(full):
        pos += 16 + int.from_bytes(full[pos : pos + 8], "little")
        ends.append(pos)
    cuts = [ends[5] + 3, ends[12] + 20, len(full) - 1, len(full)]
    expected = [5, 12, 19, 20]  # records after the file_version record
    d = tmp_path / "live"
    d.mkdir()
    for path, n in zip(live_file(d, "events.out.tfevents.1.host", full, cuts), expected):
        run = read_path(str(path))[0]
        assert run.steps.tolist() == steps[:n]
        assert any("incomplete" in w or "partial" in w for w in run.warnings) == (n < 20), run.warnings
        run_dir = read_path(str(d))[0]  # the log dir reads the same
        assert run_dir.steps.tolist() == steps[:n]


def test_wandb_appended_while_read(tmp_path):
    steps = list(range(10, 210, 10))
    full = wandb_bytes(steps)
    sizes = [len(wandb_bytes(steps[:k])) for k in range(1, 21)]
    cuts = [sizes[4] + 5, sizes[11] + 9, len(full) - 2, len(full)]
    expected = [5, 12, 19, 20]
    folder = tmp_path / "wandb" / "run-20250101_000000-abc"
    folder.mkdir(parents=True)
    for path, n in zip(live_file(folder, "run-abc.wandb", full, cuts), expected):
        run = read_path(str(path))[0]
        assert run.steps.tolist() == steps[:n] and run.step_column == "train/global_step"
        assert any("partial" in w for w in run.warnings) == (n < 20), run.warnings
        assert read_path(str(folder))[0].steps.tolist() == steps[:n]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tensorboard", "wandb"])
def test_concurrent_writer_never_breaks_a_reader(tmp_path, fmt):
    """A writer thread appends in odd-sized pieces while the main thread reads in a loop: every
    read returns a prefix of the steps (complete records only), never an error."""
    steps = list(range(1, 301))
    full = {
        "jsonl": lambda: jsonl_rows(steps),
        "csv": lambda: csv_rows(steps),
        "tensorboard": lambda: tf_bytes(steps, tmp_path, "w"),
        "wandb": lambda: wandb_bytes(steps),
    }[fmt]()
    name = {"jsonl": "w.jsonl", "csv": "w.csv", "tensorboard": "events.out.tfevents.9.x", "wandb": "run-w.wandb"}[fmt]
    path = tmp_path / "live" / name
    path.parent.mkdir()
    rng = np.random.default_rng(5)
    first = {"csv": len(csv_rows(steps[:2])), "jsonl": len(jsonl_rows(steps[:1]))}.get(fmt, len(full) // 40)
    path.write_bytes(full[:first])
    cuts = sorted(set(rng.integers(first, len(full), 60).tolist())) + [len(full)]
    stop = threading.Event()

    def writer():
        done = first
        with open(path, "ab", buffering=0) as f:
            for cut in cuts:
                f.write(full[done:cut])
                done = cut
                stop.wait(0.002)

    t = threading.Thread(target=writer)
    t.start()
    reads = 0
    try:
        while t.is_alive() or reads < 3:
            try:
                run = read_path(str(path))[0]
            except ReadError as exc:  # only before the first complete record
                assert fmt in ("tensorboard", "wandb") and ("first record" in exc.message or "no " in exc.message), (
                    exc.one_line()
                )
                continue
            got = run.steps.tolist()
            assert got == steps[: len(got)], (fmt, got[-3:])
            reads += 1
    finally:
        t.join()
    final = read_path(str(path))[0]
    assert final.steps.tolist() == steps
    assert not [w for w in final.warnings if "incomplete" in w or "partial" in w]


def test_crash_then_resume_leaves_a_torn_middle_line(tmp_path):
    """A crashed writer's half line followed by the resumed run's rows is reported by line
    number; it never reads as a wrong value (e.g. ``0.`` for ``0.57``)."""
    torn = jsonl_rows(range(1, 11)) + b'{"step": 11, "reward": 0.'  # crash, no newline
    data = torn + b"\n" + jsonl_rows(range(11, 21))
    for d in (data, torn + jsonl_rows(range(11, 21))):  # with and without a newline after it
        with pytest.raises(ReadError) as info:
            read_bytes(d, "resumed.jsonl")
        assert "line 11" in info.value.one_line() and info.value.fix
    wrapped = b"".join(json.dumps({"step": s, "data": {"reward": reward(s)}}).encode() + b"\n" for s in range(1, 11))
    with pytest.raises(ReadError, match="line 5"):
        read_bytes(wrapped.replace(b"}}\n", b"}\n", 5).replace(b"}\n", b"}}\n", 4), "verl.jsonl")


# ------------------------------------------------------------------------------ resumes, order, inf/NaN


def _resume_logs(tmp_path) -> dict[str, str]:
    """A run logged steps 1..30, crashed, resumed from step 20 and logged 20..40 with new values."""
    first, second = list(range(1, 31)), list(range(20, 41))
    bump = 0.5  # resumed values differ, so "kept the last" is visible

    def rows(steps, off):
        return [{"step": s, "reward": reward(s) + off} for s in steps]

    all_rows = rows(first, 0) + rows(second, bump)
    paths = {}
    p = tmp_path / "resume.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in all_rows))
    paths["jsonl"] = str(p)
    p = tmp_path / "resume.csv"
    p.write_text("step,reward\n" + "".join(f"{r['step']},{r['reward']}\n" for r in all_rows))
    paths["csv"] = str(p)
    d = tmp_path / "tb"
    d.mkdir()
    writers.write_tfevents(
        str(d / "events.out.tfevents.1.a"), [(r["step"], {"reward": r["reward"]}) for r in rows(first, 0)]
    )
    writers.write_tfevents(
        str(d / "events.out.tfevents.2.a"), [(r["step"], {"reward": r["reward"]}) for r in rows(second, bump)]
    )
    paths["tensorboard"] = str(d)
    p = tmp_path / "run-r.wandb"
    writers.write_wandb_file(str(p), [{"train/global_step": r["step"], "reward": r["reward"]} for r in all_rows])
    paths["wandb"] = str(p)
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": all_rows}))
    paths["trainer_state"] = str(p)
    return paths


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "tensorboard", "wandb", "trainer_state"])
def test_resumed_run_keeps_the_last_value_of_each_duplicated_step(tmp_path, fmt):
    path = _resume_logs(tmp_path)[fmt]
    run = read_path(path)[0]
    assert run.steps.tolist() == list(range(1, 41))
    expected = [reward(s) + (0.5 if s >= 20 else 0) for s in range(1, 41)]
    np.testing.assert_allclose(run.metrics["reward"], expected, rtol=1e-6 if fmt == "tensorboard" else 0)
    if fmt != "trainer_state":  # HF merges rows by step by design (sparse rows), silently
        assert any("duplicated" in w or "again" in w for w in run.warnings), run.warnings


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "trl"])
def test_unsorted_steps_are_sorted_with_a_warning(tmp_path, fmt):
    order = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6]
    if fmt == "jsonl":
        data = b"".join(json.dumps({"step": s, "reward": reward(s)}).encode() + b"\n" for s in order)
    elif fmt == "csv":
        data = ("step,reward\n" + "".join(f"{s},{reward(s)}\n" for s in order)).encode()
    else:
        data = "".join(repr({"step": str(s), "reward": str(reward(s))}) + "\n" for s in order).encode()
    run = read_bytes(data, "-")[0]
    assert run.steps.tolist() == list(range(1, 11))
    np.testing.assert_array_equal(run.metrics["reward"], [reward(s) for s in range(1, 11)])
    assert any("not in order" in w for w in run.warnings)


def test_inf_and_nan_points_are_dropped_and_counted(tmp_path, capsys):
    values = {3: "NaN", 5: "Infinity", 7: "-Infinity", 9: "null", 11: "1e999"}
    lines = []
    for s in range(1, 41):
        v = values.get(s, repr(reward(s)))
        lines.append(f'{{"step": {s}, "reward": {v}, "kl": 0.1}}')
    path = tmp_path / "nan.jsonl"
    path.write_text("\n".join(lines) + "\n")
    run = read_path(str(path))[0]
    assert run.stats.get("infinite") == 3
    assert any("3 infinite value(s) dropped" in w for w in run.warnings)
    finite = 40 - len(values)
    info = inspect_run(run)
    assert info["roles"]["reward"] == {"column": "reward", "points": finite}
    from grpofit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["fit", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0
    assert json.loads(out)["runs"][0]["n_points"] == finite
    assert "3 infinite value(s) dropped" in err
    # the same counts from a CSV (empty, nan, inf cells)
    csv = tmp_path / "nan.csv"
    csv.write_text(
        "step,reward\n"
        + "".join(
            f"{s},{ {3: '', 5: 'inf', 7: '-inf', 9: 'nan', 11: 'Infinity'}.get(s, reward(s)) }\n" for s in range(1, 41)
        )
    )
    run = read_path(str(csv))[0]
    assert run.stats.get("infinite") == 3 and int(np.isfinite(run.metrics["reward"]).sum()) == finite
