"""``cronwave up``: the whole suite in the foreground, until Ctrl-C or SIGTERM.

Also what the demos share with it: a suite configured from the environment, started
and always stopped by pid, recorded in its data dir while it runs
(``cronwave._suite_record``), and its table of processes."""

from __future__ import annotations

import errno
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.table import Table
from rich.text import Text

from cronwave import _suite_record
from cronwave.cli._console import (
    SERVICE_MODULES,
    chosen_data_dir,
    err,
    fail,
    out,
    reported_errors,
    server_modules,
)
from cronwave_core.errors import ConfigurationError, FailedPrecondition
from cronwave_core.redis_password import without_password
from cronwave_server.cli._jobs_option import HELP, with_job_modules

if TYPE_CHECKING:
    from cronwave_core.suite import Suite, SuiteConfig

app = typer.Typer()

# Variables the suite sets for its processes itself; the rest of CRONWAVE_* passes through.
_SUITE_OWNED = {
    "CRONWAVE_DATA_DIR",
    # Each process's certificate is the suite's to choose; the caller's own (and its
    # API key) are not passed on.
    "CRONWAVE_INSECURE",
    "CRONWAVE_TLS_DIR",
    "CRONWAVE_TLS_IDENTITY",
    "CRONWAVE_TLS_CA",
    "CRONWAVE_TLS_CERT",
    "CRONWAVE_TLS_KEY",
    "CRONWAVE_TOKEN",
    "CRONWAVE_DATABASE_URL",
    "CRONWAVE_REDIS_URL",
    "CRONWAVE_STORE_ADDR",
    "CRONWAVE_LEADER_ADDR",
    "CRONWAVE_DISPATCHER_ADDR",
    "CRONWAVE_PLANNER_ADDR",
    "CRONWAVE_WORKER_ADDR",
    "CRONWAVE_CONSOLE_ADDR",
}

PORT_OWNERS = {
    "store": "workflow-store",
    "leader": "leader-election",
    "dispatcher": "dispatcher",
    "planner": "cron-planner",
    "worker": "worker",
    "redis": "embedded redis",
    "console": "console",
}


def suite_config(
    data_dir: Path,
    *,
    ports: Mapping[str, int] | None,
    planners: int = 1,
    workers: int = 1,
    environ: Mapping[str, str] | None = None,
    insecure: bool = False,
) -> SuiteConfig:
    """A suite in ``data_dir`` that uses ``CRONWAVE_DATABASE_URL`` / ``CRONWAVE_REDIS_URL``
    when set (else SQLite in the data dir / an embedded redis-server) and passes every
    other ``CRONWAVE_*`` setting on to its processes but their certificates: with
    mutual TLS unless ``insecure`` (or ``CRONWAVE_INSECURE=1``)."""
    from cronwave_core.suite import SuiteConfig

    env = os.environ if environ is None else environ
    from cronwave_core.settings import check_env

    check_env(env)  # a malformed variable stops here, named
    from cronwave_core.settings import TlsSettings

    return SuiteConfig(
        insecure=insecure or TlsSettings.from_env(env).insecure,
        data_dir=data_dir.expanduser().resolve(),
        database_url=env.get("CRONWAVE_DATABASE_URL") or None,
        redis_url=env.get("CRONWAVE_REDIS_URL") or None,
        ports=ports,
        planners=planners,
        workers=workers,
        env={k: v for k, v in env.items() if k.startswith("CRONWAVE_") and k not in _SUITE_OWNED},
    )


#: The port each service gets from ``--port-base N``: N, N+1, ... in this order.
#: (``cronwave_core.settings.DEFAULT_PORTS``'s order, spelled here so that the CLI's
#: help needs no settings; ``tests/cli/test_suite_discovery.py`` holds them equal.)
PORT_ORDER = ("store", "leader", "dispatcher", "planner", "worker", "redis")
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


