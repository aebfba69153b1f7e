"""``CRONWAVE_REDIS_URL``: which Redis a process talks to, and how.

Two kinds of URL, each plain or over TLS:

- ``redis://[[USER]:PASSWORD@]HOST:PORT/DB`` — one server (``unix:///PATH?db=DB`` on a
  socket); ``rediss://`` the same over TLS.
- ``redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]`` — the
  master of the Sentinel service ``SERVICE``, asked of these sentinels (port 26379
  when none is given) before each new connection, as redis-py's
  ``Sentinel(...).master_for(SERVICE)`` does: after a failover, connections to the old
  master are dropped and new ones reach the new master. ``rediss+sentinel://`` speaks
  TLS to the sentinels and to the master, with the same options. The password is the
  master's; the sentinels are asked without one.

TLS is set by redis-py's own query parameters, parsed by redis-py: ``ssl_ca_certs``
(a PEM file of the CAs to trust; unset: the system's), ``ssl_ca_path``,
``ssl_certfile`` and ``ssl_keyfile`` (a client certificate, for a server with
``tls-auth-clients yes``), ``ssl_cert_reqs`` (``required``, the default, ``optional``
or ``none``) and ``ssl_check_hostname`` (``true``, the default, or ``false``). Every
other query parameter is refused (``db`` aside): a pool's size and timeouts are the
process's (``CRONWAVE_REDIS_POOL_*``, ``CRONWAVE_REDIS_TIMEOUT``), and a URL that set
``max_connections`` would lift a pool's bound unseen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cronwave_core.config import Kind
from cronwave_core.errors import ConfigurationError
from cronwave_core.redaction import redact

__all__ = ["RULE", "RedisTarget", "RedisUrl", "RedisUrlError", "parse"]

RULE = (
    "redis://HOST:PORT/DB, rediss://HOST:PORT/DB (TLS), unix:///PATH or "
    "redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE/DB (rediss+sentinel:// for TLS)"
)
DIRECT = ("redis", "rediss", "unix")
SENTINEL = ("redis+sentinel", "rediss+sentinel")
SENTINEL_PORT = 26379

_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
_CHOICES = {
    "ssl_cert_reqs": ("required", "optional", "none"),
    "ssl_check_hostname": ("true", "false"),
}
TLS_OPTIONS = (*_FILES, "ssl_ca_path", *_CHOICES)


class RedisUrlError(ValueError):
    """A Redis URL that breaks one part of its rule; the message says which (never the
    URL's password)."""


@dataclass(frozen=True)
class RedisTarget:
    """A parsed ``CRONWAVE_REDIS_URL``."""

    scheme: str
    tls: bool
    #: The sentinels to ask, in order; empty for one server.
    sentinels: tuple[tuple[str, int], ...]
    service: str  # the Sentinel service's name; empty for one server
    db: int
    username: str | None
    password: str | None = field(repr=False)
    #: redis-py's TLS keyword arguments, from the query (``ssl_ca_certs`` ...).
    tls_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sentinel(self) -> bool:
        return bool(self.sentinels)


def parse(url: str) -> RedisTarget:
    """``url`` checked and parsed; ``RedisUrlError`` says what is wrong with it."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in (*DIRECT, *SENTINEL):
        raise RedisUrlError(f"the scheme must be one of {', '.join(DIRECT + SENTINEL)}")
    tls = scheme.startswith("rediss")
    query = _query(urlsplit(url).query, tls)
    if scheme in SENTINEL:
        return _sentinel(scheme, rest, tls, query)
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError when out of range
    except ValueError:
        raise RedisUrlError("the port must be a whole number from 1 to 65535") from None
    db = _db(query.pop("db", "0"))
    if scheme != "unix" and parts.path.strip("/"):
        db = _db(parts.path.strip("/"))
    return RedisTarget(
        scheme=scheme,
        tls=tls,
        sentinels=(),
        service="",
        db=db,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        tls_options=_tls_options(query),
    )


def _query(text: str, tls: bool) -> dict[str, str]:
    pairs = parse_qs(text, keep_blank_values=True)
    query: dict[str, str] = {}
    for name, values in pairs.items():
        if name != "db" and name not in TLS_OPTIONS:
            raise RedisUrlError(
                f"query parameter {name!r} is not one cronwave passes on: only db and the "
                f"TLS options {', '.join(TLS_OPTIONS)} (a pool's size and timeouts are "
                "CRONWAVE_REDIS_POOL_SIZE, CRONWAVE_REDIS_POOL_TIMEOUT, CRONWAVE_REDIS_TIMEOUT)"
            )
        if len(values) != 1 or not values[0]:
            raise RedisUrlError(f"query parameter {name!r} must be given once, with a value")
        query[name] = values[0]
    if not tls and (given := [n for n in query if n.startswith("ssl_")]):
        raise RedisUrlError(
            f"{given[0]} is a TLS option: use rediss:// (or rediss+sentinel://) for TLS"
        )
    if "db" in query:
        _db(query["db"])
    for name in _FILES:
        if name in query and not Path(query[name]).is_file():
            raise RedisUrlError(f"{name}: no file {query[name]} (a PEM file's path)")
    if "ssl_ca_path" in query and not Path(query["ssl_ca_path"]).is_dir():
        raise RedisUrlError(f"ssl_ca_path: no directory {query['ssl_ca_path']}")
    if "ssl_keyfile" in query and "ssl_certfile" not in query:
        raise RedisUrlError("ssl_keyfile needs ssl_certfile (the client certificate it signs)")
    for name, choices in _CHOICES.items():
        if name in query and query[name] not in choices:
            raise RedisUrlError(f"{name} must be {' or '.join(choices)}")
    return query


def _db(text: str) -> int:
    if not text.isdigit():
        raise RedisUrlError("the database must be a whole number (redis://HOST:PORT/DB)")
    return int(text)


def _tls_options(query: Mapping[str, str]) -> dict[str, Any]:
    """The query's TLS options as redis-py reads them from a URL itself."""
    tls = {name: value for name, value in query.items() if name in TLS_OPTIONS}
    if not tls:
        return {}
    from urllib.parse import urlencode

    from redis.connection import parse_url

    parsed = parse_url(f"rediss://localhost/?{urlencode(tls)}")
    return {name: value for name, value in parsed.items() if name in TLS_OPTIONS}


def _sentinel(scheme: str, rest: str, tls: bool, query: dict[str, str]) -> RedisTarget:
    authority, _, path = rest.partition("/")
    path = path.partition("?")[0].partition("#")[0]
    userinfo, at, hosts = authority.rpartition("@")
    if not at:
        userinfo, hosts = "", authority
    username, colon, password = userinfo.partition(":")
    sentinels = tuple(_sentinel_address(part) for part in hosts.split(","))
    segments = [unquote(s) for s in path.split("/") if s]
    if not segments:
        raise RedisUrlError(
            "a Sentinel URL names the master's service after the sentinels: "
            "redis+sentinel://HOST:PORT[,HOST:PORT...]/SERVICE/DB"
        )
    if len(segments) > 2:
        raise RedisUrlError("a Sentinel URL's path is /SERVICE or /SERVICE/DB")
    db = _db(segments[1]) if len(segments) == 2 else int(query.pop("db", "0"))
    query.pop("db", None)
    return RedisTarget(
        scheme=scheme,
        tls=tls,
        sentinels=sentinels,
        service=segments[0],
        db=db,
        username=unquote(username) if username else None,
        password=unquote(password) if colon and password else None,
        tls_options=_tls_options(query),
    )


def _sentinel_address(text: str) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):  # [IPv6]:PORT
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    if not host:
        raise RedisUrlError("each sentinel is HOST:PORT, separated by commas")
    if not port:
        return host, SENTINEL_PORT
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise RedisUrlError(f"sentinel {host}: the port must be a whole number from 1 to 65535")
    return host, int(port)


class RedisUrl(Kind[str]):
    """A URL ``parse`` accepts, kept as written. One it refuses stops start-up naming
    ``variable``, the rule and which part of it broke (the password masked)."""

    rule = RULE

    def __init__(self, variable: str) -> None:
        self.variable = variable

    @property
    def summary(self) -> str:
        return "Redis URL (redis, rediss, unix, redis+sentinel, rediss+sentinel)"

    def parse(self, raw: str) -> str:
        try:
            parse(raw)
        except RedisUrlError as exc:
            # As ``config.read`` shows a secret: a URL with its password masked, and
            # text that is no URL (a password pasted alone?) not at all.
            got = repr(redact(raw)) if "://" in raw else "a value not shown here"
            message = f"{self.variable}: expected {RULE} ({exc}), got {got}"
            raise ConfigurationError(message) from None
        return raw
