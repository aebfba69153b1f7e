"""The fault matrix's faults: which there are, the matrix's settings, and how each
fault is applied to a running suite and undone (``FaultInjector``).

The faults, in the order the matrix applies them (``FAULTS``):

- ``baseline``: none -- the steady load alone, the control row;
- ``kill-<service>``: ``kill -9`` of the worker (first, so that the worker started
  then runs through every later fault: see ``fault_matrix``), workflow-store, leader-election,
  the leading cron-planner, dispatcher; each restarted at once (its window's fault ends
  when the new process answers its health check) -- the planner once the other one
  has taken its lease over, so the fault is a hand-over;
- ``stop-planner``: SIGSTOP of the leading planner for ``hold`` (at least its lease
  and a retry interval, so it is stopped past its lease), then SIGCONT;
- ``restart-redis``: Redis killed (kill -9) and, after ``hold``, started empty;
- ``blackhole-database``: the store's PostgreSQL connections blackholed for ``hold``
  (every call hangs), then reset (every connection closed with a TCP reset) and new
  ones forwarded again.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
from cronwave_proto.v1 import worker_service_pb2 as worker_pb
from cronwave_proto.v1 import worker_service_pb2_grpc as worker_grpc

from cronwave_bench.failover import Drill, wait_for
from cronwave_bench.faults import OwnRedis, TcpProxy
from cronwave_bench.lease_timing import FAST, LeaseTiming
from cronwave_bench.slot_audit import STUCK_AFTER, TOLERANCE
from cronwave_core.suite import Suite

#: Every fault, in the order the matrix applies them.
FAULTS = (
    "baseline",
    "kill-worker",
    "kill-workflow-store",
    "kill-leader-election",
    "kill-planner",
    "kill-dispatcher",
    "stop-planner",
    "restart-redis",
    "blackhole-database",
)
#: The faults a SQLite store cannot have (no connection to cut), and why.
NOT_ON_SQLITE = {"blackhole-database": "SQLite has no connection to blackhole"}
SEED_VAR = "CRONWAVE_FAULT_MATRIX_SEED"
#: The matrix's suite with ``MatrixConfig.replicas``: two of every service (and two
#: workers and two planners). Two stores share one database: PostgreSQL only.
REPLICAS = {"workflow-store": 2, "leader-election": 2, "dispatcher": 2}
_RPC = 5.0  # seconds: deadline of every call the injector makes


@dataclass(frozen=True)
class MatrixConfig:
    """How big and how long the matrix is; validated on creation."""

    schedules: int = 50
    hold: timedelta = timedelta(seconds=3)
    quiet: timedelta = timedelta(seconds=2)
    settle: timedelta = timedelta(seconds=2)
    recovery_limit: timedelta = timedelta(seconds=60)
    stuck_after: timedelta = STUCK_AFTER
    tolerance: timedelta = TOLERANCE
    lease: LeaseTiming = FAST
    faults: tuple[str, ...] = FAULTS
    seed: int = 1
    #: Every service in replicas (``REPLICAS``, two workers): a kill -9 of a service
    #: kills its first replica, and the others serve meanwhile.
    replicas: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.schedules <= 1000:
            raise ValueError("MatrixConfig.schedules must be within [1, 1000]")
        for name in ("hold", "quiet", "settle", "recovery_limit", "stuck_after", "tolerance"):
            if getattr(self, name) <= timedelta(0):
                raise ValueError(f"MatrixConfig.{name} must be positive")
        unknown = [f for f in self.faults if f not in FAULTS]
        if unknown or not self.faults:
            raise ValueError(f"MatrixConfig.faults: choose from {', '.join(FAULTS)}")

    @property
    def stop_for(self) -> timedelta:
        """How long the leading planner stays stopped: ``hold``, and at least past its
        lease (ttl, a retry interval, and a margin for the hand-over's calls)."""
        return max(self.hold, self.lease.ttl + self.lease.retry_interval + timedelta(seconds=1))

    def figures(self) -> dict[str, Any]:
        return {
            "schedules": self.schedules,
            "hold_s": self.hold.total_seconds(),
            "planner_stopped_s": self.stop_for.total_seconds(),
            "quiet_s": self.quiet.total_seconds(),
            "settle_s": self.settle.total_seconds(),
            "recovery_limit_s": self.recovery_limit.total_seconds(),
            "stuck_after_s": self.stuck_after.total_seconds(),
            "tolerance_s": self.tolerance.total_seconds(),
            "lease": self.lease.figures(),
            "seed": self.seed,
            "replicas": self.replicas,
        }


def seed_from_env(environ: Mapping[str, str] | None = None) -> int:
    """The seed in ``CRONWAVE_FAULT_MATRIX_SEED``; a fresh random one when it is unset
    (print it: setting the variable to it replays the same fault phases)."""
    env = os.environ if environ is None else environ
    raw = env.get(SEED_VAR, "").strip()
    if not raw:
        return random.SystemRandom().randrange(1, 2**31)
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SEED_VAR}: expected an integer, got {raw!r}") from None


@dataclass(frozen=True)
class Applied:
    """One fault as applied: what was done, when it began and when it was undone."""

    fault: str
    label: str
    injected_at: datetime
    ended_at: datetime
    detail: str = ""
    held: bool = False  # a fault held for a while: its end is a reference too


