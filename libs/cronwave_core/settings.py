"""Settings from ``CRONWAVE_*`` environment variables: one frozen class per component,
each read once in ``main()`` with ``from_env`` and passed to what needs it.

Every default works on one laptop: a SQLite file and span files under the data
directory, services on fixed loopback ports. A malformed value stops start-up with a
message naming the variable and the rule (``cronwave_core.config``).

``COMPONENTS`` lists cronwave's classes; ``components()`` adds those of the installed
packages (``cronwave_core.extensions``), in the order ``docs/operations/configure.md``
shows them; the table there is generated from them (``tools/config_table.py``).

Fault injection and failure drills (``TestHooks``) exist only in a process started
for tests or drills, which says so with ``CRONWAVE_TEST_HOOKS=1``. A process given one
of them without the switch does not start: a drill variable that leaked into a
production environment stops it rather than slowing, stalling or killing real runs.
An installed package's drills (its ``Extension.drills``) are refused the same way.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Self

from cronwave_core import config, extensions
from cronwave_core.config import (
    Address,
    Addresses,
    Choice,
    Derived,
    Duration,
    Integer,
    Names,
    Switch,
    Text,
    Url,
    setting,
)
from cronwave_core.console_settings import ConsoleSettings
from cronwave_core.errors import ConfigurationError, InvalidArgument
from cronwave_core.fields import lease_name, shown
from cronwave_core.limit_settings import LimitSettings
from cronwave_core.redis_urls import RedisUrl
from cronwave_core.settings_base import PREFIX, FromEnv, ProcessSettings
from cronwave_core.settings_deadlines import DeadlineSettings
from cronwave_core.settings_logs import LogSettings
from cronwave_core.settings_pools import PoolSettings
from cronwave_core.settings_sampling import TraceKeepSettings
from cronwave_core.settings_tls import TlsSettings
from cronwave_core.shards import MAX_SHARDS, shard_scopes

DEFAULT_PORTS = {
    "store": 7401,
    "leader": 7402,
    "dispatcher": 7403,
    "planner": 7404,
    "worker": 7405,
    "redis": 7479,
}
#: A worker's job processes unless set (``CRONWAVE_JOB_MAX_PROCESSES``): its threads, at
#: most this many (each is a Python process; a burst's bodies take turns on them).
MAX_DERIVED_PROCESSES = 16

#: The planners' lease scope (``CRONWAVE_LEASE_SCOPES`` must include it).
PLANNER_SCOPE = "planner"

#: The switch that says "this process was started for tests or drills"; never set in
#: production. Without it no fault hook is installed and ``TEST_ONLY`` is refused.
TEST_HOOKS = PREFIX + "TEST_HOOKS"
FAULT = PREFIX + "FAULT"
#: The variables that arm a fault or a failure drill: each needs ``TEST_HOOKS``
#: (and so does each of an installed package's drills: ``test_only_variables``).
TEST_ONLY = (
    FAULT,
    PREFIX + "MISSED_SLOTS_AHEAD",
)


def listen_address(name: str, port: int, doc: str) -> Any:
    """A ``setting`` of one server's address, ``CRONWAVE_<name>``, by default
    ``127.0.0.1:<port>`` (a package's own server, as the billing example's gateway)."""
    return setting(PREFIX + name, Address(), f"127.0.0.1:{port}", doc)


def _peer(name: str, port: int, doc: str) -> Any:
    """A service's address: where it listens (one), where its callers reach it (one,
    or its replicas: ``cronwave_core.targets``)."""
    return setting(PREFIX + name, Addresses(), f"127.0.0.1:{port}", doc)


def _data_dir(env: Mapping[str, str]) -> Path:
    return ProcessSettings.from_env(env).data_dir


def in_data_dir(file: str) -> Derived[str]:
    """The default of a database setting: the SQLite file ``file`` in the data dir."""
    return Derived(
        f"sqlite:///<data dir>/{file}",
        lambda _values, env: f"sqlite:///{_data_dir(env) / file}",
    )


#: The rule of a database URL setting.
DATABASE_URL = Url("a SQLAlchemy URL such as postgresql+psycopg://user@host/db")


@dataclass(frozen=True, kw_only=True)
class NetworkSettings(FromEnv):
    """Where each service listens and is reached, and the deadline of a call to one. A
    process listens on one `HOST:PORT`; its callers may be given all of a service's
    replicas instead, `IP:PORT,IP:PORT,...` (or `dns:///NAME:PORT`), and spread their
    calls over them round robin (see *Replicas*)."""

    store_addr: str = _peer("STORE_ADDR", DEFAULT_PORTS["store"], "the workflow-store")
    leader_addr: str = _peer("LEADER_ADDR", DEFAULT_PORTS["leader"], "the leader-election service")
    dispatcher_addr: str = _peer("DISPATCHER_ADDR", DEFAULT_PORTS["dispatcher"], "the dispatcher")
    planner_addr: str = _peer("PLANNER_ADDR", DEFAULT_PORTS["planner"], "the cron-planner")
    worker_addr: str = _peer("WORKER_ADDR", DEFAULT_PORTS["worker"], "a worker's status service")
    rpc_timeout: timedelta = setting(
        PREFIX + "RPC_TIMEOUT",
        Duration(),
        timedelta(seconds=5),
        "default deadline of every outgoing call",
    )
    #: None (unset or empty): from 10000 to just below the kernel's ephemeral range.
    own_ports: str | None = setting(
        PREFIX + "OWN_PORTS",
        Text(),
        None,
        "LO-HI: the ports a suite (`cronwave up`, the tests) picks at random for the "
        "processes it was given no port for (metrics, extra replicas); unset: from 10000 "
        "to just below the kernel's ephemeral range, so that a port a killed service "
        "freed is not taken meanwhile by some connection's local end",
    )


@dataclass(frozen=True, kw_only=True)
class RedisSettings(FromEnv):
    """The Redis of the broker, the leases and the caches."""

    redis_url: str = setting(
        PREFIX + "REDIS_URL",
        RedisUrl(PREFIX + "REDIS_URL"),
        f"redis://127.0.0.1:{DEFAULT_PORTS['redis']}/0",
        "broker, leases, caches; `cronwave up` starts an embedded redis-server there "
        "unless this is set. `rediss://` for TLS (CA and client certificate as redis-py's "
        "query parameters `ssl_ca_certs`, `ssl_certfile`, `ssl_keyfile`), "
        "`redis+sentinel://HOST:PORT,HOST:PORT/SERVICE/DB` for the master Sentinel names "
        "(see *Redis: TLS, Sentinel*)",
        secret=True,  # may carry a password
    )
    namespace: str = setting(
        PREFIX + "NAMESPACE", Text(), "cronwave", "prefix of every Redis key and queue"
    )


@dataclass(frozen=True, kw_only=True)
class TelemetrySettings(FromEnv):
    """Tracing of a process (``cronwave_core.telemetry.tracing.init_tracing``)."""

    tracing: bool = setting(
        PREFIX + "TRACING",
        Switch(),
        True,
        "`off`: no spans at all (no tracer provider, no gRPC instrumentation)",
    )
    otlp_endpoint: str | None = setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        Text(),
        None,
        "send spans over OTLP (Jaeger ingests OTLP) instead of the local span files",
    )
    otlp_protocol: str = setting(
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        Choice("grpc", "http/protobuf"),
        "grpc",
        "how spans go to `OTEL_EXPORTER_OTLP_ENDPOINT`: OTLP over gRPC (a collector's "
        "port 4317) or over HTTP (`http/protobuf`, port 4318, to `<endpoint>/v1/traces`)",
    )
    #: None (``0`` or unset): Python's own, 5 ms.
    switch_interval: timedelta | None = setting(
        PREFIX + "SWITCH_INTERVAL",
        Duration(),
        None,
        "the interpreter's thread switch interval (`0`: Python's own, 5 ms): shorter "
        "trims the tail the span exporter adds to calls, at a cost in throughput (see "
        "*Tracing overhead*)",
    )
    #: Where the local span files go: ``spans/`` in the data dir.
    spans_dir: Path = config.derived(lambda _v, env: _data_dir(env) / "spans")

    def __post_init__(self) -> None:
        if self.switch_interval == timedelta(0):
            object.__setattr__(self, "switch_interval", None)


@dataclass(frozen=True, kw_only=True)
class MetricsSettings(FromEnv):
    """A service process's Prometheus endpoint (``cronwave_core.metrics``)."""

    #: None (unset or empty): no endpoint.
    metrics_addr: str | None = setting(
        PREFIX + "METRICS_ADDR",
        Address(),
        None,
        "serve Prometheus metrics at `http://HOST:PORT/metrics` (one port per process); "
        "unset: none. The suite (`cronwave up`, the tests) gives each of its processes a "
        "free loopback port and prints it (see *Metrics*)",
    )


