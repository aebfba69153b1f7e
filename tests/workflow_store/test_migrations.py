"""The Alembic migration head creates exactly the tables the models describe."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from workflow_store.db import alembic_config, create_engine, migrate
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
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.scalar(sa.text("SELECT revision FROM store_revision WHERE id = 1")) == 0
    finally:
        engine.dispose()
