"""Fault matrix: a whole suite under steady load, every service faulted in turn, and
every slot of every fault's window audited.

The suite: workflow-store (on PostgreSQL through a ``TcpProxy``, so its database link
can be cut; or on SQLite, where that fault is left out), leader-election, two
cron-planners, dispatcher and worker, all real processes, on a Redis the matrix owns
(``OwnRedis``, so it can be killed and started again empty on the same port). The
load: ``schedules`` schedules of ``cronwave.noop`` firing every second, their phases
spread over the second, with the default policies (overlap ``skip``, catch-up
``latest``). The worker runs job bodies in threads (``harness.PIPELINE_ENV``, as the
throughput scenario does: a job process per noop body would make the figures those of
process hand-overs on a busy machine). Lease timing is ``failover.FAST`` unless given.

The faults, in this order, each in a window of its own (``FAULTS``):

- ``baseline``: none -- the steady load alone, the control row;
- ``kill-<service>``: ``kill -9`` of the worker (first, so that the worker started
  then runs through every later fault: see below), workflow-store, leader-election,
  the leading cron-planner, dispatcher; each restarted at once (its window's fault ends
  when the new process answers its health check) -- the planner once the other one
  has taken its lease over, so the fault is a hand-over;
- ``stop-planner``: SIGSTOP of the leading planner for ``hold`` (at least its lease
  and a retry interval, so it is stopped past its lease), then SIGCONT;
- ``restart-redis``: Redis killed (kill -9) and, after ``hold``, started empty;
- ``blackhole-database``: the store's PostgreSQL connections blackholed for ``hold``
  (every call hangs), then reset (every connection closed with a TCP reset) and new
  ones forwarded again.

Each fault is injected at a random point of a second (``seed``); its window begins
two seconds before (runs of slots just before it may still be in flight), and the
matrix waits until firing is back on time (``settle`` of slots each completed within
``tolerance`` of its fire time, bounded by ``recovery_limit``), then lets the load
run quiet for ``quiet``; the window ends there and the next one begins. After the
last window the planners are stopped, every run is awaited (bounded), and each
window is audited by ``slot_audit.audit_window``: missing, duplicate and stuck slots,
MISSED records by reason, and the recovery time -- from the fault's injection, and
for a fault held for a while (SIGSTOP, a blackhole, Redis down) also from its end.

The worker's own count cross-checks the store once everything has finished: the
worker that runs at the end (started by ``kill-worker``, or the first one if that
fault is left out) must have begun exactly one attempt per run it holds. Attempts it
began beyond that are bodies it ran twice; the store shows each as a re-run (a new
attempt while the worker of the previous one lived on), and the count says how many
of those re-runs were bodies, hence whose windows' duplicates they are
(``slot_audit.Tally``). A worker's count dies with it, and counts attempts released up
to two seconds ahead of their fire time, so a killed worker's count is reported, not
compared.
"""

from __future__ import annotations

import os
import random
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import sqlalchemy as sa

from cronwave._models import RunEvent
from cronwave.v1 import common_pb2
from cronwave.v1 import worker_service_pb2 as worker_pb
from cronwave.v1 import worker_service_pb2_grpc as worker_grpc
from cronwave.v1 import workflow_store_service_pb2 as store_pb
from cronwave_bench.failover import (
    FAST,
    NOOP,
    PLANNED,
    TERMINAL,
    Drill,
    DrillFailed,
    LeaseTiming,
    is_placeholder,
    wait_for,
)
from cronwave_bench.faults import OwnRedis, TcpProxy
from cronwave_bench.harness import (
    PIPELINE_ENV,
    Backend,
    SuiteOptions,
    dispatch_lead,
    suite_config,
)
from cronwave_bench.measure import parallel
from cronwave_bench.slot_audit import (
    STUCK_AFTER,
    TOLERANCE,
    History,
    Tally,
    Window,
    WindowAudit,
    audit_window,
    body_started,
    needs_history,
    suspects,
)
from cronwave_core.calendar import fire_times
from cronwave_core.convert import ts_to_dt
from cronwave_core.spec import Spec
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
PLANNER = "cron-planner"
_RPC = 5.0  # seconds: deadline of every call the matrix makes
_POLL = 0.5  # seconds between looks at the runs while waiting for recovery
#: A fault's window begins the tolerance and this long before the fault: a run normally
#: ends within the tolerance of its fire time, so the runs of earlier slots are over.
_IN_FLIGHT = timedelta(seconds=1)
#: A slot is judged by the live recovery check only this long after its fire time
#: plus the tolerance (its completion may be on its way).
_MARGIN = timedelta(seconds=0.5)

