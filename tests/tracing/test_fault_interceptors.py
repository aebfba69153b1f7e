"""The latency faults of RPCs: interceptors that slow the store's answers and the
dispatcher's starts of the runs a fault selects, in a span of the fault's hop and kind
that says which fault it was, and that a process not started for tests never has."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cronwave_core.convert import dt_to_ts
from cronwave_core.fault_interceptors import (
    CLIENT_POINTS,
    SERVER_POINTS,
    ClientFaults,
    ServerFaults,
    server_faults,
)
from cronwave_core.faults import Faults, LatencyFault, run_key
from cronwave_core.settings import TEST_HOOKS, TestHooks
from cronwave_core.telemetry import spans
from cronwave_core.telemetry.vocabulary import ATTR_FAULT, ATTR_HOP, ATTR_KIND

FIRE = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)
DELAY = timedelta(milliseconds=30)
RECORD_RUNS = "/cronwave.v1.WorkflowStoreService/RecordRuns"


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """The spans the code under test draws (through ``spans.tracer``)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("cronwave")
    monkeypatch.setitem(spans._tracers, "cronwave", tracer)
    with tracer.start_as_current_span("call"):
        yield exporter


def _faults(hop: str, kind: str, fraction: float = 1.0) -> Faults:
    return Faults([LatencyFault(hop, kind, DELAY, fraction)])


def _recorded(created: bool) -> store_pb.RecordRunsResponse:
    run = common_pb2.Run(run_id="run-1", schedule_id="nightly", fire_time=dt_to_ts(FIRE))
    recorded = store_pb.RecordRunResponse(run=run, created=created)
    return store_pb.RecordRunsResponse(results=[store_pb.RecordRunResult(recorded=recorded)])


class Details:
    def __init__(self, method: str) -> None:
        self.method = method


def _served(interceptor: ServerFaults, method: str, response: Any) -> Any:
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: response)
    return interceptor.intercept_service(lambda _: handler, Details(method))


def _fault_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if (s.attributes or {}).get(ATTR_FAULT)]


def test_every_method_the_faults_name_is_one_the_store_has() -> None:
    # A renamed RPC would silently lose its fault point
    service = store_pb.DESCRIPTOR.services_by_name["WorkflowStoreService"]
    names = {f"/{service.full_name}/{m.name}" for m in service.methods}
    assert set(SERVER_POINTS) <= names
    assert set(CLIENT_POINTS) <= names


def test_a_recorded_run_the_fault_selects_is_answered_late_in_a_marked_span(
    exported: InMemorySpanExporter,
) -> None:
    # Given the store's fault interceptor with a persist fault for every run
    handler = _served(ServerFaults(_faults("persist", "database")), RECORD_RUNS, _recorded(True))
    # When a call records a new run
    began = time.monotonic()
    response = handler.unary_unary(store_pb.RecordRunsRequest(), None)
    # Then its answer came the delay later, and a span of that hop and kind says why
    assert time.monotonic() - began >= DELAY.total_seconds()
    assert response.results[0].recorded.created
    (span,) = _fault_spans(exported)
    assert span.attributes is not None
    assert span.attributes[ATTR_HOP] == "persist"
    assert span.attributes[ATTR_KIND] == "database"
    assert span.attributes[ATTR_FAULT] == "persist:database:+30ms"


def test_a_run_that_was_not_created_or_not_selected_is_not_slowed(
    exported: InMemorySpanExporter,
) -> None:
    repeat = _served(ServerFaults(_faults("persist", "database")), RECORD_RUNS, _recorded(False))
    repeat.unary_unary(store_pb.RecordRunsRequest(), None)
    unselected = _served(
        ServerFaults(_faults("persist", "database", fraction=0.0)), RECORD_RUNS, _recorded(True)
    )
    unselected.unary_unary(store_pb.RecordRunsRequest(), None)
    assert _fault_spans(exported) == []


def test_a_method_without_a_configured_fault_keeps_its_own_handler() -> None:
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: None)
    interceptor = ServerFaults(_faults("execute", "app"))
    assert interceptor.intercept_service(lambda _: handler, Details(RECORD_RUNS)) is handler


def test_the_dispatcher_start_is_slowed_before_it_is_sent(
    exported: InMemorySpanExporter,
) -> None:
    # Given the dispatcher's client faults with a cache fault for every run
    interceptor = ClientFaults(_faults("dispatch", "cache"))
    sent: list[float] = []
    start = store_pb.RecordRunRequest(schedule_id="nightly", fire_time=dt_to_ts(FIRE))
    request = store_pb.RecordRunsRequest(runs=[start])
    began = time.monotonic()
    # When it records a start
    interceptor.intercept_unary_unary(
        lambda details, req: sent.append(time.monotonic() - began), Details(RECORD_RUNS), request
    )
    # Then the call went out after the delay, which a dispatch:cache span carries
    assert sent and sent[0] >= DELAY.total_seconds()
    (span,) = _fault_spans(exported)
    assert span.attributes is not None
    assert (span.attributes[ATTR_HOP], span.attributes[ATTR_KIND]) == ("dispatch", "cache")
    assert run_key("nightly", FIRE) == "nightly@1740794400000000"


def test_only_a_process_started_for_tests_installs_them() -> None:
    store = ["cronwave.v1.WorkflowStoreService"]
    fault = {"CRONWAVE_FAULT": "delay=persist:database:1ms:1"}
    assert server_faults(TestHooks.from_env({}), store) == []
    assert server_faults(TestHooks.from_env({TEST_HOOKS: "1"}), store) == []
    (installed,) = server_faults(TestHooks.from_env({TEST_HOOKS: "1", **fault}), store)
    assert isinstance(installed, ServerFaults)
    # and a server with no fault point of its own gets none
    planner = ["cronwave.v1.CronPlannerService"]
    assert server_faults(TestHooks.from_env({TEST_HOOKS: "1", **fault}), planner) == []
