"""A schedule's labels (schedules.labels): its owners' key=value pairs, such as
critical=true (cronwave_core.domain.labels); {} for every schedule that exists when
this revision runs.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE ... ADD COLUMN on both backends: SQLite's batch mode would
    # copy and drop the table, which its runs' foreign keys refuse.
    op.add_column(
        "schedules",
        sa.Column("labels", sa.JSON(), nullable=False, server_default=sa.text("'{}'")),
    )


def downgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("labels")
