"""``cronwave schedule ...``: create, update, preview, backfill, list, show, describe,
pause, resume, trigger, delete."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any

import typer
from cronwave_proto.v1 import common_pb2 as pb
from rich.text import Text

from cronwave._client import Client
from cronwave._models import Schedule
from cronwave._spec_input import policy_of, spec_of
from cronwave._update_input import NOTHING_TO_UPDATE, update_of
from cronwave.cli import _json, _render
from cronwave.cli import _schedule_args as args
from cronwave.cli._console import connected, out, reported_errors
from cronwave.cli._json import Output, OutputOption
from cronwave.cli._payload import HELP as PAYLOAD_HELP
from cronwave.cli._payload import parse_payload
from cronwave.cli._schedule_options import (
    AtOption,
    CronOption,
    DeadlineOption,
    DstGapOption,
    DstRepeatOption,
    EveryOption,
    ExcludeOption,
    LabelOption,
    LabelUpdateOption,
    NotifyFormatOption,
    NotifyOption,
    NotifyUpdateOption,
    PhaseOption,
    TzOption,
    deadline_keywords,
    labels_of,
)
from cronwave_core.domain.schedule_fields import BY_NAME
from cronwave_core.domain.spec import (
    CATCHUPS,
    OVERLAPS,
    DstGap,
    DstRepeat,
    Spec,
)
from cronwave_core.errors import CronwaveError, InvalidArgument

app = typer.Typer(
    help="Create, update, preview, backfill, inspect, pause, resume, trigger and delete schedules.",
    no_args_is_help=True,
)

ScheduleId = Annotated[str, typer.Argument(help="The schedule's id, e.g. nightly-billing.")]

TRACE_SAMPLE_HELP = BY_NAME["trace_sample"].help


class ShowOutput(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


ShowOutputOption = Annotated[
    ShowOutput,
    typer.Option(
        "--output",
        "-o",
        help="table (for people), json (one document, for scripts) or yaml (a file "
        "`cronwave apply -f` takes back as it is).",
    ),
]
_US = timedelta(microseconds=1)
_SPEC = Spec()


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
    elif not fires and schedule.spec.max_runs:
        console.print(
            Text(f"max runs reached ({schedule.spec.max_runs}): no more fire times", "yellow")
        )
    else:
        title = "Next fire times" + (" (paused: these are skipped)" if schedule.paused else "")
        console.print(_render.fires_table(fires, schedule.time_zone, title))


@app.command()
def create(
    schedule_id: ScheduleId,
    job_type: Annotated[
        str, typer.Option("--job-type", help="A job type a worker registered, e.g. cronwave.noop.")
    ],
    cron: CronOption = [],  # noqa: B006 (typer reads the default, never mutates it)
    every: EveryOption = [],  # noqa: B006
    phase: PhaseOption = [],  # noqa: B006
    at: AtOption = [],  # noqa: B006
    tz: TzOption = "UTC",
    payload: Annotated[str, typer.Option("--payload", help=PAYLOAD_HELP)] = "{}",
    paused: Annotated[bool, typer.Option("--paused", help="Create it paused.")] = False,
    dst_gap: DstGapOption = None,
    dst_repeat: DstRepeatOption = None,
    overlap: Annotated[
        str | None,
        typer.Option(help=f"Previous run still going: {'|'.join(OVERLAPS.choices())}."),
    ] = None,
    catchup: Annotated[
        str | None,
        typer.Option(
            help=f"Slots missed while down: {'|'.join(CATCHUPS.choices())} "
            "('all' needs --overlap buffer_all or allow_all)."
        ),
    ] = None,
    catchup_window: Annotated[
        str | None,
        typer.Option(help="Slots later than this after downtime are MISSED (default 10m)."),
    ] = None,
    catchup_max_runs: Annotated[
        int, typer.Option(help="At most this many catch-up runs with --catchup all (0: 100).")
    ] = 0,
    jitter: Annotated[
        str | None,
        typer.Option(help="Delay each start by a deterministic amount below this, e.g. 30s."),
    ] = None,
    exclude_date: ExcludeOption = [],  # noqa: B006
    start: Annotated[
        str | None, typer.Option("--start", help="First instant it may fire (inclusive).")
    ] = None,
    end: Annotated[
        str | None, typer.Option("--end", help="It fires only before this instant (exclusive).")
    ] = None,
    max_runs: Annotated[int, typer.Option(help="Fire at most this many times (0: no limit).")] = 0,
    trace_sample: Annotated[float | None, typer.Option(help=TRACE_SAMPLE_HELP)] = None,
    deadline: DeadlineOption = None,
    notify: NotifyOption = [],  # noqa: B006
    notify_format: NotifyFormatOption = None,
    label: LabelOption = [],  # noqa: B006
    if_absent: Annotated[
        bool,
        typer.Option(
            "--if-absent", help="If the id exists, keep that schedule as it is (no error)."
        ),
    ] = False,
) -> None:
    """Create a schedule: the union of its --cron, --every and --at times. Nothing is
    written when a field is wrong; an existing id is an error unless --if-absent."""
    with connected() as client:
        spec = spec_of(
            cron,
            time_zone=tz,
            dst_gap=dst_gap,
            dst_repeat=dst_repeat,
            exclude_dates=args.parse_dates(exclude_date),
            intervals=args.parse_intervals(every, phase),
            one_off=[args.parse_instant(text, "--at", tz) for text in at],
            start_at=args.parse_instant(start, "--start", tz) if start else None,
            end_at=args.parse_instant(end, "--end", tz) if end else None,
            max_runs=max_runs,
            jitter=args.parse_duration(jitter, "--jitter") if jitter is not None else None,
        )
        policy = policy_of(
            overlap=overlap,
            catchup=catchup,
            catchup_window=(
                args.parse_duration(catchup_window, "--catchup-window")
                if catchup_window is not None
                else None
            ),
            catchup_max_runs=catchup_max_runs,
            trace_sample=trace_sample,
            **deadline_keywords(deadline, notify, notify_format),
        )
        message = pb.Schedule(
            schedule_id=schedule_id,
            spec=spec.to_proto(),
            policy=policy.to_proto(),
            job_type=job_type,
            payload_json=json.dumps(parse_payload(payload)),
            paused=paused,
            labels=labels_of(label),
        )
        schedule, created = client._create(message, if_absent=if_absent)
        if not created:
            out().print(
                f"[yellow]already exists[/]: schedule {schedule.schedule_id!r} was left unchanged"
            )
            show_schedule(client, schedule)
            return
        out().print(f"[green]created[/] schedule {schedule.schedule_id!r}")
        show_schedule(client, schedule)


@app.command()
def update(
    schedule_id: ScheduleId,
    job_type: Annotated[
        str | None, typer.Option("--job-type", help="Another registered job type.")
    ] = None,
    cron: Annotated[
        list[str] | None,
        typer.Option("--cron", help="Replaces the cron expressions; repeatable."),
    ] = None,
    every: Annotated[
        list[str] | None, typer.Option("--every", help="Replaces the intervals; repeatable.")
    ] = None,
    phase: PhaseOption = [],  # noqa: B006
    at: Annotated[
        list[str] | None, typer.Option("--at", help="Replaces the one-off instants; repeatable.")
    ] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="Another IANA zone.")] = None,
    payload: Annotated[
        str | None, typer.Option("--payload", help=f"Replaces the job input. {PAYLOAD_HELP}")
    ] = None,
    dst_gap: DstGapOption = None,
    dst_repeat: DstRepeatOption = None,
    overlap: Annotated[
        str | None,
        typer.Option(help=f"Previous run still going: {'|'.join(OVERLAPS.choices())}."),
    ] = None,
    catchup: Annotated[
        str | None,
        typer.Option(help=f"Slots missed while down: {'|'.join(CATCHUPS.choices())}."),
    ] = None,
    catchup_window: Annotated[
        str | None, typer.Option(help="Slots later than this after downtime are MISSED.")
    ] = None,
    catchup_max_runs: Annotated[
        int | None, typer.Option(help="At most this many catch-up runs with --catchup all.")
    ] = None,
    jitter: Annotated[str | None, typer.Option(help="Deterministic start delay bound.")] = None,
    exclude_date: Annotated[
        list[str] | None,
        typer.Option("--exclude-date", help="Replaces the excluded local dates; repeatable."),
    ] = None,
    start: Annotated[str | None, typer.Option("--start", help="First instant it may fire.")] = None,
    end: Annotated[str | None, typer.Option("--end", help="It fires only before this.")] = None,
    max_runs: Annotated[int | None, typer.Option(help="Fire at most this many times.")] = None,
    trace_sample: Annotated[float | None, typer.Option(help=TRACE_SAMPLE_HELP)] = None,
    deadline: DeadlineOption = None,
    notify: NotifyUpdateOption = None,
    notify_format: NotifyFormatOption = None,
    label: LabelUpdateOption = None,
    no_labels: Annotated[bool, typer.Option("--no-labels", help="Remove every label.")] = False,
) -> None:
    """Change the options given, in place; every other field keeps its value.

    Validated as create is: a bad value changes nothing. The planner re-plans from now
    on: a slot already run does not run again, and the slots between the old and the
    new calendar are not counted as missed. Times without an offset are read in --tz,
    else in the schedule's zone."""
    with connected() as client:
        zone = tz
        if zone is None and (at or start or end):
            zone = client.get_schedule(schedule_id).time_zone
        message, paths = _update_request(
            schedule_id,
            job_type=job_type,
            payload=parse_payload(payload) if payload is not None else None,
            cron=cron,
            time_zone=tz,
            dst_gap=dst_gap,
            dst_repeat=dst_repeat,
            overlap=overlap,
            catchup=catchup,
            catchup_window=(
                args.parse_duration(catchup_window, "--catchup-window")
                if catchup_window is not None
                else None
            ),
            catchup_max_runs=catchup_max_runs,
            exclude_dates=args.parse_dates(exclude_date) if exclude_date is not None else None,
            intervals=args.parse_intervals(every, phase) if every is not None else None,
            one_off=(
                [args.parse_instant(text, "--at", zone or "UTC") for text in at]
                if at is not None
                else None
            ),
            start_at=args.parse_instant(start, "--start", zone or "UTC") if start else None,
            end_at=args.parse_instant(end, "--end", zone or "UTC") if end else None,
            max_runs=max_runs,
            jitter=args.parse_duration(jitter, "--jitter") if jitter is not None else None,
            trace_sample=trace_sample,
            labels=_labels_update(label, no_labels),
            **deadline_keywords(deadline, notify, notify_format),
        )
        schedule, changed = client._update(message, paths)
        if changed:
            out().print(f"[green]updated[/] schedule {schedule.schedule_id!r}: {', '.join(paths)}")
        else:
            out().print(f"unchanged: schedule {schedule.schedule_id!r} already had these values")
        show_schedule(client, schedule)