Say = Callable[[str], None]


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


@dataclass
class _Load:
    ids: list[str] = field(default_factory=list)
    specs: dict[str, common_pb2.ScheduleSpec] = field(default_factory=dict)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


class FaultMatrix:
    """A running suite under load, and the means to fault it and audit its slots.
    Every call has a deadline, every wait a bound."""

    def __init__(
        self,
        suite: Suite,
        redis: OwnRedis,
        proxy: TcpProxy | None,
        config: MatrixConfig,
        say: Say = lambda _: None,
    ) -> None:
        self.suite = suite
        self.redis = redis
        self.proxy = proxy
        self.config = config
        self.say = say
        self.drill = Drill(suite)
        self.store = self.drill.store
        self.rng = random.Random(config.seed)
        self.load = _Load()
        self.applied: list[Applied] = []
        self.windows: list[Window] = []
        self.killed_workers: list[dict[str, Any]] = []
        self.deaths: dict[str, datetime] = {}  # killed worker id -> when
        self._lead = dispatch_lead()

    def close(self) -> None:
        self.drill.close()

    # the load ------------------------------------------------------------------
    def create_load(self) -> None:
        """``schedules`` 1-second schedules of ``cronwave.noop``, phases spread over
        the second, default policies."""
        wait_for(
            lambda: any(
                j.name == NOOP
                for j in self.store.ListJobTypes(
                    store_pb.ListJobTypesRequest(), timeout=_RPC
                ).job_types
            ),
            30,
            f"job type {NOOP} registered by the worker",
            poll=0.1,
        )
        n = self.config.schedules
        prefix = f"fm-{uuid.uuid4().hex[:8]}"
        every = timedelta(seconds=1)

        def create(i: int) -> tuple[str, common_pb2.ScheduleSpec, datetime]:
            spec = common_pb2.ScheduleSpec()
            interval = spec.intervals.add()
            interval.every.FromTimedelta(every)
            interval.phase.FromTimedelta(every * i / n)
            schedule = common_pb2.Schedule(
                schedule_id=f"{prefix}-{i:04d}", spec=spec, job_type=NOOP
            )
            reply = self.store.CreateSchedule(
                store_pb.CreateScheduleRequest(schedule=schedule), timeout=_RPC
            )
            return reply.schedule.schedule_id, spec, ts_to_dt(reply.schedule.updated_at)

        made = parallel(create, list(range(n)))
        self.load.ids = [sid for sid, _, _ in made]
        self.load.specs = {sid: spec for sid, spec, _ in made}
        self.load.created_at = max(at for _, _, at in made)

    def slots(self, window: Window) -> dict[str, list[datetime]]:
        """Each schedule's nominal fire times in the window."""
        out: dict[str, list[datetime]] = {}
        for sid, spec in self.load.specs.items():
            times: list[datetime] = []
            for at in fire_times(Spec.from_proto(spec), window.start):
                if at > window.end:
                    break
                times.append(at)
            out[sid] = times
        return out

    def _recent_runs(self, seconds: float) -> list[common_pb2.Run] | None:
        """The newest runs of every schedule, about ``seconds`` of them, plus those
        dispatched ahead; None while the store does not answer."""
        span = seconds + self._lead.total_seconds() + 3
        request = store_pb.ListRunsRequest(
            schedule_ids=self.load.ids, limit=int(len(self.load.ids) * span)
        )
        try:
            return list(self.store.ListRuns(request, timeout=_RPC).runs)
        except grpc.RpcError:
            return None

    def on_time_since(self, after: datetime) -> datetime | None:
        """The end of a ``settle``-long stretch of slots, all after ``after``, each
        completed within ``tolerance`` of its fire time; None when the last such
        stretch is not (yet) on time."""
        cfg = self.config
        horizon = datetime.now(UTC) - cfg.tolerance - _MARGIN
        begin = horizon - cfg.settle
        if begin <= after:
            return None
        runs = self._recent_runs((cfg.settle + cfg.tolerance + _MARGIN).total_seconds())
        if runs is None:
            return None
        by_slot = {
            (r.schedule_id, ts_to_dt(r.fire_time)): r
            for r in runs
            if r.trigger in PLANNED and not is_placeholder(r)
        }
        window = Window("settle", begin, horizon)
        for sid, times in self.slots(window).items():
            for at in times:
                run = by_slot.get((sid, at))
                if run is None or not body_started(run, {}, cfg.tolerance):
                    return None
        return horizon

    def wait_on_time(self, after: datetime, limit: timedelta) -> datetime | None:
        """Block until firing is on time after ``after`` (``on_time_since``), at most
        ``limit``; the end of the on-time stretch, or None if it never came."""
        try:
            return wait_for(
                lambda: self.on_time_since(after),
                limit.total_seconds(),
                "firing on time",
                poll=_POLL,
            )
        except DrillFailed:
            return None

    # the faults ----------------------------------------------------------------
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

    def _worker_names(self) -> list[str]:
        return [n for n in self.suite.procs if n.startswith("worker")]

    def worker_status(self, name: str) -> worker_pb.GetWorkerStatusResponse:
        with grpc.insecure_channel(self.suite.procs[name].address) as channel:
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
            (name,) = self._worker_names()
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

    # the run -------------------------------------------------------------------
    def run(self) -> None:
        """Warm up, then apply every configured fault in its own window."""
        cfg = self.config
        started = self.wait_on_time(self.load.created_at, cfg.recovery_limit)
        if started is None:
            raise DrillFailed(
                f"the load never fired on time after its schedules were created; "
                f"logs in {self.suite.log_dir}"
            )
        opened: tuple[datetime, Applied] | None = None
        for fault in cfg.faults:
            # A random point of a second, so faults fall at every phase of the load.
            time.sleep(self.rng.random())
            # The slots just before the fault go with it: their runs may still be in
            # flight when it strikes.
            boundary = datetime.now(UTC) - cfg.tolerance - _IN_FLIGHT
            if opened is not None:
                self._close(*opened, boundary)
            applied = self.apply(fault)
            self.applied.append(applied)
            opened = (boundary, applied)
            self.say(f"{applied.label}: applied {applied.detail}".rstrip())
            back = self.wait_on_time(applied.ended_at, cfg.recovery_limit)
            if back is None:
                self.say(
                    f"{applied.label}: not on time {cfg.recovery_limit.total_seconds():g} s "
                    "after it; moving on"
                )
            time.sleep(cfg.quiet.total_seconds())  # the quiet period, by design
        if opened is not None:
            self._close(*opened, datetime.now(UTC))

    def _close(self, start: datetime, applied: Applied, end: datetime) -> None:
        held_end = applied.ended_at if applied.held else None
        self.windows.append(Window(applied.fault, start, end, applied.injected_at, held_end))

    def finish(self) -> dict[str, Any]:
        """Stop the planners, let every run end (bounded), and audit every window."""
        cfg = self.config
        for name in [n for n in self.suite.procs if n.startswith(PLANNER)]:
            self.suite.stop_proc(self.suite.procs[name])
        last = self.windows[-1].end
        bound = (cfg.stuck_after + self._lead).total_seconds() + 10

        def everything_ended() -> list[common_pb2.Run] | None:
            runs = self.all_runs()
            return None if _open(runs) else runs

        try:
            runs = wait_for(everything_ended, bound, "every run ended", poll=1.0)
        except DrillFailed:
            runs = self.all_runs()
        audited_at = datetime.now(UTC)
        if _open(runs):
            self.say(f"runs still open {(audited_at - last).total_seconds():.0f} s after the end")
        workers = [self.worker_status(n) for n in self._worker_names()]
        by_schedule: dict[str, list[common_pb2.Run]] = {}
        for run in runs:
            by_schedule.setdefault(run.schedule_id, []).append(run)
        wanted = [r for r in runs if needs_history(r, cfg.tolerance)] + suspects(by_schedule)
        histories = self.histories(wanted)
        reruns = Counter(w for h in histories.values() for w in h.rerun_by(self.deaths))
        worker_check = []
        tallies: dict[str, Tally] = {}
        for status in workers:
            held = sum(1 for r in runs if r.worker_id == status.worker_id)
            excess = status.runs_started - held
            # Each re-run of this worker in the store is a body it ran twice, or an
            # attempt it never began: its own count says how many were bodies.
            tallies[status.worker_id] = Tally(reruns[status.worker_id], max(0, excess))
            worker_check.append(
                {
                    "worker_id": status.worker_id,
                    "attempts_begun": status.runs_started,
                    "runs_it_holds": held,
                    "excess": excess,
                    "reruns_in_store": reruns[status.worker_id],
                }
            )
        audits = [
            audit_window(
                window,
                self.slots(window),
                by_schedule,
                histories,
                audited_at,
                deaths=self.deaths,
                tallies=tallies,
                tolerance=cfg.tolerance,
                stuck_after=cfg.stuck_after,
            )
            for window in self.windows
        ]
        return {
            "audits": audits,
            "worker_check": worker_check,
            "killed_workers": self.killed_workers,
            "refused_stale": self.drill.stale_refusals(),
            "runs": len(runs),
        }

    def all_runs(self) -> list[common_pb2.Run]:
        """Every run of every schedule of the load (oldest first per schedule)."""
        expected = int((datetime.now(UTC) - self.load.created_at).total_seconds()) + 100

        def of(sid: str) -> list[common_pb2.Run]:
            request = store_pb.ListRunsRequest(schedule_id=sid, limit=expected * 2)
            return list(reversed(self.store.ListRuns(request, timeout=_RPC * 4).runs))

        return [run for runs in parallel(of, self.load.ids) for run in runs]

    def histories(self, runs: Sequence[common_pb2.Run]) -> dict[str, History]:
        """What each run's history says of its attempts, by run id."""

        def of(run: common_pb2.Run) -> tuple[str, History]:
            request = store_pb.ListRunEventsRequest(run_id=run.run_id)
            events = self.store.ListRunEvents(request, timeout=_RPC).events
            return run.run_id, History.of(RunEvent.from_proto(e) for e in events)

        return dict(parallel(of, list(runs)))