@dataclass(frozen=True, kw_only=True)
class StoreSettings(FromEnv):
    """The workflow-store: the only process that touches the scheduler's database."""

    database_url: str = setting(
        PREFIX + "DATABASE_URL",
        DATABASE_URL,
        in_data_dir("cronwave.db"),
        "the scheduler's database (workflow-store only); `postgresql+psycopg://user@host/db` "
        "in production",
        secret=True,  # may carry a password
    )


@dataclass(frozen=True, kw_only=True)
class LeaseSettings(FromEnv):
    """The planners' leader lease (the planner renews it, leader-election keeps it);
    see *Leader election and fencing* for how the three relate."""

    ttl: timedelta = setting(
        PREFIX + "LEASE_TTL", Duration(), timedelta(seconds=1.5), "lease duration"
    )
    renew_interval: timedelta = setting(
        PREFIX + "LEASE_RENEW_INTERVAL",
        Duration(),
        Derived("TTL / 5", lambda values, _env: values["ttl"] / 5),
        "how often the leader renews its lease; shorter than the TTL",
    )
    retry_interval: timedelta = setting(
        PREFIX + "LEASE_RETRY_INTERVAL",
        Duration(),
        timedelta(seconds=0.2),
        "how often followers campaign, and a failed renewal is retried",
    )
    max_ttl: timedelta = setting(
        PREFIX + "LEASE_MAX_TTL",
        Duration(minimum=timedelta(seconds=1)),
        Derived("TTL * 4", lambda values, _env: values["ttl"] * 4),
        "the longest lease leader-election grants: a Campaign asking for more is refused "
        "(INVALID_ARGUMENT on `ttl`), so a caller cannot take the lease for long; at "
        "least the TTL",
    )
    scopes: tuple[str, ...] = setting(
        PREFIX + "LEASE_SCOPES",
        Names(empty=False),
        (PLANNER_SCOPE,),
        "the lease scopes there are, a closed set: leader-election grants leases, and "
        "the workflow-store issues and accepts fencing tokens, for these alone (any "
        "other is INVALID_ARGUMENT naming the scope); `planner` (the planners') is one. "
        "Give every leader-election and workflow-store the same",
    )
    planner_shards: int = setting(
        PREFIX + "PLANNER_SHARDS",
        Integer(minimum=1, maximum=MAX_SHARDS),
        1,
        "how many shards the planners' schedules hash into, each with its own lease and "
        "fencing token; planners divide the shards between them (1: one lease, "
        "`planner`, one leader plans everything; 64 suits up to dozens of planners). "
        "Give every planner, leader-election and workflow-store the same",
    )

    def fenced_scopes(self) -> frozenset[str]:
        """The scopes leases are granted and tokens issued for: ``scopes`` and, when
        planning is sharded, every shard's."""
        return frozenset(self.scopes) | frozenset(shard_scopes(self.planner_shards))

    def __post_init__(self) -> None:
        if self.renew_interval >= self.ttl:
            raise ConfigurationError(
                f"{PREFIX}LEASE_RENEW_INTERVAL: must be shorter than {PREFIX}LEASE_TTL "
                f"({self.renew_interval.total_seconds()}s >= {self.ttl.total_seconds()}s)"
            )
        if self.max_ttl < self.ttl:
            raise ConfigurationError(
                f"{PREFIX}LEASE_MAX_TTL: must be at least {PREFIX}LEASE_TTL "
                f"({self.max_ttl.total_seconds()}s < {self.ttl.total_seconds()}s), or the "
                "planners' own campaigns are refused"
            )
        if PLANNER_SCOPE not in self.scopes:
            raise ConfigurationError(
                f"{PREFIX}LEASE_SCOPES: must include '{PLANNER_SCOPE}', the planners' "
                f"scope, got {','.join(self.scopes)}"
            )
        for scope in self.scopes:
            try:
                lease_name(scope, f"{PREFIX}LEASE_SCOPES")
            except InvalidArgument as exc:
                raise ConfigurationError(f"{exc.field}: {shown(scope)} {exc.rule}") from None


