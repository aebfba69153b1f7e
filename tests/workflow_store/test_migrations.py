"""The Alembic migration head creates exactly the tables the models describe."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from workflow_store.db import alembic_config, create_engine, migrate, newest_revision
from workflow_store.models import Base


def test_migration_head_matches_models(tmp_path: Path):
    # Given a database migrated to head (twice: migrating is idempotent)
    engine = create_engine(f"sqlite:///{tmp_path / 'cronwave.db'}", instrument=False)
    try:
        migrate(engine)
        migrate(engine)

        # Then autogenerate finds nothing to change
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
            head = ScriptDirectory.from_config(alembic_config()).get_current_head()
            assert context.get_current_revision() == head
            # the head a store at start-up compares with, read without Alembic
            assert newest_revision() == head
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.scalar(sa.text("SELECT revision FROM store_revision WHERE id = 1")) == 0
    finally:
        engine.dispose()


def _row(table: sa.Table, **values: object) -> dict[str, object]:
    """``values``, and a plain value for every other required column of ``table``."""
    now = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
    row = dict(values)
    for column in table.columns:
        if column.name in row or column.nullable or column.server_default is not None:
            continue
        if column.autoincrement is True:
            continue
        kind = column.type.python_type
        row[column.name] = {str: "", int: 0, bool: False, datetime: now}.get(kind, "{}")
    return row


@pytest.mark.both_backends
def test_revision_0006_keeps_the_claim_of_existing_runs_as_claimed_at(empty_database_url: str):
    # Given a database at revision 0004 with a schedule, a run claimed at 02:00:01 and
    # its event (rows that foreign keys tie together)
    engine = create_engine(empty_database_url, instrument=False)
    claimed = datetime(2026, 12, 1, 2, 0, 1, tzinfo=UTC)
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0004")
            meta = sa.MetaData()
            schedules = sa.Table("schedules", meta, autoload_with=conn)
            runs = sa.Table("runs", meta, autoload_with=conn)
            conn.execute(sa.insert(schedules), [_row(schedules, id="s1")])
            conn.execute(
                sa.insert(runs),
                [_row(runs, run_id="r1", schedule_id="s1", state="running", started_at=claimed)],
            )
            events = sa.Table("run_events", meta, autoload_with=conn)
            conn.execute(sa.insert(events), [_row(events, run_id="r1", kind="claimed")])

        # When it is migrated to head
        migrate(engine)

        # Then the claim is claimed_at, started_at keeps it, and no cancel is pending
        with engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT claimed_at, started_at, cancel_deadline, cancel_reason "
                    "FROM runs WHERE run_id = 'r1'"
                )
            ).one()
        assert row.cancel_deadline is None and row.cancel_reason == ""
        for value in (row.claimed_at, row.started_at):
            stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
            assert stamp.replace(tzinfo=stamp.tzinfo or UTC) == claimed
    finally:
        engine.dispose()
