"""A traced gRPC channel's set-up is a ``connect`` span before its first call, in the
hop of the call (``cronwave_core.channel_ready``, ``cronwave_core.rpc``): real gRPC
servers on loopback, a real channel."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cronwave_core.channel_ready import ATTR_INCLUDES_DNS, ATTR_STATE, ChannelReadiness
from cronwave_core.rpc import SerializingChannel
from cronwave_core.telemetry import spans
from cronwave_core.telemetry.propagation import RunAttributesProcessor
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import ATTR_HOP, ATTR_KIND, ATTR_PEER, Hop, Kind


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(RunAttributesProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setitem(spans._tracers, "cronwave", provider.get_tracer("cronwave"))
    yield exporter


@pytest.fixture
def port() -> Iterator[int]:
    """A health server on loopback."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    bound = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield bound
    server.stop(grace=None)


def _traced(target: str) -> SerializingChannel:
    raw = grpc.insecure_channel(target)
    return SerializingChannel(raw, ChannelReadiness(raw, target, default_timeout=10))


def _check(channel: grpc.Channel) -> health_pb2.HealthCheckResponse:
    stub = health_pb2_grpc.HealthStub(channel)
    with hop_span("worker.complete", Hop.COMPLETE, Kind.APP):
        reply: health_pb2.HealthCheckResponse = stub.Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
    return reply


def _connects(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == "grpc connect"]


def test_a_channel_s_first_call_connects_in_a_span_and_the_next_calls_do_not(
    exported: InMemorySpanExporter, port: int
) -> None:
    # Given a traced channel to a server known by its address
    with _traced(f"127.0.0.1:{port}") as channel:
        # When two calls are made on it
        first, second = _check(channel), _check(channel)

    # Then both are answered, and only the first was preceded by a connect span
    assert first.status == second.status == health_pb2.HealthCheckResponse.SERVING
    [connect] = _connects(exported)
    assert connect.attributes is not None
    # in the caller's hop (the health check has none of its own), connected
    assert (connect.attributes[ATTR_HOP], connect.attributes[ATTR_KIND]) == ("complete", "connect")
    assert connect.attributes[ATTR_STATE] == "READY"
    assert connect.attributes[ATTR_PEER] == f"127.0.0.1:{port}"
    # and, the target being an address, no look-up inside it
    assert connect.attributes[ATTR_INCLUDES_DNS] is False


def test_a_name_s_look_up_is_said_to_be_inside_the_connect_span(
    exported: InMemorySpanExporter, port: int
) -> None:
    with _traced(f"localhost:{port}") as channel:
        _check(channel)
    [connect] = _connects(exported)
    assert connect.attributes is not None
    assert connect.attributes[ATTR_INCLUDES_DNS] is True


def test_a_server_that_is_not_there_fails_the_call_as_before_and_the_next_call_tries_again(
    exported: InMemorySpanExporter,
) -> None:
    # Given a port nothing listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with _traced(f"127.0.0.1:{closed}") as channel:
        # When two calls are made
        for _ in range(2):
            with pytest.raises(grpc.RpcError) as caught:
                _check(channel)
            # Then each fails UNAVAILABLE at once, as an untraced channel's would
            assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    # and the first was preceded by a connect attempt that says it failed (the second
    # too only if it came a second or more later: RETRY_AFTER)
    connects = _connects(exported)
    assert 1 <= len(connects) <= 2
    for connect in connects:
        assert connect.attributes is not None
        assert connect.attributes[ATTR_STATE] == "TRANSIENT_FAILURE"
