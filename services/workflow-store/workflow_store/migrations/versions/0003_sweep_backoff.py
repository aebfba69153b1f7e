"""Sweeper back-off: when the sweeper may re-send a run's message again, and how many
times it did (runs.next_sweep_at, runs.requeues).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The models' UTCDateTime is stored as this type.
Instant = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("next_sweep_at", Instant, nullable=True))
        batch.add_column(
            sa.Column("requeues", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("requeues")
        batch.drop_column("next_sweep_at")
