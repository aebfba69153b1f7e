"""``cronwave status``: per schedule, whether it is active or paused, whether its last
slot ran on time and succeeded, and its deadline state; exit 3 while a deadline is
breached (a health check). A slot is a SCHEDULED, CATCHUP or BACKFILL run: a manual
trigger never answers for one."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from cronwave.cli import _json
from cronwave.cli._console import connected, out
from cronwave.cli._json import Output, OutputOption
from cronwave.cli._render import NONE, fmt_delta, fmt_time, schedule_status
from cronwave.cli._status import ScheduleStatus, document, status_of

app = typer.Typer()

#: The exit code while a schedule's deadline is breached (1 stays "the command failed").
BREACHED_EXIT = 3
#: A schedule's newest runs looked at for its last slot and a success since a breach.
RUNS_LOOKED_AT = 20


@app.command()
def status(
    schedule_id: Annotated[
        list[str] | None,
        typer.Option("--schedule", help="Only this schedule; repeatable (default: all)."),
    ] = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Per schedule: active or paused, its last slot (state, lateness, on time) and its
    deadline state; a manual trigger is no slot (a schedule only ever run by hand has
    "no slot yet").
    Exits 3 while a deadline is breached (the newest breach of a schedule with no
    success since), 0 otherwise: a health check for cron or a probe."""
    with connected() as client:
        schedules = (
            [client.get_schedule(s) for s in schedule_id]
            if schedule_id
            else client.list_schedules()
        )
        statuses = []
        for schedule in schedules:
            breaches = client.deadline_breaches(schedule.schedule_id, limit=1)
            runs = client.list_runs(schedule.schedule_id, limit=RUNS_LOOKED_AT)
            breach = breaches[0] if breaches else None
            complete = len(runs) < RUNS_LOOKED_AT
            statuses.append(status_of(schedule, runs, breach, complete=complete))
    if output is Output.JSON:
        _json.emit([document(s) for s in statuses])
    else:
        out().print(_table(statuses))
    if not all(s.healthy for s in statuses):
        raise typer.Exit(BREACHED_EXIT)


def _table(statuses: list[ScheduleStatus]) -> Table:
    table = Table(title=f"{len(statuses)} schedule(s)", title_justify="left")
    columns = ("schedule", "status", "last slot", "state", "lateness", "on time", "deadline")
    for name in (*columns, "breach"):
        table.add_column(name, no_wrap=name in ("schedule", "last slot"))
    for s in statuses:
        run, breach = s.last_slot, s.breach
        on_time = {None: NONE, True: "yes", False: "late"}[s.on_time]
        deadline = NONE if s.schedule.deadline is None else fmt_delta(s.schedule.deadline)
        state_style = {"breached": "red", "ok": "green"}.get(s.deadline_state, "")
        shown = Text(s.deadline_state, style=state_style)
        if breach is not None and s.deadline_state == "breached":
            shown = Text(
                f"breached: {breach.reason} (slot {fmt_time(breach.fire_time)})", style="red"
            )
        table.add_row(
            Text(s.schedule.schedule_id),
            schedule_status(s.schedule),
            fmt_time(run.fire_time) if run else Text(s.no_slot, style="yellow"),
            run.state if run else NONE,
            fmt_delta(run.lateness) if run and run.lateness is not None else NONE,
            on_time,
            deadline,
            shown,
        )
    return table
