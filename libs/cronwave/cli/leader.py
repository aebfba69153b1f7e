"""``cronwave leader``: who holds the planner lease."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from cronwave.cli import _json, _render
from cronwave.cli._console import connected, out
from cronwave.cli._json import Output, OutputOption

app = typer.Typer()


@app.command()
def leader(
    scope: Annotated[str, typer.Option("--scope", help="The lease's name.")] = "planner",
    output: OutputOption = Output.TABLE,
) -> None:
    """Show who holds the lease: holder, ttl, expiry (its fencing token is the
    holder's alone)."""
    with connected() as client:
        lease = client.leader(scope)
        if output is Output.JSON:
            _json.emit(_json.lease(lease))
            return
        console = out()
        console.print(_render.lease_fields(lease))
        if not lease.held:
            console.print(
                f"[yellow]nobody holds the {escape(repr(scope))} lease: no planner is running, "
                "or one is taking over right now[/]"
            )
