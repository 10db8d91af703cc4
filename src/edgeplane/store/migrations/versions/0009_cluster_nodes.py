"""The cluster's register of nodes (``edgeplane.store.cluster_nodes``)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_cluster_nodes"
down_revision = "0008_delivery_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cluster_nodes",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("addresses", sa.String(1000), nullable=False),
        sa.Column("started_on", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_on", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("cluster_nodes")
