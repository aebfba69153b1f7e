"""The request limits (``cronwave_core.limits``) and their settings: what they let
through, what they refuse and how the refusal reads, and the combinations that stop
start-up."""

from __future__ import annotations

import pytest

from cronwave_core.errors import ConfigurationError, InvalidArgument
from cronwave_core.limits import DEFAULT_LIMITS, ID_ALPHABET_RULE, KIB, RequestLimits
from cronwave_core.settings import LimitSettings


def refusal(check: object, *args: object) -> str:
    with pytest.raises(InvalidArgument) as info:
        check(*args)  # type: ignore[operator]
    return info.value.message


def test_the_defaults_are_the_documented_ones() -> None:
    assert LimitSettings.from_env({}).limits() == DEFAULT_LIMITS
    assert (
        RequestLimits(
            payload_bytes=256 * KIB,
            id_chars=128,
            note_bytes=KIB,
            page_size=1_000,
            backfill_slots=10_000,
            result_bytes=1024 * KIB,
            checkpoint_bytes=1024 * KIB,
            receive_bytes=16 * 1024 * KIB,
        )
        == DEFAULT_LIMITS
    )


def test_an_id_at_the_limit_passes_and_one_more_character_is_refused_with_the_size() -> None:
    assert DEFAULT_LIMITS.identifier("k" * 128, "idempotency_key") == "k" * 128

    message = refusal(DEFAULT_LIMITS.identifier, "k" * 129, "idempotency_key")

    assert message == "idempotency_key: must be at most 128 characters, got 129"


@pytest.mark.parametrize("value", ["nightly@2030-01-01T02:00:00+00:00", "apply:billing", "a/b=c#d"])
def test_ids_of_the_stated_alphabet_pass(value: str) -> None:
    assert DEFAULT_LIMITS.identifier(value, "key") == value


@pytest.mark.parametrize(
    ("value", "found"),
    [("my key", "U+0020 at index 2"), ("é", "U+00E9 at index 0"), ("a\x00", "U+0000 at index 1")],
)
def test_an_id_outside_the_alphabet_is_refused_naming_the_alphabet_and_the_character(
    value: str, found: str
) -> None:
    assert refusal(DEFAULT_LIMITS.identifier, value, "worker_id") == (
        f"worker_id: must use only {ID_ALPHABET_RULE} (found {found})"
    )


def test_a_note_is_counted_in_utf8_bytes() -> None:
    assert DEFAULT_LIMITS.note("é" * 512, "note") == "é" * 512  # 1,024 bytes

    assert refusal(DEFAULT_LIMITS.note, "é" * 512 + "x", "note") == (
        "note: must be at most 1024 bytes, got 1025"
    )


def test_a_page_past_the_limit_is_refused_and_zero_asks_for_the_default() -> None:
    assert DEFAULT_LIMITS.page(0) == 0 and DEFAULT_LIMITS.page(1_000) == 1_000

    assert refusal(DEFAULT_LIMITS.page, 1_001) == (
        "limit: must be at most 1000 per page, got 1001; page on"
    )
    assert refusal(DEFAULT_LIMITS.page, -1) == "limit: must not be negative, got -1"


def test_settings_change_the_limits() -> None:
    env = {
        "CRONWAVE_MAX_PAYLOAD_BYTES": "2048",
        "CRONWAVE_MAX_ID_CHARS": "32",
        "CRONWAVE_MAX_NOTE_BYTES": "100",
        "CRONWAVE_MAX_PAGE_SIZE": "10",
        "CRONWAVE_MAX_BACKFILL_SLOTS": "50",
    }
    limits = LimitSettings.from_env(env).limits()

    assert refusal(limits.payload_size, "x" * 2049, "schedule.payload_json") == (
        "schedule.payload_json: at most 2048 bytes, got 2049"
    )
    assert refusal(limits.identifier, "k" * 33, "queue") == (
        "queue: must be at most 32 characters, got 33"
    )
    assert limits.backfill_slots == 50 and limits.page_size == 10 and limits.note_bytes == 100


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CRONWAVE_MAX_PAGE_SIZE": "0"}, "CRONWAVE_MAX_PAGE_SIZE"),
        ({"CRONWAVE_MAX_ID_CHARS": "1000"}, "CRONWAVE_MAX_ID_CHARS"),
        (
            {"CRONWAVE_MAX_PAYLOAD_BYTES": "2097152", "CRONWAVE_MAX_RECEIVE_BYTES": "4194304"},
            "CRONWAVE_MAX_RECEIVE_BYTES",
        ),
    ],
)
def test_a_limit_that_breaks_its_rule_stops_start_up_naming_the_variable(
    env: dict[str, str], named: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        LimitSettings.from_env(env).limits()

    assert named in str(info.value)


def test_a_result_and_a_checkpoint_past_their_limits_are_refused_with_the_setting() -> None:
    limits = LimitSettings.from_env(
        {"CRONWAVE_MAX_RESULT_BYTES": "2048", "CRONWAVE_MAX_CHECKPOINT_BYTES": "4096"}
    ).limits()

    assert limits.result_size("x" * 2048, "result_json") == 2048
    assert refusal(limits.result_size, "é" * 1025, "completions[0].result_json") == (
        "completions[0].result_json: at most 2048 bytes (CRONWAVE_MAX_RESULT_BYTES), got 2050"
    )
    assert refusal(limits.checkpoint_size, "x" * 4097, "checkpoint_json") == (
        "checkpoint_json: at most 4096 bytes (CRONWAVE_MAX_CHECKPOINT_BYTES), got 4097"
    )


def test_payload_result_and_checkpoint_together_must_stay_readable_under_4_mib() -> None:
    # 1 MiB + 2 MiB + 1 MiB: a run holding all three could not be read back
    env = {"CRONWAVE_MAX_PAYLOAD_BYTES": "1048576", "CRONWAVE_MAX_RESULT_BYTES": "2097152"}

    with pytest.raises(ConfigurationError) as info:
        LimitSettings.from_env(env).limits()

    assert str(info.value).startswith(
        "CRONWAVE_MAX_PAYLOAD_BYTES, CRONWAVE_MAX_RESULT_BYTES, CRONWAVE_MAX_CHECKPOINT_BYTES: "
    )
