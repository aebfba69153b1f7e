"""Failover drill: the leading planner dies again and again under a 1-second schedule.
How long does firing stop, and is every slot still fired exactly once?

One trial: wait until a planner holds the lease and the store has accepted one of its
fires; wait a random fraction of the schedule's period (so deaths fall at every phase
of the second); then end the leader, either with ``kill -9`` (a crash: its lease must
run out) or with SIGTERM (a graceful stop: it stops firing, then resigns). Measured:

- *takeover*: death -> another planner holds the lease (Observe, polled every 20 ms);
- *failover*: death -> the store accepts the next fire carrying a newer fencing token
  (that run's ``created_at``, stamped by the store on the same host and clock).

The dead planner is restarted in the background, so the pool stays at ``planners``.

After the last trial the planners are stopped and every slot of the schedule between
its creation and the end of the last trial is audited (``audit.audit``): a slot must have
exactly one run, or a MISSED record, and no run's job body may have started twice
(the store's attempt count, cross-checked with the workers' own count). A start the
store refused as stale shows in the refusing planner's log; those are counted too.
"""

from __future__ import annotations

import random
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import cron_planner_service_pb2 as planner_pb
from cronwave_proto.v1 import cron_planner_service_pb2_grpc as planner_grpc
from cronwave_proto.v1 import leader_election_service_pb2 as leader_pb
from cronwave_proto.v1 import leader_election_service_pb2_grpc as leader_grpc
from cronwave_proto.v1 import worker_service_pb2 as worker_pb
from cronwave_proto.v1 import worker_service_pb2_grpc as worker_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave_bench.audit import TERMINAL, audit, is_placeholder
from cronwave_bench.lease_timing import FAST, LeaseTiming
from cronwave_core.convert import ts_to_dt
from cronwave_core.domain.calendar import fire_times
from cronwave_core.domain.spec import Spec
from cronwave_core.errors import CronwaveError
from cronwave_core.suite import Suite, SuiteConfig
from cronwave_waterfall.percentiles import quantile

T = TypeVar("T")

PLANNER = "cron-planner"
NOOP = "cronwave.noop"
SCOPE = "planner"
#: The fire loop's log line for a start the store refused for a stale fencing token.
STALE_MARKER = "refused: fencing token"
_POLL = 0.02  # seconds between looks at the lease while timing a failover
#: Between looks at the runs: the failover figure is the accepted run's ``created_at``
#: (the store's stamp), so looking more often would only cost the store more work.
_RUNS_POLL = 0.1
_RPC = 5.0  # seconds: deadline of every call the drill makes


class DrillFailed(CronwaveError):
    """The drill could not go on (no leader, no fire, a run that never finished);
    the message says what was awaited and where the logs are."""