def _labels_update(label: list[str] | None, none: bool) -> dict[str, str] | None:
    """The labels an update sets: those of --label, none with --no-labels, or (None)
    the schedule's own."""
    if none and label:
        raise InvalidArgument("--no-labels", "give it or --label, not both")
    if none:
        return {}
    return labels_of(label) if label is not None else None


def _update_request(schedule_id: str, **changes: Any) -> tuple[pb.Schedule, list[str]]:
    """``update_of``'s request, its refusal of an update that names nothing said in
    the CLI's words (its options), not the SDK's keywords."""
    try:
        return update_of(schedule_id, **changes)
    except InvalidArgument as exc:
        if exc.field != NOTHING_TO_UPDATE:
            raise
        raise InvalidArgument(
            "cronwave schedule update",
            "give at least one option to change, e.g. --cron '30 2 * * *' or --payload "
            "@payload.json; `cronwave schedule update --help` lists them",
        ) from None


@app.command()
def preview(
    cron: CronOption = [],  # noqa: B006
    every: EveryOption = [],  # noqa: B006
    phase: PhaseOption = [],  # noqa: B006
    at: AtOption = [],  # noqa: B006
    tz: TzOption = "UTC",
    dst_gap: DstGapOption = None,
    dst_repeat: DstRepeatOption = None,
    exclude_date: ExcludeOption = [],  # noqa: B006
    from_: Annotated[
        str | None,
        typer.Option(
            "--from", help="ISO-8601 instant to start at (inclusive; default now); no offset: --tz."
        ),
    ] = None,
    count: Annotated[int, typer.Option("--count", min=1, max=10_000, help="How many.")] = 10,
) -> None:
    """Print the next fire times, one a line: `<local ISO-8601> <UTC ISO-8601>`.

    Computed here by the planner's own calendar code; no running suite is needed."""
    from cronwave_core.domain.calendar import fire_times, validate
    from cronwave_core.domain.preview import format_preview_line

    with reported_errors():
        spec = Spec(
            cron=tuple(cron),
            time_zone=tz,
            dst_gap=DstGap.parse(dst_gap, "--dst-gap") if dst_gap else _SPEC.dst_gap,
            dst_repeat=(
                DstRepeat.parse(dst_repeat, "--dst-repeat") if dst_repeat else _SPEC.dst_repeat
            ),
            exclude_dates=tuple(args.parse_dates(exclude_date)),
            intervals=tuple(args.parse_intervals(every, phase)),
            one_off=tuple(args.parse_instant(text, "--at", tz) for text in at),
        )
        validate(spec)
        begin = args.parse_instant(from_, "--from", tz) if from_ else datetime.now(UTC)
        lines = [
            format_preview_line(instant, tz)
            for instant in itertools.islice(fire_times(spec, begin - _US), count)
        ]
    for line in lines:
        typer.echo(line)


