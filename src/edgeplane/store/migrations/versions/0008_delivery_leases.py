"""Delivery by several processes: the delivery members, a lease per Logpush job with its fencing token, and the
jobs' cursors in the shared log stream (``edgeplane.store.delivery_models``)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_delivery_leases"
down_revision = "0007_dashboard_sessions"
branch_labels = None
depends_on = None

JOB_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "delivery_members",
        sa.Column("owner", sa.String(255), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("started", sa.Double(), nullable=False),
        sa.Column("heartbeat", sa.Double(), nullable=False),
    )
    op.create_index("ix_delivery_members_heartbeat", "delivery_members", ["heartbeat"])
    op.create_table(
        "job_leases",
        sa.Column("job_id", JOB_ID, primary_key=True, autoincrement=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("expires", sa.Double(), nullable=False),
    )
    op.create_index("ix_job_leases_owner", "job_leases", ["owner"])
    op.create_table(
        "job_cursors",
        sa.Column("dataset", sa.String(64), primary_key=True),
        sa.Column("job_id", JOB_ID, primary_key=True, autoincrement=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_cursors")
    op.drop_table("job_leases")
    op.drop_table("delivery_members")
