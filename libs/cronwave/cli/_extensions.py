"""Commands other distributions add to the ``cronwave`` app: each entry point of the
group ``cronwave.cli`` names a function that takes the app and adds its commands
(``app.add_typer(...)``), as the server distribution's ``server`` does. The SDK
imports none of them by name.

Without the server distribution, its commands still show in ``--help``, and each says
what to install instead of running; so does ``demo`` without the billing example's
distribution (``cronwave-example-billing``, which adds it)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points

import typer

from cronwave.cli._console import SERVER_HINT, fail

GROUP = "cronwave.cli"
#: The entry point of the server distribution (``cronwave[server]``).
SERVER = "server"
#: The entry point of the billing example's distribution, which needs the server's.
EXAMPLE = "billing"


@dataclass(frozen=True)
class Provider:
    """A distribution that adds commands by its entry point ``name``: the commands,
    and what each says when the distribution is not installed."""

    name: str
    commands: tuple[str, ...]
    summary: str  # in --help, beside each command
    needs: str  # the error's subject: "the server packages (not installed)", ...
    hint: str = ""


#: In the order they are looked for: a command whose distribution is missing is
#: refused for the first missing one it depends on (the example needs the server).
PROVIDERS = (
    Provider(
        SERVER,
        ("up", "bench", "waterfall", "trace", "load", "worker", "demo"),
        "(needs the server: pip install 'cronwave[server]')",
        "the server packages (not installed)",
        SERVER_HINT,
    ),
    Provider(
        EXAMPLE,
        ("demo",),
        "(needs the billing example: pip install -e examples/billing)",
        "the billing example (the cronwave-example-billing distribution), which is not "
        "installed: run `pip install -e examples/billing` in a checkout of cronwave "
        "(`make setup` does), then try again",
    ),
)


def add_installed(app: typer.Typer) -> None:
    """Add the commands of every installed ``cronwave.cli`` entry point to ``app`` (the
    server's first, then the others by name), and a refusal for each command of the
    server or of the billing example when that is not installed."""
    found = sorted(entry_points(group=GROUP), key=lambda point: (point.name != SERVER, point.name))
    for point in found:
        point.load()(app)
    names = {point.name for point in found}
    refused: set[str] = set()
    for provider in PROVIDERS:
        if provider.name in names:
            continue
        for command in provider.commands:
            if command not in refused:
                refused.add(command)
                _add_refusal(app, command, provider)


def _add_refusal(app: typer.Typer, name: str, provider: Provider) -> None:
    """``cronwave NAME``, listed with the provider's summary, failing with its message
    whatever it is given."""

    @app.command(
        name,
        help=provider.summary,
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )
    def refused(ctx: typer.Context) -> None:
        fail(f"`cronwave {name}` needs {provider.needs}", provider.hint)
