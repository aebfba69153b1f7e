"""Initial schema: schedules, the store revision, job types, runs, run events, fencing.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The models' UTCDateTime and Micros are stored as these types.
Instant = sa.DateTime(timezone=True)
Micros = sa.BigInteger()


def upgrade() -> None:
    op.create_table(
        "fencing",
        sa.Column("scope", sa.String(), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", Instant, nullable=False),
        sa.PrimaryKeyConstraint("scope", name=op.f("pk_fencing")),
    )
    op.create_table(
        "job_types",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("duration_limit", Micros, nullable=False),
        sa.Column("heartbeat_timeout", Micros, nullable=False),
        sa.Column("retry_initial_interval", Micros, nullable=False),
        sa.Column("retry_backoff_coefficient", sa.Float(), nullable=False),
        sa.Column("retry_maximum_interval", Micros, nullable=False),
        sa.Column("retry_maximum_attempts", sa.Integer(), nullable=False),
        sa.Column("retry_non_retryable_errors", sa.JSON(), nullable=False),
        sa.Column("queue", sa.String(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("financial", sa.Boolean(), nullable=False),
        sa.Column("created_at", Instant, nullable=False),
        sa.Column("updated_at", Instant, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_job_types")),
    )
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("policy", sa.JSON(), nullable=False),
        sa.Column("job_type", sa.String(), nullable=False),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("pause_note", sa.Text(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("created_at", Instant, nullable=False),
        sa.Column("updated_at", Instant, nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
        sa.UniqueConstraint("revision", name=op.f("uq_schedules_revision")),
    )
    store_revision = op.create_table(
        "store_revision",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_store_revision")),
    )
    op.bulk_insert(store_revision, [{"id": 1, "revision": 0}])
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("schedule_id", sa.String(), nullable=False),
        sa.Column("fire_time", Instant, nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("trigger", sa.String(), nullable=False),
        sa.Column("job_type", sa.String(), nullable=False),
        sa.Column("payload_json", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("attempt_token", sa.BigInteger(), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("idempotency_key", sa.String(), nullable=False),
        sa.Column("queue", sa.String(), nullable=False),
        sa.Column("worker_id", sa.String(), nullable=False),
        sa.Column("trace_id", sa.String(), nullable=False),
        sa.Column("created_at", Instant, nullable=False),
        sa.Column("started_at", Instant, nullable=True),
        sa.Column("finished_at", Instant, nullable=True),
        sa.Column("heartbeat_at", Instant, nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("result_json", sa.Text(), nullable=False),
        sa.Column("checkpoint_json", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["schedule_id"], ["schedules.id"], name=op.f("fk_runs_schedule_id_schedules")
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_runs")),
        # One run per schedule and fire time, enforced by the database.
        sa.UniqueConstraint("schedule_id", "fire_time", name=op.f("uq_runs_schedule_id_fire_time")),
    )
    op.create_index("ix_runs_fire_time_run_id", "runs", ["fire_time", "run_id"])
    op.create_index(op.f("ix_runs_state"), "runs", ["state"])
    op.create_table(
        "run_events",
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("at", Instant, nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.run_id"], name=op.f("fk_run_events_run_id_runs")
        ),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_run_events")),
    )
    op.create_index(op.f("ix_run_events_run_id"), "run_events", ["run_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_run_events_run_id"), table_name="run_events")
    op.drop_table("run_events")
    op.drop_index(op.f("ix_runs_state"), table_name="runs")
    op.drop_index("ix_runs_fire_time_run_id", table_name="runs")
    op.drop_table("runs")
    op.drop_table("store_revision")
    op.drop_table("schedules")
    op.drop_table("job_types")
    op.drop_table("fencing")
