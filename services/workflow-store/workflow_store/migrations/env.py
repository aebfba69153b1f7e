"""Alembic environment: runs on the connection ``db.migrate`` hands over (inside its
transaction), or on ``sqlalchemy.url`` when alembic is driven by hand."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from workflow_store.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url or pass a connection in config.attributes")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("workflow-store migrations run online only")
run_migrations_online()
