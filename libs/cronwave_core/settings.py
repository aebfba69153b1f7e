"""Settings from ``CRONWAVE_*`` environment variables, read once in ``main()``.

Every default works on one laptop: a SQLite file and span files under the data
directory, services on fixed loopback ports. A malformed value stops start-up with a
message naming the variable.

Fault injection and failure drills (``TEST_ONLY``) exist only in a process started
for tests or drills, which says so with ``CRONWAVE_TEST_HOOKS=1``. A process given one
of them without the switch does not start: a drill variable that leaked into a
production environment stops it rather than slowing, stalling or killing real runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from cronwave_core.errors import ConfigurationError

PREFIX = "CRONWAVE_"

DEFAULT_PORTS = {
    "store": 7401,
    "leader": 7402,
    "dispatcher": 7403,
    "planner": 7404,
    "worker": 7405,
    "redis": 7479,
}
#: The billing demo's sandbox payment gateway; apart from DEFAULT_PORTS because only a
#: suite asked for it runs one.
GATEWAY_PORT = 7406

#: The switch that says "this process was started for tests or drills"; never set in
#: production. Without it no fault hook is installed and ``TEST_ONLY`` is refused.
TEST_HOOKS = PREFIX + "TEST_HOOKS"
FAULT = PREFIX + "FAULT"
#: The variables that arm a fault or a failure drill: each needs ``TEST_HOOKS``.
TEST_ONLY = (
    FAULT,
    PREFIX + "GATEWAY_TIMEOUT_AFTER_COMMIT",
    PREFIX + "BILLING_CRASH_AFTER_CHARGES",
)
_ON = ("on", "1", "true")
_OFF = ("off", "0", "false")


def _seconds(env: Mapping[str, str], name: str, default: float) -> timedelta:
    raw = env.get(PREFIX + name)
    if raw is None or raw == "":
        return timedelta(seconds=default)
    try:
        value = float(raw.removesuffix("s"))
    except ValueError as exc:
        raise ConfigurationError(
            f"{PREFIX}{name}: expected seconds (e.g. 2.5), got {raw!r}"
        ) from exc
    if value < 0:
        raise ConfigurationError(f"{PREFIX}{name}: must not be negative, got {raw!r}")
    return timedelta(seconds=value)


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(PREFIX + name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{PREFIX}{name}: expected an integer, got {raw!r}") from exc
    if value < minimum:
        raise ConfigurationError(f"{PREFIX}{name}: must be at least {minimum}, got {value}")
    return value


def _switch(env: Mapping[str, str], name: str, default: str) -> bool:
    raw = (env.get(PREFIX + name) or default).strip().lower()
    if raw not in _ON + _OFF:
        raise ConfigurationError(f"{PREFIX}{name}: expected on or off, got {raw!r}")
    return raw in _ON


def refuse_test_only(names: Iterable[str]) -> None:
    """Stop start-up when any of ``names`` (set ``TEST_ONLY`` variables) is given to a
    process without ``TEST_HOOKS``."""
    given = ", ".join(names)
    if given:
        raise ConfigurationError(
            f"{given} set, but {TEST_HOOKS} is not: fault injection and failure drills "
            f"exist only in processes started for tests or drills. In production unset "
            f"{given}; a test or drill sets {TEST_HOOKS}=1 as well (never in production)"
        )


def _addr(env: Mapping[str, str], name: str, port: int) -> str:
    raw = env.get(PREFIX + name) or f"127.0.0.1:{port}"
    host, sep, port_text = raw.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ConfigurationError(f"{PREFIX}{name}: expected HOST:PORT, got {raw!r}")
    return raw


@dataclass(frozen=True)
class Settings:
    """Everything a cronwave process is configured with. Build with ``from_env``."""

    data_dir: Path
    database_url: str
    redis_url: str
    store_addr: str
    leader_addr: str
    dispatcher_addr: str
    planner_addr: str
    worker_addr: str
    rpc_timeout: timedelta
    lease_ttl: timedelta
    lease_renew_interval: timedelta
    lease_retry_interval: timedelta
    grace: timedelta
    worker_queues: tuple[str, ...]
    worker_threads: int
    worker_id: str
    candidate: str
    tracing: bool
    otlp_endpoint: str | None
    #: ``CRONWAVE_FAULT``; empty unless ``test_hooks``.
    fault: str
    billing_database_url: str
    gateway_addr: str
    gateway_database_url: str
    namespace: str
    #: How long before a fire time the planner dispatches its run (0: at the instant).
    dispatch_lead: timedelta = timedelta(seconds=5)
    #: The interpreter's thread switch interval (None: Python's own, 5 ms).
    switch_interval: timedelta | None = None
    extra: Mapping[str, str] = field(default_factory=dict)
    #: Started for tests or drills (``CRONWAVE_TEST_HOOKS``): fault hooks may be installed.
    test_hooks: bool = False

    def __post_init__(self) -> None:
        if self.fault and not self.test_hooks:
            refuse_test_only([FAULT])

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        data_dir = Path(env.get(PREFIX + "DATA_DIR") or ".cronwave").expanduser().resolve()
        database_url = env.get(PREFIX + "DATABASE_URL") or f"sqlite:///{data_dir / 'cronwave.db'}"
        if "://" not in database_url:
            raise ConfigurationError(
                f"{PREFIX}DATABASE_URL: expected a SQLAlchemy URL such as "
                f"postgresql+psycopg://user@host/db, got {database_url!r}"
            )
        redis_url = env.get(PREFIX + "REDIS_URL") or f"redis://127.0.0.1:{DEFAULT_PORTS['redis']}/0"
        if not redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                f"{PREFIX}REDIS_URL: expected redis://HOST:PORT/DB, got {redis_url!r}"
            )
        queues = tuple(
            q.strip() for q in (env.get(PREFIX + "WORKER_QUEUES") or "default").split(",") if q
        )
        lease_ttl = _seconds(env, "LEASE_TTL", 15.0)
        renew = _seconds(env, "LEASE_RENEW_INTERVAL", lease_ttl.total_seconds() / 5)
        if renew >= lease_ttl:
            raise ConfigurationError(
                f"{PREFIX}LEASE_RENEW_INTERVAL: must be shorter than {PREFIX}LEASE_TTL "
                f"({renew.total_seconds()}s >= {lease_ttl.total_seconds()}s)"
            )
        pid = os.getpid()
        test_hooks = _switch(env, "TEST_HOOKS", "off")
        if not test_hooks:
            refuse_test_only(name for name in TEST_ONLY if env.get(name))
        return cls(
            data_dir=data_dir,
            database_url=database_url,
            redis_url=redis_url,
            store_addr=_addr(env, "STORE_ADDR", DEFAULT_PORTS["store"]),
            leader_addr=_addr(env, "LEADER_ADDR", DEFAULT_PORTS["leader"]),
            dispatcher_addr=_addr(env, "DISPATCHER_ADDR", DEFAULT_PORTS["dispatcher"]),
            planner_addr=_addr(env, "PLANNER_ADDR", DEFAULT_PORTS["planner"]),
            worker_addr=_addr(env, "WORKER_ADDR", DEFAULT_PORTS["worker"]),
            rpc_timeout=_seconds(env, "RPC_TIMEOUT", 5.0),
            lease_ttl=lease_ttl,
            lease_renew_interval=renew,
            lease_retry_interval=_seconds(env, "LEASE_RETRY_INTERVAL", 1.0),
            grace=_seconds(env, "GRACE", 5.0),
            worker_queues=queues or ("default",),
            worker_threads=_int(env, "WORKER_THREADS", 8, minimum=1),
            worker_id=env.get(PREFIX + "WORKER_ID") or f"worker-{pid}",
            candidate=env.get(PREFIX + "CANDIDATE") or f"planner-{pid}",
            tracing=_switch(env, "TRACING", "on"),
            otlp_endpoint=env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None,
            fault=env.get(PREFIX + "FAULT") or "",
            billing_database_url=env.get(PREFIX + "BILLING_DATABASE_URL")
            or f"sqlite:///{data_dir / 'billing.db'}",
            gateway_addr=_addr(env, "GATEWAY_ADDR", GATEWAY_PORT),
            gateway_database_url=env.get(PREFIX + "GATEWAY_DATABASE_URL")
            or f"sqlite:///{data_dir / 'gateway.db'}",
            namespace=env.get(PREFIX + "NAMESPACE") or "cronwave",
            dispatch_lead=_seconds(env, "DISPATCH_LEAD", 5.0),
            switch_interval=_seconds(env, "SWITCH_INTERVAL", 0.0) or None,
            extra={k: v for k, v in env.items() if k.startswith(PREFIX)},
            test_hooks=test_hooks,
        )

    @property
    def spans_dir(self) -> Path:
        return self.data_dir / "spans"
