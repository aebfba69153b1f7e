"""``cronwave runs ...``: list runs, show one with its history, wait for one, cancel one."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer

from cronwave.cli import _json, _render
from cronwave.cli._console import connected, fail, out
from cronwave.cli._json import Output, OutputOption
from cronwave.cli._schedule_args import parse_duration

app = typer.Typer(
    help="List runs, show a run with its events, wait for a run, cancel a run.",
    no_args_is_help=True,
)

RunId = Annotated[str, typer.Argument(help="The run's id (see `cronwave runs list`).")]


@app.command("list")
def list_(
    schedule: Annotated[
        str | None, typer.Option("--schedule", help="Only runs of this schedule.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 50,
    state: Annotated[
        list[str] | None,
        typer.Option("--state", help="Only runs in this state (e.g. FAILED); repeatable."),
    ] = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """List runs, newest first."""
    with connected() as client:
        runs = client.list_runs(schedule, limit=limit, states=state or ())
        if output is Output.JSON:
            _json.emit([_json.run(r) for r in runs])
            return
        if not runs:
            out().print("no runs")
            return
        out().print(_render.runs_table(runs))


@app.command()
def show(run_id: RunId, output: OutputOption = Output.TABLE) -> None:
    """Show a run and its events in order."""
    with connected() as client:
        run = client.get_run(run_id)
        events = client.run_events(run_id)
        if output is Output.JSON:
            _json.emit({"run": _json.run(run), "events": [_json.event(e) for e in events]})
            return
        console = out()
        console.print(_render.run_fields(run))
        console.print(_render.events_table(events))


@app.command()
def events(run_id: RunId, output: OutputOption = Output.TABLE) -> None:
    """Show a run's history, oldest first."""
    with connected() as client:
        history = client.run_events(run_id)
        if output is Output.JSON:
            _json.emit([_json.event(e) for e in history])
            return
        out().print(_render.events_table(history))


@app.command()
def wait(
    run_id: RunId,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.0, help="Seconds to wait at most.")
    ] = 60.0,
    output: OutputOption = Output.TABLE,
) -> None:
    """Wait until a run is terminal. Exits 0 if it SUCCEEDED, 1 otherwise."""
    with connected() as client:
        if output is Output.JSON:
            run = client.wait_run(run_id, timeout=timedelta(seconds=timeout))
            _json.emit(_json.run(run))
        else:
            with out().status(f"waiting for run {run_id} ..."):
                run = client.wait_run(run_id, timeout=timedelta(seconds=timeout))
            out().print(_render.run_fields(run))
    if run.state != "SUCCEEDED":
        fail(f"run {run.run_id} ended {run.state}" + (f": {run.error}" if run.error else ""))


@app.command()
def cancel(
    run_id: RunId,
    grace: Annotated[
        str,
        typer.Option(
            "--grace",
            help="How long a running job may take to stop on its own (e.g. 30s, 2m; at "
            "most 1h; 0: at once). It sees ctx.cancelled meanwhile; past it, its body "
            "is stopped.",
        ),
    ] = "30s",
    reason: Annotated[
        str, typer.Option("--reason", help="Recorded as the run's error.")
    ] = "cancelled by an operator",
) -> None:
    """Cancel a run: it ends CANCELLED and is never retried or resumed. A run no worker
    holds ends at once; a running one once its job returns or its grace is over."""
    with connected() as client:
        run = client.cancel_run(run_id, grace=parse_duration(grace, "--grace"), reason=reason)
        console = out()
        if run.cancelling:
            console.print(
                f"run {run.run_id}: cancel requested; its job is stopped by "
                f"{_render.fmt_time(run.cancel_deadline)} at the latest"
            )
        console.print(_render.run_fields(run))
