"""cronwave_core.telemetry: the span store's line format, lean spans, hop spans, run attributes."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider, sampling
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import StatusCode

from cronwave_core.errors import ConfigurationError
from cronwave_core.settings import TelemetrySettings
from cronwave_core.telemetry import spans
from cronwave_core.telemetry.export import JsonLinesSpanExporter, span_line, span_to_dict
from cronwave_core.telemetry.lean import LeanSpan, LeanTracerProvider
from cronwave_core.telemetry.propagation import RunAttributesProcessor, run_baggage
from cronwave_core.telemetry.tracing import init_tracing
from cronwave_core.telemetry.vocabulary import (
    ATTR_HOP,
    ATTR_KIND,
    ATTR_RUN_ID,
    Hop,
    Kind,
    run_attributes,
)
from cronwave_waterfall import load_spans

FIRE = "2025-03-01T02:00:00Z"


#: Every test of the span store's lines runs with the SDK's spans and with cronwave's.
PROVIDERS = pytest.mark.parametrize("provider_cls", [TracerProvider, LeanTracerProvider])


def _provider(
    tmp_path: Path,
    limits: SpanLimits | None = None,
    provider_cls: type[TracerProvider] = TracerProvider,
    **kwargs: Any,
) -> tuple[TracerProvider, Path]:
    provider = provider_cls(
        resource=Resource.create({"service.name": "suite"}), span_limits=limits, **kwargs
    )
    provider.add_span_processor(RunAttributesProcessor())
    exporter = JsonLinesSpanExporter(tmp_path / "spans", "suite")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter.path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@PROVIDERS
def test_a_line_is_span_to_dicts_document(tmp_path: Path, provider_cls):
    # Given finished spans with escaped text, sequences and every kind of value
    provider, _ = _provider(tmp_path, provider_cls=provider_cls)
    tracer = provider.get_tracer("test")
    attrs = {"text": 'quote " and \\ and ü\n', "seq": ("a", "b"), "n": 3, "x": 1.5, "ok": True}
    with (
        tracer.start_as_current_span("root ✓", attributes=attrs, kind=trace.SpanKind.SERVER),
        tracer.start_as_current_span("child"),
    ):
        pass
    spans = []
    provider.add_span_processor(_Keep(spans))
    with tracer.start_as_current_span("kept", attributes=attrs):
        pass
    provider.shutdown()
    # and a span built from a plain dict of attributes, as a fan-out copy is
    [kept] = spans
    copy = ReadableSpan(
        name="copy",
        context=kept.context,
        parent=kept.parent,
        resource=kept.resource,
        attributes={**attrs, ATTR_RUN_ID: "r"},
        start_time=1,
        end_time=2,
    )

    # Then each line is span_to_dict's document, with the service given, on one line
    for span in (kept, copy):
        line = span_line(span, "suite")
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert json.loads(line) == {
            **json.loads(json.dumps(span_to_dict(span), default=str)),
            "service": "suite",
        }


class _Keep(SimpleSpanProcessor):
    def __init__(self, spans: list) -> None:
        self.spans = spans

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)

    def shutdown(self) -> None:
        pass


@PROVIDERS
def test_hop_spans_nest_inherit_the_run_and_record_errors(
    tmp_path: Path, monkeypatch, provider_cls
):
    # Given hop spans started through the process's tracer
    provider, path = _provider(tmp_path, provider_cls=provider_cls)
    monkeypatch.setattr(spans, "tracer", lambda name: provider.get_tracer(name))
    run = run_attributes("run-1", "nightly", FIRE)

    # When a run's hop span holds another, which fails
    with spans.hop_span("fire", Hop.PLAN, Kind.APP, run) as outer:
        assert trace.get_current_span() is outer
        with pytest.raises(ValueError), spans.hop_span("look", Hop.DISPATCH, Kind.CACHE):
            raise ValueError("no route")
        assert trace.get_current_span() is outer
    provider.shutdown()

    # Then the inner one is the outer one's child, names the run, and says why it failed
    by_name = {s["name"]: s for s in _lines(path)}
    inner, fire = by_name["look"], by_name["fire"]
    assert inner["parent_span_id"] == fire["span_id"]
    assert inner["attributes"][ATTR_HOP] == "dispatch"
    assert inner["attributes"][ATTR_KIND] == "cache"
    assert {k: inner["attributes"][k] for k in run} == run
    assert inner["status"] == "ERROR"
    assert fire["status"] == "UNSET"
    assert len(load_spans(tmp_path)) == 2


@PROVIDERS
def test_run_attributes_come_from_baggage_when_the_parent_is_remote(tmp_path: Path, provider_cls):
    # Given a span started under baggage only (its parent is in another process)
    provider, path = _provider(tmp_path, provider_cls=provider_cls)
    tracer = provider.get_tracer("test")
    with (
        run_baggage({**run_attributes("run-2", "nightly", FIRE), ATTR_HOP: Hop.PERSIST}),
        tracer.start_as_current_span("sql"),
    ):
        pass
    provider.shutdown()

    # Then it names the run, and is the service's own work (kind app), but does not
    # say the hop (not a run baggage key: only a call of an RPC with no hop sends one)
    [line] = _lines(path)
    assert line["attributes"] == {**run_attributes("run-2", "nightly", FIRE), ATTR_KIND: "app"}


@PROVIDERS
def test_inherited_attributes_respect_the_span_limits(tmp_path: Path, provider_cls):
    # Given a provider that truncates attribute values and keeps at most 2 of them
    provider, path = _provider(
        tmp_path, SpanLimits(max_span_attributes=2, max_attribute_length=4), provider_cls
    )
    tracer = provider.get_tracer("test")

    # When a span inherits the run's attributes from its parent
    with (
        tracer.start_as_current_span("fire", attributes=run_attributes("run-3", "s", FIRE)),
        tracer.start_as_current_span("child", attributes={"own": "value"}),
    ):
        pass
    provider.shutdown()

    # Then the limits apply to them as to the span's own
    child = next(line for line in _lines(path) if line["name"] == "child")
    assert len(child["attributes"]) == 2
    assert all(len(v) <= 4 for v in child["attributes"].values())


def test_lean_spans_are_used_only_with_the_default_sampler_and_limits(tmp_path: Path):
    lean, _ = _provider(tmp_path, provider_cls=LeanTracerProvider)
    sampled, _ = _provider(
        tmp_path, provider_cls=LeanTracerProvider, sampler=sampling.TraceIdRatioBased(0.5)
    )
    limited, _ = _provider(tmp_path, SpanLimits(max_span_attributes=8), LeanTracerProvider)

    assert isinstance(lean.get_tracer("t").start_span("s"), LeanSpan)
    for provider in (sampled, limited):
        span = provider.get_tracer("t").start_span("s")
        assert not isinstance(span, LeanSpan)
        span.end()
    assert lean.get_tracer("t") is lean.get_tracer("t")  # one per SDK tracer


def test_a_lean_span_keeps_valid_attributes_and_drops_the_rest(tmp_path: Path):
    provider, path = _provider(tmp_path, provider_cls=LeanTracerProvider)
    span = provider.get_tracer("t").start_span("s", attributes={"n": 1, "bad": object()})

    span.set_attributes({"seq": ["a", "b"], "mixed": ["a", 1], "none": None, "x": 0.5})
    span.set_attribute("ok", True)
    span.end()
    span.set_attribute("late", "ignored")  # an ended span does not change
    provider.shutdown()

    [line] = _lines(path)
    # (a span that says no kind is given app at its start)
    assert line["attributes"] == {"n": 1, "seq": ["a", "b"], "x": 0.5, "ok": True, ATTR_KIND: "app"}


@PROVIDERS
def test_a_hop_and_a_kind_are_written_as_their_strings(tmp_path: Path, provider_cls):
    # Given a span given a Hop and a Kind as attribute values, not through hop_span
    provider, path = _provider(tmp_path, provider_cls=provider_cls)
    spans: list[ReadableSpan] = []
    provider.add_span_processor(_Keep(spans))
    span = provider.get_tracer("t").start_span("s", attributes={ATTR_HOP: Hop.PICKUP})
    span.set_attribute(ATTR_KIND, Kind.QUEUE)
    span.end()
    provider.shutdown()

    # Then the line says them as any string is said
    [line] = _lines(path)
    assert line["attributes"] == {ATTR_HOP: "pickup", ATTR_KIND: "queue"}
    assert span_line(spans[0], "suite") == span_line(
        ReadableSpan(
            name="s",
            context=spans[0].context,
            resource=spans[0].resource,
            attributes={ATTR_HOP: "pickup", ATTR_KIND: "queue"},
            start_time=spans[0].start_time,
            end_time=spans[0].end_time,
        ),
        "suite",
    )
    # and a lean span keeps them as plain strings
    if provider_cls is LeanTracerProvider:
        assert {type(v) for v in (spans[0].attributes or {}).values()} == {str}


def test_a_lean_span_records_an_escaping_error_and_keeps_an_ok_status(tmp_path: Path):
    provider, path = _provider(tmp_path, provider_cls=LeanTracerProvider)
    spans: list[ReadableSpan] = []
    provider.add_span_processor(_Keep(spans))
    tracer = provider.get_tracer("t")

    with pytest.raises(KeyError), tracer.start_as_current_span("fails"):
        raise KeyError("route")
    with tracer.start_as_current_span("ok") as ok:
        ok.set_status(StatusCode.OK)
        ok.set_status(StatusCode.ERROR, "too late")  # OK is final, as in the SDK
    provider.shutdown()

    by_name = {s["name"]: s for s in _lines(path)}
    assert by_name["fails"]["status"] == "ERROR"
    assert by_name["ok"]["status"] == "OK"
    failed = next(s for s in spans if s.name == "fails")
    [event] = failed.events
    assert event.name == "exception"
    assert event.attributes is not None and event.attributes["exception.type"] == "KeyError"


def test_a_lean_span_under_an_unsampled_parent_records_nothing(tmp_path: Path):
    provider, path = _provider(tmp_path, provider_cls=LeanTracerProvider)
    parent = trace.NonRecordingSpan(
        trace.SpanContext(1, 2, is_remote=True, trace_flags=trace.TraceFlags(0))
    )

    with trace.use_span(parent):
        child = provider.get_tracer("t").start_span("child")
    child.end()
    provider.shutdown()

    assert not child.is_recording()
    assert child.get_span_context().trace_id == 1
    assert not path.exists() or _lines(path) == []


def test_the_switch_interval_is_python_s_own_unless_set() -> None:
    assert TelemetrySettings.from_env({}).switch_interval is None
    assert TelemetrySettings.from_env({"CRONWAVE_SWITCH_INTERVAL": "0.0005"}).switch_interval == (
        timedelta(microseconds=500)
    )
    with pytest.raises(ConfigurationError, match="CRONWAVE_SWITCH_INTERVAL"):
        TelemetrySettings.from_env({"CRONWAVE_SWITCH_INTERVAL": "fast"})
    # and a process that sets it runs with it
    before = sys.getswitchinterval()
    try:
        env = {"CRONWAVE_SWITCH_INTERVAL": "0.0005", "CRONWAVE_TRACING": "off"}
        init_tracing("test", TelemetrySettings.from_env(env))
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    finally:
        sys.setswitchinterval(before)
