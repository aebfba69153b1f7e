"""Spans from a Jaeger query service over HTTP (stdlib ``urllib``, bounded by a timeout).

Jaeger v2 answers ``GET /api/v3/traces?query.service_name=..&query.start_time_min=..
&query.start_time_max=..&query.num_traces=..`` with OTLP JSON under ``result`` (some
versions stream several such objects back to back; all are read). Older Jaeger
only has ``GET /api/traces?service=..&start=..&end=..&limit=..`` (times in
microseconds), answering Jaeger JSON. ``api="auto"`` asks v3 first and falls back
to the older API when v3 is not there (HTTP 404).

A whole trace comes back whichever service is named, since every run's trace
crosses all five services; the service only narrows the search.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwave_core.errors import InvalidArgument, Unavailable
from cronwave_waterfall.jaeger_json import read_jaeger
from cronwave_waterfall.otlp_json import read_otlp
from cronwave_waterfall.span import Span

APIS = ("auto", "v3", "legacy")


@dataclass(frozen=True)
class JaegerQuery:
    """Where and what to ask a Jaeger query service for.

    ``base_url`` is the query service root (``http://localhost:16686``). The search
    window is ``[start_min, start_max]``; when unset it is the ``lookback`` before
    now. ``limit`` bounds the number of traces.
    """

    base_url: str
    service: str = "dispatcher"
    api: str = "auto"
    start_min: datetime | None = None
    start_max: datetime | None = None
    lookback: timedelta = timedelta(hours=1)
    limit: int = 1000
    timeout: timedelta = timedelta(seconds=10)
    now: datetime | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        scheme = urllib.parse.urlsplit(self.base_url).scheme
        if scheme not in ("http", "https"):
            raise InvalidArgument("source", f"expected an http(s) URL, got {self.base_url!r}")
        if self.api not in APIS:
            raise InvalidArgument("api", f"must be one of {', '.join(APIS)}, got {self.api!r}")
        if not self.service:
            raise InvalidArgument("service", "must not be empty")
        if self.limit < 1:
            raise InvalidArgument("limit", f"must be at least 1, got {self.limit}")
        if self.timeout <= timedelta(0):
            raise InvalidArgument("timeout", "must be positive")
        for name in ("start_min", "start_max", "now"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise InvalidArgument(name, "must be an aware datetime (UTC)")

    def window(self) -> tuple[datetime, datetime]:
        end = self.start_max or self.now or datetime.now(UTC)
        start = self.start_min or end - self.lookback
        if start > end:
            raise InvalidArgument("since", f"{start.isoformat()} is after {end.isoformat()}")
        return start, end

    @classmethod
    def from_url(cls, url: str, **overrides: Any) -> JaegerQuery:
        """A query from a URL whose query string may carry ``service``, ``api``,
        ``limit`` and ``lookback`` (seconds): ``http://host:16686/?service=worker``."""
        parts = urllib.parse.urlsplit(url)
        params = dict(urllib.parse.parse_qsl(parts.query))
        base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        values: dict[str, Any] = {"base_url": base}
        if "service" in params:
            values["service"] = params["service"]
        if "api" in params:
            values["api"] = params["api"]
        try:
            if "limit" in params:
                values["limit"] = int(params["limit"])
            if "lookback" in params:
                values["lookback"] = timedelta(seconds=float(params["lookback"]))
        except ValueError as exc:
            raise InvalidArgument("source", f"bad query parameter in {url!r}: {exc}") from exc
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def v3_url(query: JaegerQuery) -> str:
    start, end = query.window()
    params = {
        "query.service_name": query.service,
        "query.start_time_min": _rfc3339(start),
        "query.start_time_max": _rfc3339(end),
        "query.num_traces": str(query.limit),
    }
    return f"{query.base_url.rstrip('/')}/api/v3/traces?{urllib.parse.urlencode(params)}"


def legacy_url(query: JaegerQuery) -> str:
    start, end = query.window()
    params = {
        "service": query.service,
        "start": str(int(start.timestamp() * 1_000_000)),
        "end": str(int(end.timestamp() * 1_000_000)),
        "limit": str(query.limit),
    }
    return f"{query.base_url.rstrip('/')}/api/traces?{urllib.parse.urlencode(params)}"


class _NotThere(Exception):
    """The endpoint answered 404: either this Jaeger lacks the API (plain 404) or
    the API found no trace (a JSON error body, as Jaeger v2's /api/v3 answers)."""

    def __init__(self, url: str, body: bytes) -> None:
        super().__init__(url)
        self.body = body

    @property
    def found_nothing(self) -> bool:
        try:
            document = json.loads(self.body)
        except ValueError:
            return False
        return isinstance(document, dict) and "error" in document


def _get(url: str, timeout: timedelta) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout.total_seconds()) as response:
            body: bytes = response.read()
            return body
    except urllib.error.HTTPError as exc:
        body = exc.read()
        if exc.code == 404:
            raise _NotThere(url, body) from exc
        detail = body[:300].decode("utf-8", "replace")
        raise Unavailable(f"Jaeger answered HTTP {exc.code} to {url}: {detail}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise Unavailable(
            f"cannot reach Jaeger at {url}: {exc}; is the query service running?"
        ) from exc


def _documents(body: bytes, url: str) -> Iterator[Any]:
    """Every JSON value in ``body``: one, or several back to back (a stream)."""
    text = body.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise Unavailable(f"Jaeger's answer to {url} is not JSON: {exc.msg}") from exc
        yield value


def query_jaeger(query: JaegerQuery) -> list[Span]:
    """The spans of the traces the query finds; an unreachable Jaeger or an error
    answer raises ``Unavailable`` naming the URL."""
    if query.api in ("auto", "v3"):
        url = v3_url(query)
        try:
            body = _get(url, query.timeout)
        except _NotThere as exc:
            if exc.found_nothing:
                return []
            if query.api == "v3":
                raise Unavailable(f"{url} answered 404: this Jaeger has no /api/v3") from exc
        else:
            spans: list[Span] = []
            for document in _documents(body, url):
                if isinstance(document, dict) and "error" in document:
                    raise Unavailable(f"Jaeger refused {url}: {document['error']}")
                spans.extend(read_otlp(document))
            return spans
    url = legacy_url(query)
    try:
        body = _get(url, query.timeout)
    except _NotThere as exc:
        raise Unavailable(f"{url} answered 404: is this a Jaeger query service?") from exc
    spans = []
    for document in _documents(body, url):
        if isinstance(document, dict) and document.get("errors"):
            raise Unavailable(f"Jaeger refused {url}: {document['errors']}")
        spans.extend(read_jaeger(document))
    return spans
