"""typer's ``CliRunner`` in the tests reuses each app's built command
(``tests.harness.cli.build_commands_once``, turned on in ``pytest_configure``): a
typer release that builds it some other way makes this fail, not the suite slower."""

from __future__ import annotations

import typer
import typer.testing
from typer.testing import CliRunner

from cronwave.cli.main import app
from tests.harness.cli import _command_of


def test_the_runner_builds_the_cronwave_command_once_and_it_still_answers() -> None:
    assert getattr(typer.testing, "_get_command", None) is _command_of
    assert _command_of(app) is _command_of(app)

    first = CliRunner().invoke(app, ["schedule", "preview", "--cron", "0 2 * * *", "--count", "2"])
    second = CliRunner().invoke(app, ["--help"])

    assert first.exit_code == 0, first.output
    assert len(first.stdout.splitlines()) == 2
    assert second.exit_code == 0 and "schedule" in second.stdout


def test_another_app_gets_its_own_command() -> None:
    other = typer.Typer()

    @other.command()
    def hello(name: str) -> None:
        print(f"hello {name}")

    assert _command_of(other) is not _command_of(app)
    assert CliRunner().invoke(other, ["ada"]).stdout == "hello ada\n"
