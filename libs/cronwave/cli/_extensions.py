"""Commands other distributions add to the ``cronwave`` app: each entry point of the
group ``cronwave.cli`` names a function that takes the app and adds its commands
(``app.add_typer(...)``), as the server distribution's ``server`` does. The SDK
imports none of them by name.

Without the server distribution, its commands still show in ``--help``, and each says
what to install instead of running; so does ``demo`` without the billing example's
distribution (``cronwave-example-billing``, which adds it)."""

from __future__ import annotations

from importlib.metadata import entry_points

import typer

from cronwave.cli._console import SERVER_HINT, fail

GROUP = "cronwave.cli"
#: The entry point of the server distribution (``cronwave[server]``).
SERVER = "server"
#: The commands the server distribution adds.
SERVER_COMMANDS = ("up", "bench", "waterfall", "trace", "load", "worker")
#: The entry point of the billing example's distribution, which needs the server's.
EXAMPLE = "billing"
#: The commands the billing example adds.
EXAMPLE_COMMANDS = ("demo",)


def add_installed(app: typer.Typer) -> None:
    """Add the commands of every installed ``cronwave.cli`` entry point to ``app`` (the
    server's first, then the others by name), and a refusal for each command of the
    server or of the billing example when that is not installed."""
    found = sorted(entry_points(group=GROUP), key=lambda point: (point.name != SERVER, point.name))
    for point in found:
        point.load()(app)
    names = {point.name for point in found}
    if SERVER not in names:
        for name in (*SERVER_COMMANDS, *EXAMPLE_COMMANDS):
            _add_refusal(
                app,
                name,
                "(needs the server: pip install 'cronwave[server]')",
                f"`cronwave {name}` needs the server packages (not installed)",
                SERVER_HINT,
            )
    elif EXAMPLE not in names:
        for name in EXAMPLE_COMMANDS:
            _add_refusal(
                app,
                name,
                "(needs the billing example: pip install -e examples/billing)",
                f"`cronwave {name}` needs the billing example (the cronwave-example-billing "
                "distribution), which is not installed: run `pip install -e examples/billing` "
                "in a checkout of cronwave (`make setup` does), then try again",
            )


def _add_refusal(app: typer.Typer, name: str, summary: str, message: str, hint: str = "") -> None:
    """``cronwave NAME``, listed with ``summary``, failing with ``message`` (and ``hint``)
    whatever it is given."""

    @app.command(
        name,
        help=summary,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )
    def refused(ctx: typer.Context) -> None:
        fail(message, hint)