def up_ports(port_base: int | None, environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """The ports ``cronwave up`` serves on: a service whose ``CRONWAVE_*_ADDR`` is set
    gets that address's port; the others ``port_base + i`` in ``PORT_ORDER`` when
    ``port_base`` is given, else their fixed defaults. ``ConfigurationError`` names a
    variable whose host is not loopback (the suite listens on 127.0.0.1 only)."""
    from cronwave_core.settings import DEFAULT_PORTS

    env = os.environ if environ is None else environ
    ports = {
        key: (DEFAULT_PORTS[key] if port_base is None else port_base + i)
        for i, key in enumerate(PORT_ORDER)
    }
    for key in PORT_ORDER:
        var = f"CRONWAVE_{key.upper()}_ADDR"
        value = env.get(var)
        if key == "redis" or not value:
            continue
        if "," in value:
            raise ConfigurationError(
                f"{var}: `cronwave up` runs one process of each service, on one HOST:PORT, "
                f"got the list {value!r}; give one address or unset it"
            )
        host, _, port = value.rpartition(":")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(f"{var}: expected HOST:PORT, got {value!r}")
        if host not in _LOOPBACK_HOSTS:
            raise ConfigurationError(
                f"{var}: `cronwave up` serves on 127.0.0.1 only, got {value!r}; "
                f"give 127.0.0.1:{port} or unset it"
            )
        ports[key] = int(port)
    doubled = sorted({p for p in ports.values() if list(ports.values()).count(p) > 1})
    if doubled:
        raise ConfigurationError(
            f"two services of the suite would share port {doubled[0]}: "
            "check --port-base and the CRONWAVE_*_ADDR variables"
        )
    return ports


def console_port(port_base: int | None, environ: Mapping[str, str] | None = None) -> int:
    """The web console's port under ``cronwave up``: ``CRONWAVE_CONSOLE_ADDR``'s when
    set, else the one after the suite's last (``port_base + 6``) with ``--port-base``,
    else 7407."""
    from cronwave_core.console_settings import CONSOLE_PORT

    env = os.environ if environ is None else environ
    value = env.get("CRONWAVE_CONSOLE_ADDR")
    if value:
        port = value.rpartition(":")[2]
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(f"CRONWAVE_CONSOLE_ADDR: expected HOST:PORT, got {value!r}")
        return int(port)
    return CONSOLE_PORT if port_base is None else port_base + len(PORT_ORDER)


def port_in_use(port: int) -> bool:
    """True when something listens on (or holds) 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # REUSEADDR: a port in TIME_WAIT is free to listen on; a listener is not.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def busy_ports(suite: Suite) -> list[tuple[str, int]]:
    """The suite's fixed ports that another process holds, with who needs them."""
    needed = {k: p for k, p in suite.ports.items() if k != "redis" or not suite.config.redis_url}
    return [(PORT_OWNERS[k], p) for k, p in needed.items() if port_in_use(p)]


def mask(url: str) -> str:
    """``url`` as it may be shown: without its password (``cronwave_core.redaction``)."""
    from cronwave_core.redaction import redact_url

    return redact_url(url)


def suite_table(suite: Suite) -> Table:
    table = Table(title="cronwave suite", title_justify="left")
    for name in ("service", "address", "metrics", "pid", "log"):
        table.add_column(name, no_wrap=name != "log", overflow="fold")
    procs = ([suite.redis] if suite.redis else []) + list(suite.procs.values())
    for proc in procs:
        address = proc.address or mask(suite.redis_url)
        metrics = f"http://{proc.metrics_address}/metrics" if proc.metrics_address else "-"
        table.add_row(proc.name, address, metrics, str(proc.pid), Text(str(proc.log_path)))
    return table


def suite_facts(suite: Suite) -> Table:
    config = suite.config
    database = config.database_url or f"sqlite:///{config.data_dir / 'cronwave.db'}"
    redis = mask(suite.redis_url) + ("" if config.redis_url else " (embedded)")
    otlp = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    rows = [
        ("data dir", str(config.data_dir)),
        ("log dir", str(suite.log_dir)),
        ("database", mask(database)),
        ("redis", redis),
        ("spans", f"OTLP {otlp}" if otlp else str(config.data_dir / "spans")),
        (
            "security",
            "insecure: plaintext, no authentication, loopback only"
            if config.insecure
            else f"mutual TLS, CA and certificates in {suite.tls_dir}; the CLI calls as "
            "local-admin (`cronwave auth create-key` for others)",
        ),
    ]
    if config.console:
        rows.append(("console", suite.console_url))
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, Text(value))
    return table


