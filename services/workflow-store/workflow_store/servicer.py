"""gRPC adapter: request proto -> domain values -> one of the store's parts -> response
proto.

Each RPC calls the part it concerns by name (``store.schedules``, ``store.runs``,
``store.attempts``...; ``Store`` is the composition root that holds them); the audit and
deadline listings go through their module's RPC function (``audit_rpc``,
``deadline_rpc``), and the slot rules take the store as their ``SlotStore`` port.

No SQL and no rules here; ``CronwaveError``s raised below become gRPC statuses in the
bootstrap's error interceptor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import TypeVar

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as api
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as api_grpc

from cronwave_core.convert import dt_to_ts, duration_to_td, opt_ts, td_to_duration, ts_to_dt
from cronwave_core.domain.cancel import CancelRequest
from cronwave_core.domain.runs import Trigger
from cronwave_core.errors import CronwaveError, InvalidArgument
from cronwave_core.rpc import item_error
from cronwave_core.shards import shard_list, shard_of
from cronwave_core.telemetry.vocabulary import (
    Hop,
)
from workflow_store import (
    audit_rpc,
    convert,
    deadline_rpc,
    metrics,
    paging,
    recent_runs,
    schedule_update,
    slots,
    sweep_store,
    validate,
)
from workflow_store.audit_rpc import actor
from workflow_store.records import (
    MAX_BATCH,
    Beat,
    Completion,
    Recorded,
    ScheduleRecord,
)
from workflow_store.rpc_spans import annotate_batch, db_span, mark_run, run_ended
from workflow_store.store import Store

M = TypeVar("M")
T = TypeVar("T")


def _items(field: str, messages: Sequence[M], parse: Callable[[M], T]) -> list[T]:
    """Every item of a batch request, converted; a malformed item fails the whole call,
    naming it (``runs[3].fire_time``)."""
    if len(messages) > MAX_BATCH:
        raise InvalidArgument(field, f"at most {MAX_BATCH} per call, got {len(messages)}")
    items = []
    for i, message in enumerate(messages):
        try:
            items.append(parse(message))
        except InvalidArgument as exc:
            raise InvalidArgument(f"{field}[{i}].{exc.field}", exc.rule) from None
    return items


def _missed_slot(msg: api.MissedSlot) -> slots.MissedSlot:
    """A RecordMissedSlots slot; an id that names no live schedule is answered among
    the unknown ones, so it only has to be well formed."""
    return slots.MissedSlot(
        schedule_id=validate.schedule_ref(msg.schedule_id, "schedule_id"),
        fire_time=convert.required_time(msg, "fire_time", "fire_time"),
        reason=validate.note(msg.reason, "reason"),
        trigger=Trigger.from_proto(msg.trigger),
    )


def _recorded_to_proto(recorded: Recorded, *, blobs: bool = True) -> api.RecordRunResponse:
    return api.RecordRunResponse(
        run=convert.run_to_proto(recorded.run, blobs=blobs), created=recorded.created
    )


def _completion_to_proto(completion: Completion) -> api.CompleteRunResponse:
    """Without the run's payload, result and checkpoint: the worker reads the run's
    state and ``changed`` (and caches the run's status), and a batch of completions
    whose results are at their limit must still be one answer it can receive."""
    return api.CompleteRunResponse(
        run=convert.run_to_proto(completion.run, blobs=False), changed=completion.changed
    )


class WorkflowStoreServicer(api_grpc.WorkflowStoreServiceServicer):
    def __init__(
        self,
        store: Store,
        watch_poll: timedelta = timedelta(seconds=0.5),
    ) -> None:
        self.store = store
        self.watch_poll = watch_poll

    # -- schedules -------------------------------------------------------------------------

    def CreateSchedule(
        self, request: api.CreateScheduleRequest, context: grpc.ServicerContext
    ) -> api.CreateScheduleResponse:
        new = convert.new_schedule_from_proto(request.schedule)
        created, record = self.store.schedules.create_schedule_if(
            new, if_absent=request.if_absent, actor=actor(context)
        )
        return api.CreateScheduleResponse(schedule=self._sent(record), created=created)

    def UpdateSchedule(
        self, request: api.UpdateScheduleRequest, context: grpc.ServicerContext
    ) -> api.UpdateScheduleResponse:
        schedule_id = validate.schedule_id(request.schedule.schedule_id, "schedule.schedule_id")
        paths = schedule_update.update_paths(request.update_mask)
        revise = schedule_update.reviser(request.schedule, paths)
        record, changed = self.store.schedules.update_schedule(schedule_id, revise, actor(context))
        return api.UpdateScheduleResponse(schedule=self._sent(record), changed=changed)

    def GetSchedule(
        self, request: api.GetScheduleRequest, context: grpc.ServicerContext
    ) -> api.GetScheduleResponse:
        record = self.store.schedules.get_schedule(validate.schedule_id(request.schedule_id))
        return api.GetScheduleResponse(schedule=self._sent(record))

    def ListSchedules(
        self, request: api.ListSchedulesRequest, context: grpc.ServicerContext
    ) -> api.ListSchedulesResponse:
        keep = _shard_keep(request.shard_filter)
        schedules, revision = paging.page(
            lambda after, n: self.store.schedules.list_schedules(
                n, request.include_deleted, after, keep
            ),
            lambda record: record.schedule_id,
            self._sent,
            lambda msg: msg.ByteSize(),
            after=validate.schedule_ref(request.after_schedule_id, "after_schedule_id"),
            # 0: a full page (the byte bound may end it sooner)
            limit=validate.limits().page(request.limit) or validate.limits().page_size,
            budget=self.store.limits.page_bytes,
        )
        return api.ListSchedulesResponse(schedules=schedules, revision=revision)

    def _sent(self, record: ScheduleRecord) -> common_pb2.Schedule:
        return convert.schedule_reply(record, self.store.limits.schedule_reply_bytes)

    def PauseSchedule(
        self, request: api.PauseScheduleRequest, context: grpc.ServicerContext
    ) -> api.PauseScheduleResponse:
        record = self.store.schedules.pause_schedule(
            validate.schedule_id(request.schedule_id),
            validate.note(request.note, "note"),
            actor(context),
        )
        return api.PauseScheduleResponse(schedule=self._sent(record))

    def ResumeSchedule(
        self, request: api.ResumeScheduleRequest, context: grpc.ServicerContext
    ) -> api.ResumeScheduleResponse:
        record = self.store.schedules.resume_schedule(
            validate.schedule_id(request.schedule_id),
            validate.note(request.note, "note"),
            actor(context),
        )
        return api.ResumeScheduleResponse(schedule=self._sent(record))

    def DeleteSchedule(
        self, request: api.DeleteScheduleRequest, context: grpc.ServicerContext
    ) -> api.DeleteScheduleResponse:
        record, cancelled = self.store.deletion.delete_schedule(
            validate.schedule_id(request.schedule_id), force=request.force, actor=actor(context)
        )
        return api.DeleteScheduleResponse(
            schedule=self._sent(record),
            cancelled=[convert.run_to_proto(run, blobs=False) for run in cancelled],
        )

    def WatchSchedules(
        self, request: api.WatchSchedulesRequest, context: grpc.ServicerContext
    ) -> Iterator[api.WatchSchedulesResponse]:
        # Wake the waiting stream as soon as the call ends (client cancel, server stop).
        keep = _shard_keep(request.shard_filter)
        context.add_callback(self.store.changes.wake_watchers)
        metrics.WATCH_STREAMS.inc()
        try:
            for record in self.store.schedules.watch(
                request.since_revision, context.is_active, poll=self.watch_poll
            ):
                if keep is None or keep(record.schedule_id):
                    yield api.WatchSchedulesResponse(schedule=self._sent(record))
        finally:
            metrics.WATCH_STREAMS.dec()

    # -- job types -------------------------------------------------------------------------

    def RegisterJobType(
        self, request: api.RegisterJobTypeRequest, context: grpc.ServicerContext
    ) -> api.RegisterJobTypeResponse:
        record = self.store.job_types.register_job_type(
            convert.job_type_from_proto(request.job_type), actor(context)
        )
        return api.RegisterJobTypeResponse(job_type=convert.job_type_to_proto(record))

    def ListJobTypes(
        self, request: api.ListJobTypesRequest, context: grpc.ServicerContext
    ) -> api.ListJobTypesResponse:
        records = self.store.job_types.list_job_types()
        return api.ListJobTypesResponse(job_types=[convert.job_type_to_proto(r) for r in records])

    # -- runs ------------------------------------------------------------------------------

    def RecordRuns(
        self, request: api.RecordRunsRequest, context: grpc.ServicerContext
    ) -> api.RecordRunsResponse:
        reqs = _items("runs", request.runs, convert.record_run_from_proto)
        if request.with_payloads and len(reqs) > 1:
            raise InvalidArgument(
                "with_payloads",
                f"only for one run (a batch of payloads could pass gRPC's "
                f"message limit), got {len(reqs)} runs",
            )
        began = time.perf_counter()
        who = actor(context)
        with db_span("RecordRuns", Hop.PERSIST):
            # A slot that already had a row is settled by the placeholder rules
            results = slots.settle_all(
                self.store, reqs, self.store.runs.record_runs(reqs, who), who
            )
            annotate_batch(
                request.runs, [r.run if isinstance(r, Recorded) else None for r in results]
            )
        metrics.batch("RecordRuns", len(reqs), time.perf_counter() - began)
        return api.RecordRunsResponse(
            results=[
                api.RecordRunResult(error=item_error(r))
                if isinstance(r, CronwaveError)
                # No payloads unless asked for one run's: the dispatcher reads a
                # trigger's alone, and 1,000 runs of 256 KiB would be far over one message
                else api.RecordRunResult(
                    recorded=_recorded_to_proto(r, blobs=request.with_payloads)
                )
                for r in results
            ]
        )

    def GetRuns(
        self, request: api.GetRunsRequest, context: grpc.ServicerContext
    ) -> api.GetRunsResponse:
        ids = _items("runs", request.runs, convert.run_id_from_proto)
        runs = self.store.runs.get_runs(ids)
        by_id = {r.run_id: r for r in runs}
        annotate_batch(request.runs, [by_id.get(run_id) for run_id in ids])
        return api.GetRunsResponse(runs=[convert.run_to_proto(r) for r in runs])

    def ListRuns(
        self, request: api.ListRunsRequest, context: grpc.ServicerContext
    ) -> api.ListRunsResponse:
        states = convert.run_states_from_proto(request.states)
        schedule_id = validate.schedule_ref(request.schedule_id, "schedule_id")
        schedule_ids = convert.schedule_ids(request.schedule_ids, "schedule_ids")
        runs = self.store.runs.list_runs(schedule_id, states, request.limit, schedule_ids)
        blobs = not request.lean
        return api.ListRunsResponse(runs=[convert.run_to_proto(r, blobs=blobs) for r in runs])

    def ListRecentRuns(
        self, request: api.ListRecentRunsRequest, context: grpc.ServicerContext
    ) -> api.ListRecentRunsResponse:
        ids = convert.schedule_ids(request.schedule_ids, "schedule_ids")
        runs = self.store.runs.recent_runs(ids, request.per_schedule)
        by_schedule: dict[str, list[common_pb2.Run]] = {}
        for run in runs:
            by_schedule.setdefault(run.schedule_id, []).append(
                convert.run_to_proto(run, blobs=False)
            )
        # A repeated field's item costs its size and a few bytes of tag and length.
        kept, left_out = recent_runs.fit(ids, by_schedule, lambda run: run.ByteSize() + 6)
        return api.ListRecentRunsResponse(runs=kept, left_out=left_out)

    def ListRunEvents(
        self, request: api.ListRunEventsRequest, context: grpc.ServicerContext
    ) -> api.ListRunEventsResponse:
        events = self.store.runs.list_run_events(validate.run_id(request.run_id))
        return api.ListRunEventsResponse(events=[convert.event_to_proto(e) for e in events])

    def AppendRunEvents(
        self, request: api.AppendRunEventsRequest, context: grpc.ServicerContext
    ) -> api.AppendRunEventsResponse:
        events = _items("events", request.events, convert.event_from_proto)
        results = self.store.runs.append_run_events(events)
        return api.AppendRunEventsResponse(
            results=[
                api.AppendRunEventResult(error=item_error(r))
                if isinstance(r, CronwaveError)
                else api.AppendRunEventResult(event=convert.event_to_proto(r))
                for r in results
            ]
        )

    # -- attempts --------------------------------------------------------------------------

    def ClaimRuns(
        self, request: api.ClaimRunsRequest, context: grpc.ServicerContext
    ) -> api.ClaimRunsResponse:
        claims = _items("claims", request.claims, convert.claim_from_proto)
        queues = [
            validate.name(queue, f"queues[{i}]", required=True)
            for i, queue in enumerate(request.queues)
        ]
        began = time.perf_counter()
        with db_span("ClaimRuns", Hop.PICKUP):
            results = self.store.attempts.claim_runs(claims, queues)
            annotate_batch(
                request.claims, [None if isinstance(r, CronwaveError) else r.run for r in results]
            )
        metrics.batch("ClaimRuns", len(claims), time.perf_counter() - began)
        return api.ClaimRunsResponse(
            results=[
                api.ClaimRunResult(error=item_error(r))
                if isinstance(r, CronwaveError)
                else api.ClaimRunResult(
                    claim=api.ClaimRunResponse(
                        run=convert.run_to_proto(r.run),
                        claimed=r.claimed,
                        attempt_token=r.attempt_token,
                        deadline_at=None if r.deadline_at is None else dt_to_ts(r.deadline_at),
                    )
                )
                for r in results
            ]
        )

    def Heartbeat(
        self, request: api.HeartbeatRequest, context: grpc.ServicerContext
    ) -> api.HeartbeatResponse:
        run_id = validate.run_id(request.run_id)
        checkpoint = validate.checkpoint_json(request.checkpoint_json)
        body_started_at = opt_ts(request, "body_started_at")
        with db_span("Heartbeat", Hop.EXECUTE, run_id):
            beat = self.store.attempts.heartbeat(
                run_id, convert.attempt_token(request.attempt_token), checkpoint, body_started_at
            )
        return _beat_to_proto(beat)

    def Heartbeats(
        self, request: api.HeartbeatsRequest, context: grpc.ServicerContext
    ) -> api.HeartbeatsResponse:
        beats = _items("beats", request.beats, convert.beat_from_proto)
        began = time.perf_counter()
        with db_span("Heartbeats", Hop.EXECUTE):
            results = self.store.attempts.heartbeats(beats)
        metrics.batch("Heartbeats", len(beats), time.perf_counter() - began)
        return api.HeartbeatsResponse(
            results=[
                api.HeartbeatResult(error=item_error(r))
                if isinstance(r, CronwaveError)
                else api.HeartbeatResult(beat=_beat_to_proto(r))
                for r in results
            ]
        )

    def CompleteRuns(
        self, request: api.CompleteRunsRequest, context: grpc.ServicerContext
    ) -> api.CompleteRunsResponse:
        completions = _items("completions", request.completions, convert.completion_from_proto)
        began = time.perf_counter()
        with db_span("CompleteRuns", Hop.COMPLETE):
            results = self.store.attempts.complete_runs(completions)
            annotate_batch(
                request.completions,
                [r.run if isinstance(r, Completion) else None for r in results],
            )
        metrics.batch("CompleteRuns", len(completions), time.perf_counter() - began)
        metrics.completed(results)
        return api.CompleteRunsResponse(
            results=[
                api.CompleteRunResult(error=item_error(r))
                if isinstance(r, CronwaveError)
                else api.CompleteRunResult(completion=_completion_to_proto(r))
                for r in results
            ]
        )

    def ReleaseRun(
        self, request: api.ReleaseRunRequest, context: grpc.ServicerContext
    ) -> api.ReleaseRunResponse:
        run_id = validate.run_id(request.run_id)
        token = convert.attempt_token(request.attempt_token)
        checkpoint = validate.checkpoint_json(request.checkpoint_json)
        reason = validate.note(request.reason, "reason")
        validate.key(request.traceparent, "traceparent")
        with db_span("ReleaseRun", Hop.EXECUTE, run_id) as span:
            run, released = self.store.attempts.release_run(run_id, token, checkpoint, reason)
            mark_run(span, run)
        # The worker only queues a message naming the run: no blobs.
        return api.ReleaseRunResponse(run=convert.run_to_proto(run, blobs=False), released=released)

    def CancelRun(
        self, request: api.CancelRunRequest, context: grpc.ServicerContext
    ) -> api.CancelRunResponse:
        run_id = validate.run_id(request.run_id)
        reason = validate.note(request.reason, "reason")
        grace = duration_to_td(request.grace, "grace")
        run, changed = self.store.attempts.cancel_run(
            CancelRequest(run_id, reason, grace), actor(context)
        )
        if changed:
            run_ended(run)  # a run no worker held ends here (a running one: its worker's)
        return api.CancelRunResponse(run=convert.run_to_proto(run), changed=changed)

    # -- fencing ---------------------------------------------------------------------------

    def GetFencingToken(
        self, request: api.GetFencingTokenRequest, context: grpc.ServicerContext
    ) -> api.GetFencingTokenResponse:
        token = self.store.fencing.fencing_token(convert.fencing_scope(request.fencing_scope))
        return api.GetFencingTokenResponse(fencing_token=token)

    def IssueFencingToken(
        self, request: api.IssueFencingTokenRequest, context: grpc.ServicerContext
    ) -> api.IssueFencingTokenResponse:
        token = self.store.fencing.issue_fencing_token(convert.fencing_scope(request.fencing_scope))
        return api.IssueFencingTokenResponse(fencing_token=token)

    # -- what planners ask of their slots (see slots.py) -----------------------------------

    def LatestFireTimes(
        self, request: api.LatestFireTimesRequest, context: grpc.ServicerContext
    ) -> api.LatestFireTimesResponse:
        entries = slots.latest_fire_times(
            self.store,
            convert.schedule_ids(request.schedule_ids, "schedule_ids"),
            validate.schedule_ref(request.after_schedule_id, "after_schedule_id"),
            request.limit,
            ts_to_dt(request.until) if request.HasField("until") else None,
        )
        return api.LatestFireTimesResponse(
            entries=[
                api.LatestFireTime(
                    schedule_id=e.schedule_id, fire_time=dt_to_ts(e.fire_time), fires=e.fires
                )
                for e in entries
            ]
        )

    def RecordMissedSlots(
        self, request: api.RecordMissedSlotsRequest, context: grpc.ServicerContext
    ) -> api.RecordMissedSlotsResponse:
        missed = _items("slots", request.slots, _missed_slot)
        token, scope = convert.fencing(request.fencing_token, request.fencing_scope)
        began = time.perf_counter()
        written: list[slots.MissedSlot] = []
        with db_span("RecordMissedSlots", Hop.PLAN):
            recorded, unknown = slots.record_missed_slots(
                self.store, missed, token, scope, written_slots=written
            )
        metrics.batch("RecordMissedSlots", len(missed), time.perf_counter() - began)
        metrics.missed(written)
        return api.RecordMissedSlotsResponse(recorded=recorded, unknown_schedules=unknown)

    def ListPendingFires(
        self, request: api.ListPendingFiresRequest, context: grpc.ServicerContext
    ) -> api.ListPendingFiresResponse:
        after = validate.key(request.after_run_id, "after_run_id")
        runs = slots.pending_fires(self.store, after, request.limit)
        # No payloads: the planner never reads them (a page is up to 10,000 runs)
        return api.ListPendingFiresResponse(
            runs=[convert.run_to_proto(r, blobs=False) for r in runs]
        )

    # -- stalled runs and dead letters -----------------------------------------------------

    def RequeueStalledRuns(
        self, request: api.RequeueStalledRunsRequest, context: grpc.ServicerContext
    ) -> api.RequeueStalledRunsResponse:
        pending_for = duration_to_td(request.pending_for, "pending_for")
        sweep_store.check_wait_count(len(request.queue_waits))
        waits = {
            validate.name(queue, f"queue_waits[{queue!r}]", required=True): duration_to_td(
                wait, f"queue_waits[{queue!r}]"
            )
            for queue, wait in request.queue_waits.items()
        }
        stalled = self.store.requeues.requeue_stalled_runs(pending_for, request.limit, waits)
        return api.RequeueStalledRunsResponse(runs=[convert.stalled_to_proto(r) for r in stalled])

    def RequeueLostRuns(
        self, request: api.RequeueLostRunsRequest, context: grpc.ServicerContext
    ) -> api.RequeueLostRunsResponse:
        lost_at = convert.required_time(request, "lost_at", "lost_at")
        page = self.store.requeues.requeue_lost_runs(
            lost_at,
            duration_to_td(request.pending_for, "pending_for"),
            validate.key(request.after_run_id, "after_run_id"),
            request.limit,
        )
        return api.RequeueLostRunsResponse(
            runs=[convert.stalled_to_proto(r) for r in page.runs],
            next_after_run_id=page.next_after_run_id,
        )

    def DeadLetterRun(
        self, request: api.DeadLetterRunRequest, context: grpc.ServicerContext
    ) -> api.DeadLetterRunResponse:
        req = convert.dead_letter_from_proto(request)
        with db_span("DeadLetterRun", Hop.COMPLETE, req.run_id) as span:
            outcome = self.store.dead_letters.dead_letter(req)
            if outcome.run is not None:
                mark_run(span, outcome.run)
        return api.DeadLetterRunResponse(
            dead_letter=convert.dead_letter_to_proto(outcome.letter) if outcome.letter else None,
            run=convert.run_to_proto(outcome.run, blobs=False) if outcome.run else None,
            changed=outcome.changed,
        )

    def ListDeadLetters(
        self, request: api.ListDeadLettersRequest, context: grpc.ServicerContext
    ) -> api.ListDeadLettersResponse:
        limit = validate.limits().page(request.limit)
        letters = self.store.dead_letters.list_dead_letters(limit, request.include_replayed)
        return api.ListDeadLettersResponse(
            dead_letters=[convert.dead_letter_to_proto(d) for d in letters]
        )

    def ReplayDeadLetter(
        self, request: api.ReplayDeadLetterRequest, context: grpc.ServicerContext
    ) -> api.ReplayDeadLetterResponse:
        run = self.store.dead_letters.replay_dead_letter(
            validate.run_id(request.run_id), actor(context)
        )
        return api.ReplayDeadLetterResponse(run=convert.run_to_proto(run))

    # -- audit and deadlines ---------------------------------------------------------------

    def ListAuditEvents(
        self, request: api.ListAuditEventsRequest, context: grpc.ServicerContext
    ) -> api.ListAuditEventsResponse:
        return audit_rpc.list_audit_events(self.store.audit, request)

    def ListDeadlineBreaches(
        self, request: api.ListDeadlineBreachesRequest, context: grpc.ServicerContext
    ) -> api.ListDeadlineBreachesResponse:
        return deadline_rpc.list_deadline_breaches(self.store.deadlines, request)


def _beat_to_proto(beat: Beat) -> api.HeartbeatResponse:
    response = api.HeartbeatResponse(deadline=dt_to_ts(beat.deadline))
    if beat.cancel_grace is not None:
        response.cancel_requested = True
        response.cancel_grace.CopyFrom(td_to_duration(beat.cancel_grace))
        response.cancel_reason = beat.cancel_reason
    return response


def _shard_keep(shard_filter: api.ShardFilter) -> Callable[[str], bool] | None:
    """Whether a schedule is in one of the filter's shards; None when there is no
    filter (``count`` 0)."""
    if shard_filter.count == 0:
        return None
    count = shard_filter.count
    shards = shard_list(shard_filter.shards, count, "shard_filter")
    return lambda schedule_id: shard_of(schedule_id, count) in shards
