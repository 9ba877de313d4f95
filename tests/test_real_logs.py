"""Every real log in tests/data/real_logs reads into the series a person would pick.

For each file (sources and licenses in tests/data/real_logs/NOTICE.md): the column fitted, its role (train reward,
or the validation reward when that is all the run logged), the step column, the number of
points and the step range, and where a run's values start and end. A file added to the folder
without a row here fails :func:`test_every_real_log_is_covered`.
"""

from __future__ import annotations

import numpy as np
import pytest

from grpofit.core.roles import choose_reward, detect_roles
from grpofit.readers import read_path
from tests.reallogs import NOT_LOGS, REAL_LOGS, SHARED, VENDORED, real_log_names

REAL = REAL_LOGS
pytestmark = pytest.mark.real_logs

# file, format, runs in the file, run (suffix of its name; None: the only run), step column,
# column, role, points, first step, last step, (mean of the first 5 values, mean of the last 10)
CASES = [
    (
        "countdown_grpo_custom_beibeizzz.jsonl",
        "jsonl",
        1,
        None,
        "step",
        "mean_reward",
        "reward",
        500,
        1,
        500,
        (1.03, 1.15),
    ),
    (
        "deepgrpo_wandb_val_gsm8k_groupsize_sweep_qwen2.5-0.5b.csv",
        "wandb-export",
        5,
        "GRPO-n32-01131200",
        "Step",
        "val-core/GSM8K/reward/mean@1",
        "eval_reward",
        1002,
        0,
        5005,
        (0.46, 0.63),
    ),
    (
        "deepgrpo_wandb_val_gsm8k_gamma_sweep_qwen2.5-0.5b.csv",
        "wandb-export",
        6,
        "gamma2.0-lam1.0-01161659",
        "Step",
        "val-core/GSM8K/reward/mean@1",
        "eval_reward",
        592,
        0,
        2955,
        (0.46, 0.66),
    ),
    (
        "deepgrpo_wandb_val_gsm8k_treerl_instability.csv",
        "wandb-export",
        1,
        "TreeRL",
        "Step",
        "val-core/openai/gsm8k/acc/mean@1",
        "eval_reward",
        186,
        0,
        925,
        (0.52, 0.60),
    ),
    (
        "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv",
        "wandb-export",
        3,
        "[paper]GRPO_online",
        "train/global_step",
        "train/reward",
        "reward",
        1280,
        1,
        1280,
        (0.44, 0.37),
    ),
    (
        "rasbt_grpo_qwen3-0.6b_7_3_tracking.csv",
        "csv",
        1,
        None,
        "step",
        "reward_avg",
        "reward",
        500,
        1,
        500,
        (0.20, 0.51),
    ),
    (
        "rasbt_grpo_qwen3-0.6b_7_4_clip_ratio.csv",
        "csv",
        1,
        None,
        "step",
        "reward_avg",
        "reward",
        500,
        1,
        500,
        (0.23, 0.71),
    ),
    (
        "rasbt_grpo_qwen3-0.6b_7_5_kl_collapse.csv",
        "csv",
        1,
        None,
        "step",
        "reward_avg",
        "reward",
        500,
        1,
        500,
        (0.35, 0.0),
    ),
    (
        "rasbt_grpo_qwen3-0.6b_7_6_format_reward.csv",
        "csv",
        1,
        None,
        "step",
        "reward_avg",
        "reward",
        500,
        1,
        500,
        (1.10, 1.58),
    ),
    (
        "rasbt_grpo_qwen3-0.6b_7_6_format_reward_conditional.csv",
        "csv",
        1,
        None,
        "step",
        "reward_avg",
        "reward",
        500,
        1,
        500,
        (1.15, 1.33),
    ),
    (
        "unsloth_grpo_gsm8k_IMJONEZZ.trainer_state.json",
        "trainer_state",
        1,
        None,
        "step",
        "reward",
        "reward",
        250,
        1,
        250,
        (0.23, 1.58),
    ),
    (
        "verl_grpo_gsm8k_qwen2-7b_trtllm.tfevents",
        "tensorboard",
        1,
        None,
        "step",
        "critic/score/mean",
        "reward",
        134,
        1,
        134,
        (0.64, 0.91),
    ),
    (
        "verl_grpo_gsm8k_qwen3-30b-a3b_torchtitan_filelogger.jsonl",
        "verl-jsonl",
        1,
        None,
        "step",
        "critic/score/mean",
        "reward",
        87,
        1,
        87,
        (0.61, 0.90),
    ),
    (
        "verl_grpo_qwen25_3b_fsdp_base.tfevents",
        "tensorboard",
        1,
        None,
        "step",
        "critic/score/mean",
        "reward",
        105,
        1,
        105,
        (0.74, 0.96),
    ),
    # the one-step off-policy twins of the two runs above: the same 105 steps and the same eval
    # series; each starts lower than its on-policy run (3B 0.68 vs 0.74, 7B 0.52 vs 0.66) and ends
    # at the same level (0.96, 0.99)
    (
        "verl_grpo_qwen25_3b_fsdp_offpolicy.tfevents",
        "tensorboard",
        1,
        None,
        "step",
        "critic/score/mean",
        "reward",
        105,
        1,
        105,
        (0.68, 0.96),
    ),
    (
        "verl_grpo_qwen2_7b_fsdp_base.tfevents",
        "tensorboard",
        1,
        None,
        "step",
        "critic/score/mean",
        "reward",
        105,
        1,
        105,
        (0.66, 0.99),
    ),
    (
        "verl_grpo_qwen2_7b_fsdp_offpolicy.tfevents",
        "tensorboard",
        1,
        None,
        "step",
        "critic/score/mean",
        "reward",
        105,
        1,
        105,
        (0.52, 0.99),
    ),
    (
        "verlpr3389_ppo_qwen25_05b_dp2_run1.parsed.csv",
        "csv",
        1,
        None,
        "step",
        "critic/rewards/mean",
        "reward",
        116,
        1,
        116,
        (0.01, 0.51),
    ),
]

