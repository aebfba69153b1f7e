"""workflow_store.db: the SQL spans of a traced engine."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from cronwave_core.telemetry.export import JsonLinesSpanExporter
from cronwave_core.telemetry.propagation import RunAttributesProcessor
from cronwave_core.telemetry.vocabulary import run_attributes
from cronwave_waterfall import load_spans
from workflow_store import db
from workflow_store.db import Database, create_engine


def test_each_statement_is_a_span_under_the_current_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Given an engine traced by a provider that writes the span store, whose checkouts
    # are never slow enough to be spans (a loaded machine can stall any checkout for a
    # millisecond; the next test covers the checkouts that are spans)
    monkeypatch.setattr(db, "SLOW_CHECKOUT_NS", 10**12)
    provider = TracerProvider(resource=Resource.create({"service.name": "workflow-store"}))
    provider.add_span_processor(RunAttributesProcessor())
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(tmp_path / "spans", "s")))
    db_file = tmp_path / "store.db"
    database = Database(create_engine(f"sqlite:///{db_file}", tracer_provider=provider))
    with database.write() as session:
        session.execute(sa.text("CREATE TABLE t (id INTEGER PRIMARY KEY)"))
    tracer = provider.get_tracer("test")
    run = run_attributes("run-1", "nightly", "2025-03-01T02:00:00Z")

    # When a run's span writes twice and reads once, and a statement fails
    with tracer.start_as_current_span("RecordRun", attributes=run):
        for _ in range(2):
            with database.write() as session:
                session.execute(sa.text("INSERT INTO t DEFAULT VALUES"))
        with database.read() as session:
            session.execute(sa.text("/* count */ SELECT count(*) FROM t")).scalar_one()
        with pytest.raises(sa.exc.OperationalError), database.read() as session:
            session.execute(sa.text("SELECT nothing FROM nowhere"))
    database.dispose()
    provider.shutdown()

    # Then every statement is a CLIENT span of the run, named and described as
    # OpenTelemetry's SQLAlchemy instrumentation names them
    spans = [s for s in load_spans(tmp_path) if s.attributes.get("cronwave.run_id") == "run-1"]
    root = next(s for s in spans if s.name == "RecordRun")
    sql = [s for s in spans if s is not root]
    names = sorted(s.name.split(" ")[0] for s in sql)
    assert names == ["BEGIN"] * 4 + ["INSERT"] * 2 + ["SELECT"] * 2
    assert all(s.span_kind == "CLIENT" and s.parent_span_id == root.span_id for s in sql)
    assert all(s.attributes["db.system"] == "sqlite" for s in sql)
    assert all(s.attributes["db.name"] == str(db_file) for s in sql)
    insert = next(s for s in sql if s.name.startswith("INSERT"))
    # named by operation and table, never the database's file
    assert insert.name == "INSERT t"
    assert insert.attributes["db.statement"] == "INSERT INTO t DEFAULT VALUES"
    assert insert.attributes["db.operation"] == "INSERT"
    count = next(s for s in sql if "count" in str(s.attributes.get("db.statement")))
    assert count.name == "SELECT t"
    assert not any(str(db_file) in s.name for s in sql)
    failed = next(s for s in sql if "nowhere" in str(s.attributes.get("db.statement")))
    assert failed.status == "ERROR"
    assert all(s.status == "UNSET" for s in sql if s is not failed)


def test_an_untraced_engine_makes_no_spans(tmp_path: Path):
    # Given a provider installed nowhere but passed to a traced engine, and an untraced one
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(tmp_path / "spans", "s")))
    traced = create_engine(f"sqlite:///{tmp_path / 'a.db'}", tracer_provider=provider)
    plain = create_engine(f"sqlite:///{tmp_path / 'b.db'}", instrument=False)

    # When each runs a statement
    for engine in (traced, plain):
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    provider.shutdown()

    # Then only the traced one's statement is a span (and its checkout, if opening the
    # connection took a millisecond or more), and the plain one is the stock engine
    names = sorted(s.name.split(" ")[0] for s in load_spans(tmp_path))
    assert [name for name in names if name != "connect"] == ["BEGIN", "SELECT"]
    assert type(plain) is sa.Engine
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_checkout_that_waited_for_the_pool_is_a_connect_span(tmp_path: Path):
    # Given a traced engine whose every pooled connection is held
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(tmp_path / "spans", "s")))
    engine = create_engine(f"sqlite:///{tmp_path / 'a.db'}", tracer_provider=provider)
    held = [engine.connect() for _ in range(engine.pool.size() + engine.pool._max_overflow)]  # type: ignore[attr-defined]
    release = threading.Timer(0.2, held[0].close)

    # When one more checkout has to wait until one of them is given back
    asked_at = time.time_ns()
    release.start()
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    finally:
        release.join(timeout=10)
        for conn in held:
            conn.close()
        engine.dispose()
        provider.shutdown()

    # Then that checkout is one connect span as long as the wait (the held ones, opened
    # before it, are spans only if opening their connection took a millisecond or more,
    # which a loaded machine can stretch to any length)
    spans = [s for s in load_spans(tmp_path) if s.name == "connect" and s.start_ns >= asked_at]
    assert [s.duration_ns >= 150 * 10**6 for s in spans] == [True], spans
