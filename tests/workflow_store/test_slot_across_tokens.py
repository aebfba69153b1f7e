"""One run per (schedule, fire time), whichever leader's token records it: a newer
leader re-recording a slot gets the existing run back, never a second one."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from cronwave_proto.v1 import workflow_store_service_pb2 as api

from cronwave_core.convert import dt_to_ts
from tests.harness.store import FIRE, create_schedule, record_run
from tests.helpers import issue_tokens

FAILED_PRECONDITION = 9


def _runs_of(stub, schedule_id: str) -> list:
    return list(stub.ListRuns(api.ListRunsRequest(schedule_id=schedule_id, limit=1000)).runs)


def test_a_slot_recorded_with_token_5_then_6_keeps_its_one_run(stub):
    # Given a slot recorded by the leader holding token 5
    sid = create_schedule(stub).schedule_id
    first = record_run(stub, sid, FIRE, token=5)
    assert first.created

    # When the next leader (token 6) records the same slot
    second = record_run(stub, sid, FIRE, token=6)

    # Then it gets the existing run back, and the slot still has exactly one run
    assert not second.created
    assert second.run.run_id == first.run.run_id
    assert second.run.fencing_token == 5  # the run that exists, as its recorder wrote it
    assert [r.run_id for r in _runs_of(stub, sid)] == [first.run.run_id]
    events = stub.ListRunEvents(api.ListRunEventsRequest(run_id=first.run.run_id)).events
    assert [e.kind for e in events] == ["recorded", "enqueued"]
    # And the newer token is now the newest seen, so the older leader is fenced out
    assert stub.GetFencingToken(api.GetFencingTokenRequest()).fencing_token == 6


def _batch(sid: str, token: int, hours: range) -> api.RecordRunsRequest:
    return api.RecordRunsRequest(
        runs=[
            api.RecordRunRequest(
                schedule_id=sid,
                fire_time=dt_to_ts(FIRE + timedelta(hours=h)),
                fencing_token=token,
            )
            for h in hours
        ]
    )


@pytest.mark.parametrize("rounds", [12])
def test_two_store_processes_record_the_same_slots_with_interleaved_tokens(
    start_store, rounds: int
):
    # Given two store processes on one database (PostgreSQL: row locks; SQLite: the
    # file's write lock), and a schedule
    one, two = start_store(), start_store()
    stubs = [one.stub(), two.stub()]
    issue_tokens(stubs[0], 2 * rounds + 2)
    sid = create_schedule(stubs[0]).schedule_id
    slots = range(40)

    # When, round after round, both record the same 40 slots at once, one with the
    # newer token and one with the older (which process holds which alternates)
    stale: list[int] = []
    created = 0
    for r in range(rounds):
        old, new = 2 * r + 1, 2 * r + 2
        tokens = (old, new) if r % 2 == 0 else (new, old)
        barrier = threading.Barrier(2)
        replies: list[object] = [None, None]

        def record(i: int, tokens=tokens, barrier=barrier, replies=replies) -> None:
            barrier.wait(timeout=10)
            replies[i] = stubs[i].RecordRuns(_batch(sid, tokens[i], slots), timeout=30)

        threads = [threading.Thread(target=record, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for i in (0, 1):
            reply = replies[i]
            assert isinstance(reply, api.RecordRunsResponse), f"round {r}: no reply"
            for result in reply.results:
                if result.HasField("error"):
                    assert result.error.code == FAILED_PRECONDITION, result.error.message
                    stale.append(tokens[i])
                else:
                    created += result.recorded.created

    # Then every slot has exactly one run, created once over all rounds
    runs = _runs_of(stubs[1], sid)
    assert sorted(r.fire_time.ToDatetime() for r in runs) == sorted(
        (FIRE + timedelta(hours=h)).replace(tzinfo=None) for h in slots
    )
    assert created == len(slots)
    # And only older tokens were refused: a batch carrying the newer token of its round
    # is never refused, one carrying the older is refused once the newer was seen
    assert all(t % 2 == 1 for t in stale), stale
    assert stubs[1].GetFencingToken(api.GetFencingTokenRequest()).fencing_token == 2 * rounds
    # And a deposed leader's batch, sent to both processes at once, is refused whole
    late = [s.RecordRuns(_batch(sid, 2 * rounds - 1, range(40, 45))) for s in stubs]
    for reply in late:
        assert [r.error.code for r in reply.results] == [FAILED_PRECONDITION] * 5
    assert len(_runs_of(stubs[0], sid)) == len(slots)
