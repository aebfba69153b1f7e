"""``cronwave_core.logs`` and ``cronwave_core.redaction``: the two formats, how one is
chosen, the fields of a line, and the secrets masked in every part of a line."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider

from cronwave_core.logs import configure_logging, resolve_format
from cronwave_core.redaction import redact, redact_url
from cronwave_core.settings import LogSettings


@pytest.fixture(autouse=True)
def root_handlers() -> Iterator[None]:
    """The root logger as it was before the test (pytest's own handlers included)."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in before:
        root.addHandler(handler)
    root.setLevel(level)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            "postgresql+psycopg://billing:s3cr%40t@db:5432/cronwave",
            "postgresql+psycopg://billing:***@db:5432/cronwave",
        ),
        ("redis://:hunter2@redis:6379/0", "redis://:***@redis:6379/0"),
        ("connect to 'rediss://u:p@h:1/0' failed", "connect to 'rediss://u:***@h:1/0' failed"),
        ("authorization: Bearer abc.DEF-123_x=", "authorization: Bearer ***"),
        ("key cwk_9f8e7d6c5b4a refused", "key cwk_*** refused"),
        ("postgresql+psycopg://cronwave@db/cronwave", "postgresql+psycopg://cronwave@db/cronwave"),
        ("nothing secret: Bearer of news, cwk", "nothing secret: Bearer of news, cwk"),
    ],
)
def test_redact_masks_passwords_tokens_and_keys_and_nothing_else(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_redact_url_hides_the_password_of_a_sqlalchemy_url_and_of_any_other() -> None:
    assert redact_url("postgresql+psycopg://u:pw@h/db") == "postgresql+psycopg://u:***@h/db"
    assert redact_url("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"
    assert redact_url("sqlite:////var/lib/cronwave/cronwave.db").endswith("cronwave.db")


def log_to(buffer: io.StringIO, fmt: str) -> logging.Logger:
    configure_logging("dispatcher", LogSettings(log_format=fmt), stream=buffer)
    return logging.getLogger("cronwave.test")


def test_a_json_line_has_the_service_and_the_runs_fields_and_masks_secrets() -> None:
    # Given JSON logging
    buffer = io.StringIO()
    log = log_to(buffer, "json")

    # When a job-style line, a line inside a span and a failure are logged
    extra = {"run_id": "run_1", "schedule_id": "nightly", "trace_id": "ab" * 16}
    log.info("charged %d invoices", 1000, extra=extra)
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span(
        "worker.execute", attributes={"cronwave.run_id": "run_2", "cronwave.schedule_id": "s2"}
    ) as span:
        log.warning("slow: %s", "Bearer tok3n.abcdef")
    try:
        raise ConnectionError("could not reach postgresql://cw:pa55@db/cw")
    except ConnectionError:
        log.exception("failed (%s)", "redis://:pa55@r/0")

    # Then each line is one JSON object with the fields, and no secret
    first, second, third = (json.loads(line) for line in buffer.getvalue().splitlines())
    assert first["message"] == "charged 1000 invoices"
    assert {k: first[k] for k in ("service", "level", "logger", *extra)} == {
        "service": "dispatcher",
        "level": "INFO",
        "logger": "cronwave.test",
        **extra,
    }
    assert "span_id" not in first  # logged outside any span: no empty field
    context = span.get_span_context()
    assert second["run_id"] == "run_2" and second["schedule_id"] == "s2"
    assert second["trace_id"] == format(context.trace_id, "032x")
    assert second["span_id"] == format(context.span_id, "016x")
    assert second["message"] == "slow: Bearer ***"
    assert third["message"] == "failed (redis://:***@r/0)"
    assert "ConnectionError" in third["exc_info"] and "cw:***@db" in third["exc_info"]
    assert "pa55" not in buffer.getvalue() and "tok3n" not in buffer.getvalue()


def test_a_text_line_is_readable_with_the_runs_fields_at_its_end() -> None:
    buffer = io.StringIO()
    log = log_to(buffer, "text")
    log.info("charged %d invoices", 3, extra={"run_id": "run_1", "schedule_id": "nightly"})
    line = buffer.getvalue().strip()
    assert line.endswith(" dispatcher INFO charged 3 invoices [run_id=run_1 schedule_id=nightly]")


def test_the_format_is_text_on_a_terminal_json_elsewhere_unless_set() -> None:
    leader, follower = os.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as terminal:
            assert resolve_format(LogSettings(), terminal) == "text"
            assert resolve_format(LogSettings(log_format="json"), terminal) == "json"
    finally:
        os.close(leader)
        os.close(follower)
    assert resolve_format(LogSettings(), io.StringIO()) == "json"
    assert resolve_format(LogSettings(log_format="text"), io.StringIO()) == "text"
    assert LogSettings.from_env({"CRONWAVE_LOG_FORMAT": "JSON"}).log_format == "json"
