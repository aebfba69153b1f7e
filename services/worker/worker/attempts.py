"""The execute step: one attempt's job body, in a job process or a thread of the
worker, under the heartbeat and time limit the chain's middleware set."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cronwave_core.errors import ConfigurationError
from cronwave_core.limits import DEFAULT_LIMITS
from cronwave_core.telemetry.propagation import inject_context
from worker.chain import Delivery
from worker.isolation import ProcessSupervisor
from worker.job_process import JobProcessPool
from worker.run_context import job_context
from worker.supervisor import AttemptResult, Outcome, Supervisor, describe


@dataclass(frozen=True)
class Isolation:
    """Where job bodies run: in job processes from ``pool`` (killable, the default),
    or in threads of the worker when ``pool`` is None. (How long a killed one gets
    between SIGTERM and SIGKILL is the ``TimeLimit`` middleware's.) ``checkpoint_bytes``:
    the most JSON a job's ``ctx.checkpoint.save`` takes (``CRONWAVE_MAX_CHECKPOINT_BYTES``);
    past it, ``save`` raises in the job."""

    pool: JobProcessPool | None
    checkpoint_bytes: int = DEFAULT_LIMITS.checkpoint_bytes


def _missing(what: str, middleware: str) -> ConfigurationError:
    return ConfigurationError(
        f"worker: an attempt has no {what}; did you forget the {middleware} middleware "
        "in the worker's chain (worker.middleware.standard)?"
    )


class Attempts:
    """Runs the body of a delivery's claimed run; what it ran under comes from the
    delivery (``beat``, ``report_start``, ``report_progress``, ``cancel``,
    ``heartbeat_interval``: Heartbeat; ``duration_limit``, ``kill_grace``: TimeLimit)."""

    def __init__(
        self,
        pool: JobProcessPool | None,
        checkpoint_bytes: int = DEFAULT_LIMITS.checkpoint_bytes,
    ) -> None:
        self.pool = pool
        self.checkpoint_bytes = checkpoint_bytes

    def __call__(self, delivery: Delivery) -> AttemptResult:
        run, job_type, stop = delivery.run, delivery.job_type, delivery.stop
        if job_type is None:
            raise _missing("job type", "DeadLettering")
        beat, interval = delivery.beat, delivery.heartbeat_interval
        progress = delivery.report_progress
        if beat is None or interval is None or progress is None:
            raise _missing("heartbeat", "Heartbeat")
        limit = delivery.duration_limit
        if limit is None:
            raise _missing("duration limit", "TimeLimit")
        fire_time = delivery.fire_time
        try:
            payload = _json_object(run.payload_json, "payload_json")
            checkpoint = _json_object(run.checkpoint_json, "checkpoint_json")
        except Exception as exc:  # the run cannot start here; record why
            return AttemptResult(Outcome.FAILED, error=describe(exc), error_types=("ValueError",))
        if self.pool is not None:
            spec = {
                "run_id": run.run_id,
                "schedule_id": run.schedule_id,
                "fire_time": fire_time.isoformat(),
                "attempt": run.attempt,
                "job_type": run.job_type,
                "payload": payload,
                "checkpoint": checkpoint,
                "checkpoint_bytes": self.checkpoint_bytes,
                "trace": inject_context(),
            }
            in_process = ProcessSupervisor(
                self.pool,
                beat,
                heartbeat_interval=interval,
                duration_limit=limit,
                kill_grace=delivery.kill_grace or timedelta(0),
                run_id=run.run_id,
                report_start=delivery.report_start,
                report_progress=progress,
                cancel=delivery.cancel,
                watch=delivery.lease.watch if delivery.lease is not None else None,
            )
            stop.attach(in_process)
            return in_process.run(spec, fire_time)
        supervisor = Supervisor(
            beat,
            heartbeat_interval=interval,
            duration_limit=limit,
            run_id=run.run_id,
            report_start=delivery.report_start,
            cancel=delivery.cancel,
        )
        ctx = job_context(
            run_id=run.run_id,
            schedule_id=run.schedule_id,
            fire_time=fire_time,
            attempt=run.attempt,
            payload=payload,
            checkpoint=checkpoint,
            checkpoint_bytes=self.checkpoint_bytes,
            job_type=run.job_type,
            on_heartbeat=supervisor.on_heartbeat,
            is_cancelled=supervisor.cancel.is_set,
            on_progress=progress,
        )
        stop.attach(supervisor)
        return supervisor.run(job_type.fn, ctx, fire_time)


def _json_object(text: str, field: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"run.{field} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"run.{field} must be a JSON object, got {type(value).__name__}")
    return value
