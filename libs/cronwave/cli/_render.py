"""How schedules, runs, events and leases look in a terminal."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from rich.table import Table
from rich.text import Text

from cronwave._models import Lease, Run, RunEvent, Schedule
from cronwave.cli._payload import payload_summary

NONE = "-"

STATE_STYLE = {
    "PENDING": "cyan",
    "WAITING": "blue",
    "RUNNING": "yellow",
    "SUCCEEDED": "green",
    "FAILED": "red",
    "TIMED_OUT": "red",
    "MISSED": "magenta",
    "CANCELLED": "dim",
    "DEAD_LETTERED": "bold red",
}


def fmt_time(value: datetime | None) -> str:
    """UTC, to the millisecond: ``2026-03-01 02:00:00.000Z``."""
    if value is None:
        return NONE
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def fmt_local(value: datetime, zone: str) -> str:
    """Wall-clock time in ``zone`` with its abbreviation and offset."""
    try:
        tz = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return fmt_time(value)
    return value.astimezone(tz).strftime("%a %Y-%m-%d %H:%M:%S %Z (%z)")


def fmt_delta(value: timedelta | None) -> str:
    """A duration for people: ``350ms``, ``1.234s``, ``2m03.4s``, ``5h02m``."""
    if value is None:
        return NONE
    seconds = value.total_seconds()
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{sign}{seconds:.3f}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{sign}{minutes:.0f}m{secs:04.1f}s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours:.0f}h{minutes:02.0f}m"


def state(name: str) -> Text:
    return Text(name, style=STATE_STYLE.get(name, ""))


def run_state(run: Run) -> Text:
    """The run's state, and ``(cancelling)`` while a cancel waits for its body."""
    text = state(run.state)
    if run.cancelling:
        text.append(" (cancelling)", style="yellow")
    return text


