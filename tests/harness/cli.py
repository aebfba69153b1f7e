"""Running the ``cronwave`` CLI as a process of its own, as a user's shell would, and
finding ports for a ``cronwave up`` beside the other tests; and typer's ``CliRunner``
building each app's command once per test process."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import click
import typer
import typer.testing

from cronwave_core.suite import OWN_PORTS_VAR
from cronwave_core.suite import free_port_base as suite_port_base
from cronwave_server.cli.suite_cmds import PORT_ORDER

#: ``python -c CLI ARGS...`` runs the CLI of this checkout (no console script needed).
CLI = "import sys; from cronwave.cli.main import app; sys.argv[0] = 'cronwave'; app()"


def cronwave_argv() -> list[str]:
    """The argv prefix of a ``cronwave`` process: append its arguments."""
    return [sys.executable, "-c", CLI]


def free_port_base(count: int = len(PORT_ORDER) + 1) -> int:
    """A port N with N..N+count-1 free now, for ``cronwave up --port-base N``: the
    suite's ports and its console's (``cronwave_core.suite.free_port_base``)."""
    return suite_port_base(count)


def user_env() -> dict[str, str]:
    """This process's environment without its CRONWAVE_ settings, as a user's shell has
    it, but with this test process's own port range (``CRONWAVE_OWN_PORTS``): what a
    ``cronwave`` process started with it picks stays out of other tests' ports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
    if os.environ.get(OWN_PORTS_VAR):
        env[OWN_PORTS_VAR] = os.environ[OWN_PORTS_VAR]
    return env


@functools.cache
def _command_of(app: typer.Typer) -> click.Command:
    """``app``'s click command, built on first use. typer's ``CliRunner`` builds it from
    the app's signatures on every ``invoke`` (about 60 ms of CPU for ``cronwave``'s, and
    the tests invoke it hundreds of times); a built click command is reusable, as click
    means it to be, and an app's commands are all added when its module is imported."""
    return typer.main.get_command(app)


def build_commands_once() -> None:
    """Make typer's ``CliRunner`` use ``_command_of``: the one name it builds with."""
    testing: Any = typer.testing
    if getattr(testing, "_get_command", None) is typer.main.get_command:
        testing._get_command = _command_of
