"""Run messages: what the dispatcher enqueues is exactly what a worker decodes, and
anything else is refused with an error that names the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import dramatiq
import pytest
import redis

from cronwave_core.errors import CronwaveError, InvalidArgument
from cronwave_core.queueing import (
    RunMessage,
    UndecodableRunMessage,
    actor_name_for,
    make_broker,
)
from cronwave_core.settings import RedisSettings
from tests.helpers import fresh


def a_message(**overrides: object) -> RunMessage:
    values: dict[str, object] = {
        "run_id": "run-1",
        "schedule_id": "nightly",
        "fire_time": datetime(2024, 3, 10, 2, 30, 0, 123456, tzinfo=UTC),
        "job_type": "billing.nightly",
        "queue": "default",
        "attempt_hint": 2,
        "trace": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        "enqueued_at_ns": 1_710_037_800_123_456_789,
        "trigger": "scheduled",
    }
    values.update(overrides)
    return RunMessage(**values)  # type: ignore[arg-type]


def test_round_trip_through_encoded_message() -> None:
    # Given a run message
    original = a_message()
    # When it becomes a dramatiq message, is encoded as the broker stores it, and decoded
    message = original.to_message()
    decoded_message = dramatiq.Message.decode(message.encode())
    decoded = RunMessage.from_kwargs(decoded_message.kwargs)
    # Then nothing was lost, and it is addressed to its queue's actor with data only
    assert decoded == original
    assert decoded.fire_time.tzinfo is not None
    assert message.queue_name == "default"
    assert message.actor_name == actor_name_for("default") == "cronwave_run__default"
    assert message.args == ()
    json.dumps(message.kwargs)  # JSON data, nothing pickled


def test_a_message_from_before_the_trigger_field_still_decodes() -> None:
    kwargs = a_message().to_kwargs()
    del kwargs["trigger"]

    assert RunMessage.from_kwargs(kwargs) == a_message(trigger="")


def test_fire_time_is_kept_in_utc_at_microseconds() -> None:
    local = datetime(2024, 3, 10, 4, 30, 0, 7, tzinfo=timezone(timedelta(hours=2)))
    decoded = RunMessage.from_kwargs(a_message(fire_time=local).to_kwargs())
    assert decoded.fire_time == local
    assert decoded.fire_time.utcoffset() == timedelta(0)
    assert decoded.fire_time.microsecond == 7


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "v"),
        ({**a_message().to_kwargs(), "v": 99}, "v"),
        ({**a_message().to_kwargs(), "run_id": ""}, "run_id"),
        ({**a_message().to_kwargs(), "run_id": 7}, "run_id"),
        ({**a_message().to_kwargs(), "fire_time": "yesterday"}, "fire_time"),
        ({**a_message().to_kwargs(), "fire_time": "2024-03-10T02:30:00"}, "fire_time"),
        ({**a_message().to_kwargs(), "queue": "no spaces"}, "queue"),
        ({**a_message().to_kwargs(), "attempt_hint": True}, "attempt_hint"),
        ({**a_message().to_kwargs(), "enqueued_at_ns": -1}, "enqueued_at_ns"),
        ({**a_message().to_kwargs(), "trace": {"traceparent": 1}}, "trace"),
    ],
)
def test_undecodable_payload_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(UndecodableRunMessage) as caught:
        RunMessage.from_kwargs(kwargs)
    assert isinstance(caught.value, CronwaveError)
    assert caught.value.field == field
    assert f"{field}:" in str(caught.value)
    assert "undecodable run message" in str(caught.value)


def test_not_a_mapping_is_undecodable() -> None:
    with pytest.raises(UndecodableRunMessage, match="kwargs: expected an object"):
        RunMessage.from_kwargs(["run-1"])  # type: ignore[arg-type]


def test_naive_fire_time_and_bad_queue_are_refused_at_construction() -> None:
    with pytest.raises(InvalidArgument, match="fire_time"):
        a_message(fire_time=datetime(2024, 1, 1))
    with pytest.raises(InvalidArgument, match="queue"):
        a_message(queue="9lives")


def test_broker_enqueues_under_its_namespace_without_becoming_global(
    redis_url: str, namespace: str
) -> None:
    # Given a broker built from settings
    settings = RedisSettings.from_env(
        {"CRONWAVE_REDIS_URL": redis_url, "CRONWAVE_NAMESPACE": namespace}
    )
    before = dramatiq.broker.global_broker
    broker = make_broker(settings)
    queue = fresh("q").replace("-", "_")
    try:
        # When a run message is enqueued on it
        broker.enqueue(a_message(queue=queue).to_message())
        # Then the message sits in Redis under the namespace, as JSON kwargs
        client = redis.Redis.from_url(redis_url)
        stored = client.hvals(f"{namespace}:{queue}.msgs")
        client.close()
        assert len(stored) == 1
        raw = stored[0]
        assert isinstance(raw, bytes)
        decoded = dramatiq.Message.decode(raw)
        assert RunMessage.from_kwargs(decoded.kwargs) == a_message(queue=queue)
        # and building the broker did not install it as dramatiq's global broker
        assert dramatiq.broker.global_broker is before
    finally:
        broker.flush(queue)
        broker.close()