class FaultInjector:
    """Applies each fault to ``suite`` and undoes it, and remembers the workers it
    killed (their counts die with them: reported, not compared)."""

    def __init__(
        self,
        suite: Suite,
        redis: OwnRedis,
        proxy: TcpProxy | None,
        config: MatrixConfig,
        drill: Drill,
    ) -> None:
        self.suite = suite
        self.redis = redis
        self.proxy = proxy
        self.config = config
        self.drill = drill
        self.killed_workers: list[dict[str, Any]] = []
        self.deaths: dict[str, datetime] = {}  # killed worker id -> when

    def leader(self) -> str:
        """The planner holding the lease (alive), waited for."""

        def check() -> str | None:
            try:
                held = self.drill.holder()
            except grpc.RpcError:
                return None
            if held is None or not self.suite.procs[held[0]].alive():
                return None
            return held[0]

        return wait_for(check, 30, "a planner holding the lease", poll=0.1)

    def _kill_and_restart(self, name: str) -> tuple[datetime, datetime]:
        proc = self.suite.procs[name]
        injected = datetime.now(UTC)
        self.suite.signal(name, signal.SIGKILL)
        if proc.popen is not None:
            proc.popen.wait(timeout=10)  # reap it
        self.suite.restart(name)
        return injected, datetime.now(UTC)

    def _kill_leader(self, name: str) -> tuple[datetime, datetime, str]:
        """kill -9 of the leading planner ``name``; restarted once another planner
        holds the lease. (Restarted at once under its own identity, it would take its
        lease back with the same token: a crash and restart, not a hand-over.)"""
        proc = self.suite.procs[name]
        injected = datetime.now(UTC)
        self.suite.signal(name, signal.SIGKILL)
        if proc.popen is not None:
            proc.popen.wait(timeout=10)  # reap it
        lease = self.config.lease
        successor = wait_for(
            lambda: self._other_leader(name),
            (lease.ttl + lease.retry_interval).total_seconds() + 20,
            f"a planner other than {name} holding the lease",
            poll=0.05,
        )
        self.suite.restart(name)
        return injected, datetime.now(UTC), successor

    def _other_leader(self, name: str) -> str | None:
        try:
            held = self.drill.holder()
        except grpc.RpcError:
            return None
        return held[0] if held is not None and held[0] != name else None

    def worker_names(self) -> list[str]:
        return [n for n in self.suite.procs if n.startswith("worker")]

    def worker_status(self, name: str) -> worker_pb.GetWorkerStatusResponse:
        with self.suite.channel(self.suite.procs[name].address) as channel:
            stub = worker_grpc.WorkerServiceStub(channel)
            return stub.GetWorkerStatus(worker_pb.GetWorkerStatusRequest(), timeout=_RPC)

    def apply(self, fault: str) -> Applied:
        """Apply ``fault`` (one of ``FAULTS``) and undo it; what was done, and when."""
        cfg = self.config
        hold = cfg.hold.total_seconds()
        if fault == "baseline":
            now = datetime.now(UTC)
            return Applied(fault, "none (baseline)", now, now)
        if fault == "kill-planner":
            name = self.leader()
            injected, ended, successor = self._kill_leader(name)
            label = "kill -9 leading cron-planner, restarted once another took over"
            return Applied(fault, label, injected, ended, f"{name} -> {successor}")
        if fault == "kill-worker":
            name = self.worker_names()[0]  # the only one, or the first of the replicas
            status = self.worker_status(name)
            self.killed_workers.append(
                {"worker_id": status.worker_id, "runs_started_before_kill": status.runs_started}
            )
            injected, ended = self._kill_and_restart(name)
            self.deaths[status.worker_id] = injected
            return Applied(fault, "kill -9 worker", injected, ended, status.worker_id)
        if fault.startswith("kill-"):
            service = fault.removeprefix("kill-")
            injected, ended = self._kill_and_restart(service)
            return Applied(fault, f"kill -9 {service}", injected, ended)
        if fault == "stop-planner":
            name = self.leader()
            stopped = cfg.stop_for.total_seconds()
            injected = datetime.now(UTC)
            self.suite.signal(name, signal.SIGSTOP)
            try:
                time.sleep(stopped)  # the fault's length, by design
            finally:
                self.suite.signal(name, signal.SIGCONT)
            label = f"SIGSTOP leading cron-planner {stopped:g} s, then SIGCONT"
            return Applied(fault, label, injected, datetime.now(UTC), name, held=True)
        if fault == "restart-redis":
            injected = datetime.now(UTC)
            self.redis.kill()
            time.sleep(hold)  # the fault's length, by design
            self.redis.start()
            label = f"Redis kill -9, started empty after {hold:g} s"
            return Applied(fault, label, injected, datetime.now(UTC), held=True)
        if fault == "blackhole-database":
            assert self.proxy is not None, "blackhole-database needs the store behind a proxy"
            injected = datetime.now(UTC)
            self.proxy.blackhole()
            time.sleep(hold)  # the fault's length, by design
            closed = self.proxy.reset()
            label = f"PostgreSQL link blackholed {hold:g} s, then reset"
            detail = f"{closed} connections reset"
            return Applied(fault, label, injected, datetime.now(UTC), detail, held=True)
        raise ValueError(f"unknown fault {fault!r}")
