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


#: The changes column is never squeezed below this (each change is one line of it).
CHANGES_WIDTH = 48


def audit_table(events: list[AuditEvent]) -> Table:
    """One row per event: who (the actor, then the peer it called from), what (the RPC,
    then the schedule and the run it touched) and the changes, one per line. The run
    id and the actor are long, so they share columns with what is shorter, and the
    changes keep room to be read."""
    table = Table(title=f"{len(events)} audit event(s), newest first", title_justify="left")
    table.add_column("id", no_wrap=True)
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("who", overflow="fold", max_width=32)
    table.add_column("what", no_wrap=True)
    table.add_column("changes", overflow="fold", min_width=CHANGES_WIDTH, ratio=1)
    for e in events:
        who = Text(e.actor)
        if e.peer:
            who.append(f"\nfrom {e.peer}", style="dim")
        what = Text(e.rpc)
        if e.schedule_id:
            what.append(f"\nschedule {e.schedule_id}")
        if e.run_id:
            what.append(f"\nrun {e.run_id}")
        table.add_row(str(e.id), fmt_time(e.at), who, what, Text(_changes(e.changes)))
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
