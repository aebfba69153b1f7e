"""A connection's set-up is its own kinds of time: opening a Redis or PostgreSQL
connection is a ``connect`` span in the hop that paid it, looking its server's name up
a ``dns`` span inside it, and the waterfall counts each once
(``cronwave_core.telemetry.setup``, ``redis_pools``, ``workflow_store.db``).

The connections are real (Redis and PostgreSQL on loopback); the resolver is the test's
(it answers the loopback address for a name no DNS server knows), as DNS is outside
the product."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest
import redis
import sqlalchemy as sa
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cronwave_core.redis_pools import bounded_client
from cronwave_core.telemetry import spans
from cronwave_core.telemetry.setup import AddrInfo
from cronwave_core.telemetry.spans import hop_span
from cronwave_core.telemetry.vocabulary import (
    ATTR_ADDRESSES,
    ATTR_HOP,
    ATTR_KIND,
    ATTR_PEER,
    Hop,
    Kind,
    run_attributes,
)
from cronwave_waterfall import build_runs
from tests.tracing.captured import as_waterfall_spans, capturing_tracer
from workflow_store.db import create_engine

PG_URL = os.environ.get("CRONWAVE_TEST_DATABASE_URL", "")
SECOND = timedelta(seconds=1)


class LoopbackResolver:
    """DNS for the test: every name in ``names`` is the loopback address; any other
    is unknown, as a real resolver says (``socket.gaierror``)."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[AddrInfo]:
        self.asked.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return socket.getaddrinfo("127.0.0.1", port, type=socket.SOCK_STREAM)


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    """The spans drawn through ``spans.tracer``, placed as the services' are."""
    tracer, exporter = capturing_tracer()
    monkeypatch.setitem(spans._tracers, "cronwave", tracer)
    return exporter


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _redis_on(url: str, host: str, resolver: LoopbackResolver) -> redis.Redis:
    address = url.split("//", 1)[1].split("/", 1)[0]
    port = address.rsplit(":", 1)[1] if ":" in address else "6379"
    named = f"redis://{host}:{port}/0"
    return bounded_client(
        named, name="test", size=2, wait=SECOND, timeout=5 * SECOND, resolver=resolver
    )


def test_a_new_redis_connection_is_a_connect_span_holding_its_look_up_in_the_caller_s_hop(
    exported: InMemorySpanExporter, redis_url: str, namespace: str
) -> None:
    # Given a client of a Redis known by a name
    resolver = LoopbackResolver("redis.cronwave.test")
    client = _redis_on(redis_url, "redis.cronwave.test", resolver)
    try:
        # When a dispatch look-up is the first command, then a second one follows
        with hop_span(
            "route cache lookup", Hop.DISPATCH, Kind.CACHE, run_attributes("r1", "s1", "t")
        ):
            client.get(f"{namespace}:a")
        with hop_span("route cache lookup", Hop.DISPATCH, Kind.CACHE):
            client.get(f"{namespace}:b")
    finally:
        client.close()
        client.connection_pool.disconnect()

    # Then the first opened one connection, in a connect span of dispatch's (the
    # second reused it: no set-up of its own)
    [connect] = _named(exported, "redis connect")
    [dns] = _named(exported, "redis dns")
    assert connect.attributes is not None and dns.attributes is not None
    assert (connect.attributes[ATTR_HOP], connect.attributes[ATTR_KIND]) == ("dispatch", "connect")
    assert connect.attributes[ATTR_PEER].startswith("redis.cronwave.test:")
    assert connect.attributes["cronwave.run_id"] == "r1"
    # with the name's look-up inside it, answered by the resolver once
    assert dns.parent is not None and connect.context is not None
    assert dns.parent.span_id == connect.context.span_id
    assert (dns.attributes[ATTR_HOP], dns.attributes[ATTR_KIND]) == ("dispatch", "dns")
    assert dns.attributes[ATTR_ADDRESSES] == "127.0.0.1"
    assert resolver.asked == ["redis.cronwave.test"]


