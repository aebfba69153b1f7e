"""The stall scenario's account of its window, on made-up runs: missing slots,
placeholders still waiting, MISSED reasons, and when firing was on time again."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from cronwave import Run
from cronwave_bench.stall import _judge

T = datetime(2030, 1, 7, 12, 0, tzinfo=UTC)
RUN = Run(
    run_id="r", schedule_id="a", fire_time=T, state="SUCCEEDED", trigger="SCHEDULED",
    job_type="cronwave.noop", payload_json="", attempt=1, fencing_token=1,
    idempotency_key="", created_at=None, started_at=None, finished_at=None,
    heartbeat_at=None, error="", result_json="", checkpoint_json="", queue="default",
    worker_id="w", trace_id="",
)  # fmt: skip


def run(sid: str, at: datetime, late: float | None, state: str = "SUCCEEDED", error: str = ""):
    started = None if late is None else at + timedelta(seconds=late)
    return replace(RUN, schedule_id=sid, fire_time=at, state=state, error=error, started_at=started)


def test_the_window_is_back_on_time_from_the_first_slot_after_which_none_is_late() -> None:
    # Given two 1-second schedules (phases 0 and 0.5 s) over ten seconds after T,
    # the store continued at T+2 s: late until T+4.5 s, on time from T+5 s, but for
    # one slot of b with no row, one placeholder still waiting, one MISSED slot
    ids = ["a", "b"]
    runs = []
    for k in range(10):
        for sid, phase in (("a", 0.0), ("b", 0.5)):
            at = T + timedelta(seconds=k + phase)
            runs.append(run(sid, at, 3.0 if at <= T + timedelta(seconds=4.5) else 0.2))
    runs = [r for r in runs if r.fire_time != T + timedelta(seconds=1.5)]  # b's: no row
    runs = [
        run("a", r.fire_time, None, "MISSED", "pending:catchup")
        if r.fire_time == T + timedelta(seconds=2)
        else run("a", r.fire_time, None, "MISSED", "superseded_by_latest")
        if r.fire_time == T + timedelta(seconds=3)
        else r
        for r in runs
    ]

    # When the window (T, T+9.5 s] is judged
    judged = _judge(ids, T, runs, T, T + timedelta(seconds=9.5), T + timedelta(seconds=2))

    # Then every slot of it is counted, each kind of trouble once, and firing was on
    # time again 3 s after the store came back (the slot at T+5 s)
    assert judged.slots == 19
    assert judged.missing == 1
    assert judged.not_finished == 1
    assert judged.missed_by_reason == {"superseded_by_latest": 1}
    assert judged.back_on_time_s == 3.0
    assert (judged.late_p50_s, judged.late_max_s) == (0.2, 3.0)


def test_a_window_that_ends_late_is_not_back_on_time() -> None:
    runs = [run("a", T + timedelta(seconds=k), 0.2 if k < 5 else 2.0) for k in range(10)]

    judged = _judge(["a"], T, runs, T, T + timedelta(seconds=9), T)

    assert judged.back_on_time_s is None
