"""Service processes forked from a server that has imported their libraries once.

A service started as ``python -P -m <module>`` spends most of its start-up CPU on
imports: about 0.5 s of the workflow-store's 0.7 s, 0.35 s of another service's 0.4 s
(grpc, protobuf, SQLAlchemy, OpenTelemetry, redis, dramatiq, the generated messages).
Every suite (``cronwave up``, ``cronwave demo``, a test's) therefore turns the fork
server on (``use_fork_server``) and forks each service from multiprocessing's fork
server, which imported those libraries once (``PRELOAD``): the service's own modules
are then imported in the child as ``python -m`` would, with the environment, working
directory, log and session the suite gives it, and its ``__main__`` runs; ``ps``
shows it as the ``python -P -m <module>`` it stands for. A service then starts on
0.13-0.19 s of CPU instead of 0.43-0.52 s (the store on 0.29 s instead of 1.21 s, or
0.40 s instead of 1.01 s when it migrates a new database), and the fork server's own
0.8 s is paid once per suite (``cronwave bench startup``, docs/benchmarks.md). No
module that holds state is preloaded, so no service carries another's (its metrics,
for one): libraries; of cronwave's own library, only what every service's main
imports anyway (a suite's four services other than the store start on about 0.08 s
of CPU less each with it); and of the services' own modules, only the store's table
models and records, definitions and most of the store's own import time (a forked
store is serving on about 0.17 s of CPU with them, 0.20-0.29 s without).

The fork server itself never starts a thread, a gRPC channel or a connection: what
it forks holds nothing a child could share by mistake. It is started by the first
fork, with this process's environment, and ends when this process does.

``ForkedProcess`` is the child as the suite tracks a ``subprocess.Popen``: its pid,
``poll``, ``wait``, ``returncode``, ``send_signal`` and ``kill``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import IO

#: Libraries the fork server imports once; every service imports most of them.
PRELOAD = (
    "grpc",
    "grpc_health.v1.health_pb2_grpc",
    "google.protobuf.json_format",
    "sqlalchemy.orm",
    "sqlalchemy.dialects.postgresql",
    "sqlalchemy.dialects.sqlite",
    "psycopg",
    # The store's migrations (it runs them as it starts) and its query spans.
    "alembic.config",
    "alembic.command",
    "alembic.runtime.environment",
    "opentelemetry.instrumentation.sqlalchemy",
    # The console's web stack.
    "uvicorn",
    "starlette.applications",
    "starlette.routing",
    "starlette.responses",
    "jinja2",
    "python_multipart",
    "redis",
    "dramatiq",
    "dramatiq.brokers.redis",
    "prometheus_client",
    "opentelemetry.sdk.trace",
    "opentelemetry.instrumentation.grpc",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "cronwave_proto.v1.workflow_store_service_pb2_grpc",
    "cronwave_proto.v1.dispatcher_service_pb2_grpc",
    "cronwave_proto.v1.cron_planner_service_pb2_grpc",
    "cronwave_proto.v1.leader_election_service_pb2_grpc",
    "cronwave_proto.v1.worker_service_pb2_grpc",
    "cronwave_proto.v1.api_key_service_pb2_grpc",
    "orjson",
    "tenacity",
    "croniter",
    "setproctitle",
    # What the five services' mains all import of cronwave's own library (the
    # bootstrap, its channels, settings, security and telemetry): none reads a setting
    # or starts anything at import, and the one metric among them (spans dropped) is
    # imported by every process a suite forks, the console's included.
    "cronwave_core.bootstrap",
    "cronwave_core.entry",
    "cronwave_core.channels",
    "cronwave_core.telemetry.setup",
    "cronwave_core.telemetry.tracing",
    # The store's table models and records: definitions only (no metric, setting or
    # connection), and most of its own modules' import time.
    "workflow_store.models",
    "workflow_store.records",
    # Last: freezes what the lines above built, so the children share it for good.
    "cronwave_core.heap_preloaded",
)

_lock = threading.Lock()
_context: ForkServerContext | None = None


def use_fork_server(on: bool = True) -> None:
    """Fork this process's suites' services from the fork server (``on``), or start
    each as a new interpreter (the default)."""
    global _context
    with _lock:
        if not on:
            _context = None
            return
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(list(PRELOAD))
            _context = context


def fork_server_on() -> bool:
    return _context is not None


class ForkedProcess:
    """A process forked from a fork server, tracked as a ``subprocess.Popen`` is (its
    ``stdin`` and ``stdout``: pipes given to it, or None). Several threads may ask
    whether it ended at once: the fork server writes its status once, and one of them
    reads it."""

    def __init__(
        self,
        process: BaseProcess,
        args: Sequence[str],
        stdin: IO[bytes] | None = None,
        stdout: IO[bytes] | None = None,
    ) -> None:
        self._process = process
        self.args = list(args)
        self.pid: int = process.pid or -1
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self._sentinel = process.sentinel
        self._reaping = threading.Lock()

    def poll(self) -> int | None:
        return self._ended(0.0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._ended(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _ended(self, timeout: float | None) -> int | None:
        """The exit code once the process has ended, else None after ``timeout``."""
        if self.returncode is not None:
            return self.returncode
        try:
            if timeout == 0:  # a poll(2) of the sentinel: a worker's pool polls every
                # process it may hand a run to, and multiprocessing's wait builds a
                # selector each time (3.1 us against 0.7 us)
                poller = select.poll()
                poller.register(self._sentinel, select.POLLIN)
                ended = bool(poller.poll(0))
            else:
                ended = bool(multiprocessing.connection.wait([self._sentinel], timeout))
        except (OSError, ValueError):  # closed by another thread that read the status
            ended = True
        if not ended:
            return None
        with self._reaping:
            if self.returncode is None:
                self._process.join(0)
                code = self._process.exitcode
                self.returncode = code if code is not None else -1
                self._process.close()  # its status pipe: one per process started
        return self.returncode


def fork_module(
    module: str, args: Sequence[str], env: Mapping[str, str], log_path: Path
) -> ForkedProcess:
    """``python -P -m module`` with ``env``, its output appended to ``log_path``, in a
    session of its own: forked from the fork server (``use_fork_server`` first)."""
    context = _context
    if context is None:
        raise RuntimeError("use_fork_server() was not called")
    title = " ".join(args)
    process = context.Process(
        target=_run_module,
        args=(module, dict(env), str(log_path), os.getcwd(), title),
        daemon=False,
    )
    process.start()
    # The suite stops what it starts; multiprocessing would otherwise wait for it
    # when this process exits.
    multiprocessing.process._children.discard(process)  # type: ignore[attr-defined]
    return ForkedProcess(process, args)


def start_module(
    argv: Sequence[str], env: Mapping[str, str], log_path: Path, *, fork: bool = True
) -> subprocess.Popen[bytes] | ForkedProcess:
    """``argv`` with ``env``, its output appended to ``log_path``, stdin from
    /dev/null, in a session of its own: forked from the fork server when it is on,
    ``fork`` is and ``argv`` is ``python -P -m <module>``, else started as it is."""
    if fork and fork_server_on() and list(argv[1:3]) == ["-P", "-m"]:
        return fork_module(argv[3], argv, env, log_path)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv), env=dict(env), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip


def _run_module(module: str, env: dict[str, str], log_path: str, cwd: str, title: str) -> None:
    """In the child: what ``subprocess.Popen([python, -P, -m, module], env=env,
    stdout=log, stderr=STDOUT, stdin=DEVNULL, start_new_session=True)`` would set up,
    then the module's ``__main__``. Its command line, as ``ps`` shows it, becomes
    ``title``, the one it stands for (else every service would show the fork
    server's), and its name (``comm``: ``top``, ``pgrep`` without ``-f``) stays the
    interpreter's, as it would be."""
    import setproctitle  # the server's dependency (this module is the SDK's too)

    setproctitle.setproctitle(title)  # which also names it after the title's start
    with contextlib.suppress(OSError):
        Path("/proc/self/comm").write_text(Path(sys.executable).name[:15])
    os.setsid()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(null)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (the process's own)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    set_python_path(env, cwd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = [sys.executable]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def set_python_path(env: Mapping[str, str], cwd: str) -> None:
    """In a child of a fork server: ``sys.path`` as the interpreter builds it for
    ``python -P`` with ``env``'s PYTHONPATH: that first, then the server's own path
    without the PYTHONPATH it inherited, and never the working directory (-P: it must
    not shadow a module of ours)."""
    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    given = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    base = [p for p in sys.path if p not in ("", ".", cwd) and p not in inherited]
    sys.path[:] = given + [p for p in base if p not in given]
