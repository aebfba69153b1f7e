"""The deadline a claim's answer carries: the instant by which a claimed run must have
succeeded (its fire time plus its schedule's ``deadline``, as the deadline sweep
judges it), so that a worker can keep the spans of a run not sampled that ended past
it (the worker's ``middleware.tracing``).

Only a run that will need it is looked up: one a planner fired (SCHEDULED, CATCHUP;
manual triggers and backfills have no deadline) whose trace was not sampled (a
sampled run's spans are exported whatever its outcome). Their schedules are read in
the claim's own transaction, one statement for the whole batch (only the stored
policies' ``deadline``, not the whole policy: a policy with a deadline takes the slow
way through ``json_format``), and none at all for a batch without such a run (every
run sampled: the default).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from google.protobuf.duration_pb2 import Duration
from sqlalchemy.orm import Session

from cronwave_core.domain.runs import Trigger
from cronwave_core.telemetry.run_span import run_sampled
from workflow_store import models as m

#: The runs whose deadline a claim answers with.
_PLANNED = frozenset({Trigger.SCHEDULED.value, Trigger.CATCHUP.value})


def needs_deadline(run: Mapping[str, Any]) -> bool:
    """Whether a claim of ``run`` (its column values) answers with its deadline."""
    if run["trigger"] not in _PLANNED:
        return False
    try:
        trace_id = int(run["trace_id"] or "0", 16)
    except ValueError:  # a trace id this store did not write: no run's
        return False
    return bool(trace_id) and not run_sampled(trace_id)


def deadlines(s: Session, runs: Iterable[Mapping[str, Any]]) -> dict[str, datetime]:
    """The deadline instant of each of ``runs`` whose schedule has a deadline, by run id."""
    wanted = [run for run in runs if needs_deadline(run)]
    if not wanted:
        return {}
    stored = m.Schedule.policy["deadline"].as_string()
    query = sa.select(m.Schedule.id, stored.label("deadline")).where(
        m.Schedule.id.in_(sorted({run["schedule_id"] for run in wanted})), stored.is_not(None)
    )
    limits = {}
    for row in s.execute(query):
        try:
            limits[row.id] = _duration(row.deadline)
        except ValueError:  # not a form this store writes: no deadline to answer with
            continue
    return {
        run["run_id"]: run["fire_time"] + limits[run["schedule_id"]]
        for run in wanted
        if run["schedule_id"] in limits
    }


@functools.lru_cache(maxsize=256)
def _duration(text: str) -> timedelta:
    """A stored duration (the proto's JSON form, ``"2700s"``)."""
    duration = Duration()
    duration.FromJsonString(text)
    return duration.ToTimedelta()
