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
process hand-overs on a busy machine). Lease timing is ``lease_timing.FAST`` unless given.
With ``MatrixConfig.replicas`` every service runs in replicas (``matrix_faults.REPLICAS``,
two workers; PostgreSQL only): each kill -9 hits a service's first replica while the
others serve, and every worker's count is cross-checked.

The faults, in this order, each in a window of its own: ``matrix_faults.FAULTS``.

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

import random
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import sqlalchemy as sa
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb

from cronwave import RunEvent
from cronwave_bench.audit import PLANNED, TERMINAL, is_placeholder
from cronwave_bench.failover import NOOP, Drill, DrillFailed, wait_for
from cronwave_bench.faults import OwnRedis, TcpProxy
from cronwave_bench.harness import (
    PIPELINE_ENV,
    Backend,
    SuiteOptions,
    dispatch_lead,
    suite_config,
)
from cronwave_bench.matrix_faults import (
    NOT_ON_SQLITE,
    REPLICAS,
    SEED_VAR,
    Applied,
    FaultInjector,
    MatrixConfig,
)
from cronwave_bench.matrix_table import table
from cronwave_bench.measure import parallel
from cronwave_bench.slot_audit import (
    History,
    Tally,
    Window,
    WindowAudit,
    audit_window,
    body_started,
    needs_history,
    suspects,
)
from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.calendar import fire_times
from cronwave_core.domain.spec import Spec
from cronwave_core.suite import Suite

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
#: The matrix's settings when none are given (frozen: one instance serves every call).
_DEFAULTS = MatrixConfig()


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
        self.config = config
        self.say = say
        self.drill = Drill(suite)
        self.store = self.drill.store
        self.faults = FaultInjector(suite, redis, proxy, config, self.drill)
        self.rng = random.Random(config.seed)
        self.load = _Load()
        self.applied: list[Applied] = []
        self.windows: list[Window] = []
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
            applied = self.faults.apply(fault)
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
        workers = [self.faults.worker_status(n) for n in self.faults.worker_names()]
        by_schedule: dict[str, list[common_pb2.Run]] = {}
        for run in runs:
            by_schedule.setdefault(run.schedule_id, []).append(run)
        wanted = [r for r in runs if needs_history(r, cfg.tolerance)] + suspects(by_schedule)
        histories = self.histories(wanted)
        deaths = self.faults.deaths
        reruns = Counter(w for h in histories.values() for w in h.rerun_by(deaths))
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
                deaths=deaths,
                tallies=tallies,
                tolerance=cfg.tolerance,
                stuck_after=cfg.stuck_after,
            )
            for window in self.windows
        ]
        return {
            "audits": audits,
            "worker_check": worker_check,
            "killed_workers": self.faults.killed_workers,
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
    config: MatrixConfig = _DEFAULTS,
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
        if config.replicas and proxy is None:
            raise ValueError("MatrixConfig.replicas: two store replicas need PostgreSQL")
        redis = OwnRedis(data_dir / "own-redis")
        redis.start()
        stack.callback(redis.stop)
        workers = 2 if config.replicas else 1
        suite_cfg = suite_config(
            Backend(url, redis.url),
            data_dir,
            SuiteOptions(tracing=False, planners=2, workers=workers, env=PIPELINE_ENV),
        )
        suite_cfg.env = {**suite_cfg.env, **config.lease.env()}
        if config.replicas:
            suite_cfg.replicas = REPLICAS
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