def wait_for(check: Callable[[], T | None], timeout: float, what: str, poll: float = 0.05) -> T:
    """``check()`` until it returns something other than None/False; bounded."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() >= deadline:
            raise DrillFailed(f"{what}: not reached within {timeout:.1f}s")
        time.sleep(poll)


@dataclass(frozen=True)
class Trial:
    mode: str  # "crash" (kill -9) or "graceful" (SIGTERM)
    planner: str  # the planner that died
    successor: str  # the planner whose fire came next
    old_token: int
    new_token: int
    takeover_s: float | None  # death -> a newer lease seen
    failover_s: float  # death -> the store accepted the next fire


class Drill:
    """A running suite with one schedule, and the means to end its leader and audit
    its slots. Every call has a deadline; every wait is bounded."""

    def __init__(self, suite: Suite) -> None:
        self.suite = suite
        self._channels: dict[str, grpc.Channel] = {}
        self.store = store_grpc.WorkflowStoreServiceStub(self._channel(suite.store_addr))
        self.leases = leader_grpc.LeaderElectionServiceStub(self._channel(suite.leader_addr))
        self.schedule_id = ""
        self.since = datetime.now(UTC)
        self._spec = common_pb2.ScheduleSpec()
        self._restarts: dict[str, Future[Any]] = {}
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="planner-restart")

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        for channel in self._channels.values():
            channel.close()

    def _channel(self, address: str) -> grpc.Channel:
        if address not in self._channels:
            self._channels[address] = self.suite.channel(address)
        return self._channels[address]

    # the schedule ------------------------------------------------------------
    def create_schedule(self, every: timedelta = timedelta(seconds=1)) -> str:
        """An interval schedule of ``cronwave.noop`` (the worker registers it).

        Its overlap policy is ``allow_all``: two slots a new leader catches up at once
        both run, rather than the second being recorded MISSED (``overlap_skip``) for
        overlapping the first -- overlap is not what a failover drill is about."""
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
        spec = common_pb2.ScheduleSpec()
        spec.intervals.add().every.FromTimedelta(every)
        schedule = common_pb2.Schedule(
            schedule_id=f"failover-{uuid.uuid4().hex[:10]}",
            spec=spec,
            policy=common_pb2.SchedulePolicy(overlap=common_pb2.OVERLAP_POLICY_ALLOW_ALL),
            job_type=NOOP,
        )
        reply = self.store.CreateSchedule(
            store_pb.CreateScheduleRequest(schedule=schedule), timeout=_RPC
        )
        self.schedule_id = reply.schedule.schedule_id
        self.since = ts_to_dt(reply.schedule.updated_at)
        self._spec = spec
        return self.schedule_id

    def slots(self, through: datetime) -> list[datetime]:
        """The schedule's nominal fire times in ``(since, through]``."""
        out: list[datetime] = []
        for at in fire_times(Spec.from_proto(self._spec), self.since):
            if at > through:
                break
            out.append(at)
        return out

    def runs(self, limit: int = 100_000) -> list[common_pb2.Run]:
        """The schedule's newest ``limit`` runs, oldest first."""
        reply = self.store.ListRuns(
            store_pb.ListRunsRequest(schedule_id=self.schedule_id, limit=limit), timeout=_RPC
        )
        return sorted(reply.runs, key=lambda r: (ts_to_dt(r.fire_time), r.run_id))

    # planners ----------------------------------------------------------------------
    def planner_names(self) -> list[str]:
        return [name for name in self.suite.procs if name.startswith(PLANNER)]

    def status(self, name: str) -> planner_pb.GetPlannerStatusResponse | None:
        """The planner's own view, or None while it does not answer."""
        stub = planner_grpc.CronPlannerServiceStub(self._channel(self.suite.procs[name].address))
        try:
            return stub.GetPlannerStatus(planner_pb.GetPlannerStatusRequest(), timeout=1.0)
        except grpc.RpcError:
            return None

    def lease(self) -> leader_pb.Lease:
        request = leader_pb.ObserveRequest(scope=SCOPE)
        return self.leases.Observe(request, timeout=_RPC).lease

    def holder(self) -> tuple[str, int] | None:
        """(planner name, token) of the lease holder, if a planner holds it. The lease
        as observed names the holder but never shows its token: the token is the one
        the holder itself reports, 0 while it does not answer or does not lead yet."""
        lease = self.lease()
        name = lease.holder.split("@", 1)[0]
        if not lease.holder or name not in self.suite.procs:
            return None
        status = self.status(name)
        leading = status is not None and status.leader and status.candidate == lease.holder
        return name, status.fencing_token if status is not None and leading else 0

    def wait_leading(self, timeout: float) -> tuple[str, int]:
        """A planner that holds the lease, is alive and has had a fire accepted."""

        def check() -> tuple[str, int] | None:
            held = self.holder()
            if held is None or not self.suite.procs[held[0]].alive():
                return None
            fired = any(r.fencing_token == held[1] for r in self.runs(limit=10))
            return held if fired else None

        return wait_for(check, timeout, "a leader with an accepted fire", poll=_RUNS_POLL)

    def end(self, name: str, graceful: bool) -> float:
        """Send the planner its death (SIGTERM or SIGKILL); the wall time it was sent."""
        proc = self.suite.procs[name]
        died_at = time.time()
        self.suite.signal(name, signal.SIGTERM if graceful else signal.SIGKILL)
        if not graceful and proc.popen is not None:
            proc.popen.wait(timeout=10)  # reap it
        return died_at

    def restart_later(self, name: str) -> None:
        self._restarts[name] = self._pool.submit(self.suite.restart, name)

    def settle_restarts(self, alive: int, timeout: float = 60) -> None:
        """Block until at least ``alive`` planners run with no restart pending."""

        def ready() -> bool:
            pending = {n for n, f in self._restarts.items() if not f.done()}
            for name, future in self._restarts.items():
                if future.done() and future.exception() is not None:
                    raise DrillFailed(f"restart of {name} failed: {future.exception()}")
            running = [
                n for n in self.planner_names() if n not in pending and self.suite.procs[n].alive()
            ]
            return len(running) >= alive

        wait_for(ready, timeout, f"{alive} planners running", poll=_POLL)

    def stop_planners(self) -> None:
        self.settle_restarts(0)
        for future in self._restarts.values():
            future.result(timeout=60)
        for name in self.planner_names():
            self.suite.stop_proc(self.suite.procs[name])

    # one failover ----------------------------------------------------------------
    def trial(self, graceful: bool, phase: float, timeout: float) -> Trial:
        """End the current leader ``phase`` seconds after its lease is confirmed,
        and time the hand-over; the dead planner is restarted in the background."""
        name, token = self.wait_leading(timeout)
        time.sleep(phase)  # the death's place within the schedule's period, by design
        held = self.holder()
        if held != (name, token):  # the lease moved meanwhile: time the new holder's end
            name, token = self.wait_leading(timeout)
        dead = self.lease().holder
        died_at = self.end(name, graceful)
        takeover: float | None = None
        listed = 0.0

        def next_fire() -> common_pb2.Run | None:
            nonlocal takeover, listed
            if takeover is None:
                lease = self.lease()
                if lease.holder and lease.holder != dead:
                    takeover = time.time() - died_at
            if time.monotonic() - listed < _RUNS_POLL:
                return None
            listed = time.monotonic()
            newer = [
                r
                for r in self.runs(limit=10)
                if r.fencing_token > token and r.state != common_pb2.RUN_STATE_MISSED
            ]
            return min(newer, key=lambda r: ts_to_dt(r.created_at)) if newer else None

        first = wait_for(next_fire, timeout, f"a fire after {name} (token {token}) died", _POLL)
        accepted = ts_to_dt(first.created_at).timestamp()
        successor = self.holder()
        self.restart_later(name)
        return Trial(
            mode="graceful" if graceful else "crash",
            planner=name,
            successor=successor[0] if successor else "",
            old_token=token,
            new_token=first.fencing_token,
            takeover_s=None if takeover is None else round(min(takeover, accepted - died_at), 3),
            failover_s=round(accepted - died_at, 3),
        )

    # accounting ------------------------------------------------------------------
    def executions(self) -> int:
        """How many job bodies the workers started (their own count)."""
        total = 0
        for name, proc in self.suite.procs.items():
            if name.startswith("worker"):
                stub = worker_grpc.WorkerServiceStub(self._channel(proc.address))
                reply = stub.GetWorkerStatus(worker_pb.GetWorkerStatusRequest(), timeout=_RPC)
                total += reply.runs_started
        return total

    def stale_refusals(self) -> int:
        """Starts the store refused for a stale token, as the planners logged them."""
        count = 0
        for name in self.planner_names():
            path = self.suite.procs[name].log_path
            if path.exists():
                count += path.read_text(errors="replace").count(STALE_MARKER)
        return count

    def finish(self, through: datetime, timeout: float = 60) -> dict[str, Any]:
        """Let the leader fire past ``through``, stop the planners, wait for every run
        to end, and account for the slots in ``(since, through]``."""

        def fired_past() -> bool:
            runs = self.runs()
            return any(ts_to_dt(r.fire_time) > through for r in runs) and not any(
                is_placeholder(r) and ts_to_dt(r.fire_time) <= through for r in runs
            )

        wait_for(fired_past, timeout, f"every slot up to {through.isoformat()} handled", 0.1)
        self.stop_planners()

        def finished() -> list[common_pb2.Run] | None:
            runs = self.runs()
            return runs if all(r.state in TERMINAL for r in runs) else None

        runs = wait_for(finished, timeout, "every run finished", poll=0.1)
        result = audit(runs, self.slots(through))
        started = [r for r in runs if r.state != common_pb2.RUN_STATE_MISSED]
        executions = self.executions()
        by_attempt = sum(max(0, r.attempt - 1) for r in started)
        twice = max(by_attempt, executions - len(started))
        refused = self.stale_refusals()
        return {
            "audit": asdict(result),
            "runs": len(runs),
            "started_runs": len(started),
            "executions": executions,
            "job_body_ran_twice": twice,
            "refused_stale": refused,
            "duplicate_fires": twice + refused + result.duplicate_runs,
            "missed_fires": result.missed,
            "recorded_missed": result.recorded_missed,
        }