def test_a_redis_name_no_resolver_knows_fails_the_command_in_an_error_span(
    exported: InMemorySpanExporter, redis_url: str
) -> None:
    client = _redis_on(redis_url, "nowhere.cronwave.test", LoopbackResolver())
    try:
        with (
            hop_span("route cache lookup", Hop.DISPATCH, Kind.CACHE),
            pytest.raises(redis.ConnectionError, match=r"nowhere\.cronwave\.test"),
        ):
            client.get("k")
    finally:
        client.connection_pool.disconnect()
    [dns] = _named(exported, "redis dns")
    assert not dns.status.is_ok
    assert all(not s.status.is_ok for s in _named(exported, "redis connect"))


def test_a_redis_address_needs_no_look_up(
    exported: InMemorySpanExporter, redis_url: str, namespace: str
) -> None:
    resolver = LoopbackResolver()
    client = _redis_on(redis_url, "127.0.0.1", resolver)
    try:
        with hop_span("worker.complete", Hop.COMPLETE, Kind.APP):
            client.get(f"{namespace}:a")
    finally:
        client.connection_pool.disconnect()
    [connect] = _named(exported, "redis connect")
    assert connect.attributes is not None
    assert connect.attributes[ATTR_HOP] == "complete"
    assert _named(exported, "redis dns") == []
    assert resolver.asked == []


@pytest.mark.skipif(not PG_URL, reason="PostgreSQL (CRONWAVE_TEST_DATABASE_URL) is the client")
def test_a_new_postgresql_connection_is_dns_then_connect_in_the_waterfall(
    exported: InMemorySpanExporter,
) -> None:
    # Given the store's engine for a PostgreSQL known by a name
    url = sa.make_url(PG_URL).set(drivername="postgresql+psycopg", host="pg.cronwave.test")
    resolver = LoopbackResolver("pg.cronwave.test")
    engine = create_engine(url.render_as_string(hide_password=False), resolver=resolver)
    try:
        # When a persist transaction is the first to need a connection
        attrs = run_attributes("r1", "s1", "2025-03-01T02:00:00Z")
        with (
            hop_span("workflow-store RecordRuns", Hop.PERSIST, Kind.APP, attrs),
            engine.connect() as conn,
        ):
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
        with (
            hop_span("workflow-store RecordRuns", Hop.PERSIST, Kind.APP, attrs),
            engine.connect() as conn,
        ):
            conn.execute(sa.text("SELECT 1"))
    finally:
        engine.dispose()

    # Then its opening was one connect span with the look-up inside, both persist's
    [connect] = _named(exported, "postgresql connect")
    [dns] = _named(exported, "postgresql dns")
    assert connect.attributes is not None and dns.attributes is not None
    assert (connect.attributes[ATTR_HOP], connect.attributes[ATTR_KIND]) == ("persist", "connect")
    assert (dns.attributes[ATTR_HOP], dns.attributes[ATTR_KIND]) == ("persist", "dns")
    assert dns.parent is not None and connect.context is not None
    assert dns.parent.span_id == connect.context.span_id
    assert resolver.asked == ["pg.cronwave.test"]
    # and the waterfall counts the look-up as dns and only the rest as connect
    [run] = build_runs(as_waterfall_spans(exported.get_finished_spans()))
    assert dns.end_time is not None and dns.start_time is not None
    assert run.kind_ns[("persist", "dns")] == dns.end_time - dns.start_time
    assert connect.end_time is not None and connect.start_time is not None
    assert run.kind_ns[("persist", "connect")] == (
        connect.end_time - connect.start_time - (dns.end_time - dns.start_time)
    )


@pytest.mark.skipif(not PG_URL, reason="PostgreSQL (CRONWAVE_TEST_DATABASE_URL) is the client")
def test_a_postgresql_name_no_resolver_knows_is_refused_naming_it(
    exported: InMemorySpanExporter,
) -> None:
    url = sa.make_url(PG_URL).set(drivername="postgresql+psycopg", host="nowhere.cronwave.test")
    engine = create_engine(
        url.render_as_string(hide_password=False), instrument=False, resolver=LoopbackResolver()
    )
    try:
        with pytest.raises(sa.exc.OperationalError, match=r"nowhere\.cronwave\.test"):
            engine.connect()
    finally:
        engine.dispose()
    [connect] = _named(exported, "postgresql connect")
    assert not connect.status.is_ok
