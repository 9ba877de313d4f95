"""``grpofit simulate``: exact GRPO on a softmax bandit, written as a GRPO log."""

from __future__ import annotations

from pathlib import Path

import typer

from grpofit.cli.common import DEBUG, TableOrJson, check_out_folder, print_json
from grpofit.core.errors import ExitCode


def simulate_bandit(
    out: Path = typer.Option(..., "--out", help="Log to write: .csv or .jsonl (p* and K go to FILE.meta.json)."),
    arms: int = typer.Option(8, "--arms", min=2, help="Arms of the bandit (2 to 1,000)."),
    correct: int = typer.Option(1, "--correct", min=1),
    lr: float = typer.Option(0.1, "--lr", help="Learning rate (finite, in (0, 1000])."),
    momentum: float = typer.Option(0.0, "--momentum"),
    refresh_interval: int = typer.Option(1, "--refresh-interval", min=1),
    group_size: int = typer.Option(
        16,
        "--group-size",
        min=0,
        help="Samples per group; 0 = exact mean-field gradient. --groups x --group-size is at most 16,384 (memory).",
    ),
    groups: int = typer.Option(16, "--groups", min=1, help="Groups (prompts) per step."),
    beta: float = typer.Option(1.0, "--beta", min=0.0, help="KL weight to the uniform reference policy (0 to 1000)."),
    steps: int = typer.Option(500, "--steps", min=1, help="Steps to simulate (at most 1,000,000)."),
    seed: int = typer.Option(0, "--seed"),
    importance_ratio: bool = typer.Option(
        False, "--importance-ratio/--no-importance-ratio", help="Reweight stale samples by pi/pi_old."
    ),
    format: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    debug: bool = DEBUG,
) -> int:
    """Exact GRPO on a softmax bandit, written as a GRPO log.

    Example: grpofit simulate bandit --arms 8 --correct 1 --lr 0.5 --momentum 0.9 --refresh-interval 4 --group-size 16 --beta 1 --steps 600 --seed 0 --out bandit.csv
    """
    from grpofit.core.limits import check_simulate
    from grpofit.dynamics.simulation import run_simulation

    check_simulate(
        arms=arms,
        correct=correct,
        lr=lr,
        momentum=momentum,
        refresh_interval=refresh_interval,
        group_size=group_size,
        groups=groups,
        beta=beta,
        steps=steps,
        seed=seed,
    )
    check_out_folder(out)
    doc = run_simulation(
        out=out,
        arms=arms,
        correct=correct,
        lr=lr,
        momentum=momentum,
        refresh_interval=refresh_interval,
        group_size=group_size,
        groups=groups,
        beta=beta,
        steps=steps,
        seed=seed,
        importance_ratio=importance_ratio,
    )
    if format is TableOrJson.json:
        print_json(doc)
    else:
        from grpofit.render import tables as render

        render.print_tables(render.simulate_tables(doc, str(out)))
    return ExitCode.OK
