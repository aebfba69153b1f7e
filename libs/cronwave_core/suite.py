"""Starts and stops a whole cronwave suite as real processes on loopback.

Used by ``cronwave up`` / ``cronwave demo`` and by the tests. Every process it starts
is tracked by pid and stopped by it: SIGTERM, then SIGKILL after the grace period.
Its services are forked from a fork server that imported their libraries once
(``cronwave_core.forked``; ``CRONWAVE_FORK_SERVICES=off``: each is a new interpreter):
half a service's start-up CPU, or less, is left to pay.
A suite sets ``CRONWAVE_TEST_HOOKS=1``, the switch fault injection needs, only when
configured with ``test_hooks=True`` (a test's or a drill's); ``cronwave up`` never
does (it passes on the one its caller set, as any other ``CRONWAVE_*`` variable).
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

import grpc

from cronwave_core import redis_password
from cronwave_core.console_settings import CONSOLE_PORT
from cronwave_core.errors import ConfigurationError, Unavailable
from cronwave_core.forked import ForkedProcess, start_module, use_fork_server
from cronwave_core.http_health import wait_http_healthy
from cronwave_core.security.pki import LOCAL_ADMIN, ensure_pki
from cronwave_core.security.tls import new_channel
from cronwave_core.settings import DEFAULT_PORTS, PREFIX, TEST_HOOKS, TlsSettings
from cronwave_core.settings_base import ProcessSettings
from cronwave_core.suite_health import find_redis_server, wait_healthy, wait_redis
from cronwave_core.suite_processes import SuiteProcess, require_process

# Start order: the store first (it migrates the database), the planner last.
SERVICES = ("workflow-store", "leader-election", "dispatcher", "worker", "cron-planner")
#: The web console (``services/console``, HTTP, not gRPC): started last, only by a
#: suite configured with ``console=True`` (``cronwave up``, ``cronwave demo``).
CONSOLE = "console"
_MODULE = {
    **{name: name.replace("-", "_") for name in SERVICES},
    CONSOLE: "console",
}
_ADDR_VAR = {
    "workflow-store": "STORE_ADDR",
    "leader-election": "LEADER_ADDR",
    "dispatcher": "DISPATCHER_ADDR",
    "cron-planner": "PLANNER_ADDR",
    "worker": "WORKER_ADDR",
    CONSOLE: "CONSOLE_ADDR",
}
#: The gRPC service each process serves: its health is asked by that name, so a
#: server of another suite that took the port meanwhile is not taken for ours.
_GRPC_SERVICE = {
    "workflow-store": "cronwave.v1.WorkflowStoreService",
    "leader-election": "cronwave.v1.LeaderElectionService",
    "dispatcher": "cronwave.v1.DispatcherService",
    "cron-planner": "cronwave.v1.CronPlannerService",
    "worker": "cronwave.v1.WorkerService",
}
#: The services a suite runs more than one of by ``SuiteConfig.replicas`` (planners
#: and workers have counts of their own): each replica listens on its own port, and
#: every process is given all of them in the service's variable, so its calls spread
#: over them (``cronwave_core.targets``).
REPLICATED = ("workflow-store", "leader-election", "dispatcher")
#: A service whose port another process took before it could listen is started again
#: on a new port, at most this many times in all.
_PORT_ATTEMPTS = 3
METRICS_ADDR = PREFIX + "METRICS_ADDR"
#: What a service logs when it cannot listen (gRPC's bind error, or
#: cronwave_core.bootstrap's own).
_PORT_TAKEN = ("Address already in use", "cannot listen on", "Failed to bind to address")
_PORT_KEY = {
    "workflow-store": "store",
    "leader-election": "leader",
    "dispatcher": "dispatcher",
    "cron-planner": "planner",
    "worker": "worker",
    CONSOLE: "console",
}


#: The lowest port a suite picks for itself. Its picks lie between this and the
#: kernel's ephemeral range, which outgoing connections draw their local ports from: a
#: port a killed service freed is then free for its restart, not taken meanwhile by the
#: local end of some connection.
_LOWEST_OWN_PORT = 10_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: How many ports of the range are tried, one after another, before the kernel's pick.
_PICKS = 4096
#: ``LO-HI``: the ports a suite picks for itself instead of the default range (to keep
#: suites of one machine apart, as the tests' parallel processes do).
OWN_PORTS_VAR = PREFIX + "OWN_PORTS"
#: Ports this process handed out lately, never handed out again while remembered: a
#: port picked is free when picked, but its service binds it only a moment later.
_handed_out: dict[int, None] = {}
_REMEMBERED = 512


@functools.cache
def ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (where connections draw their
    local ports)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def own_port_range() -> tuple[int, int]:
    """The ports (lowest, highest) a suite picks for itself: CRONWAVE_OWN_PORTS, else
    from 10000 to just below the kernel's ephemeral range."""
    text = os.environ.get(OWN_PORTS_VAR, "").strip()
    if not text:
        return _LOWEST_OWN_PORT, ephemeral_low() - 1
    low, sep, high = text.partition("-")
    if sep and low.strip().isdigit() and high.strip().isdigit():
        lowest, highest = int(low), int(high)
        if 1024 <= lowest < highest <= 65_535:
            return lowest, highest
    raise ConfigurationError(
        f"{OWN_PORTS_VAR}: expected LO-HI with 1024 <= LO < HI <= 65535, got {text!r}"
    )


