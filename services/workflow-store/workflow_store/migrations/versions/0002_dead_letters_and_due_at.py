"""Reliability: when each run's message is due (runs.due_at), and the dead-letter list.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The models' UTCDateTime is stored as this type.
Instant = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("due_at", Instant, nullable=True))
    # Runs recorded before this revision had their message sent when they were created.
    op.execute("UPDATE runs SET due_at = created_at")
    op.create_table(
        "dead_letters",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("queue", sa.String(), nullable=False),
        sa.Column("job_type", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("message_json", sa.Text(), nullable=False),
        sa.Column("created_at", Instant, nullable=False),
        sa.Column("replayed_at", Instant, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dead_letters")),
    )
    op.create_index(op.f("ix_dead_letters_run_id"), "dead_letters", ["run_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_dead_letters_run_id"), table_name="dead_letters")
    op.drop_table("dead_letters")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("due_at")
