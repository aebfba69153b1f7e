"""The demos need the billing example (examples/billing), a job package of its own:
without it they say how to install it, before starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cronwave.cli.main import app
from cronwave_bench import billing_demo as demo_billing


@pytest.mark.parametrize("args", [["demo"], ["demo", "billing"]], ids=" ".join)
def test_a_demo_without_the_billing_example_says_how_to_install_it(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an installation in which the example's package cannot be found
    monkeypatch.setattr(demo_billing, "EXAMPLE_PACKAGE", "cronwave_billing_not_installed")

    # When a demo starts
    result = CliRunner().invoke(app, [*args, "--data-dir", str(tmp_path / "d")], env={})

    # Then it refuses, saying what to install and how, having started nothing
    assert result.exit_code == 1, result.stdout
    assert "pip install -e examples/billing" in result.stderr
    assert not (tmp_path / "d" / "logs").exists()


def test_the_billing_example_is_installed_here() -> None:
    demo_billing.require_billing_example()  # make setup installs it
