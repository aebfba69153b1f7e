"""The ``cronwave`` app. Each command group is one module exposing a ``typer.Typer``
named ``app``; adding a group is that module plus one ``add_typer`` line here
(no ``name``: its commands join the top level, or the group they are added to).

Other distributions add commands through the entry point group ``cronwave.cli``
(``cli._extensions``): the server's ``up``, ``bench``, ``worker`` and the rest, the
billing example's ``demo``.

Every module is imported to register its commands, on every call (``--help`` too), so
a module imports only what its options need; what a command needs to run (the suite,
the benchmarks, the waterfall, SQLAlchemy, Redis...) is imported inside the command.
``tests/cli/test_light_install.py`` holds the CLI to it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cronwave.cli import (
    apply,
    audit,
    auth,
    dlq,
    leader,
    runs,
    schedule,
    status,
)
from cronwave.cli._console import choose_data_dir
from cronwave.cli._extensions import add_installed

app = typer.Typer(
    name="cronwave",
    help="cronwave: exactly-once cron for jobs such as nightly billing.",
    # No arguments: the help on stdout, exit 2 (see ``main``).
    invoke_without_command=True,
    pretty_exceptions_show_locals=False,
    # Plain help: typer's rich help imports rich.markdown and markdown_it, which would
    # double the time of every `--help`.
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"cronwave {version('cronwave')}")
        except PackageNotFoundError:
            typer.echo("cronwave (not installed)")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    _version_flag: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Talk to the suite that `cronwave up --data-dir` runs there (default: "
            "CRONWAVE_DATA_DIR, else $XDG_STATE_HOME/cronwave or ~/.local/state/cronwave, "
            "whatever the current folder; CRONWAVE_*_ADDR variables still win).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """cronwave: exactly-once cron for jobs such as nightly billing."""
    choose_data_dir(data_dir)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)


app.add_typer(schedule.app, name="schedule")
app.add_typer(apply.app)  # apply
app.add_typer(runs.app, name="runs")
app.add_typer(dlq.app, name="dlq")
app.add_typer(audit.app, name="audit")
app.add_typer(auth.app, name="auth")
app.add_typer(leader.app)  # leader
app.add_typer(status.app)  # status
# The server's commands (up, demo, bench, worker...) and any other distribution's.
add_installed(app)
