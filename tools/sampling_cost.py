"""What tracing costs a run at each ``trace_sample``: CPU per completed run of the
suite's own services, and span bytes written per run.

For each setting, a suite of its own (the bench's: ``CRONWAVE_DATABASE_URL`` and
``CRONWAVE_REDIS_URL`` if set, else embedded) runs ``--rate`` no-op schedules that fire
every second with that ``trace_sample``; after a warm-up, a window counts the runs
completed in it, the CPU time each service process spent in it (``/proc``: the
database and Redis servers are left out, being shared with whatever else runs on the
machine) and the bytes added to the local span files. ``off`` is
``CRONWAVE_TRACING=off``, the floor.

With ``--spans``, the CPU of one span of a run in one process instead (this
process's CPU time, the export thread's included, so the machine's load does not
move it): sampled and exported; not sampled where nothing is held (the planner,
dispatcher, store); not sampled in a worker, held and then dropped or kept; not
sampled in a job process, held, handed to its worker as JSON (``span_wire``) and
held there, then dropped or kept (both ends in this process).

    python tools/sampling_cost.py [--rate 100] [--window 20] [--settings 1,0.01,off]
    python tools/sampling_cost.py --spans
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from cronwave import Interval
from cronwave_bench.harness import PIPELINE_ENV, Backend, SuiteOptions, bench_suite, wait_leading
from cronwave_bench.measure import CpuMeter, parallel, runs_of, sleep_until
from cronwave_bench.single import next_whole_second
from cronwave_core.telemetry import span_wire
from cronwave_core.telemetry.deferred import RECORD_UNSAMPLED_RUNS, DeferredSpans
from cronwave_core.telemetry.export import JsonLinesSpanExporter
from cronwave_core.telemetry.lean import LeanTracerProvider
from cronwave_core.telemetry.propagation import RunAttributesProcessor
from cronwave_core.telemetry.run_span import decide_run_trace_id, run_context
from cronwave_core.telemetry.vocabulary import run_attributes

WARMUP = timedelta(seconds=5)
#: ``--spans``: runs of ``SPANS_PER_RUN`` spans each.
RUNS = 2_000
SPANS_PER_RUN = 10
#: label, sampler (None: the default), whether the process holds, share, keep, and
#: whether what is held is handed to a worker first (a job process's spans)
SPAN_CASES: list[tuple[str, sampling.Sampler | None, bool, float, bool, bool]] = [
    ("sampled, exported", None, False, 1.0, False, False),
    ("not sampled, planner/dispatcher/store", None, False, 0.0, False, False),
    ("not sampled, worker, held and dropped", RECORD_UNSAMPLED_RUNS, True, 0.0, False, False),
    ("not sampled, worker, held and kept", RECORD_UNSAMPLED_RUNS, True, 0.0, True, False),
    ("not sampled, job process, handed, dropped", RECORD_UNSAMPLED_RUNS, True, 0.0, False, True),
    ("not sampled, job process, handed, kept", RECORD_UNSAMPLED_RUNS, True, 0.0, True, True),
]


def _per_span(
    tracer: trace.Tracer,
    ids: list[int],
    deferred: DeferredSpans | None,
    keep: bool,
    worker: DeferredSpans | None = None,
) -> float:
    """CPU microseconds per span of runs ``ids``, each run's spans then kept or dropped
    (by ``worker``, when given, after they were handed to it as a job process does)."""
    attrs = run_attributes("run-123456", "sched-1", "2026-01-01T00:00:00+00:00")
    started = time.process_time()
    for trace_id in ids:
        context = run_context(trace_id)
        for _ in range(SPANS_PER_RUN):
            with tracer.start_as_current_span("worker.step", context, attributes=attrs):
                pass
        if deferred is not None and worker is not None:
            # the job process's outcome line, read by its worker, which makes spans
            # of it again only for a run it keeps
            handed = json.loads(json.dumps(span_wire.encode(deferred.take(trace_id))))
            if keep:
                for span in span_wire.decode(trace_id, handed):
                    worker.on_end(span)
                worker.keep(trace_id)
        elif deferred is not None:
            if keep:
                deferred.keep(trace_id)
            else:
                deferred.drop(trace_id)
    return (time.process_time() - started) / (len(ids) * SPANS_PER_RUN) * 1e6


def span_costs() -> None:
    off = trace.NoOpTracerProvider().get_tracer("cronwave")
    ids = [decide_run_trace_id(time.time_ns(), 1.0) for _ in range(RUNS)]
    floor = _per_span(off, ids, None, False)
    print(f"{'tracing off (no-op spans)':>42}: {floor:5.1f} us CPU per span")
    for label, sampler, holds, share, keep, hand in SPAN_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            resource = Resource.create({"service.name": "bench"})
            provider = LeanTracerProvider(resource=resource, sampler=sampler)
            provider.add_span_processor(RunAttributesProcessor())
            export = BatchSpanProcessor(
                JsonLinesSpanExporter(Path(tmp), "bench"), max_queue_size=65536
            )
            provider.add_span_processor(export)
            deferred = DeferredSpans() if holds else None
            if deferred is not None:
                deferred.export = export
                provider.add_span_processor(deferred)
            worker = DeferredSpans() if hand else None
            if worker is not None:
                worker.export = export
            tracer = provider.get_tracer("cronwave")
            ids = [decide_run_trace_id(time.time_ns(), share) for _ in range(RUNS)]
            per_span = _per_span(tracer, ids, deferred, keep, worker)
            flushed = time.process_time()
            provider.force_flush()  # what the export thread has left, counted too
            per_span += (time.process_time() - flushed) / (RUNS * SPANS_PER_RUN) * 1e6
            provider.shutdown()
        print(f"{label:>42}: {per_span:5.1f} us CPU per span", flush=True)


def _span_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.jsonl")) if directory.exists() else 0


def measure(backend: Backend, root: Path, setting: str, rate: int, window: timedelta) -> str:
    tracing = setting != "off"
    ratio = float(setting) if tracing else 1.0
    data_dir = root / f"sampling-{setting.replace('.', '_')}"
    options = SuiteOptions(tracing=tracing, own_database=True, env=PIPELINE_ENV)
    with bench_suite(backend, data_dir, options) as (suite, client):
        wait_leading(client)
        prefix = f"sampling-{uuid.uuid4().hex[:8]}"
        ids = [f"{prefix}-{i:04d}" for i in range(rate)]
        first = next_whole_second(datetime.now(UTC) + timedelta(seconds=3 + rate * 0.01))
        start, end = first + WARMUP, first + WARMUP + window
        every = timedelta(seconds=1)

        def create(i: int) -> object:
            return client.create_schedule(
                ids[i],
                intervals=[Interval(every=every, phase=every * i / rate)],
                job_type="cronwave.noop",
                overlap="allow_all",
                start_at=first,
                end_at=end,
                trace_sample=ratio,
            )

        parallel(create, list(range(rate)))
        spans = data_dir / "spans"
        meter = CpuMeter({name: proc.pid for name, proc in suite.procs.items()})
        sleep_until(start)
        meter.start()
        bytes_before = _span_bytes(spans)
        sleep_until(end)
        cpu = meter.stop()
        time.sleep(1.0)  # the exporters' last 500-ms batches of the window
        written = _span_bytes(spans) - bytes_before
        for name in ("cron-planner", "dispatcher", "worker"):
            suite.stop_proc(suite.procs[name])
        runs = runs_of(client, ids, limit=int((end - first) / every) + 4)
    done = [
        r for r in runs if r.state == "SUCCEEDED" and r.finished_at and start <= r.finished_at < end
    ]
    own = {name: sec for name, sec in cpu.items() if name in suite.procs}
    if not done:
        return f"{setting:>6}: no run completed in the window"
    per_run = 1000 * sum(own.values()) / len(done)
    detail = ", ".join(
        f"{name} {1000 * sec / len(done):.2f}"
        for name, sec in sorted(own.items(), key=lambda kv: -kv[1])
    )
    return (
        f"{setting:>6}: {len(done)} runs, {per_run:.2f} ms CPU/run ({detail}); "
        f"{written / len(done) / 1024:.1f} KiB of spans/run"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=100, help="runs due per second")
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured")
    parser.add_argument("--settings", default="1,0.01,off", help="trace_sample values, or off")
    parser.add_argument("--spans", action="store_true", help="CPU per span, in this process")
    args = parser.parse_args()
    if args.spans:
        span_costs()
        return
    backend = Backend.from_env()
    with tempfile.TemporaryDirectory(prefix="cw-sampling-") as tmp:
        for setting in args.settings.split(","):
            line = measure(
                backend, Path(tmp), setting.strip(), args.rate, timedelta(seconds=args.window)
            )
            print(line, flush=True)


if __name__ == "__main__":
    main()
