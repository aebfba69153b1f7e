"""Commands other distributions add to the ``cronwave`` app: each entry point of the
group ``cronwave.cli`` names a function that takes the app and adds its commands
(``app.add_typer(...)``), as the server distribution's ``server`` does. The SDK
imports none of them by name.

Without the server distribution, its commands still show in ``--help``, and each says
what to install instead of running."""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

from cronwave.cli._console import SERVER_HINT, fail

GROUP = "cronwave.cli"
#: The entry point of the server distribution (``cronwave[server]``).
SERVER = "server"
#: The commands the server distribution adds.
SERVER_COMMANDS = ("up", "demo", "bench", "waterfall", "trace", "load", "worker")


def add_installed(app: typer.Typer) -> None:
    """Add the commands of every installed ``cronwave.cli`` entry point to ``app``,
    and a refusal for each server command when the server is not installed."""
    found = sorted(entry_points(group=GROUP), key=lambda point: point.name)
    for point in found:
        point.load()(app)
    if not any(point.name == SERVER for point in found):
        for name in SERVER_COMMANDS:
            _add_refusal(app, name)


def _add_refusal(app: typer.Typer, name: str) -> None:
    @app.command(
        name,
        help="(needs the server: pip install 'cronwave[server]')",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )
    def refused(ctx: typer.Context) -> None:
        fail(f"`cronwave {name}` needs the server packages (not installed)", SERVER_HINT)