@dataclass(frozen=True, kw_only=True)
class PlannerSettings(FromEnv):
    """A cron-planner replica (with ``LeaseSettings`` for its lease)."""

    candidate: str = setting(
        PREFIX + "CANDIDATE",
        Text(),
        Derived("planner-<pid>", lambda _v, _env: f"planner-{os.getpid()}"),
        "a planner replica's name in the election",
    )
    dispatch_lead: timedelta = setting(
        PREFIX + "DISPATCH_LEAD",
        Duration(),
        timedelta(seconds=5),
        "how far ahead of its fire time a slot is dispatched: recorded, queued and "
        "claimed before the instant, its body started at the instant (`0` dispatches "
        "at the instant; never more than half the gap since the previous slot; see "
        "docs/architecture.md)",
    )
    dispatch_lead_max: timedelta = setting(
        PREFIX + "DISPATCH_LEAD_MAX",
        Duration(),
        timedelta(seconds=25),
        "how far ahead a crowded instant's slots are dispatched: past the first 250 "
        "per second of the lead due at one instant (1,250 with the default lead), the "
        "rest go this far ahead, to be claimed before their set-up begins (at or below "
        "the lead: off; keep it under the worker's 30-s early limit, and the workers' "
        "`CRONWAVE_WORKER_MAX_RUNS` above the crowd each takes; docs/benchmarks.md, "
        "*The defaults*)",
    )