def _open(runs: Sequence[common_pb2.Run]) -> bool:
    return any(r.state not in TERMINAL or is_placeholder(r) for r in runs)


# the table -------------------------------------------------------------------------
def _recovery_cell(audit: WindowAudit, applied: Applied | None) -> str:
    if applied is None or applied.fault == "baseline":
        return "-"
    if audit.recovery_from_injection_s is None:
        return "not recovered in the window"
    text = f"{audit.recovery_from_injection_s:.2f} s"
    if applied.held and audit.recovery_from_end_s is not None:
        after = audit.recovery_from_end_s
        text += (
            f" ({after:.2f} s after its end)" if after >= 0 else f" ({-after:.2f} s before its end)"
        )
    return text


def table(
    audits: Sequence[WindowAudit],
    applied: Sequence[Applied],
    left_out: Mapping[str, str] | None = None,
) -> str:
    """The matrix as a Markdown table, one row per fault (a fault left out says why)."""
    labels = {a.fault: a for a in applied}
    lines = [
        "| fault | slots audited | missing | duplicate | stuck | late (> tolerance) "
        "| MISSED by reason | recovery (from injection) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for audit in audits:
        fault = labels.get(audit.name)
        label = fault.label if fault else audit.name
        reasons = ", ".join(f"{k} {v}" for k, v in audit.missed_by_reason.items()) or "-"
        missing = str(audit.missing)
        if audit.contradicted:
            missing += f" ({audit.contradicted} MISSED with a reason their record contradicts)"
        duplicate = str(audit.duplicate)
        notes = []
        if audit.body_started_twice:
            notes.append(f"{audit.body_started_twice} bodies recorded starting twice")
        if audit.reruns:
            notes.append(f"{audit.reruns} bodies re-run after a lost completion")
        if audit.reruns_possible:
            notes.append(f"+{audit.reruns_possible} more possible")
        if audit.reruns_not_begun:
            notes.append(f"{audit.reruns_not_begun} re-attempts of a claim never begun")
        if notes:
            duplicate += f" ({'; '.join(notes)})"
        stuck = str(audit.stuck) + (f" (+{audit.unsettled} unsettled)" if audit.unsettled else "")
        lines.append(
            f"| {label} | {audit.slots} | {missing} | {duplicate} | {stuck} | {audit.late} "
            f"| {reasons} | {_recovery_cell(audit, fault)} |"
        )
    for name, why in (left_out or {}).items():
        lines.append(f"| {name} | left out: {why} | | | | | | |")
    return "\n".join(lines)


# the whole run ---------------------------------------------------------------------
@contextmanager
def _proxied(database_url: str | None) -> Iterator[tuple[str | None, TcpProxy | None]]:
    """A PostgreSQL URL rewritten to reach its server through a ``TcpProxy``, and the
    proxy; a SQLite URL (or None) as it is, with no proxy."""
    backend = Backend(database_url)
    if backend.database != "postgresql" or not database_url:
        yield database_url, None
        return
    url = sa.make_url(database_url)
    proxy = TcpProxy(f"{url.host or '127.0.0.1'}:{url.port or 5432}")
    try:
        proxied = url.set(host="127.0.0.1", port=proxy.port)
        yield proxied.render_as_string(hide_password=False), proxy
    finally:
        proxy.close()


def run_fault_matrix(
    config: MatrixConfig = MatrixConfig(),
    *,
    database_url: str | None = None,
    data_dir: Path | None = None,
    say: Say | None = None,
) -> dict[str, Any]:
    """Run the matrix (see the module docstring) and return its figures as JSON-able
    data, with ``table`` the Markdown table of them. ``database_url``: PostgreSQL
    (through a proxy) or SQLite; None: a SQLite file in ``data_dir`` (a temporary
    directory unless given; kept when given, with the logs). Faults the backend cannot
    have are left out, and listed with the reason under ``left_out``."""
    say = say or (lambda _: None)
    say(f"fault matrix: seed {config.seed} ({SEED_VAR})")
    began = time.monotonic()
    with ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cw-fm-")))
        url, proxy = stack.enter_context(_proxied(database_url))
        backend = Backend(database_url).database
        left_out = (
            {f: why for f, why in NOT_ON_SQLITE.items() if f in config.faults}
            if proxy is None
            else {}
        )
        faults = tuple(f for f in config.faults if f not in left_out)
        redis = OwnRedis(data_dir / "own-redis")
        redis.start()
        stack.callback(redis.stop)
        suite_cfg = suite_config(
            Backend(url, redis.url),
            data_dir,
            SuiteOptions(tracing=False, planners=2, env=PIPELINE_ENV),
        )
        suite_cfg.env = {**suite_cfg.env, **config.lease.env()}
        suite = Suite(suite_cfg)
        stack.callback(suite.stop)
        suite.start()
        matrix = FaultMatrix(
            suite,
            redis,
            proxy,
            replace(config, faults=faults),
            say,
        )
        stack.callback(matrix.close)
        matrix.create_load()
        setup_s = time.monotonic() - began
        matrix.run()
        accounts = matrix.finish()
    audits: list[WindowAudit] = accounts.pop("audits")
    return {
        "scenario": "fault-matrix",
        "backend": backend,
        **config.figures(),
        "left_out": left_out,
        "faults": [asdict(a) | _iso(a) for a in matrix.applied],
        "windows": [asdict(a) for a in audits],
        **accounts,
        "table": table(audits, matrix.applied, left_out),
        "setup_s": round(setup_s, 1),
        "wall_s": round(time.monotonic() - began, 1),
    }


def _iso(applied: Applied) -> dict[str, str]:
    return {
        "injected_at": applied.injected_at.isoformat(),
        "ended_at": applied.ended_at.isoformat(),
    }