def free_port() -> int:
    """A port nobody uses right now and this process has not handed out lately: the
    first such port from a random place in the suite's own range (``own_port_range``),
    else the kernel's own pick."""
    lowest, highest = own_port_range()
    size = highest - lowest + 1
    start = random.randrange(size)
    for offset in range(min(size, _PICKS)):
        port = lowest + (start + offset) % size
        if port not in _handed_out and _bindable(port):
            return _hand_out(port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return _hand_out(int(s.getsockname()[1]))


def free_port_base(count: int, tries: int = 50) -> int:
    """A port N with N..N+count-1 free now, in the suite's own range as its other ports
    are (``own_port_range``: below the kernel's ephemeral range, where a connection to
    a port nobody listens on yet can be joined to itself, and a health check then reads
    its own request back): for ``cronwave up --port-base N``."""
    lowest, highest = own_port_range()
    for _ in range(tries):
        base = random.randrange(lowest, max(highest - count, lowest + 1))
        if all(_bindable(base + i) for i in range(count)):
            return base
    raise Unavailable(f"no {count} free ports in a row after {tries} tries")


def _bindable(port: int) -> bool:
    """Whether 127.0.0.1:``port`` can be bound now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _hand_out(port: int) -> int:
    _handed_out[port] = None
    while len(_handed_out) > _REMEMBERED:
        del _handed_out[next(iter(_handed_out))]
    return port


def parse_worker_pools(text: str) -> dict[str, int]:
    """``"critical=1,default=2"`` -> ``{"critical": 1, "default": 2}``."""
    pools: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        pool, sep, count = item.partition("=")
        if not sep or not pool.strip() or not count.strip().isdigit():
            raise ConfigurationError(
                f"CRONWAVE_WORKER_POOLS: expected QUEUE=COUNT[,QUEUE=COUNT...], got {text!r}"
            )
        pools[pool.strip()] = int(count)
    return pools


@dataclass
class Proc:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    address: str = ""  # gRPC address; empty for redis
    metrics_address: str = ""  # HOST:PORT of its /metrics; empty: none (redis, or off)
    # A new interpreter, or a child of the fork server (``cronwave_core.forked``).
    popen: subprocess.Popen[bytes] | ForkedProcess | None = None
    service: str | None = None  # which service it runs; None for redis
    index: int = 0  # its replica number
    extra_env: dict[str, str] = field(default_factory=dict)
    # Written to its standard input, then closed (the embedded Redis's configuration,
    # which holds its password: no command line does).
    stdin: bytes = b""

    @property
    def pid(self) -> int:
        return self.popen.pid if self.popen else -1

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


@dataclass
class SuiteConfig:
    data_dir: Path
    database_url: str | None = None  # None: the SQLite file in data_dir
    redis_url: str | None = None  # None: start an embedded redis-server
    ports: Mapping[str, int] | None = None  # None: the fixed defaults; {} : free ports
    planners: int = 1
    workers: int = 1
    env: Mapping[str, str] = field(default_factory=dict)
    start_timeout: timedelta = timedelta(seconds=60)
    grace: timedelta = timedelta(seconds=5)
    # Installed packages' processes to run too, after the store, by the names their
    # packages declare them under (``cronwave_core.suite_processes``), e.g. the billing
    # example's ("payment-gateway",).
    processes: tuple[str, ...] = ()
    # Priority pools: worker processes per queue, each consuming only its queue. None:
    # CRONWAVE_WORKER_POOLS in env ("critical=1,default=1,bulk=1"), else `workers`
    # processes on CRONWAVE_WORKER_QUEUES.
    worker_pools: Mapping[str, int] | None = None
    # Started for tests or drills: CRONWAVE_TEST_HOOKS=1, so CRONWAVE_FAULT and the
    # installed packages' drills work. Never for `cronwave up` / `cronwave demo`.
    test_hooks: bool = False
    # Plaintext and no authentication (CRONWAVE_INSECURE=1; loopback only). Else the
    # suite's local CA and certificates are made in the TLS dir when absent.
    insecure: bool = False
    # None: CRONWAVE_TLS_DIR when set (so that the suites of one test session share a
    # CA), else <data dir>/tls.
    tls_dir: Path | None = None
    # Also run the web console (HTTP), on ports["console"] (fixed defaults: 7407).
    console: bool = False
    # Processes per service of REPLICATED (unnamed: one), e.g. {"workflow-store": 2}:
    # every caller is given all of a service's replicas, its calls spread over them.
    # Two store replicas need a database they share (PostgreSQL, not a SQLite file).
    replicas: Mapping[str, int] = field(default_factory=dict)

    def with_processes(self, names: Iterable[str]) -> SuiteConfig:
        """This config, also running the installed packages' processes ``names``, each
        at the suite's own address (a ``CRONWAVE_<addr_var>`` passed on in ``env`` would
        point the suite's processes elsewhere, so it is dropped); refused, by
        ``require_process``, for a name no installed package declares."""
        added = {name: require_process(name) for name in names}
        own = {f"CRONWAVE_{process.addr_var}" for process in added.values()}
        env = {k: v for k, v in self.env.items() if k not in own}
        processes = (*(p for p in self.processes if p not in added), *added)
        return replace(self, processes=processes, env=env)


class Suite:
    """The five services (plus an embedded Redis when none is given).

    An embedded Redis takes a password made for this suite (``redis_password``): the
    suite's processes get it in their ``CRONWAVE_REDIS_URL`` (``redis_url``), a
    worker joining the suite reads it from the data dir (``cronwave_core.redis_password``)."""

    def __init__(self, config: SuiteConfig) -> None:
        self.config = config
        #: Its services are forked from the fork server (``cronwave_core.forked``).
        self.fork = ProcessSettings.from_env({**os.environ, **config.env}).fork_services
        config.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = config.data_dir / "logs"
        self.log_dir.mkdir(exist_ok=True)
        if config.ports is None:
            ports = dict(DEFAULT_PORTS)
        else:
            # The ports given are the suite's even before their services bind them:
            # never picked for another of its processes (its metrics, a replica).
            for port in filter(None, config.ports.values()):
                _hand_out(port)
            ports = {k: config.ports.get(k) or free_port() for k in DEFAULT_PORTS}
        #: The installed packages' processes this suite runs (``suite_processes``).
        self.extra: dict[str, SuiteProcess] = {}
        for name in config.processes:
            process = self.extra[name] = require_process(name)
            given = (config.ports or {}).get(process.port_key)
            ports[process.port_key] = given or (
                process.default_port if config.ports is None else free_port()
            )
        if config.console:
            given = (config.ports or {}).get("console")
            ports["console"] = given or (CONSOLE_PORT if config.ports is None else free_port())
        self.ports = ports
        #: The ports of each replicated service's replicas after the first (which
        #: listens on ``ports``), by port key.
        self.replica_ports: dict[str, list[int]] = {}
        for service, count in config.replicas.items():
            if service not in REPLICATED or count < 1:
                raise ConfigurationError(
                    f"replicas: expected counts of at least 1 for {', '.join(REPLICATED)}, "
                    f"got {service}={count}"
                )
            if count > 1 and service == "workflow-store" and not config.database_url:
                raise ConfigurationError(
                    "replicas: workflow-store replicas share one database, and a SQLite "
                    "file is one process's: give a PostgreSQL database_url"
                )
            self.replica_ports[self._port_keys()[service]] = [free_port() for _ in range(count - 1)]
        #: The embedded Redis's password ("" when the suite uses a Redis it was given).
        self.redis_password = "" if config.redis_url else redis_password.new_password()
        self.redis_url = config.redis_url or redis_password.with_password(
            f"redis://127.0.0.1:{ports['redis']}/0", self.redis_password
        )
        self.procs: dict[str, Proc] = {}
        self.redis: Proc | None = None
        tls_env = os.environ.get(PREFIX + "TLS_DIR")
        self.tls_dir = config.tls_dir or (Path(tls_env) if tls_env else config.data_dir / "tls")
        if not config.insecure:
            ensure_pki(self.tls_dir)

    # connecting ----------------------------------------------------------------
    def tls(self, identity: str = LOCAL_ADMIN, token: str = "") -> TlsSettings:
        """How to call this suite as ``identity`` (a certificate in its TLS dir: a
        service's name, ``local-admin`` or ``client``), sending ``token`` when given."""
        return TlsSettings(
            insecure=self.config.insecure,
            tls_dir=self.tls_dir,
            identity=identity,
            ca=self.tls_dir / "ca.pem",
            cert=self.tls_dir / f"{identity}.pem",
            key=self.tls_dir / f"{identity}-key.pem",
            token=token,
        )

    def channel(self, target: str, identity: str = LOCAL_ADMIN, token: str = "") -> grpc.Channel:
        """A channel to ``target`` (a service's name, or ``HOST:PORT``) as ``identity``."""
        address = self.address(target) if target in self._port_keys() else target
        return new_channel(address, (), self.tls(identity, token))

    # the processes it knows --------------------------------------------------
    def _port_keys(self) -> dict[str, str]:
        return {**_PORT_KEY, **{name: p.port_key for name, p in self.extra.items()}}

    def _addr_vars(self) -> dict[str, str]:
        return {**_ADDR_VAR, **{name: p.addr_var for name, p in self.extra.items()}}

    def _grpc_service(self, service: str) -> str:
        return self.extra[service].grpc_service if service in self.extra else _GRPC_SERVICE[service]

    # addresses ---------------------------------------------------------------
    def address(self, service: str) -> str:
        """Where ``service``'s first replica listens (HOST:PORT)."""
        return f"127.0.0.1:{self.ports[self._port_keys()[service]]}"

    def addresses(self, service: str) -> list[str]:
        """Where each of ``service``'s replicas listens, the first first."""
        extra = self.replica_ports.get(self._port_keys()[service], [])
        return [self.address(service), *(f"127.0.0.1:{port}" for port in extra)]

    def peer_address(self, service: str) -> str:
        """What ``service``'s callers are given: its address, or its replicas'."""
        return ",".join(self.addresses(service))

    def replicas(self, service: str) -> int:
        """How many processes of ``service`` (of REPLICATED) this suite runs."""
        return len(self.addresses(service))

    @property
    def store_addr(self) -> str:
        return self.peer_address("workflow-store")

    @property
    def dispatcher_addr(self) -> str:
        return self.peer_address("dispatcher")

    @property
    def leader_addr(self) -> str:
        return self.peer_address("leader-election")

    @property
    def planner_addr(self) -> str:
        return self.address("cron-planner")

    @property
    def console_url(self) -> str:
        """The web console's URL (a suite configured with ``console=True``)."""
        return f"http://{self.address(CONSOLE)}/"

    def base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWAVE_")}
        env["CRONWAVE_DATA_DIR"] = str(self.config.data_dir)
        if self.config.database_url:
            env["CRONWAVE_DATABASE_URL"] = self.config.database_url
        env["CRONWAVE_REDIS_URL"] = self.redis_url
        port_keys = self._port_keys()
        for service, var in self._addr_vars().items():
            if port_keys[service] in self.ports:
                env["CRONWAVE_" + var] = self.peer_address(service)
        env["CRONWAVE_GRACE"] = str(self.config.grace.total_seconds())
        env["CRONWAVE_TLS_DIR"] = str(self.tls_dir)
        if self.config.insecure:
            env["CRONWAVE_INSECURE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.config.env)
        if self.config.test_hooks:
            env[TEST_HOOKS] = "1"
        return env

    # lifecycle ---------------------------------------------------------------
    def start(self) -> Suite:
        """Start Redis (when embedded) and the store, then every other service at
        once (each tolerates the others starting: it retries what it needs from
        them), and return once every one answers its health check."""
        if self.fork:
            use_fork_server()
        try:
            if self.config.redis_url is None:
                self.start_redis()
            # One store at a time: the first migrates the database.
            for index in range(self.replicas("workflow-store")):
                self.start_service("workflow-store", index)
            for name in self.config.processes:
                self.start_service(name)
            for attempt in range(1, _PORT_ATTEMPTS + 1):
                ports = self._port_plan()
                spawned = [
                    self.spawn_service(service, index)
                    for service in ("leader-election", "dispatcher")
                    for index in range(self.replicas(service))
                ]
                spawned += self.start_workers(wait=False)
                spawned += [
                    self.spawn_service("cron-planner", index=i) for i in range(self.config.planners)
                ]
                started = [self.wait_started(proc) for proc in spawned]
                if self._port_plan() == ports:
                    break
                # One of them moved to a new port: the others were told the old one.
                self.stop_procs(started)
                if attempt == _PORT_ATTEMPTS:
                    raise Unavailable(f"the suite's ports kept being taken: {self.ports}")
            if self.config.console:
                self.start_service(CONSOLE)
        except BaseException:
            self.stop()
            raise
        return self

    def _port_plan(self) -> tuple[dict[str, int], dict[str, list[int]]]:
        """Every port the suite's processes were told (to notice one that moved)."""
        return dict(self.ports), {k: list(v) for k, v in self.replica_ports.items()}

    @property
    def redis_password_file(self) -> Path | None:
        """Where the embedded Redis's password is kept (None: no embedded Redis)."""
        if not self.redis_password:
            return None
        return redis_password.path_in(self.config.data_dir)

    def start_redis(self) -> Proc:
        """The embedded redis-server, on loopback, requiring the suite's password: kept
        in the data dir first (mode 0600), then given to the server on its standard
        input (``-``), so that no command line shows it."""
        port = self.ports["redis"]
        redis_dir = self.config.data_dir / "redis"
        redis_dir.mkdir(exist_ok=True)
        redis_password.keep(self.config.data_dir, self.redis_password)
        argv = [
            find_redis_server(), "-", "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(redis_dir),
        ]  # fmt: skip
        proc = Proc("redis", argv, dict(os.environ), self.log_dir / "redis.log")
        proc.stdin = redis_password.server_config(self.redis_password)
        self._spawn(proc)
        self.redis = proc
        wait_redis(port, self.config.start_timeout, self.redis_password)
        return proc

    def proc_name(self, service: str, index: int = 0) -> str:
        return service if index == 0 else f"{service}-{index}"

    def start_workers(self, wait: bool = True) -> list[Proc]:
        """The worker processes: per pool when pools are configured, named
        ``worker-<pool>[-i]``, else ``workers`` of them."""
        pools = self.config.worker_pools
        if pools is None:
            pools = parse_worker_pools(self.config.env.get("CRONWAVE_WORKER_POOLS", ""))
        if not pools:
            procs = [self.spawn_service("worker", index=i) for i in range(self.config.workers)]
        else:
            procs, index = [], 0
            for pool, count in pools.items():
                for i in range(count):
                    name = f"worker-{pool}" + (f"-{i}" if i else "")
                    queues = {"CRONWAVE_WORKER_QUEUES": pool, "CRONWAVE_WORKER_ID": name}
                    procs.append(
                        self.spawn_service("worker", index=index, name=name, extra_env=queues)
                    )
                    index += 1
        if wait:
            for proc in procs:
                self.wait_started(proc)
        return procs

    def start_service(
        self,
        service: str,
        index: int = 0,
        wait: bool = True,
        name: str | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> Proc:
        proc = self.spawn_service(service, index, name, extra_env)
        return self.wait_started(proc) if wait else proc

    def spawn_service(
        self,
        service: str,
        index: int = 0,
        name: str | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> Proc:
        """Start one service's process, without waiting for it to answer."""
        name = name or self.proc_name(service, index)
        env = {**self.base_env(), **(extra_env or {})}
        addr_var = "CRONWAVE_" + self._addr_vars()[service]
        if index:
            # Extra replicas listen on their own port (a replicated service's, the one
            # its callers were given); the first keeps the known one.
            extra = self.replica_ports.get(self._port_keys()[service], [])
            port = extra[index - 1] if index <= len(extra) else free_port()
            env[addr_var] = f"127.0.0.1:{port}"
        elif addr_var not in {**self.config.env, **(extra_env or {})}:
            # Its callers may be given all its replicas; it listens on its own address
            # (unless the suite's env or the caller says where).
            env[addr_var] = self.address(service)
        if service == "cron-planner":
            env.setdefault("CRONWAVE_CANDIDATE", f"{name}@{socket.gethostname()}")
        # Each process presents its service's certificate (unless the env names files).
        env.setdefault("CRONWAVE_TLS_IDENTITY", service)
        # -P: the caller's working directory must not shadow a module of ours.
        module = self.extra[service].module if service in self.extra else _MODULE[service]
        argv = [sys.executable, "-P", "-m", module]
        addr = env[addr_var]
        # Each process its own /metrics port, unless the suite's env says where (or,
        # empty, that there is none).
        if METRICS_ADDR not in self.config.env:
            env[METRICS_ADDR] = f"127.0.0.1:{free_port()}"
        proc = Proc(name, argv, env, self.log_dir / f"{name}.log", addr)
        proc.metrics_address = env.get(METRICS_ADDR, "")
        proc.service, proc.index, proc.extra_env = service, index, dict(extra_env or {})
        self._spawn(proc)
        self.procs[name] = proc
        return proc

    def wait_started(self, proc: Proc) -> Proc:
        """Wait until ``proc`` answers its health check. A service that could not
        listen because its port was taken (free when picked, taken before it listened:
        another process's pick, or an outgoing connection's) is started again on a new
        port, at most ``_PORT_ATTEMPTS`` times in all."""
        service = proc.service
        assert service is not None and proc.address, "not a spawned service"
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                if service == CONSOLE:
                    wait_http_healthy(proc.address, self.config.start_timeout, proc.alive)
                else:
                    wait_healthy(
                        proc.address,
                        self.config.start_timeout,
                        self._grpc_service(service),
                        alive=proc.alive,
                        tls=self.tls(),
                    )
                return proc
            except Unavailable as exc:
                tail = proc.log_path.read_text(errors="replace")[-2000:]
                taken = any(marker in tail for marker in _PORT_TAKEN)
                if not (taken and not proc.alive() and attempt < _PORT_ATTEMPTS):
                    raise Unavailable(
                        f"{proc.name} did not start: {exc}\n--- {proc.log_path}:\n{tail}"
                    ) from exc
                extra = self.replica_ports.get(self._port_keys()[service], [])
                if not proc.index:
                    self.ports[self._port_keys()[service]] = free_port()
                elif proc.index <= len(extra):
                    extra[proc.index - 1] = free_port()
                proc = self.spawn_service(service, proc.index, proc.name, proc.extra_env)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _spawn(self, proc: Proc) -> None:
        if not proc.stdin:
            proc.popen = start_module(proc.argv, proc.env, proc.log_path, fork=self.fork)
            return
        with proc.log_path.open("ab") as log:
            popen = proc.popen = subprocess.Popen(
                proc.argv, env=proc.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE, start_new_session=True,
            )  # fmt: skip
        if popen.stdin is not None:
            # A process that exited at once closed its end: its log says why.
            with contextlib.suppress(BrokenPipeError), popen.stdin as pipe:
                pipe.write(proc.stdin)

    def restart(self, name: str) -> Proc:
        old = self.redis if name == "redis" and self.redis else self.procs[name]
        if old.alive():
            self.stop_proc(old)
        self._spawn(old)
        if old.service == CONSOLE:
            wait_http_healthy(old.address, self.config.start_timeout, old.alive)
        elif old.address:
            assert old.service is not None, "a service's process"
            service = self._grpc_service(old.service)
            wait_healthy(
                old.address, self.config.start_timeout, service, alive=old.alive, tls=self.tls()
            )
        elif old is self.redis:
            wait_redis(self.ports["redis"], self.config.start_timeout, self.redis_password)
        return old

    def signal(self, name: str, sig: int) -> None:
        proc = self.redis if name == "redis" else self.procs[name]
        if proc and proc.popen:
            os.kill(proc.popen.pid, sig)

    def stop_proc(self, proc: Proc) -> None:
        if proc.popen is None or proc.popen.poll() is not None:
            return
        try:
            os.kill(proc.popen.pid, signal.SIGCONT)  # a stopped process cannot handle SIGTERM
            proc.popen.send_signal(signal.SIGTERM)
            proc.popen.wait(timeout=self.config.grace.total_seconds() + 5)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait(timeout=10)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """Stop everything this suite started, tier by tier (``stop_order``), each
        tier's processes at once; the first error any stop raised, once all were tried."""
        errors = [error for tier in self.stop_order() for error in self.stop_procs(tier)]
        if errors:
            raise errors[0]

    def stop_order(self) -> list[list[Proc]]:
        """The tiers a stop goes through: the planners (nothing new is fired), the other
        services but the store and the installed packages' processes (a worker hands its
        runs back to the store, a job finishing meanwhile may still call its package's
        server, as billing charges the gateway), those, then Redis."""
        procs = list(self.procs.values())
        planners = [p for p in procs if p.service == "cron-planner"]
        stores = [p for p in procs if p.service == "workflow-store" or p.service in self.extra]
        others = [p for p in procs if p not in planners and p not in stores]
        return [planners, others, stores, [self.redis] if self.redis else []]

    def stop_procs(self, procs: list[Proc]) -> list[Exception]:
        """Stop ``procs`` at once (each gets its SIGTERM, then each is waited for and
        killed past its grace), so that it takes as long as the slowest, not their
        sum; every one is tried, and what their stops raised is returned."""
        errors: list[Exception] = []

        def stop_one(proc: Proc) -> None:
            try:
                self.stop_proc(proc)
            except Exception as exc:
                errors.append(exc)

        if len(procs) == 1:
            stop_one(procs[0])
        elif procs:
            with ThreadPoolExecutor(len(procs), thread_name_prefix="suite-stop") as pool:
                list(pool.map(stop_one, procs))
        return errors

    def pids(self) -> list[int]:
        procs = [*self.procs.values(), *([self.redis] if self.redis else [])]
        return [p.pid for p in procs if p.alive()]

    def __enter__(self) -> Suite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
