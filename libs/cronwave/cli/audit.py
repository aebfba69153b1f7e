"""``cronwave audit list``: the audit trail, newest first."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from cronwave._models import AuditEvent
from cronwave.cli import _json
from cronwave.cli._console import connected, out
from cronwave.cli._json import Output, OutputOption
from cronwave.cli._render import fmt_time

app = typer.Typer(
    help="The audit trail: who changed what, when and from where.",
    no_args_is_help=True,
)


def audit_json(e: AuditEvent) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": _json.instant(e.at),
        "actor": e.actor,
        "peer": e.peer,
        "rpc": e.rpc,
        "schedule_id": e.schedule_id,
        "run_id": e.run_id,
        "changes": e.changes,
    }


def _changes(changes: dict[str, Any]) -> str:
    """One line per field: ``old -> new``, or the new value alone where there was none
    (a create), sizes in bytes for payloads and large values."""
    lines = []
    for name, value in changes.items():
        if isinstance(value, dict) and "old" in value and "new" in value:
            new = json.dumps(value["new"])
            if value["old"] is None:
                lines.append(f"{name}: {new}")
            else:
                lines.append(f"{name}: {json.dumps(value['old'])} -> {new}")
        elif isinstance(value, dict) and "new_bytes" in value:
            lines.append(f"{name}: {value['old_bytes']} -> {value['new_bytes']} bytes")
        else:
            lines.append(f"{name}: {json.dumps(value)}")
    return "\n".join(lines)


def audit_table(events: list[AuditEvent]) -> Table:
    table = Table(title=f"{len(events)} audit event(s), newest first", title_justify="left")
    for column in ("id", "at (UTC)", "actor", "peer", "rpc", "schedule", "run"):
        table.add_column(column, no_wrap=column != "peer")
    table.add_column("changes", overflow="fold")
    for e in events:
        table.add_row(
            str(e.id),
            fmt_time(e.at),
            Text(e.actor),
            Text(e.peer),
            Text(e.rpc),
            Text(e.schedule_id),
            Text(e.run_id),
            Text(_changes(e.changes)),
        )
    return table


@app.command("list")
def list_(
    schedule: Annotated[
        str | None,
        typer.Option("--schedule", help="Only the events of this schedule and its runs."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 50,
    output: OutputOption = Output.TABLE,
) -> None:
    """List audit events, newest first: creates, updates, pauses, resumes, deletes,
    cancels, replays, manual and backfill runs, job type registrations."""
    with connected() as client:
        events = client.audit_events(schedule or "", limit=limit)
        if output is Output.JSON:
            _json.emit([audit_json(e) for e in events])
            return
        if not events:
            out().print("no audit events")
            return
        out().print(audit_table(events))
