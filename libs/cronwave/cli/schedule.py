"""``cronwave schedule ...``: create, list, describe, pause, resume, trigger, delete."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.text import Text

from cronwave import _enums
from cronwave._client import Client
from cronwave._models import Schedule
from cronwave.cli import _render
from cronwave.cli._console import connected, out
from cronwave_core.errors import CronwaveError, InvalidArgument

app = typer.Typer(
    help="Create, inspect, pause, resume, trigger and delete schedules.",
    no_args_is_help=True,
)

ScheduleId = Annotated[str, typer.Argument(help="The schedule's id, e.g. nightly-billing.")]


def parse_payload(text: str) -> dict[str, Any]:
    """The ``--payload`` JSON object; ``InvalidArgument('payload', ...)`` otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument("payload", f"not valid JSON ({exc.msg} at char {exc.pos})") from exc
    if not isinstance(value, dict):
        raise InvalidArgument(
            "payload", f"must be a JSON object such as '{{\"customers\": 200}}', got {text!r}"
        )
    return value


def next_fires(client: Client, schedule: Schedule, count: int = 5) -> list[datetime] | str:
    """The next fire times, or why the planner could not say (display only)."""
    if schedule.deleted:
        return "deleted: it does not fire"
    try:
        return client.preview(schedule, count=count)
    except CronwaveError as exc:
        return f"next fire times unavailable: {exc.message}"


def show_schedule(client: Client, schedule: Schedule) -> None:
    console = out()
    console.print(_render.schedule_fields(schedule))
    fires = next_fires(client, schedule)
    if isinstance(fires, str):
        console.print(Text(fires, style="yellow"))
    else:
        title = "Next fire times" + (" (paused: these are skipped)" if schedule.paused else "")
        console.print(_render.fires_table(fires, schedule.time_zone, title))


@app.command()
def create(
    schedule_id: ScheduleId,
    cron: Annotated[
        list[str],
        typer.Option("--cron", help="Cron expression (5 fields); repeat for several."),
    ],
    job_type: Annotated[
        str, typer.Option("--job-type", help="A job type a worker registered, e.g. cronwave.noop.")
    ],
    tz: Annotated[
        str, typer.Option("--tz", help="IANA zone the cron is read in, e.g. Europe/Berlin.")
    ] = "UTC",
    payload: Annotated[str, typer.Option("--payload", help="Job input as a JSON object.")] = "{}",
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    dst_gap: Annotated[
        str | None,
        typer.Option(help=f"Slot in a spring-forward gap: {'|'.join(_enums.DST_GAP_CHOICES)}."),
    ] = None,
    dst_repeat: Annotated[
        str | None,
        typer.Option(help=f"Slot in a fall-back hour: {'|'.join(_enums.DST_REPEAT_CHOICES)}."),
    ] = None,
    overlap: Annotated[
        str | None,
        typer.Option(help=f"Previous run still going: {'|'.join(_enums.OVERLAP_CHOICES)}."),
    ] = None,
    catchup: Annotated[
        str | None,
        typer.Option(help=f"Slots missed while down: {'|'.join(_enums.CATCHUP_CHOICES)}."),
    ] = None,
) -> None:
    """Create a schedule. Nothing is written when a field is wrong."""
    with connected() as client:
        schedule = client.create_schedule(
            schedule_id,
            cron=cron,
            time_zone=tz,
            job_type=job_type,
            payload=parse_payload(payload),
            paused=paused,
            dst_gap=dst_gap,
            dst_repeat=dst_repeat,
            overlap=overlap,
            catchup=catchup,
        )
        out().print(f"[green]created[/] schedule {schedule.schedule_id!r}")
        show_schedule(client, schedule)


@app.command("list")
def list_(
    deleted: Annotated[bool, typer.Option("--deleted", help="Include deleted schedules.")] = False,
) -> None:
    """List schedules."""
    with connected() as client:
        schedules = client.list_schedules(include_deleted=deleted)
        if not schedules:
            out().print("no schedules yet; create one with `cronwave schedule create`")
            return
        out().print(_render.schedules_table(schedules))


@app.command()
def describe(schedule_id: ScheduleId) -> None:
    """Show a schedule, its next fire times and its latest runs."""
    with connected() as client:
        schedule = client.get_schedule(schedule_id)
        show_schedule(client, schedule)
        runs = client.list_runs(schedule_id, limit=5)
        if runs:
            out().print(_render.runs_table(runs))
        else:
            out().print("no runs yet")


@app.command()
def pause(
    schedule_id: ScheduleId,
    note: Annotated[str, typer.Option("--note", help="Why; shown by describe.")] = "",
) -> None:
    """Stop firing a schedule until it is resumed."""
    with connected() as client:
        schedule = client.pause_schedule(schedule_id, note=note)
        out().print(f"[yellow]paused[/] schedule {schedule.schedule_id!r}")


@app.command()
def resume(
    schedule_id: ScheduleId,
    note: Annotated[str, typer.Option("--note", help="Why; kept in its history.")] = "",
) -> None:
    """Fire a paused schedule again (missed slots follow its catchup policy)."""
    with connected() as client:
        schedule = client.resume_schedule(schedule_id, note=note)
        out().print(f"[green]resumed[/] schedule {schedule.schedule_id!r}")


@app.command()
def trigger(schedule_id: ScheduleId) -> None:
    """Start a run now, outside the calendar; prints the new run."""
    with connected() as client:
        run = client.trigger(schedule_id)
        console = out()
        console.print(_render.run_fields(run))
        console.print(f"wait for it: cronwave runs wait {run.run_id}", soft_wrap=True)


@app.command()
def delete(schedule_id: ScheduleId) -> None:
    """Delete a schedule; its runs and their history stay."""
    with connected() as client:
        schedule = client.delete_schedule(schedule_id)
        out().print(f"[red]deleted[/] schedule {schedule.schedule_id!r}")
