"""A run's progress as its job body last reported it (JobContext.progress): done of
total units, and when (runs.progress_done, progress_total, progress_unit,
progress_at). NULL done: the body never reported any.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The models' UTCDateTime is stored as this type.
Instant = sa.DateTime(timezone=True)


def upgrade() -> None:
    # Plain ALTER TABLE ... ADD COLUMN on both backends: SQLite's batch mode would copy
    # and drop the table, which the foreign keys of its events refuse.
    op.add_column("runs", sa.Column("progress_done", sa.BigInteger(), nullable=True))
    op.add_column("runs", sa.Column("progress_total", sa.BigInteger(), nullable=True))
    op.add_column(
        "runs",
        sa.Column("progress_unit", sa.Text(), nullable=False, server_default=sa.text("''")),
    )
    op.add_column("runs", sa.Column("progress_at", Instant, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("progress_at")
        batch.drop_column("progress_unit")
        batch.drop_column("progress_total")
        batch.drop_column("progress_done")
