"""``grpofit predict``: mass, damping, stiffness, regime and stability from hyperparameters."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from grpofit.cli.common import DEBUG, METRIC, RUN_PATTERN, TableOrJson, print_json
from grpofit.core.errors import ExitCode


def predict(
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate eta (Adam: see --adam)."),
    momentum: Optional[float] = typer.Option(None, "--momentum", help="Heavy-ball momentum mu (Adam: beta1)."),
    refresh_interval: Optional[float] = typer.Option(
        None, "--refresh-interval", help="Steps between policy refreshes K_ref."
    ),
    curvature: Optional[float] = typer.Option(None, "--curvature", help="Curvature K of the effective potential."),
    group_size: Optional[int] = typer.Option(
        None, "--group-size", help="Group size G (adds the 1/G fluctuation); at most 1e9, and 10,000 with --beta."
    ),
    noise: Optional[float] = typer.Option(
        None, "--noise", help="Noise strength D of the forcing (for the stationary fluctuation)."
    ),
    beta: Optional[float] = typer.Option(
        None, "--beta", help="With --group-size: KL weight of the softmax bandit whose finite-G plateau to report."
    ),
    arms: int = typer.Option(8, "--arms", help="... its number of arms."),
    correct: int = typer.Option(1, "--correct", help="... its number of correct arms."),
    adam: bool = typer.Option(
        False, "--adam", help="Treat --lr/--momentum as Adam's lr/beta1 (eta_eff = lr (1 - beta1))."
    ),
    from_run: Optional[str] = typer.Option(
        None,
        "--from-run",
        help="Measure K from this run's fitted timescale; --lr, --momentum (Adam beta1), --refresh-interval and --group-size not given are read from its config. FILE::RUN picks one run of a file.",
    ),
    run_pattern: Optional[str] = RUN_PATTERN,
    metric: Optional[str] = METRIC,
    what_if_lr: Optional[float] = typer.Option(
        None, "--what-if-lr", help="Predict the trajectory at this learning rate."
    ),
    what_if_momentum: Optional[float] = typer.Option(None, "--what-if-momentum", help="... at this momentum."),
    what_if_refresh_interval: Optional[float] = typer.Option(
        None, "--what-if-refresh-interval", help="... at this refresh interval."
    ),
    prior: List[str] = typer.Option(
        [],
        "--prior",
        help="With --from-run and --what-if-*: finished runs (or a saved grpofit.prior/1 JSON) whose population prior forecasts the what-if run's final level (docs/prior.md; repeatable).",
    ),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Figure of the run, its fit and the what-if trajectory."),
    format: TableOrJson = typer.Option(TableOrJson.table, "--format"),
    debug: bool = DEBUG,
) -> int:
    """Closed-form mass, damping, stiffness, regime and stability from optimizer hyperparameters.

    Examples: grpofit predict --lr 1e-6 --momentum 0.9 --refresh-interval 4 --curvature 2000;
    grpofit predict --from-run run.csv --lr 1e-6 --momentum 0.9 --refresh-interval 2 --what-if-refresh-interval 8
    """
    if plot is not None:
        from grpofit.cli.common import check_writable
        from grpofit.render.plotting import check_suffix

        check_suffix(plot, option="--plot")
        check_writable(plot, "--plot")
    from grpofit.commands.predict import run_predict
    from grpofit.core.limits import check_predict

    what_if = {"lr": what_if_lr, "momentum": what_if_momentum, "refresh_interval": what_if_refresh_interval}
    check_predict(
        lr=lr,
        momentum=momentum,
        refresh_interval=refresh_interval,
        curvature=curvature,
        group_size=group_size,
        noise=noise,
        beta=beta,
        arms=arms,
        correct=correct,
        what_if=what_if,
    )
    doc, figure_data = run_predict(
        lr=lr,
        momentum=momentum,
        refresh_interval=refresh_interval,
        curvature=curvature,
        group_size=group_size,
        noise=noise,
        adam=adam,
        from_run=from_run,
        metric=metric,
        what_if={"lr": what_if_lr, "momentum": what_if_momentum, "refresh_interval": what_if_refresh_interval},
        bandit=None if beta is None else {"beta": beta, "arms": arms, "correct": correct},
        run_pattern=run_pattern,
        prior=list(prior) or None,
    )
    if format is TableOrJson.json:
        print_json(doc)
    else:
        from grpofit.render import tables as render

        render.print_tables(render.predict_tables(doc))
    if plot is not None:
        from grpofit.render.plotting import save_what_if_figure

        save_what_if_figure(figure_data, plot)
    return ExitCode.OK