@app.command()
def backfill(
    schedule_id: ScheduleId,
    from_: Annotated[str, typer.Option("--from", help="Start of the range, inclusive (ISO-8601).")],
    to: Annotated[
        str, typer.Option("--to", help="End of the range, exclusive, not after now (ISO-8601).")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the fire times; run nothing.")
    ] = False,
    rate: Annotated[
        float, typer.Option("--rate", min=0, help="Starts per second (0: the planner's 10).")
    ] = 0.0,
    overlap: Annotated[
        str | None,
        typer.Option(help=f"Overlap policy for these runs: {'|'.join(OVERLAPS.choices())}."),
    ] = None,
) -> None:
    """Run a schedule's fire times in [--from, --to) again, paced (the leading planner
    does it). Times without an offset are read in the schedule's zone."""
    from cronwave_core.domain.preview import format_preview_line

    with connected() as client:
        schedule = client.get_schedule(schedule_id)
        start = args.parse_instant(from_, "--from", schedule.time_zone)
        end = args.parse_instant(to, "--to", schedule.time_zone)
        fires = client.backfill(
            schedule_id, start, end, dry_run=dry_run, rate_per_second=rate, overlap=overlap
        )
    verb = "would run" if dry_run else "backfilling"
    typer.echo(f"{verb} {len(fires)} fire times of {schedule_id!r} in [{start}, {end}):")
    for instant in fires:
        typer.echo(format_preview_line(instant, schedule.time_zone))


