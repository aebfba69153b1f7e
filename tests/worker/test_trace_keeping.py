"""Which runs not sampled keep their worker's spans (``middleware.tracing``'s
``keep_reason``): those that failed, timed out, were cancelled, released,
dead-lettered or retried, and those whose body started later than the setting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronwave_proto.v1 import common_pb2

from cronwave_core.domain.instants import epoch_ns
from cronwave_core.queueing import RunMessage
from cronwave_core.wire import dt_to_ts
from worker.chain import Delivery
from worker.draining import AttemptStop
from worker.middleware.tracing import Tracing
from worker.supervisor import AttemptResult, Outcome

FIRE = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)
KEEP_LATE = timedelta(seconds=1)


def _delivery(outcome: Outcome, late: timedelta, attempt: int = 1) -> Delivery:
    message = RunMessage(
        run_id="run-1", schedule_id="nightly", fire_time=FIRE, job_type="cronwave.noop",
        queue="default",
    )  # fmt: skip
    delivery = Delivery(message, AttemptStop("run-1"))
    delivery.run = common_pb2.Run(run_id="run-1", attempt=attempt, fire_time=dt_to_ts(FIRE))
    delivery.result = AttemptResult(outcome, body_started_ns=epoch_ns(FIRE + late))
    return delivery


def test_a_run_on_time_that_succeeded_at_its_first_attempt_is_not_kept() -> None:
    keeping = Tracing("w1", keep_late=KEEP_LATE)
    assert keeping.keep_reason(_delivery(Outcome.SUCCEEDED, timedelta(milliseconds=900))) is None


def test_each_outcome_that_matters_keeps_the_run_saying_why() -> None:
    keeping = Tracing("w1", keep_late=KEEP_LATE)
    on_time = timedelta(milliseconds=5)
    reasons = {
        outcome: keeping.keep_reason(_delivery(outcome, on_time))
        for outcome in (Outcome.FAILED, Outcome.TIMED_OUT, Outcome.CANCELLED, Outcome.RELEASED)
    }
    assert reasons == {
        Outcome.FAILED: "failed",
        Outcome.TIMED_OUT: "timed_out",
        Outcome.CANCELLED: "cancelled",
        Outcome.RELEASED: "released",
    }
    assert keeping.keep_reason(_delivery(Outcome.SUCCEEDED, on_time, attempt=2)) == "retried"


def test_a_run_started_later_than_the_setting_is_kept_unless_lateness_keeps_none() -> None:
    late = _delivery(Outcome.SUCCEEDED, timedelta(seconds=1, milliseconds=1))
    assert Tracing("w1", keep_late=KEEP_LATE).keep_reason(late) == "late"
    assert Tracing("w1", keep_late=None).keep_reason(late) is None


def test_a_run_that_ended_other_than_succeeded_is_kept() -> None:
    delivery = _delivery(Outcome.SUCCEEDED, timedelta(0))
    delivery.ended_run = common_pb2.Run(run_id="run-1", state=common_pb2.RUN_STATE_CANCELLED)
    assert Tracing("w1", keep_late=KEEP_LATE).keep_reason(delivery) == "ended_cancelled"


def test_a_run_that_succeeded_after_its_deadline_is_kept() -> None:
    # Given a run that started on time and had five minutes to succeed
    deadline = FIRE + timedelta(minutes=5)
    keeping = Tracing("w1", keep_late=KEEP_LATE)

    def ended_at(finished: datetime) -> Delivery:
        delivery = _delivery(Outcome.SUCCEEDED, timedelta(0))
        delivery.deadline_at = deadline
        delivery.ended_run = common_pb2.Run(
            run_id="run-1", state=common_pb2.RUN_STATE_SUCCEEDED, finished_at=dt_to_ts(finished)
        )
        return delivery

    # Then its spans are kept when it succeeded past the deadline, not when it did not
    assert keeping.keep_reason(ended_at(deadline + timedelta(milliseconds=1))) == "deadline"
    assert keeping.keep_reason(ended_at(deadline)) is None


def test_a_run_still_unfinished_when_its_deadline_passed_is_kept() -> None:
    # its completion went to the store by another call: the delivery ends now, long
    # after the deadline
    delivery = _delivery(Outcome.SUCCEEDED, timedelta(0))
    delivery.deadline_at = FIRE + timedelta(minutes=5)
    assert Tracing("w1", keep_late=KEEP_LATE).keep_reason(delivery) == "deadline"