@dataclass(frozen=True, kw_only=True)
class DispatcherSettings(FromEnv):
    """The dispatcher's sweeper (``dispatcher.sweeper``): stalled and lost runs."""

    sweep_interval: timedelta = setting(
        PREFIX + "SWEEP_INTERVAL",
        Duration(),
        timedelta(seconds=0.5),
        "between two sweeps for stalled and lost runs; `0` turns the sweeper off",
    )
    sweep_pending_after: timedelta = setting(
        PREFIX + "SWEEP_PENDING_AFTER",
        Duration(),
        timedelta(seconds=30),
        "how long a due PENDING run may wait unclaimed, past the age of the oldest message "
        "waiting on its queue, before it is sent again",
    )
    sweep_limit: int = setting(
        PREFIX + "SWEEP_LIMIT", Integer(1, 10_000), 200, "runs a sweep re-sends at most"
    )


@dataclass(frozen=True, kw_only=True)
class WorkerSettings(FromEnv):
    """A worker process: what it consumes and how it runs job bodies."""

    queues: tuple[str, ...] = setting(
        PREFIX + "WORKER_QUEUES",
        Names(empty=False),
        ("default",),
        "the queues (pools) a worker consumes; it registers only their job types",
    )
    threads: int = setting(
        PREFIX + "WORKER_THREADS",
        Integer(1),
        64,
        "a worker's consumer threads: how many runs it claims at once (a burst's runs "
        "are claimed ahead of their instant in batches this large); an idle one costs "
        "a wake-up a second",
    )
    max_runs: int = setting(
        PREFIX + "WORKER_MAX_RUNS",
        Integer(1),
        8192,
        "runs a worker holds at once, claimed and not yet completed (waiting for their "
        "fire time, queued on a job process or running); past it the worker claims "
        "nothing more until one ends, and its queues' messages wait for it or another "
        "worker, so a crowded instant cannot take more runs than it keeps alive",
    )
    worker_id: str = setting(
        PREFIX + "WORKER_ID",
        Text(),
        Derived("worker-<pid>", lambda _v, _env: f"worker-{os.getpid()}"),
        "a worker's name in claims and in the console",
    )
    poll: timedelta = setting(
        PREFIX + "WORKER_POLL_MS",
        Duration(bare="ms", minimum=timedelta(milliseconds=1), maximum=timedelta(seconds=10)),
        timedelta(milliseconds=100),
        "the worker's idle poll of its queues: a message waits at most this long for "
        "an idle worker",
    )
    isolation: str = setting(
        PREFIX + "JOB_ISOLATION",
        Choice("process", "thread"),
        "process",
        "`process`: each job body in a job process the worker can kill; `thread`: in "
        "the worker's threads (no kill for a body stuck in C code)",
    )
    kill_grace: timedelta = setting(
        PREFIX + "JOB_KILL_GRACE",
        Duration(maximum=timedelta(seconds=300)),
        timedelta(seconds=2),
        "between SIGTERM and SIGKILL of a job process",
    )
    cancel_check: timedelta = setting(
        PREFIX + "CANCEL_CHECK_INTERVAL",
        Duration(minimum=timedelta(milliseconds=100), maximum=timedelta(seconds=60)),
        timedelta(seconds=1),
        "a running job's heartbeat comes at least this often, so a cancel reaches its "
        "body within it (docs/operations/runs.md, *Cancelling a run*)",
    )
    max_processes: int = setting(
        PREFIX + "JOB_MAX_PROCESSES",
        Integer(1),
        Derived(
            "the worker's threads, at most 16",
            lambda values, _env: min(values["threads"], MAX_DERIVED_PROCESSES),
        ),
        "job bodies running at once; more wait for a process to come back (held, at no store call)",
    )
    warm_processes: int = setting(
        PREFIX + "JOB_WARM_PROCESSES",
        Integer(0),
        Derived("2", lambda values, _env: min(2, values["max_processes"])),
        "job processes kept started and ready (at most `CRONWAVE_JOB_MAX_PROCESSES`)",
    )
    job_modules: tuple[str, ...] = setting(
        PREFIX + "JOB_MODULES",
        Names(),
        (),
        "job modules a worker loads besides its built-ins and the entry points "
        "`cronwave.jobs` (`cronwave worker --jobs` adds to it): a module's "
        "`@cronwave.job` attributes, or what its `job_types(settings)` returns",
    )
    #: Set by a worker for the job processes it starts (``worker.job_process``).
    parent_pid: int = setting(
        PREFIX + "JOB_PARENT_PID",
        Integer(0),
        0,
        "set by a worker for the job processes it starts, never by hand: the worker "
        "a job process dies with",
    )

    def __post_init__(self) -> None:
        if self.warm_processes > self.max_processes:
            object.__setattr__(self, "warm_processes", self.max_processes)


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