# eval series a person would also pick: file -> (column, points)
EVAL = {
    "verl_grpo_qwen2_7b_fsdp_base.tfevents": ("val-core/openai/gsm8k/reward/mean@1", 22),
    "verl_grpo_qwen2_7b_fsdp_offpolicy.tfevents": ("val-core/openai/gsm8k/reward/mean@1", 22),
    "verl_grpo_qwen25_3b_fsdp_offpolicy.tfevents": ("val-core/openai/gsm8k/reward/mean@1", 22),
    "verl_grpo_gsm8k_qwen2-7b_trtllm.tfevents": ("val-core/openai/gsm8k/acc/mean@1", 27),
    "verl_grpo_gsm8k_qwen3-30b-a3b_torchtitan_filelogger.jsonl": ("val-core/openai/gsm8k/acc/mean@1", 87),
    "rasbt_grpo_qwen3-0.6b_7_3_tracking.csv": ("eval_acc", 11),
}


def _run(name: str, fmt: str, nruns: int, which: str | None):
    runs = read_path(str(REAL / name))
    assert len(runs) == nruns
    assert {r.format for r in runs} == {fmt}
    if which is None:
        return runs[0]
    (run,) = [r for r in runs if r.name.endswith(which)]
    return run


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_real_log_reads_into_the_right_series(case):
    name, fmt, nruns, which, step_col, column, role, points, first, last, (start, end) = case
    run = _run(name, fmt, nruns, which)
    assert run.step_column == step_col
    choice = choose_reward(run.numeric_columns())
    assert (choice["column"], choice["role"]) == (column, role)
    steps, values = run.series(column)
    assert steps.size == points
    assert (steps[0], steps[-1]) == (first, last)
    assert np.all(np.diff(steps) > 0)
    assert values[:5].mean() == pytest.approx(start, abs=0.01)
    assert values[-10:].mean() == pytest.approx(end, abs=0.01)
    if name in EVAL:
        ev, n = EVAL[name]
        assert detect_roles(run.numeric_columns(), {"reward": column})["eval_reward"] == ev
        assert run.series(ev)[0].size == n


