"""The fault matrix's slot audit, without processes: each kind of trouble is counted
where it belongs, MISSED reasons are held to their own facts, and recovery is the
first slot of the on-time stretch that closes the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cronwave_proto.v1 import common_pb2

from cronwave._models import RunEvent
from cronwave_bench.slot_audit import (
    STUCK_AFTER,
    History,
    Tally,
    Window,
    audit_window,
    body_started,
    contradicted,
    needs_history,
    reason_label,
    suspects,
)
from cronwave_core.convert import dt_to_ts

T0 = datetime(2030, 1, 1, tzinfo=UTC)
SID = "s1"
SUCCEEDED = common_pb2.RUN_STATE_SUCCEEDED
MISSED = common_pb2.RUN_STATE_MISSED
RUNNING = common_pb2.RUN_STATE_RUNNING


def at(second: float) -> datetime:
    return T0 + timedelta(seconds=second)


def run(
    second: int,
    *,
    state: common_pb2.RunState = SUCCEEDED,
    done: float | None = 0.01,  # finished this long after the fire time (None: not)
    claimed: float = -0.5,  # the claim, relative to the fire time
    created: float = -0.5,
    attempt: int = 1,
    error: str = "",
    run_id: str = "",
) -> common_pb2.Run:
    fire = at(second)
    msg = common_pb2.Run(
        run_id=run_id or f"run-{second}",
        schedule_id=SID,
        fire_time=dt_to_ts(fire),
        state=state,
        trigger=common_pb2.TRIGGER_KIND_SCHEDULED,
        attempt=attempt,
        fencing_token=1,
        error=error,
        created_at=dt_to_ts(fire + timedelta(seconds=created)),
    )
    if state != MISSED:
        msg.claimed_at.CopyFrom(dt_to_ts(fire + timedelta(seconds=claimed)))
    if done is not None:
        msg.finished_at.CopyFrom(dt_to_ts(fire + timedelta(seconds=done)))
    return msg


def skipped(second: int, reason: str = "overlap_skip", recorded: float = 0.01) -> common_pb2.Run:
    return run(second, state=MISSED, attempt=0, error=reason, created=recorded, done=recorded)


WINDOW = Window("kill -9 x", at(0), at(10), injected_at=at(2.5), ended_at=at(2.5))
SLOTS = {SID: [at(s) for s in range(1, 11)]}


LONG_AFTER = at(60)  # an audit long after every window's end


def judge(runs, histories=None, audited_at=LONG_AFTER, window=WINDOW, slots=SLOTS, **kw):
    return audit_window(window, slots, {SID: runs}, histories or {}, audited_at, **kw)


def test_every_slot_fired_once_on_time_is_clean_and_recovers_at_the_first_slot() -> None:
    # Given one on-time run per slot
    runs = [run(s) for s in range(1, 11)]

    # When the window is audited
    result = judge(runs)

    # Then nothing is wrong, and firing was on time from the first slot after the fault
    assert result.clean
    assert (result.slots, result.fired, result.late) == (10, 10, 0)
    assert result.recovery_from_injection_s == 0.5  # slot 3, the first after 2.5 s


def test_a_slot_without_run_or_record_is_missing() -> None:
    runs = [run(s) for s in range(1, 11) if s != 4]

    result = judge(runs)

    assert result.missing == 1 and not result.clean
    assert result.recovery_from_injection_s == 2.5  # slot 5: after the gap at slot 4


def test_an_overlap_skip_with_a_run_in_flight_is_a_true_record() -> None:
    # Given slot 4 skipped while slot 3's run was still running (it ended 1.5 s late)
    runs = [run(s, done=1.5 if s == 3 else 0.01) for s in range(1, 11) if s != 4]
    runs.append(skipped(4))

    result = judge(runs)

    # Then the record stands: no slot is missing, and it is counted by its reason
    assert (result.missing, result.contradicted) == (0, 0)
    assert result.missed_by_reason == {"overlap_skip": 1}
    assert result.recovery_from_injection_s == 2.5  # slot 5: slots 3 and 4 were late


def test_an_overlap_skip_with_nothing_in_flight_is_contradicted_and_counts_missing() -> None:
    # Given slot 4 skipped though slot 3's run had ended well before slot 4's fire time
    runs = [run(s) for s in range(1, 11) if s != 4]
    runs.append(skipped(4))

    result = judge(runs)

    assert (result.missing, result.contradicted) == (1, 1)
    assert result.missed_by_reason == {"overlap_skip": 1}


def test_a_run_in_flight_recorded_only_after_the_skip_does_not_justify_it() -> None:
    skip = skipped(4, recorded=0.01)
    later = run(9, created=-0.5)  # recorded at 8.5 s, after the skip was

    assert contradicted(skip, [later, skip])
    assert not contradicted(skip, [run(3, done=None), skip])  # still running: in flight


def test_a_placeholder_that_took_the_reason_is_judged_when_its_history_recorded_it() -> None:
    # Given slot 4's catch-up placeholder, recorded at 2 s, skipped at 4.2 s while
    # slot 3's run (recorded at 2.5 s) was still running
    skip = skipped(4, recorded=-2)
    runs = [run(s, created=-0.5, done=1.5 if s == 3 else 0.01) for s in (1, 2, 3)] + [skip]

    # Then its created_at alone contradicts the skip; its history's record of it does not
    assert suspects({SID: runs}) == [skip]
    result = judge(runs, {skip.run_id: History(missed_at=at(4.2))}, slots={SID: [at(4)]})
    assert (result.missing, result.contradicted) == (0, 0)
    alone = judge(runs, slots={SID: [at(4)]})
    assert alone.contradicted_records == (f"{SID}@{at(4).isoformat()}: overlap_skip",)


def test_catchup_reasons_need_a_slot_planned_later_than_the_grace_or_its_successor() -> None:
    grace = timedelta(minutes=1)
    soon = skipped(4, "superseded_by_latest", recorded=5)
    late = skipped(4, "superseded_by_latest", recorded=61)
    summary = skipped(4, "outside_catchup_window: summary of every slot after ...", recorded=5)

    assert contradicted(soon, [soon], grace)
    assert not contradicted(late, [late], grace)
    assert contradicted(summary, [summary], grace)
    # recorded (at 9) once its next slot had come: late within the grace too
    assert not contradicted(soon, [soon], grace, successor=at(5))
    assert contradicted(soon, [soon], grace, successor=at(10))  # recorded at 9, before it
    assert not contradicted(skipped(4, "not started within 60s of its fire time"), [])


def test_a_second_run_of_a_slot_and_a_body_started_twice_are_duplicates() -> None:
    runs = [run(s) for s in range(1, 11)]
    runs.append(run(5, run_id="run-5-again"))
    runs[6] = run(7, attempt=2)
    histories = {"run-7": History(starts=(at(7), at(7.2)))}

    result = judge(runs, histories)

    assert result.duplicate == 2
    assert (result.body_started_twice, result.resumed) == (1, 1)


def test_a_new_attempt_while_the_last_worker_lived_is_a_re_run_its_count_can_prove() -> None:
    # Given slot 7 claimed twice by worker w1, which lived on, and slot 8 claimed by
    # w0 and, after w0 was killed, by w1
    runs = [run(s, attempt=2 if s in (7, 8) else 1) for s in range(1, 11)]
    histories = {
        "run-7": History(starts=(at(37),), claims=(("w1", at(6.5)), ("w1", at(37)))),
        "run-8": History(starts=(at(38),), claims=(("w0", at(7.5)), ("w1", at(38)))),
    }
    deaths = {"w0": at(7.6)}

    # When audited with w1's count saying its one re-run was a body; that it was not;
    # and with no count at all
    body = judge(runs, histories, deaths=deaths, tallies={"w1": Tally(reruns=1, bodies=1)})
    never = judge(runs, histories, deaths=deaths, tallies={"w1": Tally(reruns=1, bodies=0)})
    unknown = judge(runs, histories, deaths=deaths)

    # Then slot 7 is a duplicate only where the count proves it; slot 8 (a resume after
    # its worker's death) is none
    assert (body.duplicate, body.reruns, body.reruns_possible) == (1, 1, 0)
    assert (never.duplicate, never.reruns_not_begun) == (0, 1)
    assert (unknown.duplicate, unknown.reruns_possible) == (0, 1)
    assert body.resumed == 2


def test_a_count_of_bodies_is_shared_out_over_the_windows_as_far_as_it_proves() -> None:
    # 5 re-runs in all, 3 of them bodies: 3 re-runs in one window, 2 in another
    tally = Tally(reruns=5, bodies=3)

    assert tally.split(3) == (1, 2, 0)  # at least 3 - 2 of these three are bodies
    assert tally.split(2) == (0, 2, 0)
    assert Tally(reruns=7, bodies=2).split(7) == (2, 0, 5)
    with pytest.raises(ValueError):
        Tally(reruns=-1, bodies=0)


def test_a_history_is_read_from_claims_and_body_starts() -> None:
    def event(seq: int, kind: str, detail: str, second: float) -> RunEvent:
        return RunEvent(seq=seq, run_id="r", kind=kind, at=at(second), detail=detail, attempt=1)

    history = History.of(
        [
            event(1, "recorded", "trigger=scheduled", 0),
            event(2, "claimed", "worker-1", 0.5),
            event(3, "requeued", "heartbeat_lapsed: ...", 30),
            event(4, "claimed", "worker-2", 30.1),
            event(5, "missed", "overlap_skip", 31),
            event(6, "started", "body_started_at=2030-01-01T00:00:30.2+00:00 lateness_ms=1", 30.2),
        ]
    )

    assert history.claims == (("worker-1", at(0.5)), ("worker-2", at(30.1)))
    assert history.starts == (at(30.2),)
    assert history.missed_at == at(31)
    assert history.rerun_by({}) == ["worker-1"]
    assert history.rerun_by({"worker-1": at(10)}) == []


def test_a_run_open_or_finished_long_after_the_window_is_stuck() -> None:
    # Given slot 8 finished 15 s after the window ended, slot 9 never finished
    end = (WINDOW.end - T0).total_seconds()
    runs = [run(s) for s in range(1, 8)]
    runs.append(run(8, done=end - 8 + STUCK_AFTER.total_seconds() + 5))
    runs.append(run(9, state=RUNNING, done=None))
    runs.append(run(10))

    # When audited after the bound, and before it
    after = judge(runs, audited_at=WINDOW.end + STUCK_AFTER + timedelta(seconds=1))
    before = judge(runs, audited_at=WINDOW.end + timedelta(seconds=1))

    # Then both are stuck; before the bound the open one is only unsettled
    assert (after.stuck, after.unsettled) == (2, 0)
    assert (before.stuck, before.unsettled) == (1, 1)


def test_an_unfinished_placeholder_is_stuck() -> None:
    runs = [run(s) for s in range(1, 11) if s != 6]
    runs.append(skipped(6, "pending:catchup"))

    result = judge(runs)

    assert result.stuck == 1
    assert result.missed_by_reason == {}


def test_firing_that_is_late_at_the_end_of_the_window_has_not_recovered() -> None:
    runs = [run(s) for s in range(1, 10)] + [run(10, done=3.0, claimed=2.5)]

    result = judge(runs)

    assert result.recovery_from_injection_s is None
    assert result.late == 1


def test_recovery_is_also_timed_from_the_end_of_a_held_fault() -> None:
    held = Window("SIGSTOP", at(0), at(10), injected_at=at(2.5), ended_at=at(6.5))
    runs = [run(s, done=2.0, claimed=1.5) if s in (3, 4) else run(s) for s in range(1, 11)]

    result = judge(runs, window=held)

    assert result.recovery_from_injection_s == 2.5  # slot 5
    assert result.recovery_from_end_s == -1.5  # before the planner was resumed
    assert result.late == 2


def test_the_body_start_is_read_from_the_history_only_where_the_run_leaves_it_open() -> None:
    on_time = run(1, done=0.02, claimed=-0.5)
    late = run(2, done=3.0, claimed=2.0)
    open_ = run(3, done=2.0, claimed=-0.5)  # claimed ahead, completed late: which?

    assert not needs_history(on_time) and body_started(on_time, {})
    assert not needs_history(late) and not body_started(late, {})
    assert needs_history(open_) and not body_started(open_, {})
    assert body_started(open_, {"run-3": History(starts=(at(3.2),))})
    assert needs_history(run(4, attempt=2))
    assert not needs_history(skipped(5))


def test_reasons_are_labelled_by_their_leading_word() -> None:
    assert reason_label("overlap_skip") == "overlap_skip"
    assert reason_label("outside_catchup_window: summary of every slot") == (
        "outside_catchup_window"
    )
    assert reason_label("not started within 60s of its fire time after 9 attempts") == "gave_up"
    assert reason_label("dispatcher refused the start: bad") == "refused"
    assert reason_label("") == "no reason"


def test_a_window_must_end_after_it_starts() -> None:
    with pytest.raises(ValueError, match="end must be after start"):
        Window("w", at(5), at(5))
    with pytest.raises(ValueError, match="ends before it begins"):
        Window("w", at(0), at(5), injected_at=at(3), ended_at=at(2))