@dataclass(frozen=True, kw_only=True)
class TestHooks(FromEnv):
    """Fault injection and failure drills, for tests only; never set in production.
    Without ``enabled`` every other field is refused, so the hooks built from this
    (``cronwave_core.faults.fault_hooks`` and each service's drills) are no-ops."""

    __test__ = False  # not a pytest test class

    enabled: bool = setting(
        TEST_HOOKS,
        Switch(),
        False,
        "**never set in production.** `1`: the process was started for tests or "
        "drills, so fault injection and failure drills may be installed (the variables "
        "below and an installed package's drills, such as the billing example's). "
        "Unset, a process given any of them does not start (the message names the "
        "variable and this switch). The test harness sets it "
        "(`SuiteConfig(test_hooks=True)`) where a test injects faults; `cronwave up` "
        "and `cronwave demo` never do",
    )
    fault: str = setting(
        FAULT,
        Text(),
        "",
        "fault injection: `delay=<hop>:<kind>:<delay>:<fraction>` (see *Fault hook*), "
        "`planner.hold_start=<s>`, `worker.stop_before_complete=<attempt>`, "
        "`worker.lose_claim_answers=<count>` (see *Drills*)",
    )
    missed_slots_ahead: timedelta = setting(
        PREFIX + "MISSED_SLOTS_AHEAD",
        Duration(),
        timedelta(0),
        "the workflow-store also accepts slots recorded MISSED up to this far past its "
        "clock: for a planner on a simulated calendar (the tests' clocked planners fire "
        "in 2030). Unset, a slot must be due, give or take 1 s of clock skew (see "
        "*Security*)",
    )

    def __post_init__(self) -> None:
        if not self.enabled:
            armed = (
                (FAULT, self.fault),
                (TEST_ONLY[1], self.missed_slots_ahead),
            )
            refuse_test_only(name for name, value in armed if value)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """The hooks, after refusing what a process not started for tests may not be
        given: any ``test_only_variables()`` set at all when the switch is unset, and an
        installed package's drill armed (not its default) when it is off."""
        env = os.environ if env is None else env
        switch = dict(config.variables(cls))["enabled"]
        if not config.read(switch, env, {}):  # set at all, even to 0 or malformed
            refuse_test_only(name for name in test_only_variables() if env.get(name))
        hooks = super().from_env(env)
        if not hooks.enabled:
            refuse_test_only(_armed_drills(env))
        return hooks