def _fields(title: str, rows: Sequence[tuple[str, str | Text]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left", box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, value if isinstance(value, Text) else Text(value))
    return table


def schedule_status(schedule: Schedule) -> Text:
    if schedule.withheld and not schedule.deleted:
        return Text("not planned: over a limit", style="red")
    if schedule.deleted:
        return Text("deleted", style="dim")
    if schedule.paused:
        return Text("paused", style="yellow")
    return Text("active", style="green")


def schedule_fields(schedule: Schedule) -> Table:
    status = schedule_status(schedule)
    if schedule.paused and schedule.pause_note:
        status = Text.assemble(status, f" ({schedule.pause_note})")
    rows: list[tuple[str, str | Text]] = [
        ("schedule", schedule.schedule_id),
        ("status", status),
        ("cron", ", ".join(schedule.cron) or NONE),
        ("time zone", schedule.time_zone),
        ("job type", schedule.job_type),
        ("payload", _payload_field(schedule)),
        ("labels", ", ".join(f"{k}={v}" for k, v in schedule.labels.items()) or NONE),
        ("dst gap / repeat", f"{schedule.dst_gap} / {schedule.dst_repeat}"),
        ("overlap / catchup", f"{schedule.overlap} / {schedule.catchup}"),
    ]
    if schedule.intervals:
        rows.append(
            ("intervals", ", ".join(f"every {fmt_delta(i.every)}" for i in schedule.intervals))
        )
    if schedule.exclude_dates:
        rows.append(("excluded dates", ", ".join(d.isoformat() for d in schedule.exclude_dates)))
    if schedule.start_at or schedule.end_at:
        rows.append(("window", f"{fmt_time(schedule.start_at)} .. {fmt_time(schedule.end_at)}"))
    if schedule.max_runs:
        rows.append(("max runs", str(schedule.max_runs)))
    if schedule.deadline is not None:
        rows.append(("deadline", fmt_delta(schedule.deadline)))
    if schedule.notifiers:
        rows.append(("notify", ", ".join(f"{n.url} ({n.format})" for n in schedule.notifiers)))
    if schedule.trace_sample != 1.0:
        traced = "every run (critical)" if schedule.critical else f"{schedule.trace_sample:g}"
        rows.append(("trace sample", traced))
    rows += [
        ("created", fmt_time(schedule.created_at)),
        ("updated", fmt_time(schedule.updated_at)),
        ("revision", str(schedule.revision)),
    ]
    return _fields(f"Schedule {schedule.schedule_id}", rows)


def _payload_field(schedule: Schedule) -> str:
    """The payload, or for a long one its size and keys and where to see it whole."""
    shown = payload_summary(schedule.payload_json)
    if shown == (schedule.payload_json or "{}"):
        return shown
    return f"{shown} (whole: cronwave schedule show {schedule.schedule_id} -o json)"


def schedules_table(schedules: Sequence[Schedule]) -> Table:
    table = Table(title=f"{len(schedules)} schedule(s)", title_justify="left")
    for name in ("schedule", "cron", "time zone", "job type", "status", "updated"):
        table.add_column(name, no_wrap=name in ("schedule", "updated"))
    for s in schedules:
        table.add_row(
            Text(s.schedule_id),
            Text(", ".join(s.cron) or NONE),
            Text(s.time_zone),
            Text(s.job_type),
            schedule_status(s),
            fmt_time(s.updated_at),
        )
    return table


def fires_table(fires: Sequence[datetime], zone: str, title: str = "Next fire times") -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column(f"local ({zone})")
    table.add_column("UTC")
    for i, fire in enumerate(fires, start=1):
        table.add_row(str(i), fmt_local(fire, zone), fmt_time(fire))
    return table


def run_fields(run: Run) -> Table:
    rows: list[tuple[str, str | Text]] = [
        ("run", run.run_id),
        ("schedule", run.schedule_id),
        ("state", run_state(run)),
        ("trigger", run.trigger),
        ("job type", run.job_type),
        ("attempt", str(run.attempt)),
        ("fire time", fmt_time(run.fire_time)),
        ("claim", fmt_time(run.claimed_at)),
        ("started", fmt_time(run.started_at)),
        ("finished", fmt_time(run.finished_at)),
        ("lateness", fmt_delta(run.lateness)),
        ("duration", fmt_delta(run.duration)),
        ("queue", run.queue or NONE),
        ("worker", run.worker_id or NONE),
        ("fencing token", str(run.fencing_token)),
        ("trace id", run.trace_id or NONE),
    ]
    if run.cancelling:
        rows.append(
            (
                "cancel",
                Text(
                    f"requested ({run.cancel_reason}); the job is stopped by "
                    f"{fmt_time(run.cancel_deadline)}",
                    style="yellow",
                ),
            )
        )
    if run.error:
        rows.append(("error", Text(run.error, style="red")))
    if run.result_json:
        rows.append(("result", run.result_json))
    return _fields(f"Run {run.run_id}", rows)


#: The most of a run's error a runs table shows (``cronwave runs show`` has all of it).
REASON_SHOWN = 60


def run_reason(run: Run) -> Text:
    """Why a run ended as it did, in a line: a MISSED run's reason (``overlap_skip``,
    ``paused``, ``dst_gap_skip``...), the first line of a failed one's error."""
    if not run.error:
        return Text(NONE if run.state == "MISSED" else "")
    line = run.error.strip().splitlines()[0] if run.error.strip() else run.error
    if len(line) > REASON_SHOWN:
        line = line[: REASON_SHOWN - 3] + "..."
    return Text(line, style=STATE_STYLE.get(run.state, ""))


def runs_table(runs: Sequence[Run]) -> Table:
    table = Table(title=f"{len(runs)} run(s), newest first", title_justify="left")
    for name in ("run", "schedule", "fire time", "state", "trigger", "attempt"):
        table.add_column(name, no_wrap=True)
    table.add_column("lateness", justify="right")
    table.add_column("duration", justify="right")
    table.add_column("reason", overflow="fold")
    for r in runs:
        table.add_row(
            Text(r.run_id),
            Text(r.schedule_id),
            fmt_time(r.fire_time),
            run_state(r),
            r.trigger,
            str(r.attempt),
            fmt_delta(r.lateness),
            fmt_delta(r.duration),
            run_reason(r),
        )
    return table


def events_table(events: Sequence[RunEvent]) -> Table:
    table = Table(title=f"{len(events)} event(s), oldest first", title_justify="left")
    table.add_column("seq", justify="right")
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("+", justify="right", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("attempt", justify="right")
    table.add_column("detail", overflow="fold")
    first = events[0].at if events else None
    for e in events:
        table.add_row(
            str(e.seq),
            fmt_time(e.at),
            fmt_delta(e.at - first) if first else NONE,
            Text(e.kind, style=STATE_STYLE.get(e.kind.upper(), "")),
            str(e.attempt),
            Text(e.detail),
        )
    return table


def lease_fields(lease: Lease, now: datetime | None = None) -> Table:
    now = now or datetime.now(UTC)
    expires = fmt_time(lease.expires_at)
    if lease.expires_at is not None:
        expires += f" (in {fmt_delta(lease.expires_at - now)})"
    rows: list[tuple[str, str | Text]] = [
        ("scope", lease.scope),
        ("holder", lease.holder or Text("nobody", style="yellow")),
        ("ttl", fmt_delta(lease.ttl)),
        ("expires", expires),
    ]
    return _fields(f"Lease {lease.scope}", rows)
