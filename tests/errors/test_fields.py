"""The shared field rules: what they let through and what they refuse."""

from __future__ import annotations

import pytest

from cronwave_core.errors import InvalidArgument
from cronwave_core.fields import MAX_JSON_DEPTH, identifier, json_document, text


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_as_deep_as_allowed_parses_and_one_level_more_is_refused() -> None:
    assert json_document(nested(MAX_JSON_DEPTH), "payload_json") is not None

    with pytest.raises(InvalidArgument) as info:
        json_document(nested(MAX_JSON_DEPTH + 1), "payload_json")

    assert info.value.field == "payload_json" and "64 levels" in info.value.rule


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    document = '{"a": "' + "[{" * 500 + '", "b": "\\" [[[[", "c": [1]}'

    assert json_document(document, "payload_json") == {
        "a": "[{" * 500,
        "b": '" [[[[',
        "c": [1],
    }


def test_a_100000_deep_document_is_refused_without_recursing() -> None:
    with pytest.raises(InvalidArgument, match="nested more than 64"):
        json_document('{"a":' * 100_000, "checkpoint_json")


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
def test_numbers_json_has_not_are_refused(number: str) -> None:
    with pytest.raises(InvalidArgument, match="not standard JSON"):
        json_document(f'{{"x": {number}}}', "result_json")


def test_a_malformed_document_is_refused_with_where() -> None:
    with pytest.raises(InvalidArgument, match=r"not valid JSON \(.* line 1 column 7\)"):
        json_document('{"a": }', "payload_json")
    with pytest.raises(InvalidArgument, match="too many digits"):
        json_document("9" * 5_000, "payload_json")


@pytest.mark.parametrize("value", ["run\x00", "a\nb", "\u202eevil", "x\x1b[0m"])
def test_an_id_with_a_control_or_format_character_is_refused(value: str) -> None:
    with pytest.raises(InvalidArgument, match="non-printing characters"):
        identifier(value, "run_id")


def test_ids_with_spaces_and_letters_of_any_script_are_fine() -> None:
    assert identifier("nightly billing@2030-01-01T02:00:00+00:00", "idempotency_key")
    assert identifier("Zürich-東京", "worker_id")
    with pytest.raises(InvalidArgument, match="at most 255"):
        identifier("x" * 256, "run_id")
    with pytest.raises(InvalidArgument, match="required"):
        identifier("", "run_id", required=True)


def test_free_text_keeps_line_breaks_and_refuses_nul() -> None:
    assert text("line 1\n\tline 2", "error") == "line 1\n\tline 2"
    with pytest.raises(InvalidArgument, match="NUL"):
        text("a\x00b", "error")


@pytest.mark.parametrize(
    ("document", "where", "code_point"),
    [
        ('{"a": "\\udc00"}', "the string at $.a", "U+DC00"),
        ('{"a": ["ok", "x\\ud83d"]}', "the string at $.a[1]", "U+D83D"),
        ('{"\\udfff": 1}', "the key '\\udfff' in $", "U+DFFF"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_the_field_where_and_the_rule(
    document: str, where: str, code_point: str
) -> None:
    # Given JSON text whose \u escape stands for half of a UTF-16 pair, alone
    # When it is checked as a payload
    with pytest.raises(InvalidArgument) as info:
        json_document(document, "payload_json")

    # Then it is refused as not valid UTF-8, saying where and which code point
    assert info.value.field == "payload_json"
    assert info.value.rule == (
        f"must be valid UTF-8: {where} holds a lone surrogate {code_point} "
        "(a \\ud800-\\udbff escape must be followed by a \\udc00-\\udfff one)"
    )


def test_a_surrogate_pair_is_one_character_and_passes() -> None:
    assert json_document('{"smile": "\\ud83d\\ude00", "\\u00e9": "\\u00e9"}', "x") == {
        "smile": "\U0001f600",
        "é": "é",
    }
