"""What ``cronwave load`` does (``cronwave_server.cli.load`` has the command and what
it means): trigger, wait and count, against a running suite; the truth benchmark
drives its runs so too."""

from __future__ import annotations

import resource
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import grpc
from cronwave_proto.v1 import common_pb2
from cronwave_proto.v1 import dispatcher_service_pb2 as dispatcher_pb
from cronwave_proto.v1 import dispatcher_service_pb2_grpc as dispatcher_grpc
from cronwave_proto.v1 import workflow_store_service_pb2 as store_pb
from cronwave_proto.v1 import workflow_store_service_pb2_grpc as store_grpc

from cronwave import Client
from cronwave_bench.names import LOAD_JOB_TYPE as DEFAULT_JOB_TYPE
from cronwave_bench.names import LOAD_SCENARIOS as SCENARIOS
from cronwave_core.caching import METADATA_KEY, TERMINAL_STATES, RunStatusCache, redis_client
from cronwave_core.errors import InvalidArgument
from cronwave_core.rpc import open_channel
from cronwave_core.security.tls import new_channel
from cronwave_core.settings import TlsSettings

POLL = 0.01  # seconds between two reads of the run-status cache
_CHUNK = 1000  # run ids per MGET


@dataclass(frozen=True)
class Target:
    """Where the suite is."""

    store_addr: str
    dispatcher_addr: str
    redis_url: str
    namespace: str
    rpc_timeout: timedelta = timedelta(seconds=10)
    tls: TlsSettings | None = None  # None: this process's CRONWAVE_TLS_*


