"""``Client.update_schedule``'s keywords -> the UpdateSchedule request: each keyword
given is one mask path, and nothing else is in the mask."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwave import Overlap, Policy, Spec
from cronwave._update_input import update_of
from cronwave_core.errors import InvalidArgument


def test_each_keyword_given_is_one_path():
    msg, paths = update_of(
        "nightly",
        cron="30 2 * * *",
        overlap="allow_all",
        catchup_window=timedelta(minutes=30),
        start_at=datetime(2030, 1, 1, tzinfo=UTC),
        payload={"customers": 3},
        job_type="billing.nightly",
    )
    assert paths == [
        "spec.cron",
        "spec.start_at",
        "policy.overlap",
        "policy.catchup_window",
        "job_type",
        "payload_json",
    ]
    assert list(msg.spec.cron) == ["30 2 * * *"] and msg.schedule_id == "nightly"
    assert msg.payload_json == '{"customers": 3}' and msg.job_type == "billing.nightly"
    # a zero or empty value given is a change too (to no jitter, to no excluded dates)
    assert update_of("n", jitter=timedelta(0), exclude_dates=[])[1] == [
        "spec.exclude_dates",
        "spec.jitter",
    ]


def test_a_whole_spec_or_policy_is_one_path_each():
    _, paths = update_of("n", Spec(cron=("0 2 * * *",)), Policy(overlap=Overlap.SKIP))
    assert paths == ["spec", "policy"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: update_of("n"), "update_schedule: name at least one field to change"),
        (
            lambda: update_of("n", Spec(cron=("0 2 * * *",)), cron="0 3 * * *"),
            "spec: give the spec whole or by its keywords, not both",
        ),
        (
            lambda: update_of("n", None, Policy(), overlap="skip"),
            "policy: give the policy whole or by its keywords, not both",
        ),
        (lambda: update_of("n", payload={"at": object()}), "payload: must be JSON-serializable"),
        (lambda: update_of("n", overlap="sometimes"), "'sometimes' is not one of"),
        (
            lambda: update_of("n", start_at=datetime(2030, 1, 1)),
            "spec.start_at: must be a timezone-aware datetime",
        ),
    ],
)
def test_bad_keywords_are_refused_before_any_call(call, message):
    with pytest.raises(InvalidArgument) as refused:
        call()
    assert message in refused.value.message
