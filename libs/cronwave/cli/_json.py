"""``-o json``: what a list, show or describe command prints for scripts.

One JSON document on stdout per command (an object, or a list of objects for a
listing). Field names are snake_case and stable; instants are RFC 3339 in UTC with
microseconds (``2030-01-01T02:00:00.000000Z``) or ``null``; durations are seconds as
numbers (``catchup_window_seconds: 600.0``); policies and states are the names the
CLI takes and shows (``"skip"``, ``"SUCCEEDED"``). docs/operations/schedules.md
(*JSON output*) lists the fields.
"""

from __future__ import annotations

import json
from datetime import UTC
from enum import StrEnum
from typing import Annotated, Any

import typer

from cronwave._models import Lease, Run, RunEvent, Schedule
from cronwave.cli._field_forms import instant, json_fields, seconds

__all__ = ["Output", "OutputOption", "emit", "instant", "seconds"]


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"


OutputOption = Annotated[
    Output,
    typer.Option(
        "--output", "-o", help="table (for people) or json (one document on stdout, for scripts)."
    ),
]


def emit(document: Any) -> None:
    """Print ``document`` as one JSON document on stdout."""
    typer.echo(json.dumps(document, indent=2, ensure_ascii=False))


def _decoded(text: str) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def schedule(s: Schedule) -> dict[str, Any]:
    """A schedule: its identity, its spec and policy fields (``_field_forms``, from
    the dataclasses), then what the store keeps beside them."""
    return {
        "schedule_id": s.schedule_id,
        "job_type": s.job_type,
        **json_fields(s.spec, s.policy),
        "payload": _decoded(s.payload_json),
        "paused": s.paused,
        "pause_note": s.pause_note,
        "managed_by": s.managed_by,
        "labels": s.labels,
        "deleted": s.deleted,
        "withheld": s.withheld,
        "created_at": instant(s.created_at),
        "updated_at": instant(s.updated_at),
        "revision": s.revision,
    }


def run(r: Run) -> dict[str, Any]:
    return {
        "run_id": r.run_id,
        "schedule_id": r.schedule_id,
        "fire_time": instant(r.fire_time),
        "state": r.state,
        "trigger": r.trigger,
        "job_type": r.job_type,
        "attempt": r.attempt,
        "queue": r.queue,
        "worker_id": r.worker_id,
        "created_at": instant(r.created_at),
        "claimed_at": instant(r.claimed_at),
        "started_at": instant(r.started_at),
        "finished_at": instant(r.finished_at),
        "heartbeat_at": instant(r.heartbeat_at),
        "lateness_seconds": seconds(r.lateness),
        "duration_seconds": seconds(r.duration),
        "error": r.error,
        "cancel_deadline": instant(r.cancel_deadline),
        "payload": _decoded(r.payload_json),
        "result": _decoded(r.result_json),
        "checkpoint": _decoded(r.checkpoint_json),
        "idempotency_key": r.idempotency_key,
        "fencing_token": r.fencing_token,
        "trace_id": r.trace_id,
    }


def event(e: RunEvent) -> dict[str, Any]:
    return {
        "seq": e.seq,
        "run_id": e.run_id,
        "kind": e.kind,
        "at": instant(e.at),
        "attempt": e.attempt,
        "detail": e.detail,
    }


def lease(lease_: Lease) -> dict[str, Any]:
    return {
        "scope": lease_.scope,
        "held": lease_.held,
        "holder": lease_.holder,
        "ttl_seconds": seconds(lease_.ttl),
        "expires_at": instant(lease_.expires_at),
    }


def dead_letter(d: Any) -> dict[str, Any]:
    """A ``cronwave.v1.DeadLetter`` message."""
    return {
        "id": d.id,
        "run_id": d.run_id,
        "reason": d.reason,
        "error": d.error,
        "queue": d.queue,
        "job_type": d.job_type,
        "attempt": d.attempt,
        "message_json": d.message_json,
        "created_at": instant(d.created_at.ToDatetime(tzinfo=UTC))
        if d.HasField("created_at")
        else None,
        "replayed_at": (
            instant(d.replayed_at.ToDatetime(tzinfo=UTC)) if d.HasField("replayed_at") else None
        ),
    }