def test_every_real_log_is_covered():
    covered = {c[0] for c in CASES} | {"heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_GradNorm.csv"}
    present = set(real_log_names())
    assert present <= covered, f"real logs without a test: {sorted(present - covered)}"
    if SHARED.is_dir():  # a log added to ../shared/real_logs is vendored and covered too
        shared = {p.name for p in SHARED.iterdir() if p.is_file() and p.name not in NOT_LOGS}
        assert shared <= present, f"real logs in {SHARED} not vendored in {VENDORED}: {sorted(shared - present)}"


def _notice() -> dict[str, dict[str, str]]:
    """NOTICE.md's table: file -> its row."""
    lines = [ln for ln in (VENDORED / "NOTICE.md").read_text(encoding="utf-8").splitlines() if ln.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return {r["file"]: r for r in (dict(zip(head, (c.strip() for c in ln.strip("|").split("|")))) for ln in lines[2:])}


def test_vendored_logs_are_byte_for_byte_the_sources_with_a_notice_row():
    """Each vendored log has a NOTICE row naming its repository, commit, path and license, and
    still has the git blob id of the source's file (so it is byte for byte that file)."""
    import hashlib

    rows = _notice()
    names = sorted(p.name for p in VENDORED.iterdir() if p.name not in NOT_LOGS)
    assert sorted(rows) == names
    for name in names:
        row = rows[name]
        assert row["repository"] and row["path there"] and len(row["commit"]) >= 7, name
        assert "Apache-2.0" in row["license"] or "MIT" in row["license"], name
        data = (VENDORED / name).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == row["blob id"], name
        if (SHARED / name).is_file():
            assert (SHARED / name).read_bytes() == data, name


def test_rasbt_restart_keeps_the_last_occurrence():
    """7_3 logs steps 1-5 twice (a restart, total_steps 300 then 500): the second rows win."""
    run = read_path(str(REAL / "rasbt_grpo_qwen3-0.6b_7_3_tracking.csv"))[0]
    assert "total_steps" in run.metrics  # a constant (the plan length), not the step
    assert run.step_column == "step"
    assert run.metrics["total_steps"][0] == 500
    assert run.stats["duplicates"] == 5


def test_gradnorm_panel_joins_the_reward_panel_by_run_name():
    """The GradNorm export has no reward; diagnose joins it to the TrainReward export by run name.
    GRPO's grad norm first exceeds 0.5 at step 749 (PROVENANCE.md)."""
    from grpofit.readers.panels import join_by_run_name

    runs = read_path(str(REAL / "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_GradNorm.csv"))
    assert all(choose_reward(r.numeric_columns())["column"] is None for r in runs)
    runs += read_path(str(REAL / "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv"))
    joined = join_by_run_name(runs)
    assert len(joined) == 3
    grpo = next(r for r in joined if r.name.endswith("[paper]GRPO_online"))
    assert choose_reward(grpo.numeric_columns())["column"] == "train/reward"
    steps, gn = grpo.series("train/grad_norm")
    assert steps[np.argmax(gn > 0.5)] == 749


def test_validation_only_fit_names_the_role(tmp_path):
    """A validation-only export is fitted, and the fit says it is the validation reward."""
    from grpofit.fitting.analysis import fit_run
    from grpofit.render.tables import fit_tables

    run = _run("deepgrpo_wandb_val_gsm8k_treerl_instability.csv", "wandb-export", 1, "TreeRL")
    doc = fit_run(run).summary()
    assert doc["metric"] == "val-core/openai/gsm8k/acc/mean@1"
    assert doc["role"] == "eval_reward"
    assert "validation reward" in doc["metric_note"]
    (table,) = fit_tables([doc])
    assert "validation reward" in str(table.title)


def test_several_candidates_say_which_was_chosen():
    run = _run("countdown_grpo_custom_beibeizzz.jsonl", "jsonl", 1, None)
    choice = choose_reward(run.numeric_columns())
    assert choice["candidates"] == ["mean_reward", "accuracy"]
    assert "'mean_reward' chosen over 'accuracy'" in choice["note"]
