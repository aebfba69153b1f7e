"""Who manages a schedule declaratively (schedules.managed_by): "apply:<manager>" for
one `cronwave apply` created or took over, "" for every schedule made by hand (all
the schedules that exist when this revision runs).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE ... ADD COLUMN on both backends: SQLite's batch mode would
    # copy and drop the table, which its runs' foreign keys refuse.
    op.add_column(
        "schedules",
        sa.Column("managed_by", sa.String(), nullable=False, server_default=sa.text("''")),
    )


def downgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("managed_by")