def _interrupt(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def running(suite: Suite) -> Iterator[Suite]:
    """Start ``suite`` and stop everything it started when the block ends, whatever
    ends it. SIGTERM inside the block acts like Ctrl-C, so ``finally`` runs; while
    stopping, both are ignored so a second Ctrl-C cannot strand processes.

    Once healthy, the suite is recorded in its data dir (``suite.json``), marked
    stopped once stopped; a data dir whose recorded suite still runs is refused
    (``FailedPrecondition``) before anything starts."""
    data_dir = suite.config.data_dir
    other = _suite_record.read(data_dir)
    if other is not None and other.running():
        raise FailedPrecondition(
            f"data dir {data_dir}: a suite already runs there (pid {other.pid}); use it, "
            "or stop it first, or give another --data-dir"
        )
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if in_main else None
    record = None
    try:
        suite.start()
        record = _suite_record.started(data_dir, _addresses(suite), **_joining(suite))
        yield suite
    finally:
        if in_main:
            prev_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            suite.stop()
        finally:
            if record is not None:
                _suite_record.stopped(data_dir, record)
            if in_main:
                signal.signal(signal.SIGINT, prev_int)
                signal.signal(signal.SIGTERM, previous)


def _joining(suite: Suite) -> dict[str, Any]:
    """What a client or a worker joining the suite needs besides its addresses: its
    certificates (or that it has none), its Redis and the namespace of its keys."""
    extra: dict[str, Any] = (
        {"insecure": True} if suite.config.insecure else {"tls_dir": str(suite.tls_dir)}
    )
    # Without its password: suite.json is no place for a secret. A worker joining the
    # suite reads the embedded Redis's password from its file (mode 0600); one joining a
    # suite whose given Redis has one is given it (CRONWAVE_REDIS_URL), and told so.
    extra["redis_url"] = without_password(suite.redis_url)
    if suite.redis_password_file is not None:
        extra["redis_password_file"] = str(suite.redis_password_file)
    elif urlsplit(suite.redis_url).password is not None:
        extra["redis_password"] = True
    namespace = suite.config.env.get("CRONWAVE_NAMESPACE")
    if namespace:
        extra["namespace"] = namespace
    return extra


def _addresses(suite: Suite) -> dict[str, str]:
    """The suite's gRPC addresses, by setting name (``store``: CRONWAVE_STORE_ADDR)."""
    return {key: f"127.0.0.1:{suite.ports[key]}" for key in _suite_record.SERVICES}


def _watch(suite: Suite, tick: float = 0.5) -> None:
    """Report processes that exit on their own. Runs until interrupted: that is the
    point of ``up``."""
    reported: set[str] = set()
    while True:
        procs = ([suite.redis] if suite.redis else []) + list(suite.procs.values())
        for proc in procs:
            if proc.name in reported or proc.alive():
                continue
            reported.add(proc.name)
            code = proc.popen.returncode if proc.popen else None
            err().print(
                f"[red]{proc.name} exited (code {code}); see {proc.log_path}[/]", soft_wrap=True
            )
        time.sleep(tick)


@app.command()
def up(
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="SQLite file, logs, spans and the suite's record go here (default: "
            "CRONWAVE_DATA_DIR, else $XDG_STATE_HOME/cronwave or ~/.local/state/cronwave).",
        ),
    ] = None,
    planners: Annotated[int, typer.Option("--planners", min=1, help="Planner replicas.")] = 1,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Worker processes.")] = 1,
    port_base: Annotated[
        int | None,
        typer.Option(
            "--port-base",
            min=1024,
            max=65535 - len(PORT_ORDER),
            help=f"Serve on ports N..N+{len(PORT_ORDER) - 1} ({', '.join(PORT_ORDER)}) "
            f"and the web console on N+{len(PORT_ORDER)}, instead of 7401-7405, 7479 and "
            "7407.",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[str | None, typer.Option("--jobs", help=HELP)] = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="Plaintext gRPC with no authentication, on loopback only "
            "(CRONWAVE_INSECURE=1). Default: mutual TLS with the suite's own CA in "
            "<data dir>/tls.",
        ),
    ] = False,
) -> None:
    """Run the whole suite until Ctrl-C (or SIGTERM), then stop it, with every server the
    installed job packages declare (such as a job's sandbox payment gateway).

    Ports: a service's CRONWAVE_*_ADDR when set, else --port-base N + its place, else
    the fixed defaults. The suite is recorded in the data dir while it runs, so a
    command run from any folder with that data dir (the default one, or --data-dir /
    CRONWAVE_DATA_DIR) talks to it."""
    with server_modules("cronwave up", SERVICE_MODULES):
        from cronwave_core.suite import Suite
    from cronwave_core.settings import ProcessSettings
    from cronwave_core.settings_base import user_data_dir

    with reported_errors():
        process = ProcessSettings.from_env()
        config = suite_config(
            data_dir or chosen_data_dir() or process.data_dir,
            ports=up_ports(port_base),
            planners=planners,
            workers=workers,
            environ=with_job_modules(os.environ, jobs),
            insecure=insecure,
        )
        ports = {**up_ports(port_base), "console": console_port(port_base)}
        config = replace(config, ports=ports, console=True)
        from cronwave_core.suite_processes import declared_processes

        # The installed job packages' servers (entry point group cronwave.processes): the
        # jobs those packages register with the workers need them.
        config = config.with_processes(declared_processes())
        suite = Suite(config)
        busy = busy_ports(suite)
        if busy:
            first = busy[0][1]
            fail(
                "; ".join(f"port {port} ({owner}) is already in use" for owner, port in busy),
                "Another `cronwave up` is probably running: use it (the CLI talks to it) or "
                "stop it with Ctrl-C in its terminal, or run this one beside it with "
                "--port-base (e.g. --port-base 7501). Otherwise free the port "
                f"(`ss -ltnp 'sport = :{first}'` shows who holds it). `cronwave demo` runs on "
                "free ports and does not need them.",
            )
        console = out()
        console.print(f"starting cronwave in {config.data_dir} ...")
        # The default data dir is found from any folder; another must be named.
        listing = (
            "cronwave schedule list"
            if config.data_dir == user_data_dir(os.environ).resolve()
            else f"cronwave --data-dir {config.data_dir} schedule list"
        )
        try:
            with running(suite):
                console.print(suite_table(suite))
                console.print(suite_facts(suite))
                console.print(
                    f"[green]cronwave is up.[/] Console: {suite.console_url} ; try "
                    f"`{listing}` in another terminal; Ctrl-C stops everything.",
                    soft_wrap=True,
                )
                _watch(suite)
        except KeyboardInterrupt:
            pass
        console.print(f"stopped {len(suite.procs) + (1 if suite.redis else 0)} processes")
