"""The audit trail: one row per mutation a caller asked for (audit_events), written in
the transaction of the change.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The models' UTCDateTime is stored as this type.
Instant = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", Instant, nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("peer", sa.String(), nullable=False),
        sa.Column("rpc", sa.String(), nullable=False),
        sa.Column("schedule_id", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("changes", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index(op.f("ix_audit_events_schedule_id"), "audit_events", ["schedule_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_audit_events_schedule_id"), table_name="audit_events")
    op.drop_table("audit_events")
