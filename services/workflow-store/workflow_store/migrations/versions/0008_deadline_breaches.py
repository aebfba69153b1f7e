"""Deadlines per schedule: the breaches the store's deadline sweep records (once per
schedule and fire time), the deliveries of their notifications, and how far each
schedule's slots were judged.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The models' UTCDateTime is stored as this type.
Instant = sa.DateTime(timezone=True)
Serial = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "deadline_breaches",
        sa.Column("id", Serial, autoincrement=True, nullable=False),
        sa.Column("schedule_id", sa.String(), nullable=False),
        sa.Column("fire_time", Instant, nullable=False),
        sa.Column("deadline_at", Instant, nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("run_state", sa.String(), nullable=False),
        sa.Column("detected_at", Instant, nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name=op.f("fk_deadline_breaches_schedule_id_schedules"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deadline_breaches")),
        sa.UniqueConstraint(
            "schedule_id", "fire_time", name=op.f("uq_deadline_breaches_schedule_id_fire_time")
        ),
    )
    op.create_index(
        "ix_deadline_breaches_schedule_id_id", "deadline_breaches", ["schedule_id", "id"]
    )
    op.create_table(
        "deadline_deliveries",
        sa.Column("id", Serial, autoincrement=True, nullable=False),
        sa.Column("breach_id", Serial, nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("updated_at", Instant, nullable=False),
        sa.ForeignKeyConstraint(
            ["breach_id"],
            ["deadline_breaches.id"],
            name=op.f("fk_deadline_deliveries_breach_id_deadline_breaches"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deadline_deliveries")),
    )
    op.create_index(op.f("ix_deadline_deliveries_breach_id"), "deadline_deliveries", ["breach_id"])
    op.create_index(op.f("ix_deadline_deliveries_status"), "deadline_deliveries", ["status"])
    op.create_table(
        "deadline_cursors",
        sa.Column("schedule_id", sa.String(), nullable=False),
        sa.Column("checked_through", Instant, nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name=op.f("fk_deadline_cursors_schedule_id_schedules"),
        ),
        sa.PrimaryKeyConstraint("schedule_id", name=op.f("pk_deadline_cursors")),
    )


def downgrade() -> None:
    op.drop_table("deadline_cursors")
    op.drop_index(op.f("ix_deadline_deliveries_status"), table_name="deadline_deliveries")
    op.drop_index(op.f("ix_deadline_deliveries_breach_id"), table_name="deadline_deliveries")
    op.drop_table("deadline_deliveries")
    op.drop_index("ix_deadline_breaches_schedule_id_id", table_name="deadline_breaches")
    op.drop_table("deadline_breaches")
