"""``cronwave dlq ...``: the dead-letter list, and replaying a run from it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from typing import Annotated, Any, TypeVar

import typer
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from rich.markup import escape
from rich.table import Table

from cronwave.cli import _json
from cronwave.cli._console import out
from cronwave.cli._json import Output, OutputOption
from cronwave.cli._render import fmt_time
from cronwave.cli._stub import StoreStub, store_stub

app = typer.Typer(
    help="The dead-letter list: runs whose retries are spent, and poison messages.",
    no_args_is_help=True,
)

Resp = TypeVar("Resp")


@contextmanager
def _store() -> Iterator[StoreStub[Any]]:
    from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

    with store_stub(store_grpc.WorkflowStoreServiceStub) as store:
        yield store


def letters_table(letters: Any) -> Table:
    table = Table(title="dead letters (newest first)", title_justify="left")
    for name in ("id", "run", "reason", "job type", "attempt", "queue", "at", "error"):
        table.add_column(name, no_wrap=name not in ("error",), overflow="fold")
    for d in letters:
        replayed = " (replayed)" if d.HasField("replayed_at") else ""
        table.add_row(
            str(d.id),
            d.run_id or "-",
            d.reason + replayed,
            d.job_type or "-",
            str(d.attempt) if d.attempt else "-",
            d.queue or "-",
            fmt_time(d.created_at.ToDatetime(tzinfo=UTC)),
            escape(d.error or d.message_json or "-"),
        )
    return table


@app.command("list")
def list_(
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 50,
    all_: Annotated[
        bool, typer.Option("--all", help="Include entries that were already replayed.")
    ] = False,
    output: OutputOption = Output.TABLE,
) -> None:
    """List the dead letters, newest first."""
    with _store() as store:
        response = store.call(
            store.stub.ListDeadLetters,
            store_pb.ListDeadLettersRequest(limit=limit, include_replayed=all_),
        )
    if output is Output.JSON:
        _json.emit([_json.dead_letter(d) for d in response.dead_letters])
        return
    if not response.dead_letters:
        out().print("no dead letters")
        return
    out().print(letters_table(response.dead_letters))


@app.command()
def replay(
    run_id: Annotated[str, typer.Argument(help="The dead-lettered run (see `cronwave dlq list`).")],
) -> None:
    """Put a dead-lettered run back to PENDING to run it again.

    The dispatcher's sweeper re-enqueues it within a second; its next attempt starts
    with a fresh retry budget."""
    with _store() as store:
        response = store.call(
            store.stub.ReplayDeadLetter, store_pb.ReplayDeadLetterRequest(run_id=run_id)
        )
    state = common_pb2.RunState.Name(response.run.state).removeprefix("RUN_STATE_")
    out().print(f"run {response.run.run_id} replayed: {state}; a worker picks it up shortly")
