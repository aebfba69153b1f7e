"""``register``: the server's commands joining the ``cronwave`` app (the server
distribution's entry point ``server`` of the group ``cronwave.cli``)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the server's commands to the ``cronwave`` app."""
    from cronwave_server.cli import bench, load, suite_cmds, trace, waterfall, worker_cmd

    app.add_typer(suite_cmds.app)  # up
    app.add_typer(bench.app)  # bench
    app.add_typer(waterfall.app)  # waterfall
    app.add_typer(trace.app, name="trace")
    app.add_typer(load.app)  # load
    app.add_typer(worker_cmd.app)  # worker
