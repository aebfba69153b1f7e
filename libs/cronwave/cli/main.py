"""The ``cronwave`` app. Each command group is one module exposing a ``typer.Typer``
named ``app``; adding a group is that module plus one ``add_typer`` line here
(no ``name``: its commands join the top level, or the group they are added to)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from cronwave.cli import (
    bench,
    demo,
    dlq,
    leader,
    load,
    runs,
    schedule,
    suite_cmds,
    trace,
    waterfall,
    worker_cmd,
)

app = typer.Typer(
    name="cronwave",
    help="cronwave: exactly-once cron for jobs such as nightly billing.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        try:
            typer.echo(f"cronwave {version('cronwave')}")
        except PackageNotFoundError:
            typer.echo("cronwave (not installed)")
        raise typer.Exit()


@app.callback()
def main(
    _version_flag: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """cronwave: exactly-once cron for jobs such as nightly billing."""


app.add_typer(suite_cmds.app)  # up
app.add_typer(demo.app)  # demo
app.add_typer(schedule.app, name="schedule")
app.add_typer(runs.app, name="runs")
app.add_typer(dlq.app, name="dlq")
app.add_typer(leader.app)  # leader
app.add_typer(bench.app)  # bench
app.add_typer(waterfall.app)  # waterfall
app.add_typer(trace.app, name="trace")
app.add_typer(load.app)  # load
app.add_typer(worker_cmd.app)  # worker
