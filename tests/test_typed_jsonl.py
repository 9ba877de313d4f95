"""Typed-record JSONL: records keyed by type/split/phase/event/mode become prefixed columns."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpofit.core.errors import GrpofitError
from grpofit.core.roles import choose_reward, detect_roles
from grpofit.readers import inspect_run, read_bytes, read_path
from tests.conftest import assert_reads_or_fails_cleanly


def _typed_log(path, kind_key="type", step_key="grpo_step", n=60):
    """Written as a custom loop writes it: json.dumps per record, rollout + train every step,
    eval every 6 steps (and at step 0)."""
    rng = np.random.default_rng(0)
    lines = [{kind_key: "eval", step_key: 0, "reward": 0.1}]
    for s in range(1, n + 1):
        r = 0.8 - 0.6 * np.exp(-s / 15) + rng.normal(0, 0.02)
        lines.append({kind_key: "rollout", step_key: s, "reward": r, "mean_reward": r, "reward_std": 0.3})
        lines.append({kind_key: "train", step_key: s, "optimizer_step": 2 * s, "grad_norm": 0.5, "token_entropy": 0.4})
        if s % 6 == 0:
            lines.append({kind_key: "eval", step_key: s, "reward": r - 0.3})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_kinds_become_prefixed_columns_aligned_on_grpo_step(tmp_path):
    run = read_path(str(_typed_log(tmp_path / "metrics.jsonl")))[0]
    assert run.step_column == "grpo_step"
    assert list(run.steps) == list(range(61))
    assert {"eval/reward", "rollout/reward", "rollout/mean_reward", "train/grad_norm", "optimizer_step"} <= set(
        run.metrics
    )
    assert "reward" not in run.metrics and "type" not in run.metrics
    # the eval reward never leaks into the train reward
    assert run.series("rollout/reward")[0].size == 60
    assert list(run.series("eval/reward")[0]) == [0, 6, 12, 18, 24, 30, 36, 42, 48, 54, 60]
    assert run.metrics["eval/reward"][6] == pytest.approx(run.metrics["rollout/reward"][6] - 0.3)
    roles = detect_roles(run.numeric_columns())
    assert roles["reward"] == "rollout/reward" and roles["eval_reward"] == "eval/reward"
    assert roles["entropy"] == "train/token_entropy" and roles["grad_norm"] == "train/grad_norm"
    assert roles["reward_std"] == "rollout/reward_std"
    info = inspect_run(run)
    assert info["stats"]["record_kinds"] == 3
    assert any("typed records ('type': eval 11, rollout 60, train 60)" in w for w in info["warnings"])
    assert info["duplicates"] == 0


@pytest.mark.parametrize("kind_key", ["type", "split", "phase", "event", "mode"])
@pytest.mark.parametrize("step_key", ["grpo_step", "optimizer_step", "step", "iteration"])
def test_every_kind_and_step_field(tmp_path, kind_key, step_key):
    path = _typed_log(tmp_path / "m.jsonl", kind_key, step_key, n=12)
    run = read_path(str(path))[0]
    assert run.step_column == step_key
    assert choose_reward(run.numeric_columns())["column"] == "rollout/reward"
    assert run.series("eval/reward")[0].size == 3


def test_one_kind_keeps_the_names(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps({"mode": "train", "step": s, "reward": s / 10}) + "\n" for s in range(10)))
    run = read_path(str(path))[0]
    assert "reward" in run.metrics and run.steps.size == 10
    assert any("one kind" in w for w in run.warnings)


def test_repeated_step_of_a_kind_keeps_the_last(tmp_path):
    rows = [{"type": "rollout", "step": s, "reward": s} for s in (1, 2, 3)]
    rows += [{"type": "rollout", "step": 2, "reward": 20}, {"type": "eval", "step": 2, "reward": 0.5}]
    run = read_bytes("".join(json.dumps(r) + "\n" for r in rows).encode(), "-")[0]
    assert run.metrics["rollout/reward"][1] == 20
    assert run.stats["duplicates"] == 1
    assert any("repeat a step" in w for w in run.warnings)


def test_flat_jsonl_is_untouched(tmp_path):
    run = read_bytes(b'{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n', "-")[0]
    assert list(run.metrics) == ["reward"] and not run.warnings


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=400), cut=st.floats(0, 1))
def test_arbitrary_and_truncated_bytes(tmp_path_factory, data, cut):
    """Random bytes, and a real typed log cut anywhere: a run or a one-line GrpofitError."""
    base = tmp_path_factory.mktemp("t")
    good = _typed_log(base / "m.jsonl", n=8).read_bytes()
    assert_reads_or_fails_cleanly((data, good[: int(len(good) * cut)], good[: int(len(good) * cut)] + data))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {"type": st.sampled_from(["rollout", "train", "eval", ""]), "grpo_step": st.integers(0, 5)},
            optional={
                "reward": st.floats(-1, 1),
                "kl": st.floats(0, 1),
                "nested": st.fixed_dictionaries({"a": st.integers(0, 3)}),
                "\x1fkind": st.just(1.0),
                "step": st.integers(0, 5),
                "split": st.sampled_from(["x", 3]),
            },
        ),
        min_size=1,
        max_size=25,
    )
)
def test_names_kept_per_record_shape_are_the_names_made_per_record(records):
    """Kinds.split names a record's keys once per shape (kind field, kind, keys): the table is
    the one naming every record afresh gives (MAX_SHAPES = 0 keeps no shape)."""
    import grpofit.readers.typed as typed

    data = "".join(json.dumps(r) + "\n" for r in records).encode()

    def read():
        try:
            return [
                (r.step_column, r.steps.tobytes(), {k: v.tobytes() for k, v in r.metrics.items()}, r.warnings, r.stats)
                for r in read_bytes(data, "typed.jsonl")
            ]
        except GrpofitError as exc:
            return str(exc)

    kept = read()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(typed, "MAX_SHAPES", 0)
        assert read() == kept