@dataclass
class LoadReport:
    """What a load did. ``seconds`` runs from the first trigger to the last end seen."""

    runs: int
    scenario: str
    concurrency: int
    triggered: int = 0
    states: dict[str, int] = field(default_factory=dict)
    unfinished: int = 0
    refused: int = 0
    seconds: float = 0.0
    trigger_ms: list[float] = field(default_factory=list)
    run_ids: list[str] = field(default_factory=list)
    schedule_ids: list[str] = field(default_factory=list)
    since: datetime | None = None  # just before the first measured trigger
    warmed: int = 0  # warm-up runs triggered before

    @property
    def finished(self) -> int:
        return sum(self.states.values())

    @property
    def throughput(self) -> float:
        """Runs ended per second."""
        return self.finished / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        states = ", ".join(f"{n} {s.lower()}" for s, n in sorted(self.states.items())) or "none"
        ordered = sorted(self.trigger_ms)

        def pct(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

        lines = [
            f"{self.triggered} runs triggered ({self.scenario} scenario, {self.concurrency} in "
            f"flight at most) in {self.seconds:.1f}s: {states}"
            + (f", {self.unfinished} unfinished" if self.unfinished else "")
            + (f", {self.refused} refused" if self.refused else ""),
            f"throughput {self.throughput:.1f} runs/s end to end; trigger call p50 "
            f"{pct(0.5):.1f} ms, p99 {pct(0.99):.1f} ms",
        ]
        return "\n".join(lines)


def _state_name(state: int) -> str:
    return common_pb2.RunState.Name(state).removeprefix("RUN_STATE_")


def create_schedules(client: Client, count: int, job_type: str) -> list[str]:
    """``count`` paused load schedules of ``job_type`` (a trigger still runs them)."""
    prefix = f"load-{uuid.uuid4().hex[:8]}"
    ids = []
    for i in range(count):
        schedule = client.create_schedule(
            f"{prefix}-{i:03d}",
            cron="0 0 1 1 *",
            job_type=job_type,
            paused=True,
            overlap="allow_all",
        )
        ids.append(schedule.schedule_id)
    return ids


def drive(
    target: Target,
    *,
    runs: int,
    scenario: str = "local",
    concurrency: int = 8,
    timeout: timedelta = timedelta(minutes=10),
    job_type: str = DEFAULT_JOB_TYPE,
    schedules: int = 8,
    warmup: int = 0,
    progress: bool = False,
) -> LoadReport:
    """Trigger ``warmup`` runs, then ``runs`` measured ones, each with at most
    ``concurrency`` in flight, and wait for them (see the module docstring). The
    warm-up warms connections and caches and is not in the report; ``since`` in the
    report is where the measured runs begin. Never longer than ``timeout``."""
    if runs < 1:
        raise InvalidArgument("runs", f"must be at least 1, got {runs}")
    if concurrency < 1:
        raise InvalidArgument("concurrency", f"must be at least 1, got {concurrency}")
    if warmup < 0:
        raise InvalidArgument("warmup", f"must not be negative, got {warmup}")
    if scenario not in SCENARIOS:
        raise InvalidArgument(
            "scenario", f"must be one of {', '.join(SCENARIOS)}, got {scenario!r}"
        )
    deadline = time.monotonic() + timeout.total_seconds()
    report = LoadReport(runs=runs, scenario=scenario, concurrency=concurrency)
    with Client(
        store_addr=target.store_addr,
        dispatcher_addr=target.dispatcher_addr,
        timeout=target.rpc_timeout,
        tls=target.tls,
    ) as client:
        report.schedule_ids = create_schedules(client, max(1, min(schedules, runs)), job_type)
    # Its trigger threads and the poll of finished runs share the pool.
    cache_client = redis_client(target.redis_url, timedelta(seconds=2), size=concurrency + 2)
    channel = open_channel(target.dispatcher_addr, target.rpc_timeout, traced=False, tls=target.tls)
    phase = _Phase(
        target,
        dispatcher_grpc.DispatcherServiceStub(channel),
        RunStatusCache(cache_client, target.namespace),
        report.schedule_ids,
        scenario,
        concurrency,
        deadline,
    )
    try:
        if warmup:
            warm = LoadReport(runs=warmup, scenario=scenario, concurrency=concurrency)
            phase.run(warm)
            report.warmed = warm.triggered
        report.since = datetime.now(UTC)
        phase.run(report, progress=progress)
    finally:
        channel.close()
        cache_client.close()
    return report


class _Phase:
    """Runs triggered with at most ``concurrency`` in flight, until all ended."""

    def __init__(
        self,
        target: Target,
        dispatcher: dispatcher_grpc.DispatcherServiceStub,
        status: RunStatusCache,
        schedule_ids: list[str],
        scenario: str,
        concurrency: int,
        deadline: float,
    ) -> None:
        self.target = target
        self.dispatcher = dispatcher
        self.status = status
        self.schedule_ids = schedule_ids
        control = SCENARIOS[scenario]
        self.metadata = ((METADATA_KEY, control),) if control else None
        self.concurrency = concurrency
        self.deadline = deadline

    def run(self, report: LoadReport, progress: bool = False) -> None:
        slots = threading.Semaphore(self.concurrency)
        lock = threading.Lock()
        open_runs: set[str] = set()
        next_index = iter(range(report.runs))
        first: list[float] = []
        last_end = [0.0]
        stop = threading.Event()
        timeout = self.target.rpc_timeout.total_seconds()

        def trigger_loop() -> None:
            while not stop.is_set():
                if not slots.acquire(timeout=0.2):
                    continue
                with lock:
                    index = next(next_index, None)
                if index is None or time.monotonic() >= self.deadline:
                    slots.release()
                    return
                schedule_id = self.schedule_ids[index % len(self.schedule_ids)]
                began = time.monotonic()
                try:
                    reply = self.dispatcher.TriggerRun(
                        dispatcher_pb.TriggerRunRequest(schedule_id=schedule_id),
                        timeout=timeout,
                        metadata=self.metadata,
                    )
                except grpc.RpcError:
                    with lock:
                        report.refused += 1
                    slots.release()
                    continue
                ended = time.monotonic()
                with lock:
                    if not first:
                        first.append(began)
                    report.triggered += 1
                    report.trigger_ms.append((ended - began) * 1000)
                    report.run_ids.append(reply.run.run_id)
                    open_runs.add(reply.run.run_id)

        def settle(found: dict[str, common_pb2.Run]) -> None:
            now = time.monotonic()
            with lock:
                for run_id, run in found.items():
                    if run_id in open_runs:
                        open_runs.discard(run_id)
                        name = _state_name(run.state)
                        report.states[name] = report.states.get(name, 0) + 1
                        last_end[0] = now
                        slots.release()

        threads = [
            threading.Thread(target=trigger_loop, name=f"load-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        for thread in threads:
            thread.start()
        shown = time.monotonic()
        try:
            while time.monotonic() < self.deadline:
                with lock:
                    waiting = list(open_runs)
                    busy = any(t.is_alive() for t in threads)
                if not waiting and not busy:
                    break
                for start in range(0, len(waiting), _CHUNK):
                    settle(self.status.get_many(waiting[start : start + _CHUNK]))
                if progress and time.monotonic() - shown >= 2:
                    shown = time.monotonic()
                    print(f"  {report.finished} of {report.runs} runs ended ...", flush=True)
                time.sleep(POLL)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=timeout + 1)
        with lock:
            leftover = list(open_runs)
        if leftover:
            settle(_from_store(self.target, leftover))
        with lock:
            report.unfinished = len(open_runs)
        if first:
            report.seconds = max(last_end[0], first[0]) - first[0]


#: The most runs one read of the store asks for (GetRuns takes at most 1,000).
_READ_BATCH = 1000


def _from_store(target: Target, run_ids: list[str]) -> dict[str, common_pb2.Run]:
    """The runs among ``run_ids`` that have ended, as the store says (one read per
    1,000 runs)."""
    found: dict[str, common_pb2.Run] = {}
    with new_channel(target.store_addr, (), target.tls) as channel:
        store = store_grpc.WorkflowStoreServiceStub(channel)
        for i in range(0, len(run_ids), _READ_BATCH):
            request = store_pb.GetRunsRequest(
                runs=[store_pb.GetRunRequest(run_id=r) for r in run_ids[i : i + _READ_BATCH]]
            )
            try:
                runs = store.GetRuns(request, timeout=5).runs
            except grpc.RpcError:
                continue
            found.update({run.run_id: run for run in runs if run.state in TERMINAL_STATES})
    return found


def children_cpu() -> float:
    """User and system CPU seconds of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
