"""The demos are the billing example's (examples/billing), a job package of its own that
adds them to ``cronwave`` through its entry point of the group ``cronwave.cli``:
without it they say how to install it, before starting anything."""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from cronwave.cli import _extensions
from cronwave_billing.demo.cli import register


def _without_the_example(monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    """The ``cronwave`` app's commands as an installation without the billing example
    (its server, but not its ``cronwave.cli`` entry point) adds them."""
    installed = [p for p in entry_points(group=_extensions.GROUP) if p.name != _extensions.EXAMPLE]

    def found(group: str) -> list[EntryPoint]:
        return installed if group == _extensions.GROUP else list(entry_points(group=group))

    monkeypatch.setattr(_extensions, "entry_points", found)
    app = typer.Typer()
    _extensions.add_installed(app)
    return app


@pytest.mark.parametrize("args", [["demo"], ["demo", "billing"]], ids=" ".join)
def test_a_demo_without_the_billing_example_says_how_to_install_it(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an installation in which the example's package cannot be found
    app = _without_the_example(monkeypatch)

    # When a demo starts
    result = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path / "d")], env={})

    # Then it refuses, saying what to install and how, having started nothing
    assert result.exit_code == 1, result.stdout
    assert "pip install -e examples/billing" in result.stderr
    assert not (tmp_path / "d" / "logs").exists()


def test_the_billing_example_is_installed_here() -> None:
    # make setup installs it: its entry point adds the demos
    (point,) = entry_points(group=_extensions.GROUP, name=_extensions.EXAMPLE)
    assert point.load() is register
