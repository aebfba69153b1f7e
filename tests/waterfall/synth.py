"""Synthetic runs with a known structure, shaped like the suite's real traces.

One run is one trace across five services: the planner's fire span calls the
leader and the dispatcher over gRPC (auto-instrumented CLIENT/SERVER spans that
carry no cronwave attributes), the dispatcher de-duplicates through its cache,
calls the store to persist (a database span with a nested SQL-instrumentation
span), and enqueues; the worker's queue-wait span (pickup), the job (execute, with
its own SQL and cache spans) and the completion call to the store follow.

``Injection`` adds a known delay to one (hop, kind) of a chosen share of runs and
marks those runs with a tell-tale attribute, so a test knows what the tail must
be blamed on. Every time is a whole number of microseconds, so a Jaeger round
trip (microsecond precision) is lossless.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cronwave_core.telemetry.vocabulary import run_attributes
from cronwave_waterfall.span import Span

US = 1000
MS = 1_000_000
BASE_FIRE = datetime(2025, 3, 1, 2, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Injection:
    """``share`` of runs get ``extra_ms`` more ``kind`` time in ``hop``."""

    hop: str
    kind: str
    extra_ms: float
    share: float = 0.02


@dataclass
class RunRecord:
    """What the generator did to one run: ground truth for the tests."""

    run_id: str
    trace_id: str
    fire_time: datetime
    injected: bool
    cache_hit: str
    spans: list[Span] = field(default_factory=list)


class _Trace:
    def __init__(self, rng: random.Random, fire_ns: int, common: dict[str, Any]) -> None:
        self.rng = rng
        self.fire_ns = fire_ns
        self.common = common
        self.trace_id = f"{rng.getrandbits(128):032x}"
        self.spans: list[Span] = []

    def span(
        self,
        name: str,
        service: str,
        parent: Span | None,
        start_us: int,
        dur_us: int,
        attrs: dict[str, Any] | None = None,
        *,
        hop: str | None = None,
        kind: str | None = None,
        span_kind: str = "INTERNAL",
        run_attrs: bool = True,
    ) -> Span:
        attributes: dict[str, Any] = dict(self.common) if run_attrs else {}
        if hop is not None:
            attributes["cronwave.hop"] = hop
        if kind is not None:
            attributes["cronwave.kind"] = kind
        attributes.update(attrs or {})
        span = Span(
            trace_id=self.trace_id,
            span_id=f"{self.rng.getrandbits(64) | 1:016x}",
            parent_span_id=parent.span_id if parent else "",
            name=name,
            service=service,
            start_ns=self.fire_ns + start_us * US,
            end_ns=self.fire_ns + (start_us + dur_us) * US,
            attributes=attributes,
            status="UNSET",
            span_kind=span_kind,
        )
        self.spans.append(span)
        return span

    def rpc(
        self,
        parent: Span,
        client_service: str,
        server_service: str,
        service: str,
        method: str,
        start_us: int,
        server_dur_us: int,
        net_us: int,
    ) -> tuple[Span, Span, int]:
        """A client span and its server span; the server starts after half the
        network time. Returns (client, server, server start)."""
        rpc = {"rpc.system": "grpc", "rpc.service": service, "rpc.method": method}
        client = self.span(
            f"/{service}/{method}",
            client_service,
            parent,
            start_us,
            server_dur_us + net_us,
            rpc,
            span_kind="CLIENT",
            run_attrs=False,
        )
        server_start = start_us + net_us // 2
        server = self.span(
            f"/{service}/{method}",
            server_service,
            client,
            server_start,
            server_dur_us,
            rpc,
            span_kind="SERVER",
            run_attrs=False,
        )
        return client, server, server_start


def _u(rng: random.Random, low_ms: float, high_ms: float) -> int:
    """A duration in whole microseconds, uniform in [low, high] milliseconds."""
    return round(rng.uniform(low_ms, high_ms) * 1000)


def make_run(
    rng: random.Random,
    index: int,
    injection: Injection | None = None,
    *,
    cache_weights: tuple[float, float, float] = (0.7, 0.25, 0.05),
    schedule_id: str = "nightly-billing",
    job_type: str = "billing",
    spacing: timedelta = timedelta(seconds=1),
    trigger: str | None = None,
    late_by: timedelta = timedelta(0),
) -> RunRecord:
    """One run's spans; ``index`` sets its fire time and id. ``trigger`` is said by the
    planner's span (as the planner says it); ``late_by`` puts the nominal fire time that
    much before the spans (a backfilled slot's)."""
    fire = BASE_FIRE + index * spacing
    fire_ns = int(fire.timestamp()) * 1_000_000_000
    run_id = (
        f"{schedule_id}-{trigger or 'run'}-{index:06d}" if trigger else f"{schedule_id}-{index:06d}"
    )
    injected = injection is not None and rng.random() < injection.share
    extra = round(injection.extra_ms * 1000) if injection is not None and injected else 0

    def extra_for(hop: str, kind: str) -> int:
        assert injection is not None or extra == 0
        return (
            extra if injection is not None and (injection.hop, injection.kind) == (hop, kind) else 0
        )

    cache_hit = rng.choices(("local", "redis", "miss"), weights=cache_weights)[0]
    if injected and injection is not None and injection.hop == "dispatch":
        cache_hit = "miss"
    nominal = fire - late_by
    common = {
        **run_attributes(run_id, schedule_id, nominal.isoformat().replace("+00:00", "Z")),
        "cronwave.job_type": job_type,
    }
    t = _Trace(rng, fire_ns, common)

    # plan: the planner wakes just before the fire time.
    plan_start = -_u(rng, 0.5, 1.0)
    said = {"cronwave.trigger": trigger} if trigger else {}
    plan_root = t.span(
        "planner.fire", "cron-planner", None, plan_start, 0, said, hop="plan", kind="app"
    )
    at = plan_start + _u(rng, 0.05, 0.1)
    dur = _u(rng, 0.05, 0.2)
    t.span(
        "schedule.cache",
        "cron-planner",
        plan_root,
        at,
        dur,
        {"cronwave.cache.hit": "local"},
        hop="plan",
        kind="cache",
    )
    at += dur + _u(rng, 0.02, 0.05)

    # leader: confirm the lease over gRPC.
    lease_cache = _u(rng, 0.05, 0.15)
    lease_app = _u(rng, 0.05, 0.1)
    client, server, s_at = t.rpc(
        plan_root,
        "cron-planner",
        "leader-election",
        "cronwave.v1.LeaderElectionService",
        "ConfirmLease",
        at,
        lease_cache + lease_app + 40,
        _u(rng, 0.2, 0.4),
    )
    t.span(
        "lease.read",
        "leader-election",
        server,
        s_at + 20,
        lease_cache,
        {"cronwave.cache.hit": "local"},
        hop="leader",
        kind="cache",
    )
    t.span(
        "lease.check",
        "leader-election",
        server,
        s_at + 20 + lease_cache,
        lease_app,
        hop="leader",
        kind="app",
    )
    at = client.end_ns // US - fire_ns // US + _u(rng, 0.02, 0.05)

    # dispatch -> persist, then enqueue.
    decode = _u(rng, 0.03, 0.08)
    dedupe = {"local": _u(rng, 0.03, 0.08), "redis": _u(rng, 0.3, 0.6), "miss": _u(rng, 0.8, 1.2)}[
        cache_hit
    ] + extra_for("dispatch", "cache")
    route = _u(rng, 0.1, 0.3)
    p_decode = _u(rng, 0.03, 0.08)
    insert = _u(rng, 1.0, 3.0) + extra_for("persist", "database")
    commit = _u(rng, 0.5, 2.0)
    p_app = _u(rng, 0.1, 0.3)
    store_net = _u(rng, 0.2, 0.5)
    persist_server = p_decode + insert + commit + p_app
    enqueue = _u(rng, 0.2, 0.5)
    dispatch_server = decode + dedupe + route + persist_server + store_net + enqueue + 60
    d_client, d_server, d_at = t.rpc(
        plan_root,
        "cron-planner",
        "dispatcher",
        "cronwave.v1.DispatcherService",
        "StartRun",
        at,
        dispatch_server,
        _u(rng, 0.2, 0.5),
    )
    handler = t.span(
        "dispatch.start",
        "dispatcher",
        d_server,
        d_at + 10,
        dispatch_server - 20,
        hop="dispatch",
        kind="app",
    )
    cur = d_at + 10
    t.span("decode", "dispatcher", handler, cur, decode, hop="dispatch", kind="serialization")
    cur += decode
    t.span(
        "dedupe.lookup",
        "dispatcher",
        handler,
        cur,
        dedupe,
        {"cronwave.cache.hit": cache_hit},
        hop="dispatch",
        kind="cache",
    )
    cur += dedupe
    t.span("route", "dispatcher", handler, cur, route, hop="dispatch", kind="app")
    cur += route
    persist_hit = "miss" if extra_for("persist", "database") else "local"
    s_client, s_server, s_at = t.rpc(
        handler,
        "dispatcher",
        "workflow-store",
        "cronwave.v1.WorkflowStoreService",
        "CreateRun",
        cur,
        persist_server,
        store_net,
    )
    pc = s_at
    t.span("decode", "workflow-store", s_server, pc, p_decode, hop="persist", kind="serialization")
    pc += p_decode
    t.span(
        "schedule.lookup",
        "workflow-store",
        s_server,
        pc,
        0,
        {"cronwave.cache.hit": persist_hit},
        hop="persist",
        kind="cache",
    )
    ins = t.span(
        "INSERT run", "workflow-store", s_server, pc, insert, hop="persist", kind="database"
    )
    # SQL instrumentation nested in the explicit database span: counted once.
    t.span(
        "INSERT",
        "workflow-store",
        ins,
        pc + 5,
        insert - 10,
        {"db.system": "sqlite"},
        run_attrs=False,
    )
    pc += insert
    t.span("COMMIT", "workflow-store", s_server, pc, commit, hop="persist", kind="database")
    pc += commit
    t.span("persist.app", "workflow-store", s_server, pc, p_app, hop="persist", kind="app")
    cur = s_client.end_ns // US - fire_ns // US
    enq = t.span("enqueue", "dispatcher", handler, cur, enqueue, hop="dispatch", kind="queue")
    enqueued_at = cur + enqueue
    plan_end = d_client.end_ns // US - fire_ns // US + _u(rng, 0.02, 0.05)
    # The fire span ends once the dispatcher answered; its end is known only now.
    t.spans[t.spans.index(plan_root)] = replace(plan_root, end_ns=fire_ns + plan_end * US)

    # pickup: the message waits in its queue.
    worker = f"w-{rng.randrange(8)}"
    queue = "bulk" if extra_for("pickup", "queue") else "default"
    wait = _u(rng, 2.0, 5.0) + extra_for("pickup", "queue")
    t.span(
        "queue.wait",
        "worker",
        enq,
        enqueued_at,
        wait,
        {"cronwave.queue": queue, "cronwave.worker_id": worker},
        hop="pickup",
        kind="queue",
    )
    start = enqueued_at + wait + _u(rng, 0.02, 0.05)

    # execute: the job body with its own SQL and cache.
    q1 = _u(rng, 1.0, 2.0)
    c1 = _u(rng, 0.05, 0.1)
    q2 = _u(rng, 0.5, 1.0)
    body = q1 + c1 + q2 + _u(rng, 1.0, 3.0)
    attempt = 2 if extra_for("pickup", "queue") else 1
    job = t.span(
        "job.billing",
        "worker",
        enq,
        start,
        body,
        {"cronwave.attempt": attempt, "cronwave.worker_id": worker},
        hop="execute",
        kind="app",
    )
    t.span("select customers", "worker", job, start + 10, q1, hop="execute", kind="database")
    t.span(
        "rates.cache",
        "worker",
        job,
        start + 10 + q1,
        c1,
        {"cronwave.cache.hit": "local"},
        hop="execute",
        kind="cache",
    )
    t.span(
        "insert invoices", "worker", job, start + 10 + q1 + c1, q2, hop="execute", kind="database"
    )

    # complete: durable completion in the store.
    update = _u(rng, 0.5, 1.5)
    _, c_server, c_at = t.rpc(
        enq,
        "worker",
        "workflow-store",
        "cronwave.v1.WorkflowStoreService",
        "CompleteRun",
        start + body + _u(rng, 0.02, 0.05),
        update + 50,
        _u(rng, 0.2, 0.5),
    )
    t.span(
        "UPDATE run", "workflow-store", c_server, c_at + 20, update, hop="complete", kind="database"
    )
    return RunRecord(run_id, t.trace_id, nominal, injected, cache_hit, t.spans)


def make_runs(
    count: int, injection: Injection | None = None, *, seed: int = 7, **options: Any
) -> list[RunRecord]:
    rng = random.Random(seed)
    return [make_run(rng, i, injection, **options) for i in range(count)]


def all_spans(records: list[RunRecord]) -> list[Span]:
    return [s for r in records for s in r.spans]


def write_span_store(spans: list[Span], spans_dir: Path, process: str = "suite-1") -> Path:
    """The spans as a span-store file, one ``span_to_dict``-shaped line each."""
    spans_dir.mkdir(parents=True, exist_ok=True)
    path = spans_dir / f"{process}.jsonl"
    with path.open("a", encoding="utf-8") as handle:
        for s in spans:
            record = {
                "trace_id": s.trace_id,
                "span_id": s.span_id,
                "parent_span_id": s.parent_span_id,
                "name": s.name,
                "service": s.service,
                "kind": s.span_kind,
                "start_ns": s.start_ns,
                "end_ns": s.end_ns,
                "attributes": dict(s.attributes),
                "status": s.status,
            }
            handle.write(json.dumps(record) + "\n")
    return path
