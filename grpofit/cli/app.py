"""The typer app: the root options (``--version``, ``--debug``) and one command per module.

The order of registration is the order ``grpofit --help`` lists the commands in.
"""

from __future__ import annotations

import typer

from grpofit import __version__
from grpofit.cli import backtest, compare, diagnose, fit, forecast, inspect, predict, rank, simulate, watch
from grpofit.cli.common import DEBUG

app = typer.Typer(
    name="grpofit",
    help="Fit, forecast and diagnose GRPO training runs from their logs.\n\n"
    "Examples:\n\n"
    "  grpofit fit run.csv\n\n"
    "  grpofit diagnose logdir/ --format markdown\n\n"
    "  grpofit predict --lr 1e-6 --momentum 0.9 --refresh-interval 4 --curvature 2000",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
simulate_app = typer.Typer(
    help="Simulate GRPO where the paper's reduction is exact.\n\n"
    "Example (an 8-arm bandit, then its fit):\n\n"
    "  grpofit simulate bandit --arms 8 --correct 1 --lr 0.5 --group-size 16 --steps 600 --seed 0 --out bandit.csv\n\n"
    "  grpofit fit bandit.csv",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(simulate_app, name="simulate")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"grpofit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    debug: bool = DEBUG,
) -> None:
    """Fit, forecast and diagnose GRPO training runs from their logs."""


app.command()(fit.fit)
app.command(cls=diagnose.DiagnoseCommand)(diagnose.diagnose)
app.command()(inspect.inspect)
app.command()(predict.predict)
simulate_app.command("bandit")(simulate.simulate_bandit)
app.command()(forecast.forecast)
app.command()(backtest.backtest)
app.command()(watch.watch)
app.command()(compare.compare)
app.command()(rank.rank)
