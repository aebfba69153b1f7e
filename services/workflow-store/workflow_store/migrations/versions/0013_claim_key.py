"""The key of the claim that started a run's current attempt (runs.claim_key): a
claim asked again with it, by the same worker, after its answer was lost, is answered
with that attempt rather than refused as held. NULL for every run that exists when
this revision runs (no key given).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE ... ADD COLUMN on both backends: SQLite's batch mode would
    # copy and drop the table, which its events' foreign keys refuse.
    op.add_column("runs", sa.Column("claim_key", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("claim_key")
