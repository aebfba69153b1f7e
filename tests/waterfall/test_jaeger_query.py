"""Spans from a Jaeger query service over HTTP.

Jaeger itself is outside the product, so these tests mock it: a tiny
``http.server`` on 127.0.0.1 answers with recorded responses (``data/``) in the
shapes Jaeger v2's ``/api/v3/traces`` and the older ``/api/traces`` return, and
records what it was asked. The client under test is the real one, over real HTTP.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cronwave_core.errors import Unavailable
from cronwave_waterfall import (
    JaegerQuery,
    build_runs,
    load_spans,
    query_jaeger,
    waterfall_command,
)

from . import recorded


@dataclass
class FakeJaeger:
    """What the mock serves per path, and the requests it received."""

    routes: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    stall: threading.Event | None = None
    url: str = ""


@pytest.fixture
def jaeger() -> Iterator[FakeJaeger]:
    fake = FakeJaeger()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            fake.requests.append((parts.path, dict(urllib.parse.parse_qsl(parts.query))))
            if fake.stall is not None:
                fake.stall.wait(timeout=10)
            status, body = fake.routes.get(parts.path, (404, b"404 page not found\n"))
            # A stalled request's client has given up (its timeout is the test): the
            # late answer finds the connection closed.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        if fake.stall is not None:
            fake.stall.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


WINDOW = (datetime(2025, 3, 1, 1, 0, tzinfo=UTC), datetime(2025, 3, 1, 3, 0, tzinfo=UTC))


def test_v3_api_answers_otlp_under_result(jaeger: FakeJaeger):
    # Given a Jaeger v2 with the recorded trace
    jaeger.routes["/api/v3/traces"] = (200, recorded.V3.read_bytes())

    # When asked for the dispatcher's traces in a window
    query = JaegerQuery(jaeger.url, service="dispatcher", start_min=WINDOW[0], start_max=WINDOW[1])
    spans = query_jaeger(query)

    # Then the run is measured as recorded, and the query named service and window
    [run] = build_runs(spans)
    assert run.kind_ns == recorded.KIND_NS
    [(path, params)] = jaeger.requests
    assert path == "/api/v3/traces"
    assert params == {
        "query.service_name": "dispatcher",
        "query.start_time_min": "2025-03-01T01:00:00Z",
        "query.start_time_max": "2025-03-01T03:00:00Z",
        "query.num_traces": "1000",
    }


def test_a_streamed_v3_answer_is_read_whole(jaeger: FakeJaeger):
    # Given a Jaeger that streams two result objects back to back
    body = recorded.V3.read_bytes()
    jaeger.routes["/api/v3/traces"] = (200, body + b"\n" + body)

    # When queried
    spans = query_jaeger(JaegerQuery(jaeger.url, api="v3", now=WINDOW[1]))

    # Then both objects' spans are read (the same trace twice counts once as a run)
    assert len(spans) == 2 * recorded.SPANS
    assert len(build_runs(spans)) == 1


def test_older_jaeger_is_asked_on_api_traces_when_v3_is_missing(jaeger: FakeJaeger):
    # Given an older Jaeger: no /api/v3, Jaeger JSON on /api/traces
    jaeger.routes["/api/traces"] = (200, recorded.LEGACY.read_bytes())

    # When loaded from its URL (service and limit in the query string)
    spans = load_spans(
        f"{jaeger.url}/?service=worker&limit=20", start_min=WINDOW[0], start_max=WINDOW[1]
    )

    # Then v3 was tried, then the older API, and the run is measured as recorded
    assert [path for path, _ in jaeger.requests] == ["/api/v3/traces", "/api/traces"]
    params = jaeger.requests[1][1]
    assert params["service"] == "worker"
    assert params["limit"] == "20"
    assert params["start"] == str(int(WINDOW[0].timestamp() * 1_000_000))
    [run] = build_runs(spans)
    assert run.hop_ns == recorded.HOP_NS


def test_v3_finding_nothing_is_an_empty_answer(jaeger: FakeJaeger):
    not_found = b'{"error":{"httpCode":404,"message":"trace not found"}}'
    jaeger.routes["/api/v3/traces"] = (404, not_found)
    assert query_jaeger(JaegerQuery(jaeger.url, api="v3", now=WINDOW[1])) == []


def test_an_error_answer_is_unavailable_with_the_url(jaeger: FakeJaeger):
    jaeger.routes["/api/v3/traces"] = (500, b'{"error":{"httpCode":500,"message":"boom"}}')
    with pytest.raises(Unavailable, match=r"HTTP 500 to http://127\.0\.0\.1:\d+/api/v3/traces"):
        query_jaeger(JaegerQuery(jaeger.url, now=WINDOW[1]))


def test_a_stalled_jaeger_times_out(jaeger: FakeJaeger):
    # Given a Jaeger that never answers
    jaeger.stall = threading.Event()
    jaeger.routes["/api/v3/traces"] = (200, recorded.V3.read_bytes())

    # When queried with a short timeout
    query = JaegerQuery(jaeger.url, timeout=timedelta(milliseconds=300), now=WINDOW[1])

    # Then the call gives up with Unavailable
    with pytest.raises(Unavailable, match="cannot reach Jaeger"):
        query_jaeger(query)


def test_nothing_listening_is_unavailable():
    # Given a loopback port that nothing listens on (bound, then released)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    # Then a query there fails fast, saying what to check
    with pytest.raises(Unavailable, match="is the query service running"):
        query_jaeger(JaegerQuery(f"http://127.0.0.1:{port}", timeout=timedelta(seconds=2)))


def test_the_waterfall_command_reads_a_jaeger_url(jaeger: FakeJaeger):
    # Given a Jaeger v2 holding the recorded run
    jaeger.routes["/api/v3/traces"] = (200, recorded.V3.read_bytes())

    # When the CLI entry point is pointed at it with a window and a service
    text = waterfall_command(
        f"{jaeger.url}/?service=worker",
        fmt="json",
        since="2025-03-01T01:00:00Z",
        until="2025-03-01T03:00:00Z",
    )

    # Then the query carried them, and the waterfall covers the recorded run
    params = jaeger.requests[0][1]
    assert params["query.service_name"] == "worker"
    assert params["query.start_time_min"] == "2025-03-01T01:00:00Z"
    document = json.loads(text)
    assert document["runs"] == 1
    assert document["end_to_end"]["p50_ms"] == recorded.END_TO_END_NS / 1e6
