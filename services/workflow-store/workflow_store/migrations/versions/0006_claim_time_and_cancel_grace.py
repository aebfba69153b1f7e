"""A run's claim and its body start become two columns (runs.claimed_at, and
runs.started_at = when the job body first began), and a cancel with a grace is
recorded on the run until its body stops (runs.cancel_deadline, runs.cancel_reason).

Before this revision started_at was the first claim. It is copied to claimed_at and
kept as started_at too, the nearest instant known of those runs' body start (their
event "started" names the exact one).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The models' UTCDateTime is stored as this type.
Instant = sa.DateTime(timezone=True)


def upgrade() -> None:
    # Plain ALTER TABLE ... ADD COLUMN on both backends: SQLite's batch mode would copy
    # and drop the table, which the foreign keys of its events refuse.
    op.add_column("runs", sa.Column("claimed_at", Instant, nullable=True))
    op.add_column("runs", sa.Column("cancel_deadline", Instant, nullable=True))
    op.add_column(
        "runs",
        sa.Column("cancel_reason", sa.Text(), nullable=False, server_default=sa.text("''")),
    )
    op.execute("UPDATE runs SET claimed_at = started_at")


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("cancel_reason")
        batch.drop_column("cancel_deadline")
        batch.drop_column("claimed_at")
