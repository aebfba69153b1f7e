"""``cronwave apply -f schedules.yaml``: make the store's schedules what a file
declares (create or update each; with ``--prune``, delete the file's own schedules it
no longer declares). ``--dry-run`` shows the changes and makes none."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cronwave._enums import IN_FLIGHT_STATES
from cronwave.cli import _json
from cronwave.cli._console import connected, fail, out
from cronwave.cli._json import Output, OutputOption
from cronwave_core.errors import CronwaveError, FailedPrecondition, InvalidArgument

if TYPE_CHECKING:
    from cronwave._client import Client
    from cronwave.cli._apply_file import ApplyFile
    from cronwave.cli._apply_plan import Plan

app = typer.Typer()

# Done and dry-run words, by the plan's action values.
_DONE = {"create": "created", "update": "updated", "unchanged": "unchanged", "prune": "pruned"}
_WOULD = {
    "create": "would create",
    "update": "would update",
    "unchanged": "unchanged",
    "prune": "would prune",
}


@app.command("apply")
def apply(
    file: Annotated[
        Path, typer.Option("--file", "-f", help="The YAML file of schedules (see docs).")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change; change nothing.")
    ] = False,
    prune: Annotated[
        bool,
        typer.Option(
            "--prune", help="Delete this file's schedules (its manager's) that it no longer lists."
        ),
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Prune schedules with runs in flight (cancels them).")
    ] = False,
    output: OutputOption = Output.TABLE,
) -> None:
    """Create or update every schedule the file declares, idempotently: a second apply
    of the same file changes nothing. The whole file is checked first; a bad entry
    changes nothing."""
    # The file's reader (PyYAML, the calendar) loads only when apply runs.
    from cronwave.cli import _apply_file
    from cronwave.cli._apply_plan import plan

    with connected() as client:
        declared = _apply_file.read(file)
        _check_job_types(client, declared)
        changes = plan(declared, client.list_schedules(), prune=prune)
        if not force:
            _check_prunable(client, changes)
        if not dry_run:
            _execute(client, changes)
    _report(declared, changes, dry_run, output)


def _check_job_types(client: Client, declared: ApplyFile) -> None:
    registered = client._job_type_names()
    for entry in declared.schedules:
        if entry.job_type not in registered:
            names = ", ".join(registered) if registered else "none (start a worker first)"
            raise InvalidArgument(
                f"{entry.where(declared.path)}: job_type",
                f"unknown job type '{entry.job_type}'; registered: {names}",
            )


def _check_prunable(client: Client, changes: Plan) -> None:
    from cronwave.cli._apply_plan import Action

    for change in changes.of(Action.PRUNE):
        runs = client.list_runs(change.schedule_id, limit=5, states=IN_FLIGHT_STATES)
        if runs:
            shown = ", ".join(f"{r.run_id} ({r.state})" for r in runs)
            raise FailedPrecondition(
                f"schedule_id: pruning '{change.schedule_id}' would strand its run(s) in "
                f"flight: {shown}; wait for them to end, or apply with --force to cancel "
                "them; nothing was changed"
            )


def _execute(client: Client, changes: Plan) -> None:
    """Make each change in order; a refusal midway says what was already done."""
    from cronwave.cli._apply_plan import Action, Change

    done: list[Change] = []
    for change in changes.changes:
        try:
            if change.action is Action.CREATE and change.message is not None:
                client._create(change.message, if_absent=False)
            elif change.action is Action.UPDATE and change.message is not None:
                client._update(change.message, change.paths)
            elif change.action is Action.PRUNE:
                client._delete(change.schedule_id, force=True)
        except CronwaveError as exc:
            made = [
                f"{_DONE[c.action]} {c.schedule_id}"
                for c in done
                if c.action is not Action.UNCHANGED
            ]
            so_far = "; ".join(made) if made else "nothing"
            fail(
                f"{change.schedule_id}: {exc.message}",
                f"changed before this refusal: {so_far}; fix it and apply again",
            )
        done.append(change)


def _report(declared: ApplyFile, changes: Plan, dry_run: bool, output: Output) -> None:
    if output is Output.JSON:
        _json.emit(_document(declared, changes, dry_run))
        return
    console = out()
    if not changes.changes_anything:
        console.print(
            f"no changes: the {len(changes.changes)} schedule(s) of {escape(str(declared.path))} "
            "are as declared"
        )
        return
    words = _WOULD if dry_run else _DONE
    title = f"{declared.path} (manager {declared.manager!r})" + (
        ": dry run, nothing changed" if dry_run else ""
    )
    table = Table(title=escape(title), title_justify="left")
    for name in ("action", "schedule", "fields"):
        table.add_column(name, overflow="fold")
    for change in changes.changes:
        table.add_row(words[change.action], change.schedule_id, ", ".join(change.paths) or "-")
    console.print(table)


def _document(declared: ApplyFile, changes: Plan, dry_run: bool) -> dict[str, Any]:
    from cronwave.cli._apply_plan import Action

    return {
        "file": str(declared.path),
        "manager": declared.manager,
        "dry_run": dry_run,
        "changed": changes.changes_anything and not dry_run,
        "created": [c.schedule_id for c in changes.of(Action.CREATE)],
        "updated": [
            {"schedule_id": c.schedule_id, "fields": list(c.paths)}
            for c in changes.of(Action.UPDATE)
        ],
        "unchanged": [c.schedule_id for c in changes.of(Action.UNCHANGED)],
        "pruned": [c.schedule_id for c in changes.of(Action.PRUNE)],
    }