def _extension_drills() -> tuple[type[FromEnv], ...]:
    return tuple(drill for extension in extensions.installed() for drill in extension.drills)


def _armed_drills(env: Mapping[str, str]) -> list[str]:
    """The variables of the installed packages' drills that ``env`` sets to other than
    their defaults."""
    armed = []
    for drill in _extension_drills():
        values = drill.from_env(env)
        armed += [
            var.name
            for name, var in config.variables(drill)
            if getattr(values, name) != var.default
        ]
    return armed


@functools.cache
def test_only_variables() -> tuple[str, ...]:
    """``TEST_ONLY`` and the variables of the installed packages' drills: each stops a
    process not started for tests (``TEST_HOOKS``)."""
    drills = [var.name for drill in _extension_drills() for _, var in config.variables(drill)]
    return (*TEST_ONLY, *drills)


#: cronwave's settings classes, in the order the configuration table shows them
#: (``components()`` places the installed packages' among them).
COMPONENTS: tuple[type[FromEnv], ...] = (
    ProcessSettings,
    NetworkSettings,
    TlsSettings,
    RedisSettings,
    PoolSettings,
    TelemetrySettings,
    TraceKeepSettings,
    MetricsSettings,
    LimitSettings,
    LogSettings,
    StoreSettings,
    DeadlineSettings,
    LeaseSettings,
    PlannerSettings,
    DispatcherSettings,
    WorkerSettings,
    ConsoleSettings,
    TestHooks,
)


@functools.cache
def components() -> tuple[type[FromEnv], ...]:
    """Every settings class in the order the configuration table shows them: cronwave's,
    the installed packages' settings (``Extension.settings``), ``TestHooks``, then the
    packages' drills (``Extension.drills``)."""
    installed = extensions.installed()
    own = tuple(cls for extension in installed for cls in extension.settings)
    return (*COMPONENTS[:-1], *own, TestHooks, *_extension_drills())


def check_env(env: Mapping[str, str]) -> None:
    """Load every component from ``env``: a malformed variable stops here, named. For
    a launcher (``cronwave up``, the bench) before it starts processes with ``env``."""
    for component in components():
        component.from_env(env)
