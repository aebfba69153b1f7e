"""``cronwave leader``: who holds the planner lease."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from cronwave.cli import _render
from cronwave.cli._console import connected, out

app = typer.Typer()


@app.command()
def leader(
    scope: Annotated[str, typer.Option("--scope", help="The lease's name.")] = "planner",
) -> None:
    """Show who holds the lease: holder, fencing token, expiry."""
    with connected() as client:
        lease = client.leader(scope)
        console = out()
        console.print(_render.lease_fields(lease))
        if not lease.held:
            console.print(
                f"[yellow]nobody holds the {escape(repr(scope))} lease: no planner is running, "
                "or one is taking over right now[/]"
            )