def _figures(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "p50": round(quantile(ordered, 0.5), 3),
        "p99": round(quantile(ordered, 0.99), 3),
        "max": round(ordered[-1], 3),
        "min": round(ordered[0], 3),
        "mean": round(sum(ordered) / len(ordered), 3),
    }


def _backend(database_url: str | None) -> str:
    if database_url is None or database_url.startswith("sqlite"):
        return "sqlite"
    return database_url.split(":", 1)[0].split("+", 1)[0]


def run_failover(
    trials: int = 20,
    *,
    planners: int = 2,
    graceful_share: float = 0.0,
    lease: LeaseTiming = FAST,
    database_url: str | None = None,
    redis_url: str | None = None,
    data_dir: Path | None = None,
    seed: int = 5,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Start a suite with ``planners`` planner replicas and a 1-second schedule, end
    the leader ``trials`` times (``graceful_share`` of them by SIGTERM, the rest by
    kill -9), and return the figures as JSON-able data: failover and takeover
    times (p50, p99, max, in seconds), duplicate fires (job bodies started twice, plus
    starts refused as stale) and missed fires (slots with neither a run nor a MISSED
    record), with the lease settings used and the wall time taken.

    ``database_url`` / ``redis_url`` default to a SQLite file and an embedded Redis in
    ``data_dir`` (a temporary directory unless given; kept when given, with the logs).
    """
    if trials < 1:
        raise ValueError("trials must be at least 1")
    if planners < 2:
        raise ValueError("a failover needs at least 2 planners")
    if not 0.0 <= graceful_share <= 1.0:
        raise ValueError("graceful_share must be within [0, 1]")
    rng = random.Random(seed)
    graceful_count = round(trials * graceful_share)
    modes = [True] * graceful_count + [False] * (trials - graceful_count)
    rng.shuffle(modes)
    timeout = (lease.ttl + lease.retry_interval).total_seconds() + 20
    say = progress or (lambda _: None)
    started = time.monotonic()
    with ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cw-fo-")))
        suite = Suite(
            SuiteConfig(
                data_dir=data_dir,
                database_url=database_url,
                redis_url=redis_url,
                ports={},
                planners=planners,
                workers=1,
                env={**lease.env(), "CRONWAVE_NAMESPACE": f"cwfo{uuid.uuid4().hex[:10]}"},
                grace=timedelta(seconds=2),
            )
        )
        stack.callback(suite.stop)
        suite.start()
        drill = Drill(suite)
        stack.callback(drill.close)
        drill.create_schedule()
        setup_s = time.monotonic() - started
        done: list[Trial] = []
        for i, graceful in enumerate(modes):
            drill.settle_restarts(alive=2)
            trial = drill.trial(graceful, phase=rng.random(), timeout=timeout)
            done.append(trial)
            say(
                f"trial {i + 1}/{trials}: {trial.mode} of {trial.planner} (token "
                f"{trial.old_token}) -> fire by token {trial.new_token} after "
                f"{trial.failover_s:.3f}s"
            )
        through = datetime.now(UTC)
        accounts = drill.finish(through)
    failovers = [t.failover_s for t in done]
    return {
        "scenario": "failover",
        "trials": trials,
        "crashes": sum(1 for t in done if t.mode == "crash"),
        "graceful": sum(1 for t in done if t.mode == "graceful"),
        "planners": planners,
        "schedule_every_s": 1.0,
        "backend": _backend(database_url),
        "lease": lease.figures(),
        "failover_s": _figures(failovers),
        "failover_crash_s": _figures([t.failover_s for t in done if t.mode == "crash"]),
        "failover_graceful_s": _figures([t.failover_s for t in done if t.mode == "graceful"]),
        "takeover_s": _figures([t.takeover_s for t in done if t.takeover_s is not None]),
        **accounts,
        "setup_s": round(setup_s, 1),
        "wall_s": round(time.monotonic() - started, 1),
        "trial_log": [asdict(t) for t in done],
    }
