"""the trainer_state.json and console-log readers keep memory at a bounded
multiple of the file (they used to peak at 6-8.5x: the whole text, then every row as a dict,
then copies of those dicts). The streamed readers must give exactly what the loaded ones gave:
the reference implementations below are the old code, kept here to compare against."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grpofit.core.runs import to_float_array
from grpofit.readers import read_path
from grpofit.readers.common import rows_to_columns
from grpofit.readers.hf import SUMMARY_KEYS, merge_rows
from grpofit.readers.jsonl import flatten_row

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ the old, loaded merge


def _old_merge(rows: list[dict]) -> dict[str, np.ndarray]:
    merged: dict = {}
    order: list = []
    no_step: list[dict] = []
    for raw in rows:
        if any(k in raw for k in SUMMARY_KEYS[:2]):
            continue
        row = flatten_row(raw)
        s = row.get("step")
        if not isinstance(s, (int, float)) or isinstance(s, bool):
            no_step.append(row)
            continue
        if s != s:  # a NaN step is no step to merge on, whichever NaN object it is
            s = object()
        if s in merged:
            merged[s].update({k: v for k, v in row.items() if v is not None})
        else:
            merged[s] = dict(row)
            order.append(s)

    def scalar(v):
        if isinstance(v, bool):
            return float(v)
        return v if isinstance(v, (int, float, str)) else None

    table = rows_to_columns([merged[s] for s in order] + no_step, scalar)
    return {k: to_float_array(v) for k, v in table.items()}


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["0.5", "nan", "x", "True"]),
    st.just([1, 2]),
    st.just({"inner": 0.25}),
)
_rows = st.lists(
    st.dictionaries(
        st.sampled_from(["step", "loss", "reward", "eval_reward", "kl", "train_runtime", "rewards"]),
        _values,
        max_size=6,
    ).map(lambda r: {**r, "step": r["step"]} if "step" in r and not isinstance(r["step"], (dict, list)) else r),
    max_size=30,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(rows=_rows)
def test_streamed_merge_equals_the_loaded_merge(rows):
    table, _ = merge_rows(rows)
    old = _old_merge(rows)
    assert list(table) == list(old)  # the same columns in the same order
    for k in old:
        assert np.array_equal(table[k], old[k], equal_nan=True), k


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(rows=_rows, wrapper=st.booleans(), chunk=st.sampled_from([1, 7, 64, 1 << 20]))
# json parses every NaN to one object: two rows with NaN steps were merged as one step
@example(
    rows=[{"step": False, "loss": False}, {"step": math.nan, "loss": False}, {"step": math.nan, "loss": False}],
    wrapper=False,
    chunk=1,
)
@example(
    rows=[{"step": False, "loss": False}, {"step": math.nan}, {"step": math.nan, "reward": None}],
    wrapper=False,
    chunk=1,
)
def test_scanned_document_equals_json_loads(tmp_path_factory, rows, wrapper, chunk):
    """A trainer_state.json read by the scanner, whatever its chunk size, gives the run the
    loaded document gave."""
    from unittest import mock

    import grpofit.readers.jsonscan as js
    from grpofit.core.errors import GrpofitError
    from grpofit.core.runs import make_run

    doc = (
        {"best_metric": None, "log_history": rows, "logging_steps": 10, "stateful_callbacks": {"x": [1, {"y": 2}]}}
        if wrapper
        else rows
    )
    path = tmp_path_factory.mktemp("hf") / "trainer_state.json"
    path.write_text(json.dumps(doc, indent=1))
    try:
        ref = make_run("r", "r", "trainer_state", _old_merge(rows), step=None)
    except GrpofitError:
        ref = None
    with mock.patch.object(js, "CHUNK", chunk):
        try:
            [run] = read_path(str(path))
        except GrpofitError:
            assert ref is None or not ref.numeric_columns() or not rows
            return
    assert ref is not None
    assert np.array_equal(run.steps, ref.steps) and list(run.metrics) == list(ref.metrics)
    for k in ref.metrics:
        assert np.array_equal(run.metrics[k], ref.metrics[k], equal_nan=True), k
    assert run.warnings == ref.warnings
    if wrapper:
        assert run.config.get("trainer_state.logging_steps") == 10


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "rew', "not valid JSON"),
        ('{"log_history": [{"step": 1, "reward": 0.1}] "x": 1}', "not valid JSON"),
        ('{"log_history": [{"step": 1, "reward": 0.1}]} {}', "not valid JSON"),
        ('{"log_history": []}', "log_history is empty"),
        ('{"log_history": 3}', "without log_history"),
        ("{}", "without log_history"),
        ("[1, 2]", "items are not log rows"),
        ('"text"', "not a list of log rows"),
        ('{"log_history": [{"step": 1, "reward": 1' + "2" * 3000, "not valid JSON"),
    ],
)
def test_scanned_document_errors(tmp_path, monkeypatch, text, message):
    import grpofit.readers.jsonscan as js
    from grpofit.core.errors import GrpofitError
    from grpofit.readers.hf import read_hf
    from grpofit.readers.source import Source

    monkeypatch.setattr(js, "CHUNK", 16)
    path = tmp_path / "trainer_state.json"
    path.write_text(text)
    with pytest.raises(GrpofitError, match=message):
        read_hf(Source(str(path), str(path)), "trainer_state")


def test_number_cut_at_a_chunk_edge_is_not_shortened(tmp_path, monkeypatch):
    import grpofit.readers.jsonscan as js

    rows = [{"step": s, "reward": 0.123456789 + s} for s in range(50)]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": rows, "max_steps": 123456789}))
    for chunk in range(1, 40):
        monkeypatch.setattr(js, "CHUNK", chunk)
        [run] = read_path(str(path))
        assert np.array_equal(run.metrics["reward"], [r["reward"] for r in rows])
        assert run.config["trainer_state.max_steps"] == 123456789


# ------------------------------------------------------------------ console readers: same rows


def test_console_readers_read_line_by_line_the_same(tmp_path):
    """\\r redraws, a BOM, a bad UTF-8 byte and ANSI colours give what the whole-text readers gave."""
    verl = tmp_path / "verl.log"
    lines = ["\ufeff(TaskRunner pid=1) {'trainer': {'total_epochs': 1}}"]
    for s in range(1, 40):
        lines.append(
            f"(TaskRunner pid=1) \x1b[36mstep:{s} - critic/score/mean:{0.1 + s / 100:.4f} - actor/kl:{s / 1e4}\x1b[0m"
        )
    verl.write_bytes(("\n".join(lines) + "\n").encode() + b"step:40 - critic/score/mean:\xff0.5 - x:1\n")
    [run] = read_path(str(verl))
    assert run.format == "verl-console" and run.steps[-1] == 40 and run.config
    assert run.metrics["critic/score/mean"][0] == pytest.approx(0.11) and np.isnan(run.metrics["critic/score/mean"][-1])
    trl = tmp_path / "trl.log"
    body = "".join(
        f"\r{s * 10}%|##| {s}/20 [00:01<00:10]{{'loss': '{0.5 / s:.4f}', 'reward': {s / 20}, 'epoch': {s / 20}}}\n"
        + (f"{{'eval_reward': {s / 25}, 'epoch': {s / 20}}}\n" if s % 5 == 0 else "")
        for s in range(1, 21)
    )
    trl.write_text(body + "{'train_runtime': 10.0, 'train_loss': 0.1}\n")
    [run] = read_path(str(trl))
    assert run.format == "trl-console" and list(run.steps) == list(range(1, 21))
    assert run.metrics["eval_reward"][4] == pytest.approx(0.2) and np.isnan(run.metrics["eval_reward"][3])
    kv = tmp_path / "progress.log"
    kv.write_text("".join(f"Epoch:[1/1]({i}/30), Reward: {i / 30:.4f}, KL: 0.01, Loss: 0.5\r" for i in range(1, 31)))
    [run] = read_path(str(kv))
    assert run.format == "kv-console" and list(run.steps) == list(range(1, 31))


# ------------------------------------------------------------------ the memory bound


def _trainer_state(path: Path, n: int) -> None:
    rng = random.Random(0)
    keys = [
        "loss",
        "grad_norm",
        "learning_rate",
        "reward",
        "reward_std",
        "kl",
        "entropy",
        "completions/mean_length",
        "rewards/accuracy_reward/mean",
        "frac_reward_zero_std",
    ]
    with open(path, "w") as f:
        f.write('{"global_step": %d, "log_history": [\n' % n)
        for s in range(1, n + 1):
            row = {k: rng.random() for k in keys}
            row["step"] = s
            f.write("  " + json.dumps(row) + (",\n" if s < n else "\n"))
        f.write('], "logging_steps": 1, "max_steps": %d}\n' % n)


def _console(path: Path, kind: str, n: int) -> None:
    rng = random.Random(1)
    keys = ["loss", "grad_norm", "reward", "reward_std", "kl", "entropy", "clip_ratio", "lr"]
    with open(path, "w") as f:
        for s in range(1, n + 1):
            if kind == "verl":
                f.write(
                    f"(TaskRunner pid=7) step:{s} - " + " - ".join(f"actor/{k}:{rng.random():.6f}" for k in keys) + "\n"
                )
            elif kind == "trl":
                f.write(f" 10%|#  | {s}/{n} [00:01<00:09]" + repr({k: f"{rng.random():.6f}" for k in keys}) + "\n")
            else:
                f.write(f"Epoch:[1/1]({s}/{n}), " + ", ".join(f"{k}: {rng.random():.6f}" for k in keys) + "\n")


MEASURE = (
    "import os, sys, tracemalloc\n"
    "import grpofit.readers as r, grpofit.readers.hf, grpofit.readers.console, grpofit.readers.keyvalue\n"
    "path = sys.argv[1]\n"
    "tracemalloc.start()\n"
    "[run] = r.read_path(path)\n"
    "peak = tracemalloc.get_traced_memory()[1]\n"
    "print(peak / os.path.getsize(path), run.format, run.steps.size)\n"
)


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("kind", ["trainer_state", "verl", "trl", "progress"])
def test_reader_peak_memory_is_a_bounded_multiple_of_the_file(tmp_path, kind):
    """Python-level peak (tracemalloc, in a child) of reading a 6,000-row log of 1-2 MB: at most
    the file's size plus 2 MB (the sniffer's and the scanner's buffers; the columns themselves
    are about a fifth of the file). The loaded readers peaked at 5.7x (trainer_state), 6.3x
    (verl), 7.1x (TRL) and 8.3x (progress lines) the file on these logs."""
    n = 6000
    path = tmp_path / ("trainer_state.json" if kind == "trainer_state" else f"{kind}.log")
    if kind == "trainer_state":
        _trainer_state(path, n)
    else:
        _console(path, kind, n)
    r = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert r.returncode == 0, r.stderr
    ratio, fmt, rows = r.stdout.split()
    assert (
        int(rows) == n
        and fmt
        == {"trainer_state": "trainer_state", "verl": "verl-console", "trl": "trl-console", "progress": "kv-console"}[
            kind
        ]
    )
    size = path.stat().st_size
    peak = float(ratio) * size
    assert 1e6 < size < 3e6
    assert peak < size + 2e6, f"{kind}: peak {peak / 1e6:.1f} MB for a {size / 1e6:.1f} MB file"