@app.command("list")
def list_(
    deleted: Annotated[bool, typer.Option("--deleted", help="Include deleted schedules.")] = False,
    output: OutputOption = Output.TABLE,
) -> None:
    """List schedules."""
    with connected() as client:
        schedules = client.list_schedules(include_deleted=deleted)
        if output is Output.JSON:
            _json.emit([_json.schedule(s) for s in schedules])
            return
        if not schedules:
            out().print("no schedules yet; create one with `cronwave schedule create`")
            return
        out().print(_render.schedules_table(schedules))


@app.command()
def show(schedule_id: ScheduleId, output: ShowOutputOption = ShowOutput.TABLE) -> None:
    """Show a schedule's fields (-o yaml: as an apply file that keeps it as it is)."""
    with connected() as client:
        schedule = client.get_schedule(schedule_id)
    if output is ShowOutput.JSON:
        _json.emit(_json.schedule(schedule))
        return
    if output is ShowOutput.YAML:
        _emit_yaml([schedule])
        return
    out().print(_render.schedule_fields(schedule))


def _emit_yaml(schedules: list[Schedule]) -> None:
    from cronwave.cli import _apply_file  # PyYAML: only when asked for

    typer.echo(_apply_file.dump(_apply_file.document_of(schedules)), nl=False)


@app.command()
def describe(schedule_id: ScheduleId, output: OutputOption = Output.TABLE) -> None:
    """Show a schedule, its next fire times and its latest runs."""
    with connected() as client:
        schedule = client.get_schedule(schedule_id)
        if output is Output.JSON:
            fires = next_fires(client, schedule)
            _json.emit(
                {
                    "schedule": _json.schedule(schedule),
                    "next_fire_times": (
                        [] if isinstance(fires, str) else [_json.instant(t) for t in fires]
                    ),
                    "next_fire_times_unavailable": fires if isinstance(fires, str) else None,
                    "runs": [_json.run(r) for r in client.list_runs(schedule_id, limit=5)],
                }
            )
            return
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
    """Fire a paused schedule again from now on; the slots of the pause are neither run
    nor recorded (the pause itself is, with its note)."""
    with connected() as client:
        schedule = client.resume_schedule(schedule_id, note=note)
        out().print(f"[green]resumed[/] schedule {schedule.schedule_id!r}")


@app.command()
def trigger(
    schedule_id: ScheduleId,
    payload: Annotated[
        str | None,
        typer.Option(
            "--payload", help=f"This run's input instead of the schedule's. {PAYLOAD_HELP}"
        ),
    ] = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Start a run now, outside the calendar; prints the new run (-o json: its fields
    as `cronwave runs list -o json` gives them, run_id first). --payload gives this run
    its own input; the schedule keeps its payload."""
    with connected() as client:
        own = parse_payload(payload) if payload is not None else None
        run = client.trigger(schedule_id, payload=own)
        if output is Output.JSON:
            _json.emit(_json.run(run))
            return
        console = out()
        console.print(_render.run_fields(run))
        console.print(f"wait for it: cronwave runs wait {run.run_id}", soft_wrap=True)


@app.command()
def delete(
    schedule_id: ScheduleId,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Cancel its runs in flight (PENDING, WAITING, RUNNING) and delete."
        ),
    ] = False,
) -> None:
    """Delete a schedule; its runs and their history stay. Refused while a run is in
    flight, unless --force, which cancels those runs."""
    with connected() as client:
        schedule, cancelled = client._delete(schedule_id, force=force)
        console = out()
        for run in cancelled:
            console.print(f"[yellow]cancelled[/] run {run.run_id} ({run.fire_time.isoformat()})")
        console.print(f"[red]deleted[/] schedule {schedule.schedule_id!r}")
