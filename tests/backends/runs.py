"""A suite's runs end to end: a few schedules of the noop job every second, until each
has succeeded a few times; then every slot up to there is accounted for, once."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections import Counter
from datetime import datetime, timedelta

from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_bench.audit import Audit, audit
from cronwave_bench.failover import NOOP
from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.calendar import fire_times
from cronwave_core.domain.spec import Spec
from cronwave_core.suite import Suite
from tests.harness.tls import hop_channel
from tests.helpers import eventually

SCHEDULES = 3
PERIOD = timedelta(seconds=1)
#: Succeeded runs each schedule must reach.
RUNS_EACH = 3


def _spec() -> common_pb2.ScheduleSpec:
    spec = common_pb2.ScheduleSpec()
    spec.intervals.add().every.FromTimedelta(PERIOD)
    return spec


def _slots(since: datetime, through: datetime) -> list[datetime]:
    out: list[datetime] = []
    for at in fire_times(Spec.from_proto(_spec()), since):
        if at > through:
            return out
        out.append(at)
    return out


def runs_complete_exactly_once(
    suite: Suite, prefix: str, schedules: int = SCHEDULES
) -> dict[str, Audit]:
    """Make ``schedules`` schedules (ids starting ``prefix``) on ``suite``, wait until
    each has ``RUNS_EACH`` succeeded runs, and audit each one's slots from its creation
    through its last such run: every slot has one run, no job body started twice, all
    ended. Each schedule's audit, by id."""
    channel = hop_channel(suite, "workflow-store")
    store = store_grpc.WorkflowStoreServiceStub(channel)
    try:
        eventually(
            lambda: any(
                j.name == NOOP
                for j in store.ListJobTypes(store_pb.ListJobTypesRequest(), timeout=5).job_types
            ),
            timeout=60,
            what=f"job type {NOOP} registered by the worker",
        )
        created: dict[str, datetime] = {}
        for i in range(schedules):
            schedule = common_pb2.Schedule(
                schedule_id=f"{prefix}-{i}-{uuid.uuid4().hex[:8]}",
                spec=_spec(),
                policy=common_pb2.SchedulePolicy(overlap=common_pb2.OVERLAP_POLICY_SKIP),
                job_type=NOOP,
            )
            request = store_pb.CreateScheduleRequest(schedule=schedule)
            reply = store.CreateSchedule(request, timeout=5)
            created[reply.schedule.schedule_id] = ts_to_dt(reply.schedule.updated_at)

        def audited() -> dict[str, Audit]:
            request = store_pb.ListRunsRequest(schedule_ids=list(created), limit=10_000)
            runs = list(store.ListRuns(request, timeout=10).runs)
            succeeded = Counter(
                r.schedule_id for r in runs if r.state == common_pb2.RUN_STATE_SUCCEEDED
            )
            assert all(succeeded[sid] >= RUNS_EACH for sid in created), dict(succeeded)
            audits = {}
            for sid, since in created.items():
                mine = [r for r in runs if r.schedule_id == sid]
                done = sorted(
                    ts_to_dt(r.fire_time) for r in mine if r.state == common_pb2.RUN_STATE_SUCCEEDED
                )
                result = audit(mine, _slots(since, done[RUNS_EACH - 1]))
                assert not result.unfinished, (sid, result)
                audits[sid] = result
            return audits

        audits = eventually(audited, timeout=60, interval=0.2, what="the runs succeeded")
    finally:
        channel.close()
    for sid, result in audits.items():
        assert result.clean, (sid, result)
        assert result.fired >= RUNS_EACH, (sid, result)
    return audits


def logged_errors(suite: Suite, service: str) -> list[str]:
    """The messages ``service`` of ``suite`` logged at ERROR (its JSON lines)."""
    errors = []
    for line in (suite.log_dir / f"{service}.log").read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("level") == "ERROR":
                errors.append(str(entry.get("message")))
    return errors


__all__ = ["RUNS_EACH", "SCHEDULES", "logged_errors", "runs_complete_exactly_once"]
