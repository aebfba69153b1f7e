"""Attempt tokens become 128 random bits (runs.attempt_token as 32 hex digits), and
the store records the newest fencing token it issued per scope (fencing.issued).

An attempt that was running when this revision ran gets a new random token: its
worker's next heartbeat is refused, it stops, and the run resumes from its
checkpoint once the heartbeat lapses. Every token issued before this revision is
taken as issued (issued = the newest seen), so a leader in office keeps its token.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    with op.batch_alter_table("runs") as batch:
        batch.alter_column(
            "attempt_token",
            type_=sa.String(),
            existing_type=sa.BigInteger(),
            existing_nullable=False,
            postgresql_using="attempt_token::text",
        )
    fresh = (
        "replace(gen_random_uuid()::text, '-', '')"
        if dialect == "postgresql"
        else "lower(hex(randomblob(16)))"
    )
    op.execute(f"UPDATE runs SET attempt_token = CASE WHEN attempt = 0 THEN '' ELSE {fresh} END")
    with op.batch_alter_table("fencing") as batch:
        batch.add_column(
            sa.Column("issued", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
    op.execute("UPDATE fencing SET issued = token")


def downgrade() -> None:
    with op.batch_alter_table("fencing") as batch:
        batch.drop_column("issued")
    op.execute("UPDATE runs SET attempt_token = CAST(attempt AS TEXT)")
    with op.batch_alter_table("runs") as batch:
        batch.alter_column(
            "attempt_token",
            type_=sa.BigInteger(),
            existing_type=sa.String(),
            existing_nullable=False,
            postgresql_using="attempt_token::bigint",
        )
