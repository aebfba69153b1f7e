"""gRPC adapter: request proto -> domain values -> ``Store`` -> response proto.

No SQL and no rules here; ``CronwaveError``s raised below become gRPC statuses in the
bootstrap's error interceptor.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import timedelta

import grpc
from opentelemetry.trace import Span

from cronwave.v1 import workflow_store_service_pb2 as api
from cronwave.v1 import workflow_store_service_pb2_grpc as api_grpc
from cronwave_core import telemetry
from cronwave_core.convert import dt_to_ts
from workflow_store import convert
from workflow_store.records import DEFAULT_FENCING_SCOPE, RunRecord
from workflow_store.store import Store


def _db_span(
    name: str, hop: str, run_id: str = "", schedule_id: str = "", fire_time: str = ""
) -> AbstractContextManager[Span]:
    """The span of an RPC's database work within its hop of the run's waterfall."""
    attrs = {}
    if run_id:
        attrs[telemetry.ATTR_RUN_ID] = run_id
    if schedule_id:
        attrs[telemetry.ATTR_SCHEDULE_ID] = schedule_id
    if fire_time:
        attrs[telemetry.ATTR_FIRE_TIME] = fire_time
    return telemetry.hop_span(f"workflow-store {name}", hop=hop, kind="database", attributes=attrs)


def _mark(span: Span, run: RunRecord) -> None:
    span.set_attributes(
        telemetry.run_attributes(run.run_id, run.schedule_id, convert.iso(run.fire_time))
    )


class WorkflowStoreServicer(api_grpc.WorkflowStoreServiceServicer):
    def __init__(self, store: Store, watch_poll: timedelta = timedelta(seconds=0.5)) -> None:
        self.store = store
        self.watch_poll = watch_poll

    # -- schedules ---------------------------------------------------------------------

    def CreateSchedule(
        self, request: api.CreateScheduleRequest, context: grpc.ServicerContext
    ) -> api.CreateScheduleResponse:
        new = convert.new_schedule_from_proto(request.schedule)
        record = self.store.create_schedule(new)
        return api.CreateScheduleResponse(schedule=convert.schedule_to_proto(record))

    def GetSchedule(
        self, request: api.GetScheduleRequest, context: grpc.ServicerContext
    ) -> api.GetScheduleResponse:
        record = self.store.get_schedule(request.schedule_id)
        return api.GetScheduleResponse(schedule=convert.schedule_to_proto(record))

    def ListSchedules(
        self, request: api.ListSchedulesRequest, context: grpc.ServicerContext
    ) -> api.ListSchedulesResponse:
        records, revision = self.store.list_schedules(request.limit, request.include_deleted)
        return api.ListSchedulesResponse(
            schedules=[convert.schedule_to_proto(r) for r in records], revision=revision
        )

    def PauseSchedule(
        self, request: api.PauseScheduleRequest, context: grpc.ServicerContext
    ) -> api.PauseScheduleResponse:
        record = self.store.pause_schedule(request.schedule_id, request.note)
        return api.PauseScheduleResponse(schedule=convert.schedule_to_proto(record))

    def ResumeSchedule(
        self, request: api.ResumeScheduleRequest, context: grpc.ServicerContext
    ) -> api.ResumeScheduleResponse:
        record = self.store.resume_schedule(request.schedule_id, request.note)
        return api.ResumeScheduleResponse(schedule=convert.schedule_to_proto(record))

    def DeleteSchedule(
        self, request: api.DeleteScheduleRequest, context: grpc.ServicerContext
    ) -> api.DeleteScheduleResponse:
        record = self.store.delete_schedule(request.schedule_id)
        return api.DeleteScheduleResponse(schedule=convert.schedule_to_proto(record))

    def WatchSchedules(
        self, request: api.WatchSchedulesRequest, context: grpc.ServicerContext
    ) -> Iterator[api.WatchSchedulesResponse]:
        # Wake the waiting stream as soon as the call ends (client cancel, server stop).
        context.add_callback(self.store.wake_watchers)
        for record in self.store.watch(
            request.since_revision, context.is_active, poll=self.watch_poll
        ):
            yield api.WatchSchedulesResponse(schedule=convert.schedule_to_proto(record))

    # -- job types ---------------------------------------------------------------------

    def RegisterJobType(
        self, request: api.RegisterJobTypeRequest, context: grpc.ServicerContext
    ) -> api.RegisterJobTypeResponse:
        record = self.store.register_job_type(convert.job_type_from_proto(request.job_type))
        return api.RegisterJobTypeResponse(job_type=convert.job_type_to_proto(record))

    def ListJobTypes(
        self, request: api.ListJobTypesRequest, context: grpc.ServicerContext
    ) -> api.ListJobTypesResponse:
        records = self.store.list_job_types()
        return api.ListJobTypesResponse(job_types=[convert.job_type_to_proto(r) for r in records])

    # -- runs --------------------------------------------------------------------------

    def RecordRun(
        self, request: api.RecordRunRequest, context: grpc.ServicerContext
    ) -> api.RecordRunResponse:
        req = convert.record_run_from_proto(request)
        with _db_span(
            "RecordRun", "persist", "", req.schedule_id, convert.iso(req.fire_time)
        ) as span:
            recorded = self.store.record(req)
            _mark(span, recorded.run)
        return api.RecordRunResponse(
            run=convert.run_to_proto(recorded.run), created=recorded.created
        )

    def RecordMissed(
        self, request: api.RecordMissedRequest, context: grpc.ServicerContext
    ) -> api.RecordMissedResponse:
        req = convert.record_missed_from_proto(request)
        with _db_span(
            "RecordMissed", "persist", "", req.schedule_id, convert.iso(req.fire_time)
        ) as span:
            recorded = self.store.record(req)
            _mark(span, recorded.run)
        return api.RecordMissedResponse(
            run=convert.run_to_proto(recorded.run), created=recorded.created
        )

    def GetRun(
        self, request: api.GetRunRequest, context: grpc.ServicerContext
    ) -> api.GetRunResponse:
        return api.GetRunResponse(run=convert.run_to_proto(self.store.get_run(request.run_id)))

    def ListRuns(
        self, request: api.ListRunsRequest, context: grpc.ServicerContext
    ) -> api.ListRunsResponse:
        states = convert.run_states_from_proto(request.states)
        runs = self.store.list_runs(request.schedule_id, states, request.limit)
        return api.ListRunsResponse(runs=[convert.run_to_proto(r) for r in runs])

    def ListRunEvents(
        self, request: api.ListRunEventsRequest, context: grpc.ServicerContext
    ) -> api.ListRunEventsResponse:
        events = self.store.list_run_events(request.run_id)
        return api.ListRunEventsResponse(events=[convert.event_to_proto(e) for e in events])

    def AppendRunEvent(
        self, request: api.AppendRunEventRequest, context: grpc.ServicerContext
    ) -> api.AppendRunEventResponse:
        event = self.store.append_run_event(request.run_id, request.kind, request.detail)
        return api.AppendRunEventResponse(event=convert.event_to_proto(event))

    # -- attempts ----------------------------------------------------------------------

    def ClaimRun(
        self, request: api.ClaimRunRequest, context: grpc.ServicerContext
    ) -> api.ClaimRunResponse:
        with _db_span("ClaimRun", "persist", request.run_id) as span:
            claim = self.store.claim_run(request.run_id, request.worker_id)
            _mark(span, claim.run)
        return api.ClaimRunResponse(
            run=convert.run_to_proto(claim.run),
            claimed=claim.claimed,
            attempt_token=claim.attempt_token,
        )

    def Heartbeat(
        self, request: api.HeartbeatRequest, context: grpc.ServicerContext
    ) -> api.HeartbeatResponse:
        with _db_span("Heartbeat", "persist", request.run_id):
            deadline = self.store.heartbeat(
                request.run_id, request.attempt_token, request.checkpoint_json
            )
        return api.HeartbeatResponse(deadline=dt_to_ts(deadline))

    def CompleteRun(
        self, request: api.CompleteRunRequest, context: grpc.ServicerContext
    ) -> api.CompleteRunResponse:
        state = convert.completion_state_from_proto(request.state)
        with _db_span("CompleteRun", "complete", request.run_id) as span:
            completion = self.store.complete_run(
                request.run_id,
                request.attempt_token,
                state,
                error=request.error,
                result_json=request.result_json,
                retry_after=request.retry_after.ToTimedelta(),
            )
            _mark(span, completion.run)
        return api.CompleteRunResponse(
            run=convert.run_to_proto(completion.run), changed=completion.changed
        )

    def GetFencingToken(
        self, request: api.GetFencingTokenRequest, context: grpc.ServicerContext
    ) -> api.GetFencingTokenResponse:
        token = self.store.fencing_token(request.fencing_scope or DEFAULT_FENCING_SCOPE)
        return api.GetFencingTokenResponse(fencing_token=token)
