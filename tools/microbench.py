"""Microbenchmarks behind figures in docs/benchmarks.md (CPU time, not wall time).

    python tools/microbench.py spans          # CPU per span, SDK spans and LeanSpans
    python tools/microbench.py inserts URL    # 200-row batches into PostgreSQL
    python tools/microbench.py redis URL      # pipelined SETs, as the caches send them

``spans`` starts and ends ``hop_span``s through the local span exporter, in a data
directory of its own, and counts the process's CPU (the export thread's included).
``inserts`` writes batches of 200 run-event-like rows into a scratch table of the
PostgreSQL database at URL (created and dropped here), as an executemany, as
SQLAlchemy's multi-VALUES insert, as one ``unnest`` statement (an array per column)
and as the store's one statement over a JSON document (``workflow_store.bulk``), and
counts this process's CPU and the database backend's (``/proc``, Linux). ``redis``
sends pipelines of 100 SETs of 100-byte values to the Redis at URL and counts this
process's CPU per command; it says whether redis-py found hiredis (its C packer and
parser).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from cronwave_bench.measure import cpu_seconds
from cronwave_core.telemetry import spans as hop_spans
from cronwave_core.telemetry.export import JsonLinesSpanExporter
from cronwave_core.telemetry.lean import LeanTracerProvider
from cronwave_core.telemetry.propagation import RunAttributesProcessor
from cronwave_core.telemetry.vocabulary import run_attributes
from workflow_store.bulk import RecordSet

SPANS = 20_000
BATCHES = 200
ROWS = 200


def spans() -> None:
    attrs = run_attributes("run-123456", "sched-1", "2026-01-01T00:00:00+00:00")
    for cls in (TracerProvider, LeanTracerProvider):
        with tempfile.TemporaryDirectory() as tmp:
            provider = cls(resource=Resource.create({"service.name": "bench"}))
            provider.add_span_processor(RunAttributesProcessor())
            exporter = JsonLinesSpanExporter(Path(tmp), "bench")
            provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65536))
            tracer = provider.get_tracer("cronwave")
            started = time.process_time()
            for _ in range(SPANS):
                with hop_spans._CurrentSpan(tracer, "worker.claim", dict(attrs)) as span:
                    span.set_attribute("cronwave.claimed", True)
            provider.force_flush()
            spent = time.process_time() - started
            provider.shutdown()
            lines = sum(1 for _ in exporter.path.open())
        print(f"{cls.__name__}: {1e6 * spent / SPANS:.1f} us of CPU per span ({lines} lines)")


def inserts(url: str) -> None:
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    table = sa.Table(
        "microbench_events",
        meta,
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String),
        sa.Column("kind", sa.String),
        sa.Column("at", sa.DateTime(timezone=True)),
        sa.Column("detail", sa.Text),
        sa.Column("attempt", sa.Integer),
    )
    meta.drop_all(engine)
    meta.create_all(engine)
    now = datetime.now(UTC)
    rows = [
        {"run_id": f"run_{i:020d}", "kind": "claimed", "at": now, "detail": "w-1", "attempt": 1}
        for i in range(ROWS)
    ]
    unnest = sa.text(
        "INSERT INTO microbench_events (run_id, kind, at, detail, attempt) SELECT * FROM "
        "unnest(CAST(:run_id AS VARCHAR[]), CAST(:kind AS VARCHAR[]), "
        "CAST(:at AS TIMESTAMP WITH TIME ZONE[]), CAST(:detail AS TEXT[]), "
        "CAST(:attempt AS INTEGER[]))"
    )
    columns = {name: [row[name] for row in rows] for name in rows[0]}
    try:
        for name, many in (("executemany", False), ("multi-VALUES", True)):
            engine.dialect.use_insertmanyvalues_wo_returning = many
            _time(engine, name, lambda c: c.execute(sa.insert(table), rows))
        _time(engine, "unnest", lambda c: c.execute(unnest, columns))
        recordset = RecordSet(table, engine.dialect)
        _time(engine, "json_to_recordset", lambda c: recordset.insert(c, rows, list(rows[0])))
    finally:
        meta.drop_all(engine)
        engine.dispose()


def redis_sets(url: str) -> None:
    import redis
    from redis.utils import HIREDIS_AVAILABLE

    client = redis.Redis.from_url(url)
    keys = [f"cronwave-microbench:{i}" for i in range(ROWS // 2)]
    value = b"v" * 100
    try:
        for rounds in (20, BATCHES * 5):  # the first is the warm-up
            started = time.process_time()
            for _ in range(rounds):
                pipe = client.pipeline(transaction=False)
                for key in keys:
                    pipe.set(key, value, px=60_000)
                pipe.execute()
            spent = time.process_time() - started
        per = 1e6 * spent / (rounds * len(keys))
        print(f"hiredis {'in use' if HIREDIS_AVAILABLE else 'absent'}: {per:.1f} us of CPU per SET")
    finally:
        client.delete(*keys)
        client.close()


def _time(engine: sa.Engine, name: str, insert: Callable[[sa.Connection], Any]) -> None:
    with engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        for _ in range(20):
            insert(conn)
            conn.commit()
        backend, started = cpu_seconds(int(pid or 0)) or 0.0, time.process_time()
        for _ in range(BATCHES):
            insert(conn)
            conn.commit()
        here = time.process_time() - started
        there = (cpu_seconds(int(pid or 0)) or 0.0) - backend
    print(
        f"{name}: {1e3 * here / BATCHES:.2f} ms of Python and {1e3 * there / BATCHES:.2f} ms "
        f"of PostgreSQL per batch of {ROWS}"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["spans"]:
        spans()
    elif sys.argv[1:2] == ["inserts"] and len(sys.argv) == 3:
        inserts(sys.argv[2])
    elif sys.argv[1:2] == ["redis"] and len(sys.argv) == 3:
        redis_sets(sys.argv[2])
    else:
        sys.exit(__doc__)
